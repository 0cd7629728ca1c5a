#include "erg/optimizers/batch_size/server/http_server.hpp"

#include <httplib.h>

#include <chrono>
#include <thread>

#include "erg/optimizers/guarded_server.hpp"
#include "erg/optimizers/http_guard.hpp"

namespace erg::batch_size::server {

struct HttpServer::Impl {
  explicit Impl(const http_guard::Limits& limits) : server(limits) {}
  http_guard::GuardedServer server;
};

namespace {

void send(httplib::Response& res, const Reply& reply) {
  res.status = reply.status;
  if (!reply.job_token.empty()) res.set_header(http_guard::kJobTokenHeader, reply.job_token);
  res.set_content(reply.body, "application/json");
}

std::optional<std::string> query(const httplib::Request& req, const char* name) {
  if (!req.has_param(name)) return std::nullopt;
  return req.get_param_value(name);
}

}  // namespace

Result<std::unique_ptr<HttpServer>> HttpServer::bind(Service& service, const HttpOptions& options) {
  auto impl = std::make_unique<Impl>(options.limits);
  auto& s = impl->server;
  s.set_payload_max_length(options.max_body_bytes);
  http_guard::refuse_unbounded_bodies(s, options.max_body_bytes);
  // httplib writes a response's headers and body separately: without TCP_NODELAY the body waits
  // for the client's delayed ACK (40 ms on Linux) on a kept-alive connection.
  s.set_tcp_nodelay(true);
  s.Post("/jobs", [&service](const httplib::Request& req, httplib::Response& res) {
    send(res, service.register_job(req.body, http_guard::caller_of(req)));
  });
  s.Get("/jobs/batch_size", [&service](const httplib::Request& req, httplib::Response& res) {
    send(res, service.get_batch_size(query(req, "job_id"), http_guard::caller_of(req)));
  });
  s.Post("/report", [&service](const httplib::Request& req, httplib::Response& res) {
    send(res, service.report(req.body, http_guard::caller_of(req)));
  });
  s.Patch("/trials", [&service](const httplib::Request& req, httplib::Response& res) {
    send(res, service.end_trial(req.body, http_guard::caller_of(req)));
  });
  s.Delete("/jobs", [&service](const httplib::Request& req, httplib::Response& res) {
    send(res, service.delete_job(query(req, "job_id"), http_guard::caller_of(req)));
  });
  // Statuses httplib answers itself (404 no route, 413 body too large, 400 bad request) get a
  // JSON body too; FastAPI answers an unknown route {"detail": "Not Found"}.
  s.set_error_handler([](const httplib::Request&, httplib::Response& res) {
    if (!res.body.empty()) return;
    const char* what = res.status == 404   ? "Not Found"
                       : res.status == 405 ? "Method Not Allowed"
                       : res.status == 413 ? "Request body too large"
                                           : "Bad request";
    res.set_content(std::string(R"({"detail":")") + what + "\"}", "application/json");
  });
  s.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
    res.status = 500;
    res.set_content(R"({"message":"internal server error"})", "application/json");
  });
  const int port = s.bind(options.host, options.port);
  if (port < 0)
    return fail(ErrorCode::kUnavailable, "cannot listen on " + options.host + ":" + std::to_string(options.port));
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl), port));
}

HttpServer::HttpServer(std::unique_ptr<Impl> impl, int port) : impl_(std::move(impl)), port_(port) {}
HttpServer::~HttpServer() { stop(); }

bool HttpServer::run() { return impl_->server.listen_after_bind(); }
void HttpServer::wait_until_ready() const {
  while (!impl_->server.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}
void HttpServer::stop() { impl_->server.shut(); }

void HttpServer::serve_socket(int fd) { impl_->server.serve_socket(fd); }

}  // namespace erg::batch_size::server
