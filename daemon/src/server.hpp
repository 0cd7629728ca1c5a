#pragma once
// The socket layer of ergd: listeners (Unix socket, TCP; listeners.cpp), one thread per
// connection with HTTP/1.1 keep-alive and the SSE transport (connection.cpp), a watchdog for
// idle and slow connections, lingering close after errors. Knows nothing of devices or routes:
// every parsed request goes to a RequestHandler.

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "erg/core/result.hpp"
#include "erg/daemon/config.hpp"
#include "erg/daemon/request_handler.hpp"

namespace erg::daemon {

class Server {
 public:
  /// Serves the listeners `config` names; `handler` and `config` must outlive the server.
  Server(RequestHandler& handler, const Config& config) : handler_(handler), config_(config) {}
  ~Server() { stop(); }
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  Result<void> start();
  void stop();
  [[nodiscard]] std::uint16_t tcp_port() const { return tcp_port_; }

 private:
  void accept_loop(int listen_fd, bool unix_socket);
  /// A connection's receive deadline (steady_clock ticks; 0 while it is not waiting for bytes;
  /// kIdleDeadline while it waits for its next request and the watchdog has not yet given that
  /// wait a deadline). The watchdog shuts the read side of a connection whose deadline passed,
  /// so connection threads block in recv(2) without a per-call kernel timer (SO_RCVTIMEO arms
  /// one per wait) and read no clock per request.
  using Deadline = std::atomic<std::int64_t>;
  static constexpr std::int64_t kIdleDeadline = -1;
  void serve(int fd, bool unix_socket, Deadline& deadline);
  void watchdog_loop();

  RequestHandler& handler_;
  const Config& config_;
  int unix_fd_ = -1;
  int tcp_fd_ = -1;
  int wake_pipe_[2] = {-1, -1};
  std::uint16_t tcp_port_ = 0;
  std::vector<std::thread> acceptors_;
  std::atomic<bool> stopping_{false};
  bool started_ = false;
  std::mutex mutex_;
  std::condition_variable idle_;
  std::condition_variable watchdog_cv_;
  std::thread watchdog_;
  std::map<int, std::shared_ptr<Deadline>> connections_;  // open connection fds, for shutdown()
  std::size_t threads_ = 0;                               // live connection threads
};

}  // namespace erg::daemon
