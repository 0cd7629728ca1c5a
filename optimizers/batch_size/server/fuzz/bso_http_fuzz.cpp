// libFuzzer target: the batch-size optimizer server's whole connection loop, as `erg bso serve`
// serves each connection: each input is raw HTTP (one or more pipelined requests; the line
// "--next-connection--" starts another connection, at most 16) written into one end of a Unix
// socket pair while HttpServer::serve_socket serves the other end on this thread, connection
// after connection — erg::http_guard::GuardedServer's admission, keep-alive loop, whole-request deadline,
// head bound and lingering close, cpp-httplib's parsing and routing, refuse_unbounded_bodies,
// and the Service over a real SQLite store (in /dev/shm) that lives for the whole run. The peer
// is "unix" with the fuzzer's own uid (SO_PEERCRED), so every request takes the Caller path.
// One store holds a canary job `fuzz-1` (registered over HTTP, so the fuzzer's user owns it;
// batch size 128, trials 1 and 2 out) that the corpus's requests name.
//
// Checked after every input (a violation aborts, which libFuzzer reports as a crash):
//  - serve_socket returns (a hang is caught by libFuzzer's -timeout; the Limits are short);
//  - everything the server wrote is a sequence of well-formed HTTP/1.1 responses (status line,
//    headers, exactly one Content-Length the body matches; http_exchange.hpp);
//  - never 500 or 503 (the database is healthy, one connection is never over a cap); every
//    whole body is JSON, an error's with "message" or FastAPI's "detail".

#include <sqlite3.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "erg/optimizers/batch_size/server/http_server.hpp"
#include "erg/optimizers/batch_size/server/service.hpp"
#include "erg/optimizers/batch_size/server/store.hpp"
#include "http_exchange.hpp"

namespace {

namespace srv = erg::batch_size::server;
namespace hf = erg::http_fuzz;

void require(bool ok, const std::string& what) {
  if (!ok) {
    std::fprintf(stderr, "bso_http_fuzz: %s\n", what.c_str());
    std::abort();
  }
}

/// The canary's registration (the corpus's requests name it).
constexpr std::string_view kCanary =
    R"({"job_id":"fuzz-1","job_id_prefix":"fuzz","batch_sizes":[32,64,128,256],"default_batch_size":128,)"
    R"("beta_knob":2.0,"max_epochs":5,"mab_seed":7,"max_power":300,"number_of_gpus":1,"gpu_model":"A100"})";
/// Registers the canary and takes trials 1 and 2 out, over HTTP (so the fuzzer's user owns it).
std::string seed_requests() {
  const std::string get = "GET /jobs/batch_size?job_id=fuzz-1 HTTP/1.1\r\nHost: x\r\n\r\n";
  return "POST /jobs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
         std::to_string(kCanary.size()) + "\r\n\r\n" + std::string(kCanary) + get + get;
}
/// Above this many jobs or canary trials the store is trimmed, so each input stays fast.
constexpr int kMaxJobs = 16;
constexpr int kMaxTrials = 32;  // the optimizer state restored and saved per request grows with it

class Harness {
 public:
  Harness() {
    const char* base = std::filesystem::is_directory("/dev/shm") ? "/dev/shm" : "/tmp";
    std::string tmpl = std::string(base) + "/erg-bso-http-fuzz-XXXXXX";
    require(mkdtemp(tmpl.data()) != nullptr, "mkdtemp");
    dir_ = tmpl;
    const std::string path = (dir_ / "bso.db").string();
    auto store = srv::open_store("sqlite://" + path);
    require(store.has_value(), "cannot open the store");
    store_ = std::move(*store);
    service_ = std::make_unique<srv::Service>(*store_);
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
    require(server.has_value(), "cannot bind");
    server_ = std::move(*server);
    require(sqlite3_open_v2(path.c_str(), &reader_, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK, "reader");
    sqlite3_busy_timeout(reader_, 10000);
    seed_canary();
    data_version_ = scalar("PRAGMA data_version");
  }
  ~Harness() {
    sqlite3_close(reader_);
    server_.reset();
    service_.reset();
    store_.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  void one(std::string_view input) {
    for (const std::string_view connection : hf::split_connections(input)) {
      const std::string out = serve(connection);
      static const bool print = std::getenv("ERG_FUZZ_PRINT") != nullptr;  // to look at a corpus's replies
      if (print) std::fprintf(stderr, "--- %zu bytes in, %zu out:\n%s\n", connection.size(), out.size(), out.c_str());
      for (const auto& r : hf::parse_responses(out, connection)) {
        if (r.status == 500 || r.status == 503) hf::violated("status " + std::to_string(r.status), out);
        (void)hf::json_body(r, out);
      }
    }
    // Keep the store small and the canary present; only a commit can change them.
    const std::string version = scalar("PRAGMA data_version");
    if (version != data_version_) {
      trim();
      data_version_ = scalar("PRAGMA data_version");
    }
  }

 private:
  std::string serve(std::string_view input) {
    return hf::serve_input(client_, input, [this](int fd) { server_->serve_socket(fd); });
  }

  void seed_canary() {
    const std::string in = seed_requests();
    const std::string out = serve(in);
    const auto replies = hf::parse_responses(out, in);
    require(replies.size() == 3 && (replies[0].status == 201 || replies[0].status == 200) && replies[1].status == 200 &&
                replies[2].status == 200,
            "canary: " + out);
  }

  void trim() {
    if (std::stoi(scalar("SELECT count(*) FROM Job")) > kMaxJobs) {
      std::vector<std::string> ids;
      sqlite3_stmt* s = nullptr;
      require(
          sqlite3_prepare_v2(reader_, "SELECT job_id FROM Job WHERE job_id != 'fuzz-1'", -1, &s, nullptr) == SQLITE_OK,
          sqlite3_errmsg(reader_));
      while (sqlite3_step(s) == SQLITE_ROW)
        ids.emplace_back(reinterpret_cast<const char*>(sqlite3_column_blob(s, 0)),
                         static_cast<std::size_t>(sqlite3_column_bytes(s, 0)));
      sqlite3_finalize(s);
      for (const auto& id : ids) require(service_->delete_job(id).status == 200, "trim " + id);
    }
    const bool canary = scalar("SELECT count(*) FROM Job WHERE job_id = 'fuzz-1'") != "0";
    const bool full = std::stoi(scalar("SELECT count(*) FROM Trial WHERE job_id = 'fuzz-1'")) > kMaxTrials;
    if (canary && full) require(service_->delete_job(std::string("fuzz-1")).status == 200, "trim canary");
    if (!canary || full) seed_canary();
  }

  std::string scalar(const char* sql) {
    sqlite3_stmt* s = nullptr;
    require(sqlite3_prepare_v2(reader_, sql, -1, &s, nullptr) == SQLITE_OK, sqlite3_errmsg(reader_));
    require(sqlite3_step(s) == SQLITE_ROW, sqlite3_errmsg(reader_));
    const auto* t = sqlite3_column_text(s, 0);
    std::string v = t ? reinterpret_cast<const char*>(t) : "NULL";
    sqlite3_finalize(s);
    return v;
  }

  std::filesystem::path dir_;
  std::unique_ptr<srv::Store> store_;
  std::unique_ptr<srv::Service> service_;
  std::unique_ptr<srv::HttpServer> server_;
  hf::ClientThread client_;
  sqlite3* reader_ = nullptr;
  std::string data_version_;
};

Harness* harness = nullptr;  // one store and server for the whole run; removed when the process exits

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (harness == nullptr) {
    harness = new Harness();
    std::atexit([] { delete harness; });
  }
  harness->one(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
