#pragma once
// Helpers for tests of ergd over a real Unix socket (and loopback TCP) with fake devices.

#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <memory>
#include <string>

#include "fixture.hpp"

namespace erg::daemon::testing {

/// A private directory (mode 0700) for this process's sockets, removed at exit: ergd refuses a
/// socket directory other users may write to, such as /tmp itself.
inline const std::string& socket_dir() {
  static const struct Dir {
    std::string path;
    Dir() {
      char t[] = "/tmp/ergd-test-XXXXXX";
      path = ::mkdtemp(t) != nullptr ? t : "/tmp";
    }
    ~Dir() {
      std::error_code ec;
      if (path != "/tmp") std::filesystem::remove_all(path, ec);
    }
  } dir;
  return dir.path;
}

inline std::string temp_socket(const char* tag) { return socket_dir() + "/" + tag + ".sock"; }

// FakeDaemon clears socket_path; start a daemon on a socket explicitly.
inline std::unique_ptr<testing::FakeDaemon> serve(const std::string& path, Config c = {}) {
  c.tcp = "127.0.0.1:0";
  if (!c.signing_key_path) c.tcp_insecure = true;  // TCP peers unauthenticated: the tests' own loopback
  c.gpu_power_poll_hz = 100;
  auto f = std::make_unique<testing::FakeDaemon>(c);
  // FakeDaemon's config has no socket; rebuild with one.
  Inventory inv;
  for (auto& g : f->gpus) inv.gpus.push_back(g);
  for (auto& cpu : f->cpus) inv.cpus.push_back(cpu);
  c.socket_path = path;
  c.skip_privilege_check = true;
  auto d = Daemon::create(c, std::move(inv));
  EXPECT_TRUE(d) << d.error().message;
  f->daemon = std::move(*d);
  auto r = f->daemon->start();
  EXPECT_TRUE(r) << (r ? "" : r.error().message);
  return f;
}

inline int connect_raw(const std::string& path) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::strncpy(a.sun_path, path.c_str(), sizeof a.sun_path - 1);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

/// Sends raw bytes, returns everything read until the daemon closes (or 3 s pass).
inline std::string raw_exchange(const std::string& path, const std::string& bytes) {
  int fd = connect_raw(path);
  if (fd < 0) return "";
  timeval tv{3, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  std::size_t off = 0;
  while (off < bytes.size()) {
    ssize_t n = ::send(fd, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
    if (n <= 0) break;
    off += static_cast<std::size_t>(n);
  }
  ::shutdown(fd, SHUT_WR);  // the daemon sees EOF after our bytes
  std::string out;
  char buf[4096];
  for (;;) {
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return out;
}

inline int status_of(const std::string& wire) { return wire.size() >= 12 ? std::stoi(wire.substr(9, 3)) : 0; }

}  // namespace erg::daemon::testing
