#pragma once
// erg::http_guard::GuardedServer: cpp-httplib's Server with the connection handling its 0.11.4
// lacks, for erg's servers reachable by other users (`erg bso serve`, `erg perseus serve`,
// `erg exporter --listen`; docs/security.md). cpp-httplib still parses requests and routes them;
// this class owns each connection from accept to close:
//  - one thread per connection (a waiting or slow client holds its own thread, never a shared
//    worker), open connections capped in total and per peer;
//  - a peer is its local uid when it connects over loopback (the kernel's socket table says who
//    owns the client's socket), otherwise its source address; a peer at its cap gets its own
//    longest-idle connection closed for the new one; when none is idle the new one waits
//    (Limits::admission_wait) for one to end, then gets a 503;
//  - a whole-request deadline (first byte of the request line to the last byte of the body) and
//    a bound on a request's head (request line and headers), which httplib has not;
//  - a listen backlog sized for bursts (httplib's is 5).
// Handlers may ask who sent the request they serve (current_peer) and whether its client has
// left (client_gone), so a waiting request ends when its client does.

#include <httplib.h>
#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "erg/optimizers/http_guard.hpp"

namespace erg::http_guard {

/// Who is on the other end of a connection.
struct Peer {
  std::string address;       ///< The source address ("127.0.0.1"), "unix" for a Unix socket.
  bool local = false;        ///< Over loopback (or a Unix socket): a user of this machine.
  std::optional<uid_t> uid;  ///< The local user owning the client's socket, when known.
  /// The bucket the per-peer cap counts: "uid:N", or "addr:A" when the uid is unknown.
  [[nodiscard]] std::string key() const;
};

/// The peer of the request the calling thread serves (inside a GuardedServer handler); nullptr
/// elsewhere.
const Peer* current_peer();
/// True when the client of the request the calling thread serves has closed its connection or
/// reset it (a handler that waits polls this); false outside a GuardedServer handler.
bool client_gone();
/// The Caller of `req` (served by a GuardedServer on the calling thread): its local uid when
/// the peer is a local user, the job token it presented.
Caller caller_of(const httplib::Request& req);
/// Ends the connection the calling thread serves once the current answer is written.
void end_connection_after_reply();

/// What a GuardedServer refused or ended, since it started.
struct GuardStats {
  std::uint64_t accepted = 0;
  std::uint64_t refused = 0;    ///< 503: the peer (or the server) was at its cap, none idle.
  std::uint64_t evicted = 0;    ///< Idle connections closed for a new one of the same peer.
  std::uint64_t waited = 0;     ///< Connections that waited for a slot of their peer (Limits::admission_wait).
  std::uint64_t timed_out = 0;  ///< Requests that missed the whole-request deadline or head bound.
};

class GuardedServer : public httplib::Server {
 public:
  explicit GuardedServer(Limits limits = {});
  ~GuardedServer() override;
  GuardedServer(const GuardedServer&) = delete;
  GuardedServer& operator=(const GuardedServer&) = delete;

  /// Binds `host`:`port` (0: any free port) with the backlog of Limits; the bound port, or -1.
  int bind(const std::string& host, int port);
  /// Stops accepting, closes every connection (waking waiting handlers' client_gone) and makes
  /// listen_after_bind() return once every connection thread has ended.
  void shut();
  [[nodiscard]] GuardStats stats() const;
  /// Serves one connected stream socket on the calling thread exactly as a connection thread
  /// does (admission, deadlines, requests, close), then closes it. A seam for the fuzzer.
  void serve_socket(int fd) { process_and_close_socket(fd); }
  [[nodiscard]] const Limits& limits() const { return limits_; }

  struct Connection;

 private:
  bool process_and_close_socket(socket_t sock) override;
  /// Under mu_: frees a slot for `key` (or anywhere when `key` is empty) by closing the
  /// longest-idle connection; false when none is idle.
  bool evict_idle_locked(const std::string& key);
  void refuse(int fd, const char* why);

  const Limits limits_;
  mutable std::mutex mu_;
  std::map<int, std::shared_ptr<Connection>> connections_;
  std::map<std::string, std::size_t> per_peer_;
  std::map<std::string, std::size_t> waiting_;  // connections waiting for a slot of their peer
  std::size_t waiting_total_ = 0;
  std::condition_variable slot_freed_;
  std::size_t open_ = 0;  // admitted connections not evicted
  std::atomic<bool> shutting_{false};
  GuardStats stats_;
  std::atomic<int> refusing_{0};  // refused connections still being answered
  friend class ConnectionThreads;
};

}  // namespace erg::http_guard
