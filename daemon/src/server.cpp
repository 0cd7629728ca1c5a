#include "server.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <filesystem>

#include "erg/daemon/daemon.hpp"
#include "erg/protocol/bodies.hpp"
#include "erg/protocol/http.hpp"

namespace erg::daemon {
namespace {

using Clock = std::chrono::steady_clock;

std::string errno_text(int err) { return std::strerror(err); }

bool write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) {
        pollfd p{fd, POLLOUT, 0};
        if (::poll(&p, 1, 10000) <= 0) return false;
        continue;
      }
      return false;
    }
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

/// Sends the error, stops writing, and discards input for a moment so the peer reads the
/// response instead of a reset (closing with unread input sends RST).
void error_and_linger(int fd, int status, const std::string& message) {
  protocol::HttpResponse r{status, "application/json", protocol::error_body(message), {}};
  write_all(fd, protocol::serialize_response(r, false));
  ::shutdown(fd, SHUT_WR);
  char sink[16384];
  auto deadline = Clock::now() + std::chrono::milliseconds(500);
  std::size_t drained = 0;
  while (Clock::now() < deadline && drained < (4u << 20)) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    ssize_t n = ::recv(fd, sink, sizeof sink, 0);
    if (n <= 0) break;
    drained += static_cast<std::size_t>(n);
  }
}

}  // namespace

Result<void> Server::listen_unix() {
  namespace fs = std::filesystem;
  const std::string& path = config_.socket_path;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path)
    return fail(ErrorCode::kInvalidArgument, "socket path too long (max 107 bytes): " + path);
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  std::error_code ec;
  fs::path parent = fs::path(path).parent_path();
  if (!parent.empty()) fs::create_directories(parent, ec);

  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode))
      return fail(ErrorCode::kAlreadyExists, path + " exists and is not a socket; refusing to replace it");
    // Stale only if nobody accepts on it (zeusd's rule).
    int probe = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int rc = ::connect(probe, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    int err = errno;
    ::close(probe);
    if (rc == 0) return fail(ErrorCode::kAlreadyExists, "another daemon is already listening on " + path);
    if (err != ECONNREFUSED && err != ENOENT)
      return fail(ErrorCode::kIo, "cannot probe existing socket " + path + ": " + errno_text(err));
    ::unlink(path.c_str());
  }
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return fail(ErrorCode::kIo, "socket(AF_UNIX): " + errno_text(errno));
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    int err = errno;
    ::close(fd);
    return fail(err == EACCES ? ErrorCode::kNoPermission : ErrorCode::kIo,
                "cannot bind " + path + ": " + errno_text(err));
  }
  if (config_.socket_group) {
    gid_t gid = 0;
    const std::string& g = *config_.socket_group;
    auto r = std::from_chars(g.data(), g.data() + g.size(), gid);
    if (r.ec != std::errc() || r.ptr != g.data() + g.size()) {
      struct group* gr = ::getgrnam(g.c_str());
      if (gr == nullptr) {
        ::close(fd);
        ::unlink(path.c_str());
        return fail(ErrorCode::kNotFound, "unknown --socket-group '" + g + "'");
      }
      gid = gr->gr_gid;
    }
    if (::chown(path.c_str(), static_cast<uid_t>(-1), gid) != 0) {
      int err = errno;
      ::close(fd);
      ::unlink(path.c_str());
      return fail(ErrorCode::kNoPermission, "cannot chgrp " + path + ": " + errno_text(err));
    }
  }
  if (::chmod(path.c_str(), config_.socket_mode) != 0 || ::listen(fd, 1024) != 0) {
    int err = errno;
    ::close(fd);
    ::unlink(path.c_str());
    return fail(ErrorCode::kIo, "cannot listen on " + path + ": " + errno_text(err));
  }
  unix_fd_ = fd;
  return ok();
}

