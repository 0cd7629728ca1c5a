#include "server.hpp"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "connection.hpp"
#include "erg/protocol/bodies.hpp"
#include "erg/protocol/http.hpp"
#include "listeners.hpp"

namespace erg::daemon {
namespace {

using Clock = std::chrono::steady_clock;

std::string errno_text(int err) { return std::strerror(err); }

}  // namespace

Result<void> Server::start() {
  if (started_) return ok();
  if (config_.socket_path.empty() && !config_.tcp)
    return fail(ErrorCode::kInvalidArgument, "nothing to listen on: give --socket-path or --tcp");
  if (::pipe2(wake_pipe_, O_CLOEXEC) != 0) return fail(ErrorCode::kIo, "pipe: " + errno_text(errno));
  if (!config_.socket_path.empty()) {
    auto fd = listen_unix(config_);
    if (!fd) return fail(fd.error());
    unix_fd_ = *fd;
  }
  if (config_.tcp) {
    auto fd = listen_tcp(*config_.tcp, tcp_port_);
    if (!fd) {
      if (unix_fd_ >= 0) {
        ::close(unix_fd_);
        unix_fd_ = -1;
        ::unlink(config_.socket_path.c_str());
      }
      return fail(fd.error());
    }
    tcp_fd_ = *fd;
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
  // most that period. An idle wait gets its deadline here, at the first check that sees it, so
  // idle connections are closed between idle_timeout and idle_timeout + period after their last
  // reply, never early.
  auto period = std::clamp(std::min(config_.idle_timeout, config_.request_timeout) / 2, std::chrono::milliseconds(10),
                           std::chrono::milliseconds(500));
  const auto idle_ticks = std::chrono::duration_cast<Clock::duration>(config_.idle_timeout).count();
  std::unique_lock lock(mutex_);
  while (!stopping_.load()) {
    watchdog_cv_.wait_for(lock, period);
    auto now = Clock::now().time_since_epoch().count();
    for (const auto& [fd, deadline] : connections_) {
      auto d = deadline->load(std::memory_order_relaxed);
      if (d == kIdleDeadline) {
        // The connection may have received its request meanwhile (and stored 0): only an idle
        // wait that is still one gets the deadline.
        deadline->compare_exchange_strong(d, now + idle_ticks, std::memory_order_relaxed);
        continue;
      }
      // SHUT_RD: the blocked recv returns 0; the thread can still answer 408.
      if (d > 0 && now >= d) ::shutdown(fd, SHUT_RD);
    }
  }
}

}  // namespace erg::daemon
