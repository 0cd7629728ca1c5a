#pragma once
/// The Perseus server: Service over HTTP (cpp-httplib) on a TCP address.

#include <memory>
#include <string>

#include "erg/core/result.hpp"
#include "erg/optimizers/http_guard.hpp"
#include "erg/optimizers/pipeline_frequency/server/service.hpp"

namespace erg::pipeline_frequency::server {

struct HttpOptions {
  std::string host = "127.0.0.1";
  int port = 0;                          ///< 0 = any free port (see HttpServer::port()).
  std::size_t max_body_bytes = 1 << 20;  ///< Larger bodies answer 413; results carry breakdowns.
  /// Connections: caps in all and per peer, whole-request deadline, backlog (docs/security.md).
  /// Every rank's waiting GET /schedule holds one connection (and its thread).
  http_guard::Limits limits{.max_per_peer = 256};
};

class HttpServer {
 public:
  /// Binds `options`' address; kUnavailable if it cannot. `service` must outlive the server.
  static Result<std::unique_ptr<HttpServer>> bind(Service& service, const HttpOptions& options);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  [[nodiscard]] int port() const { return port_; }
  /// Serves until stop(); also evicts idle jobs once a minute. Returns false if serving failed.
  bool run();
  /// Blocks until run() accepts connections.
  void wait_until_ready() const;
  /// Wakes waiting GETs (503) and makes run() return; thread-safe.
  void stop();
  /// Serves one connected stream socket on the calling thread as the server serves each
  /// connection (erg::http_guard::GuardedServer), then closes it. A seam for the fuzzer.
  void serve_socket(int fd);

 private:
  struct Impl;
  explicit HttpServer(std::unique_ptr<Impl> impl, int port);
  std::unique_ptr<Impl> impl_;
  int port_;
};

}  // namespace erg::pipeline_frequency::server
