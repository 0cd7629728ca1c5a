#pragma once
// The socket layer of ergd: listeners (Unix socket, TCP; listeners.cpp), admission (connection
// limits in total, per uid, and a reserve for root and allowed peers; 503 when refused, also
// when out of file descriptors), one thread per connection with HTTP/1.1 keep-alive and the SSE
// transport (connection.cpp), write deadlines, a watchdog for idle and slow connections,
// lingering close after errors. Knows nothing of devices or routes: every parsed request goes
// to a RequestHandler.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "erg/core/result.hpp"
#include "erg/daemon/config.hpp"
#include "erg/daemon/request_handler.hpp"

namespace erg::daemon {

class Server {
 public:
  /// Serves the listeners `config` names; `handler` and `config` must outlive the server.
  Server(RequestHandler& handler, const Config& config)
      : handler_(handler), config_(config), limits_(connection_limits(config)) {}
  ~Server() { stop(); }
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  Result<void> start();
  void stop();
  [[nodiscard]] std::uint16_t tcp_port() const { return tcp_port_; }
  /// What start() accepted but the operator should hear about (an insecure socket directory
  /// allowed by Config::allow_insecure_socket_dir). Not thread-safe against start().
  [[nodiscard]] const std::vector<std::string>& warnings() const { return warnings_; }

  /// Serves one connected stream socket on the calling thread, as a connection thread does,
  /// until the peer leaves, a request is refused, a write misses its deadline, or stop(); does
  /// not close `fd`. A seam for the fuzzer: without start() no watchdog runs, so receive
  /// deadlines (idle, request) are not enforced; write deadlines are.
  void serve_connection(int fd, const Peer& peer);

 private:
  /// A connection's receive deadline (steady_clock ticks; 0 while it is not waiting for bytes;
  /// positive while a request is arriving; negative while it waits for its next request: -1
  /// (kIdleDeadline) until the watchdog gives that wait a deadline, then minus the deadline). The watchdog shuts the
  /// read side of a connection whose deadline passed, so connection threads block in recv(2) without a per-call kernel
  /// timer (SO_RCVTIMEO arms one per wait) and read no clock per request.
  using Deadline = std::atomic<std::int64_t>;
  static constexpr std::int64_t kIdleDeadline = -1;
  /// An idle connection evict_idle took (from a negative value, atomically): its thread leaves
  /// without serving what it may have received meanwhile.
  static constexpr std::int64_t kEvicted = std::numeric_limits<std::int64_t>::min();
  /// Peers counted together against the per-uid limit: a uid on the Unix socket, a uid's
  /// loopback TCP connections (kTcpUser | uid), or every other TCP peer together (kNoUid).
  using Bucket = std::uint64_t;
  static constexpr Bucket kNoUid = Bucket{1} << 32;
  static constexpr Bucket kTcpUser = Bucket{1} << 33;
  struct Connection {
    std::shared_ptr<Deadline> deadline;
    Bucket bucket = kNoUid;
    std::uint64_t admitted = 0;  ///< admission order: the oldest idle connection is evicted first
    bool counted = true;         ///< false once evicted: its slot is free already
  };

  void accept_loop(int listen_fd, bool unix_socket);
  /// Admits an accepted connection (starts its thread) or refuses it (refuse_later).
  void admit(int fd, bool unix_socket);
  /// Frees a slot in `bucket` for a new connection by closing its longest-idle connection
  /// (waiting for its next request, nothing of it received). Under mutex_. False when none is
  /// idle.
  bool evict_idle(Bucket bucket);
  /// Answers 503 on a refused connection once its request has arrived (or after a short wait),
  /// on the refuser thread, so a client that already wrote reads the reply instead of a reset;
  /// when too many wait, at once.
  void refuse_later(int fd, std::string why);
  void refuser_loop();
  /// accept(2) failed for lack of file descriptors: accepts with the spare and answers 503.
  void refuse_without_files(int listen_fd);
  /// Forgets an admitted connection (its thread has ended or never started); does not close it.
  void release(int fd);
  /// Root, and peers named in Config::allow_uid/allow_gid: they may use the reserved slots.
  [[nodiscard]] bool may_use_reserve(const Peer& peer) const;
  void serve(int fd, const Peer& peer, Deadline& deadline);
  void watchdog_loop();

  RequestHandler& handler_;
  const Config& config_;
  const ConnectionLimits limits_;
  int unix_fd_ = -1;
  int tcp_fd_ = -1;
  int wake_pipe_[2] = {-1, -1};
  std::uint16_t tcp_port_ = 0;
  std::vector<std::string> warnings_;
  std::vector<std::thread> acceptors_;
  std::atomic<bool> stopping_{false};
  bool started_ = false;
  std::shared_mutex accept_mutex_;  // accept4 (shared) vs. the spare's close/accept/reopen (alone)
  int spare_fd_ = -1;               // /dev/null, closed for a moment to accept a client when out of fds
  std::mutex mutex_;
  std::condition_variable idle_;
  std::condition_variable watchdog_cv_;
  std::thread watchdog_;
  std::map<int, Connection> connections_;               // open connection fds, for shutdown()
  std::unordered_map<Bucket, std::size_t> per_bucket_;  // open connections per uid (or kNoUid)
  std::size_t threads_ = 0;                             // live connection threads
  std::size_t open_ = 0;                                // admitted connections not evicted
  static constexpr int kUnixAcceptors = 8;
  /// New connections a uid may open per second (and in one burst) before the next are shed.
  static constexpr double kAcceptRate = 2000.0;
  struct AcceptRate {
    double tokens = 0.0;
    std::chrono::steady_clock::time_point last{};
  };
  std::unordered_map<Bucket, AcceptRate> accept_rate_;  // per uid (not root, not TCP)
  std::uint64_t shed_ = 0;                              // connections shed by the accept rate
  std::uint64_t admissions_ = 0;
  // Refused connections waiting for their request before the 503 (refuser_loop).
  struct Refused {
    int fd;
    std::string why;
    std::chrono::steady_clock::time_point until;
  };
  std::mutex refused_mutex_;
  std::vector<Refused> refused_;
  int refuser_pipe_[2] = {-1, -1};
  std::thread refuser_;
  std::atomic<bool> refuser_stop_{false};  // set once no acceptor can refuse any more
};

}  // namespace erg::daemon
