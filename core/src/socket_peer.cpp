#include "erg/core/socket_peer.hpp"

#include <arpa/inet.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

namespace erg {
namespace {

/// An IPv4-mapped IPv6 address as the IPv4 address it is (the client's socket is IPv4).
sockaddr_storage unmapped(const sockaddr_storage& a) {
  if (a.ss_family != AF_INET6) return a;
  const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&a);
  if (!IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) return a;
  sockaddr_storage out{};
  auto* in = reinterpret_cast<sockaddr_in*>(&out);
  in->sin_family = AF_INET;
  in->sin_port = in6->sin6_port;
  std::memcpy(&in->sin_addr, &in6->sin6_addr.s6_addr[12], 4);
  return out;
}

/// The uid owning the client's end of a loopback TCP connection: the kernel's socket table
/// (sock_diag, as `ss -e` reads it) looked up by the connection's four-tuple seen from the
/// client. Any user may read it (/proc/net/tcp shows the same uid column).
std::optional<std::uint32_t> socket_owner(const sockaddr_storage& peer_in, const sockaddr_storage& local_in) {
  const sockaddr_storage peer = unmapped(peer_in), local = unmapped(local_in);
  if (peer.ss_family != local.ss_family) return std::nullopt;
  const int nl = ::socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
  if (nl < 0) return std::nullopt;
  struct {
    nlmsghdr header;
    inet_diag_req_v2 request;
  } message{};
  message.header.nlmsg_len = sizeof message;
  message.header.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  message.header.nlmsg_flags = NLM_F_REQUEST;
  auto& r = message.request;
  r.sdiag_family = static_cast<std::uint8_t>(peer.ss_family);
  r.sdiag_protocol = IPPROTO_TCP;
  r.idiag_states = ~0U;
  r.id.idiag_cookie[0] = INET_DIAG_NOCOOKIE;
  r.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
  if (peer.ss_family == AF_INET) {
    const auto* p = reinterpret_cast<const sockaddr_in*>(&peer);
    const auto* l = reinterpret_cast<const sockaddr_in*>(&local);
    r.id.idiag_sport = p->sin_port;
    r.id.idiag_dport = l->sin_port;
    std::memcpy(r.id.idiag_src, &p->sin_addr, 4);
    std::memcpy(r.id.idiag_dst, &l->sin_addr, 4);
  } else {
    const auto* p = reinterpret_cast<const sockaddr_in6*>(&peer);
    const auto* l = reinterpret_cast<const sockaddr_in6*>(&local);
    r.id.idiag_sport = p->sin6_port;
    r.id.idiag_dport = l->sin6_port;
    std::memcpy(r.id.idiag_src, &p->sin6_addr, 16);
    std::memcpy(r.id.idiag_dst, &l->sin6_addr, 16);
  }
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  std::optional<std::uint32_t> uid;
  if (::sendto(nl, &message, sizeof message, 0, reinterpret_cast<sockaddr*>(&kernel), sizeof kernel) ==
      static_cast<ssize_t>(sizeof message)) {
    alignas(nlmsghdr) char buffer[8192];
    pollfd p{nl, POLLIN, 0};
    if (::poll(&p, 1, 1000) == 1) {
      const ssize_t n = ::recv(nl, buffer, sizeof buffer, 0);
      if (n > 0) {
        auto* h = reinterpret_cast<nlmsghdr*>(buffer);
        int left = static_cast<int>(n);
        if (NLMSG_OK(h, left) && h->nlmsg_type == SOCK_DIAG_BY_FAMILY &&
            h->nlmsg_len >= NLMSG_LENGTH(sizeof(inet_diag_msg))) {
          const auto* m = static_cast<const inet_diag_msg*>(NLMSG_DATA(h));
          // Only a socket a process still holds says who owns it: a client that closed already
          // (FIN_WAIT2 or TIME_WAIT, kept by the kernel alone) reports inode 0 and uid 0, which
          // would make any user root. Also the reply must be the socket that was asked for.
          const bool same = m->id.idiag_sport == r.id.idiag_sport && m->id.idiag_dport == r.id.idiag_dport &&
                            std::memcmp(m->id.idiag_src, r.id.idiag_src, sizeof r.id.idiag_src) == 0 &&
                            std::memcmp(m->id.idiag_dst, r.id.idiag_dst, sizeof r.id.idiag_dst) == 0;
          if (same && m->idiag_inode != 0) uid = m->idiag_uid;
        }
      }
    }
  }
  ::close(nl);
  return uid;
}

}  // namespace

bool is_loopback(const sockaddr_storage& a) {
  if (a.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&a);
    return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
  }
  if (a.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&a);
    if (IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr)) return true;
    return IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr) && in6->sin6_addr.s6_addr[12] == 127;
  }
  return false;
}

std::optional<std::uint32_t> loopback_peer_uid(int fd) {
  sockaddr_storage remote{}, local{};
  socklen_t remote_n = sizeof remote, local_n = sizeof local;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&remote), &remote_n) != 0 || !is_loopback(remote) ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_n) != 0)
    return std::nullopt;
  return socket_owner(remote, local);
}

}  // namespace erg
