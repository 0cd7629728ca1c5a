// libFuzzer target: the Perseus server's whole connection loop, as `erg perseus serve` serves
// each connection: each input is raw HTTP (one or more pipelined requests; the line
// "--next-connection--" starts another connection, at most 16: httplib ends a connection after 5
// requests, and a job's rounds take more) written into one end of a Unix socket pair while
// HttpServer::serve_socket serves the other end on this thread, connection after connection —
// erg::http_guard::GuardedServer's admission, keep-alive loop, whole-request deadline, head bound
// and lingering close, cpp-httplib's parsing and routing, refuse_unbounded_bodies, and the
// Service with the online scheduler (profiling rounds, then the planner). The peer is "unix" with
// the fuzzer's own uid (SO_PEERCRED), so every request takes the Caller path.
//
// Job ids are predictable, so an input can register a job and drive it: the Service's clock is
// fixed at 2024-01-01 00:00:00 UTC and its id nonce is "fuzz", so a job of dp 1, pp 1, tp 1 is
// "2024-01-01-00-00-00+dp1+pp1+tp1+Online+fuzz". Every job is evicted between inputs (the clock
// jumps past max_job_idle_time for one evict_idle()), so each input starts from no jobs.
// A waiting GET /schedule ends within rank_timeout (10 ms) or when its client has left (the
// client shuts its write side once it has sent a connection's bytes, so it has: 499). The
// connections are served one after the other, so only a job of one rank gets through rounds.
//
// Checked after every input (a violation aborts, which libFuzzer reports as a crash):
//  - serve_socket returns (a hang is caught by libFuzzer's -timeout; the Limits are short);
//  - everything the server wrote is a sequence of well-formed HTTP/1.1 responses (status line,
//    headers, exactly one Content-Length the body matches; http_exchange.hpp);
//  - never 503 (the service is open, one connection is never over a cap) and 500 only as the
//    documented end of a job whose scheduler failed ({"message": "job … evicted: …"}); every whole
//    body is JSON, an error's with "message" or FastAPI's "detail".

#include <stdlib.h>
#include <time.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

#include "erg/optimizers/pipeline_frequency/server/http_server.hpp"
#include "erg/optimizers/pipeline_frequency/server/service.hpp"
#include "http_exchange.hpp"

namespace {

namespace srv = erg::pipeline_frequency::server;
namespace hf = erg::http_fuzz;

/// 2024-01-01 00:00:00 UTC.
constexpr std::chrono::seconds kEpoch{1704067200};

class Harness {
 public:
  Harness() {
    ::setenv("TZ", "UTC", 1);  // job ids hold the local time
    ::tzset();
    srv::ServiceOptions o;
    o.scheduler.kind = srv::SchedulerKind::kOnline;
    o.scheduler.online.micro_batches = 1;
    o.scheduler.online.stop_after_rises = 1;
    o.dump_data = false;
    o.rank_timeout = std::chrono::milliseconds(10);
    o.clock = [this] { return std::chrono::system_clock::time_point(kEpoch + later_.load()); };
    o.id_nonce = [] { return std::string("fuzz"); };
    max_idle_ = o.max_job_idle_time;
    service_ = std::make_unique<srv::Service>(std::move(o));
    srv::HttpOptions options;
    options.host = "127.0.0.1";
    options.port = 0;
    // Short: one input must not take seconds. The client always shuts its write side once it
    // has sent the input, so the keep-alive wait ends at once; these bound what else could wait.
    options.limits.idle_timeout = std::chrono::milliseconds(200);
    options.limits.request_deadline = std::chrono::milliseconds(1000);
    options.limits.write_timeout = std::chrono::milliseconds(1000);
    options.limits.admission_wait = std::chrono::milliseconds(100);
    auto server = srv::HttpServer::bind(*service_, options);  // never run(): serve_socket only
    if (!server) {
      std::fprintf(stderr, "perseus_http_fuzz: cannot bind: %s\n", server.error().message.c_str());
      std::abort();
    }
    server_ = std::move(*server);
  }

  void one(std::string_view input) {
    for (const std::string_view connection : hf::split_connections(input)) {
      const std::string out = hf::serve_input(client_, connection, [this](int fd) { server_->serve_socket(fd); });
      static const bool print = std::getenv("ERG_FUZZ_PRINT") != nullptr;  // to look at a corpus's replies
      if (print) std::fprintf(stderr, "--- %zu bytes in, %zu out:\n%s\n", connection.size(), out.size(), out.c_str());
      for (const auto& r : hf::parse_responses(out, connection)) {
        if (r.status == 503) hf::violated("status 503", out);
        const auto j = hf::json_body(r, out);
        if (r.status == 500) {
          const bool evicted = j && j->contains("message") && (*j)["message"].is_string() &&
                               (*j)["message"].get<std::string>().starts_with("job ") &&
                               (*j)["message"].get<std::string>().find(" evicted: ") != std::string::npos;
          if (!evicted) hf::violated("status 500 other than a failed scheduler's eviction", out);
        }
      }
    }
    // Start the next input from no jobs: every job is idle once the clock jumps.
    later_ = max_idle_ + std::chrono::seconds(1);
    service_->evict_idle();
    later_ = std::chrono::seconds(0);
  }

 private:
  std::atomic<std::chrono::seconds> later_{std::chrono::seconds(0)};
  std::chrono::seconds max_idle_{0};
  std::unique_ptr<srv::Service> service_;
  std::unique_ptr<srv::HttpServer> server_;
  hf::ClientThread client_;
};

Harness* harness = nullptr;  // one service and server for the whole run

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (harness == nullptr) {
    harness = new Harness();
    std::atexit([] { delete harness; });
  }
  harness->one(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