Result<void> Server::listen_tcp() {
  const std::string& spec = *config_.tcp;
  std::size_t colon = spec.rfind(':');
  if (colon == std::string::npos) return fail(ErrorCode::kInvalidArgument, "--tcp needs HOST:PORT, got '" + spec + "'");
  std::string host = spec.substr(0, colon);
  unsigned port = 0;
  auto r = std::from_chars(spec.data() + colon + 1, spec.data() + spec.size(), port);
  if (r.ec != std::errc() || r.ptr != spec.data() + spec.size() || port > 65535)
    return fail(ErrorCode::kInvalidArgument, "--tcp: invalid port in '" + spec + "'");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  if (::inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1)
    return fail(ErrorCode::kInvalidArgument, "--tcp: '" + host + "' is not an IPv4 address");
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return fail(ErrorCode::kIo, "socket(AF_INET): " + errno_text(errno));
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(fd, 1024) != 0) {
    int err = errno;
    ::close(fd);
    return fail(ErrorCode::kIo, "cannot listen on " + spec + ": " + errno_text(err));
  }
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  tcp_port_ = ntohs(addr.sin_port);
  tcp_fd_ = fd;
  return ok();
}

Result<void> Server::start() {
  if (started_) return ok();
  if (config_.socket_path.empty() && !config_.tcp)
    return fail(ErrorCode::kInvalidArgument, "nothing to listen on: give --socket-path or --tcp");
  if (::pipe2(wake_pipe_, O_CLOEXEC) != 0) return fail(ErrorCode::kIo, "pipe: " + errno_text(errno));
  if (!config_.socket_path.empty()) {
    if (auto r = listen_unix(); !r) return r;
  }
  if (config_.tcp) {
    if (auto r = listen_tcp(); !r) {
      if (unix_fd_ >= 0) {
        ::close(unix_fd_);
        unix_fd_ = -1;
        ::unlink(config_.socket_path.c_str());
      }
      return r;
    }
  }
  started_ = true;
  watchdog_ = std::thread([this] { watchdog_loop(); });
  if (unix_fd_ >= 0) acceptors_.emplace_back([this] { accept_loop(unix_fd_, true); });
  if (tcp_fd_ >= 0) acceptors_.emplace_back([this] { accept_loop(tcp_fd_, false); });
  return ok();
}

void Server::stop() {
  if (!started_) {
    for (int& fd : wake_pipe_)
      if (fd >= 0) ::close(std::exchange(fd, -1));
    return;
  }
  started_ = false;
  stopping_.store(true);
  char b = 1;
  [[maybe_unused]] auto n = ::write(wake_pipe_[1], &b, 1);
  for (auto& t : acceptors_) t.join();
  acceptors_.clear();
  {
    std::unique_lock lock(mutex_);
    for (const auto& [fd, deadline] : connections_) ::shutdown(fd, SHUT_RDWR);
    watchdog_cv_.notify_all();
    idle_.wait(lock, [this] { return threads_ == 0; });
  }
  if (watchdog_.joinable()) watchdog_.join();
  if (unix_fd_ >= 0) {
    ::close(unix_fd_);
    unix_fd_ = -1;
    ::unlink(config_.socket_path.c_str());
  }
  if (tcp_fd_ >= 0) ::close(std::exchange(tcp_fd_, -1));
  for (int& fd : wake_pipe_)
    if (fd >= 0) ::close(std::exchange(fd, -1));
}

void Server::accept_loop(int listen_fd, bool unix_socket) {
  while (!stopping_.load()) {
    pollfd p[2] = {{listen_fd, POLLIN, 0}, {wake_pipe_[0], POLLIN, 0}};
    int rc = ::poll(p, 2, -1);
    if (rc < 0 && errno != EINTR) return;
    if (p[1].revents != 0 || stopping_.load()) return;
    if ((p[0].revents & POLLIN) == 0) continue;
    int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      continue;
    }
    if (!unix_socket) {
      int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    std::unique_lock lock(mutex_);
    if (connections_.size() >= config_.max_connections) {
      lock.unlock();
      protocol::HttpResponse r{503, "application/json", protocol::error_body("too many connections"), {}};
      write_all(fd, protocol::serialize_response(r, false));
      ::close(fd);
      continue;
    }
    std::shared_ptr<Deadline> deadline;
    try {
      deadline = std::make_shared<Deadline>(0);
    } catch (const std::bad_alloc&) {
      lock.unlock();
      ::close(fd);
      continue;
    }
    connections_.emplace(fd, deadline);
    ++threads_;
    lock.unlock();
    try {
      std::thread([this, fd, unix_socket, deadline] {
        serve(fd, unix_socket, *deadline);
        std::lock_guard g(mutex_);
        connections_.erase(fd);
        ::close(fd);
        if (--threads_ == 0) idle_.notify_all();
      }).detach();
    } catch (const std::system_error&) {
      std::lock_guard g(mutex_);
      connections_.erase(fd);
      ::close(fd);
      if (--threads_ == 0) idle_.notify_all();
    }
  }
}

