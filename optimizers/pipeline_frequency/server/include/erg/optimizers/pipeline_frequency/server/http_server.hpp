#pragma once
/// The Perseus server: Service over HTTP (cpp-httplib) on a TCP address.

#include <memory>
#include <string>

#include "erg/core/result.hpp"
#include "erg/optimizers/pipeline_frequency/server/service.hpp"

namespace erg::pipeline_frequency::server {

struct HttpOptions {
  std::string host = "127.0.0.1";
  int port = 0;                          ///< 0 = any free port (see HttpServer::port()).
  std::size_t max_body_bytes = 1 << 20;  ///< Larger bodies answer 413; results carry breakdowns.
  /// Worker threads. Every rank's GET /schedule holds one while it waits for the others, so a
  /// job needs world_size of them at once: more ranks than threads wait until rank_timeout.
  int threads = 256;
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

 private:
  struct Impl;
  explicit HttpServer(std::unique_ptr<Impl> impl, int port);
  std::unique_ptr<Impl> impl_;
  int port_;
};

}  // namespace erg::pipeline_frequency::server
