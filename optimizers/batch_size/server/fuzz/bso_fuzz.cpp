// libFuzzer target: the batch-size optimizer server's request handling — the strict JSON body
// parsers and validation of every route, and what the Service does with whatever gets through —
// over a real SQLite store (in /dev/shm, so fsync costs nothing). One store lives for the whole
// run, holding a canary job with trials out, so valid-looking bodies reach the optimizer.
//
// Input: byte 0 picks the route (byte0 % 5: 0 POST /jobs, 1 GET /jobs/batch_size?job_id=,
// 2 POST /report, 3 PATCH /trials, 4 DELETE /jobs?job_id=); the rest is the body or query value.
//
// Checked after every input (a violation aborts, which libFuzzer reports as a crash):
//  - the answer is JSON with a documented status: 200/201 (an object or null), 400/404/409 with
//    {"message": string}, 422 in FastAPI's shape {"detail": [{"loc": ["body"|"query", ...],
//    "msg", "type"}], "message"}; never 500 or 503 (the database is healthy);
//  - no job is corrupted: after every input that committed, every job's optimizer_state
//    restores, and its Trial rows mirror the restored trials (numbers, batch sizes, statuses).

#include <sqlite3.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "erg/optimizers/batch_size/server/service.hpp"
#include "erg/optimizers/batch_size/server/store.hpp"

namespace {

namespace srv = erg::batch_size::server;
using json = nlohmann::json;

[[noreturn]] void violated(const std::string& what) {
  std::fprintf(stderr, "bso_fuzz: %s\n", what.c_str());
  std::abort();
}

void require(bool ok, const std::string& what) {
  if (!ok) violated(what);
}

/// The canary job: the corpus's requests name it, with batch size 128 and trials 1 and 2 out.
constexpr const char* kCanary = R"({"job_id":"fuzz-1","job_id_prefix":"fuzz","batch_sizes":[32,64,128,256],
  "default_batch_size":128,"beta_knob":2.0,"max_epochs":5,"mab_seed":7,"max_power":300,"number_of_gpus":1,
  "gpu_model":"A100"})";
/// Above this many jobs or canary trials the store is trimmed, so checks stay fast.
constexpr int kMaxJobs = 32;
constexpr std::size_t kMaxTrials = 200;