void Server::watchdog_loop() {
  // Checks twice per shortest timeout (at most every 500 ms): a deadline is enforced late by at
  // most that period.
  auto period = std::clamp(std::min(config_.idle_timeout, config_.request_timeout) / 2, std::chrono::milliseconds(10),
                           std::chrono::milliseconds(500));
  std::unique_lock lock(mutex_);
  while (!stopping_.load()) {
    watchdog_cv_.wait_for(lock, period);
    auto now = Clock::now().time_since_epoch().count();
    for (const auto& [fd, deadline] : connections_) {
      auto d = deadline->load(std::memory_order_relaxed);
      // SHUT_RD: the blocked recv returns 0; the thread can still answer 408.
      if (d != 0 && now >= d) ::shutdown(fd, SHUT_RD);
    }
  }
}

void Server::serve(int fd, bool unix_socket, Deadline& deadline) {
  Peer peer;
  peer.unix_socket = unix_socket;
  if (unix_socket) {
    ucred cred{};
    socklen_t len = sizeof cred;
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0) {
      peer.uid = cred.uid;
      peer.gid = cred.gid;
    }
  }
  std::string buf;
  buf.reserve(4096);
  std::string out;  // the response being sent (reused across the connection's requests)
  out.reserve(1024);
  char chunk[16384];
  protocol::HttpRequest request;
  protocol::HttpLimits limits;
  auto idle_since = Clock::now();
  while (!stopping_.load()) {
    auto outcome = protocol::parse_request(buf, request, limits);
    if (outcome.status == protocol::ParseStatus::kError) {
      error_and_linger(fd, outcome.error_status, outcome.error_message);
      return;
    }
    if (outcome.status == protocol::ParseStatus::kIncomplete) {
      auto limit = buf.empty() ? idle_since + config_.idle_timeout : idle_since + config_.request_timeout;
      if (Clock::now() >= limit) {
        if (!buf.empty()) error_and_linger(fd, 408, "request timeout");
        return;
      }
      // Blocking recv without a kernel timer: one syscall per request. The watchdog enforces
      // `limit` and stop() wakes it, both with shutdown(2).
      deadline.store(limit.time_since_epoch().count(), std::memory_order_relaxed);
      ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
      deadline.store(0, std::memory_order_relaxed);
      if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
      if (n == 0 && !buf.empty() && Clock::now() >= limit && !stopping_.load()) {
        error_and_linger(fd, 408, "request timeout");
        return;
      }
      if (n <= 0) return;
      if (buf.empty()) idle_since = Clock::now();
      buf.append(chunk, static_cast<std::size_t>(n));
      continue;
    }
    buf.erase(0, outcome.consumed);
    Reply reply = daemon_.dispatch(request, peer);
    if (reply.stream) {
      if (!write_all(fd, protocol::serialize_stream_head(200, "text/event-stream"))) return;
      daemon_.run_stream(
          *reply.stream, [fd](std::string_view event) { return write_all(fd, event); },
          [fd] {
            pollfd p{fd, POLLIN | POLLRDHUP, 0};
            return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLIN)) != 0;
          });
      return;
    }
    bool keep = request.keep_alive && !stopping_.load();
    protocol::serialize_response_to(out, reply.response, keep);
    if (!write_all(fd, out) || !keep) return;
    idle_since = Clock::now();
  }
}

}  // namespace erg::daemon
