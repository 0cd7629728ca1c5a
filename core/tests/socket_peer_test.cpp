#include "erg/core/socket_peer.hpp"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace erg {
namespace {

// The peer of a loopback TCP connection is this process: the kernel's socket table names our uid.
// A listening socket's accepted end is the server's view, as erg's servers see their clients.
TEST(SocketPeer, ALoopbackTcpPeerIsTheUserOwningItsSocket) {
  const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(listener, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(listener, 4), 0);
  socklen_t len = sizeof a;
  ASSERT_EQ(::getsockname(listener, reinterpret_cast<sockaddr*>(&a), &len), 0);
  const int client = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_EQ(::connect(client, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  const int server = ::accept(listener, nullptr, nullptr);
  ASSERT_GE(server, 0);
  const auto uid = loopback_peer_uid(server);
  ASSERT_TRUE(uid.has_value()) << "sock_diag could not be read";
  EXPECT_EQ(*uid, ::geteuid());
  // The listening socket has no peer; a Unix socket is not TCP.
  EXPECT_FALSE(loopback_peer_uid(listener).has_value());
  int pair[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, pair), 0);
  EXPECT_FALSE(loopback_peer_uid(pair[0]).has_value());
  // A client that wrote and closed before the server looked: the kernel keeps its end without an
  // owner and reports uid 0 for it. That must not read as root: no uid at all.
  const int gone = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_EQ(::connect(gone, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::send(gone, "x", 1, MSG_NOSIGNAL), 1);
  ::close(gone);
  const int orphan = ::accept(listener, nullptr, nullptr);
  ASSERT_GE(orphan, 0);
  EXPECT_FALSE(loopback_peer_uid(orphan).has_value());
  for (int fd : {client, server, listener, pair[0], pair[1], orphan}) ::close(fd);
}

}  // namespace
}  // namespace erg
