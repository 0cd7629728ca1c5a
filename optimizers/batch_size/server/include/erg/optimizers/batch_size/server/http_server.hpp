#pragma once
/// The batch-size optimizer server: Service over HTTP (cpp-httplib) on a TCP address.

#include <memory>
#include <string>

#include "erg/core/result.hpp"
#include "erg/optimizers/batch_size/server/service.hpp"
#include "erg/optimizers/http_guard.hpp"

namespace erg::batch_size::server {

struct HttpOptions {
  std::string host = "127.0.0.1";
  int port = 0;                            ///< 0 = any free port (see HttpServer::port()).
  std::size_t max_body_bytes = 64 * 1024;  ///< Larger bodies answer 413; a JobSpec is < 1 KiB.
  /// Connections: caps in all and per peer, whole-request deadline, backlog (docs/security.md).
  http_guard::Limits limits;
};

class HttpServer {
 public:
  /// Binds `options`' address; kUnavailable if it cannot. `service` must outlive the server.
  static Result<std::unique_ptr<HttpServer>> bind(Service& service, const HttpOptions& options);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  /// The bound port.
  [[nodiscard]] int port() const { return port_; }
  /// Serves until stop(); returns false if serving failed.
  bool run();
  /// Blocks until run() accepts connections.
  void wait_until_ready() const;
  /// Makes run() return; thread-safe, callable from a signal-watching thread.
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

}  // namespace erg::batch_size::server
