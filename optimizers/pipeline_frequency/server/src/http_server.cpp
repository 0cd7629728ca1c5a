#include "erg/optimizers/pipeline_frequency/server/http_server.hpp"

#include <httplib.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "erg/optimizers/guarded_server.hpp"
#include "erg/optimizers/http_guard.hpp"

namespace erg::pipeline_frequency::server {

struct HttpServer::Impl {
  Impl(Service& s, const http_guard::Limits& limits) : service(s), server(limits) {}
  Service& service;
  http_guard::GuardedServer server;
  std::mutex mu;
  std::condition_variable cv;
  bool stopping = false;
};

namespace {

void send(httplib::Response& res, const Reply& reply) {
  res.status = reply.status;
  res.set_content(reply.body, "application/json");
}

std::optional<std::string> query(const httplib::Request& req, const char* name) {
  if (!req.has_param(name)) return std::nullopt;
  return req.get_param_value(name);
}

}  // namespace

Result<std::unique_ptr<HttpServer>> HttpServer::bind(Service& service, const HttpOptions& options) {
  auto impl = std::make_unique<Impl>(service, options.limits);
  auto& s = impl->server;
  s.set_payload_max_length(options.max_body_bytes);
  http_guard::refuse_unbounded_bodies(s, options.max_body_bytes);
  // Without TCP_NODELAY a kept-alive response's body waits for the client's delayed ACK (40 ms).
  s.set_tcp_nodelay(true);
  // A waiting GET /schedule runs inside its handler: rank_timeout bounds it, and it ends when its
  // client leaves (client_gone); each holds one of its peer's connections (Limits::max_per_peer).
  s.Post("/register_job", [&service](const httplib::Request& req, httplib::Response& res) {
    send(res, service.register_job(req.body, http_guard::caller_of(req)));
  });
  // Job ids hold '+' and whatever job_metadata holds (even '/'), so the id is the rest of the path.
  s.Post(R"(/register_rank/(.+))", [&service](const httplib::Request& req, httplib::Response& res) {
    send(res, service.register_rank(req.matches[1], req.body, http_guard::caller_of(req)));
  });
  s.Get(R"(/schedule/(.+))", [&service](const httplib::Request& req, httplib::Response& res) {
    send(res,
         service.get_schedule(req.matches[1], query(req, "rank"), http_guard::client_gone, http_guard::caller_of(req)));
  });
  s.Post(R"(/result/(.+))", [&service](const httplib::Request& req, httplib::Response& res) {
    send(res, service.post_result(req.matches[1], req.body, http_guard::caller_of(req)));
  });
  // erg's addition: the job's scheduler state (the online scheduler's phase and plan).
  s.Get(R"(/state/(.+))", [&service](const httplib::Request& req, httplib::Response& res) {
    send(res, service.get_state(req.matches[1], http_guard::caller_of(req)));
  });
  // Statuses httplib answers itself get a JSON body too, FastAPI's {"detail": ...}.
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

bool HttpServer::run() {
  // Zeus's cleanup task runs once a minute; requests also evict idle jobs as they come.
  std::thread sweeper([this] {
    std::unique_lock lock(impl_->mu);
    while (!impl_->cv.wait_for(lock, std::chrono::minutes(1), [this] { return impl_->stopping; })) {
      lock.unlock();
      impl_->service.evict_idle();
      lock.lock();
    }
  });
  const bool ok = impl_->server.listen_after_bind();
  {
    std::lock_guard lock(impl_->mu);
    impl_->stopping = true;
  }
  impl_->cv.notify_all();
  sweeper.join();
  return ok;
}

void HttpServer::wait_until_ready() const {
  while (!impl_->server.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

void HttpServer::stop() {
  // Waiting GETs hold worker threads the server joins on stop: wake them first.
  impl_->service.close();
  impl_->server.shut();
}

void HttpServer::serve_socket(int fd) { impl_->server.serve_socket(fd); }

}  // namespace erg::pipeline_frequency::server