class Harness {
 public:
  Harness() {
    const char* base = std::filesystem::is_directory("/dev/shm") ? "/dev/shm" : "/tmp";
    std::string tmpl = std::string(base) + "/erg-bso-fuzz-XXXXXX";
    require(mkdtemp(tmpl.data()) != nullptr, "mkdtemp");
    dir_ = tmpl;
    const std::string path = (dir_ / "bso.db").string();
    auto store = srv::open_store("sqlite://" + path);
    require(store.has_value(), "cannot open the store");
    store_ = std::move(*store);
    service_ = std::make_unique<srv::Service>(*store_);
    require(sqlite3_open_v2(path.c_str(), &reader_, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK, "reader");
    sqlite3_busy_timeout(reader_, 10000);
    seed_canary();
  }
  ~Harness() {
    sqlite3_close(reader_);
    service_.reset();
    store_.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  void one(const std::uint8_t* data, std::size_t size) {
    if (size == 0) return;
    const std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
    const std::optional<std::string> query(std::in_place, rest);
    switch (data[0] % 5) {
      case 0: check_reply(service_->register_job(rest), "POST /jobs"); break;
      case 1: check_reply(service_->get_batch_size(query), "GET /jobs/batch_size"); break;
      case 2: check_reply(service_->report(rest), "POST /report"); break;
      case 3: check_reply(service_->end_trial(rest), "PATCH /trials"); break;
      default: check_reply(service_->delete_job(query), "DELETE /jobs"); break;
    }
    // Only a commit can corrupt a job: check when the database changed (data_version counts
    // other connections' commits), which keeps the rejected inputs, most of them, fast.
    const auto version = rows("PRAGMA data_version", 1).at(0).at(0);
    if (version != data_version_) {
      check_jobs();
      data_version_ = rows("PRAGMA data_version", 1).at(0).at(0);
    }
  }

 private:
  void seed_canary() {
    auto r = service_->register_job(kCanary);
    require(r.status == 201 || r.status == 200, "canary: " + r.body);
    for (int i = 0; i < 2; ++i) require(service_->get_batch_size("fuzz-1").status == 200, "canary trial");
  }

  static void check_reply(const srv::Reply& reply, const char* route) {
    const std::string where = std::string(route) + " answered " + std::to_string(reply.status) + " " + reply.body;
    const json j = json::parse(reply.body, nullptr, /*allow_exceptions=*/false);
    require(!j.is_discarded(), where + ": not JSON");
    switch (reply.status) {
      case 200:
      case 201: require(j.is_object() || j.is_null(), where); return;
      case 400:
      case 404:
      case 409:
        require(j.is_object() && j.size() == 1 && j.contains("message") && j["message"].is_string(), where);
        return;
      case 422: {
        require(j.is_object() && j.contains("detail") && j["detail"].is_array() && !j["detail"].empty(), where);
        require(j.contains("message") && j["message"].is_string(), where);
        for (const auto& d : j["detail"]) {
          require(d.is_object() && d.contains("loc") && d["loc"].is_array() && !d["loc"].empty(), where);
          require(d["loc"][0] == "body" || d["loc"][0] == "query", where);
          for (const auto& part : d["loc"]) require(part.is_string(), where);
          require(d.contains("msg") && d["msg"].is_string() && d.contains("type") && d["type"].is_string(), where);
        }
        return;
      }
      default: violated(where + ": undocumented status");
    }
  }

  std::vector<std::vector<std::string>> rows(const std::string& sql, int columns) {
    sqlite3_stmt* s = nullptr;
    require(sqlite3_prepare_v2(reader_, sql.c_str(), -1, &s, nullptr) == SQLITE_OK, sqlite3_errmsg(reader_));
    std::vector<std::vector<std::string>> out;
    int rc = 0;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
      auto& row = out.emplace_back();
      for (int c = 0; c < columns; ++c) {
        const auto* t = sqlite3_column_text(s, c);
        row.emplace_back(t ? reinterpret_cast<const char*>(t) : "NULL");
      }
    }
    require(rc == SQLITE_DONE, sqlite3_errmsg(reader_));
    sqlite3_finalize(s);
    return out;
  }

  void check_jobs() {
    const auto jobs = rows("SELECT job_id, optimizer_state FROM Job ORDER BY job_id", 2);
    bool canary = false;
    bool trim_canary = false;
    for (const auto& job : jobs) {
      auto opt = erg::batch_size::Optimizer::restore(job[1]);
      require(opt.has_value(), "job " + job[0] + ": optimizer_state does not restore");
      sqlite3_stmt* s = nullptr;
      require(sqlite3_prepare_v2(reader_,
                                 "SELECT trial_number, batch_size, status FROM Trial WHERE job_id = ?"
                                 " ORDER BY trial_number",
                                 -1, &s, nullptr) == SQLITE_OK,
              "prepare");
      sqlite3_bind_text(s, 1, job[0].data(), static_cast<int>(job[0].size()), SQLITE_TRANSIENT);
      std::size_t n = 0;
      while (sqlite3_step(s) == SQLITE_ROW) {
        require(n < opt->trials().size(), "job " + job[0] + ": more Trial rows than trials");
        const auto& t = opt->trials()[n];
        const std::string status = reinterpret_cast<const char*>(sqlite3_column_text(s, 2));
        const std::string want = t.status == erg::batch_size::TrialStatus::kDispatched  ? "Dispatched"
                                 : t.status == erg::batch_size::TrialStatus::kSucceeded ? "Succeeded"
                                                                                        : "Failed";
        require(
            sqlite3_column_int(s, 0) == t.trial_number && sqlite3_column_int(s, 1) == t.batch_size && status == want,
            "job " + job[0] + ": Trial row " + std::to_string(n + 1) + " disagrees with optimizer_state");
        ++n;
      }
      sqlite3_finalize(s);
      require(n == opt->trials().size(), "job " + job[0] + ": a trial has no Trial row");
      if (job[0] == "fuzz-1") {
        canary = true;
        trim_canary = opt->trials().size() > kMaxTrials;
      }
    }
    // Keep the store small and the canary present (inputs may delete it or fill it up).
    if (static_cast<int>(jobs.size()) > kMaxJobs) {
      for (const auto& job : jobs)
        if (job[0] != "fuzz-1") require(service_->delete_job(job[0]).status == 200, "trim " + job[0]);
    }
    if (trim_canary) require(service_->delete_job(std::string("fuzz-1")).status == 200, "trim canary");
    if (!canary || trim_canary) seed_canary();
  }

  std::filesystem::path dir_;
  std::unique_ptr<srv::Store> store_;
  std::unique_ptr<srv::Service> service_;
  sqlite3* reader_ = nullptr;
  std::string data_version_;
};

}  // namespace

namespace {
Harness* harness = nullptr;  // one store for the whole run; removed when the process exits
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (harness == nullptr) {
    harness = new Harness();
    std::atexit([] { delete harness; });
  }
  harness->one(data, size);
  return 0;
}
