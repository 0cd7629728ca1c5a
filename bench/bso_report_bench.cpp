// The batch-size optimizer server's report throughput (bench/report: bso_report_rps):
//  BM_BsoReportRps  POST /report over loopback HTTP (cpp-httplib, keep-alive) to an in-process
//                   server on a SQLite file in a temporary directory, from 8 concurrent clients,
//                   each training its own trial of one job: every report carries new cumulative
//                   time and energy and does not finish the trial, so every request writes the
//                   job and is durable (on disk) before it is answered. Counters: rps, p99_us.

#include <benchmark/benchmark.h>
#include <httplib.h>
#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "erg/optimizers/batch_size/server/http_server.hpp"
#include "erg/optimizers/batch_size/server/service.hpp"
#include "erg/optimizers/batch_size/server/store.hpp"

namespace {

namespace srv = erg::batch_size::server;
using json = nlohmann::json;

constexpr int kClients = 8;
constexpr auto kDuration = std::chrono::seconds(3);

void BM_BsoReportRps(benchmark::State& state) {
  std::string tmpl = (std::filesystem::temp_directory_path() / "erg-bso-bench-XXXXXX").string();
  if (mkdtemp(tmpl.data()) == nullptr) return state.SkipWithError("mkdtemp");
  const std::filesystem::path dir = tmpl;
  double rps = 0, p99_us = 0;
  std::atomic<int> failures{0};
  {
    auto store = srv::open_store("sqlite://" + (dir / "bso.db").string());
    if (!store) return state.SkipWithError(store.error().message.c_str());
    srv::Service service(**store);
    auto server = srv::HttpServer::bind(service, srv::HttpOptions{});
    if (!server) return state.SkipWithError(server.error().message.c_str());
    std::thread serving([&] { (*server)->run(); });
    (*server)->wait_until_ready();
    const int port = (*server)->port();
    // A job whose trials never finish within the run: the metric stays below the target, there
    // is no cost bound (beta null) and max_epochs is far away.
    const json job = {{"job_id", "bench-1"},       {"job_id_prefix", "bench"}, {"batch_sizes", {32, 64, 128, 256}},
                      {"default_batch_size", 128}, {"beta_knob", nullptr},     {"max_epochs", 1000000000},
                      {"max_power", 300.0},        {"number_of_gpus", 1},      {"gpu_model", "A100"}};
    httplib::Client setup("127.0.0.1", port);
    auto r = setup.Post("/jobs", job.dump(), "application/json");
    if (!r || r->status != 201) {
      (*server)->stop();
      serving.join();
      return state.SkipWithError("cannot register the job");
    }
    for (auto _ : state) {
      std::atomic<bool> go{false}, stop{false};
      std::vector<std::vector<float>> lat(kClients);
      std::vector<std::thread> threads;
      for (int i = 0; i < kClients; ++i)
        threads.emplace_back([&, i] {
          httplib::Client c("127.0.0.1", port);
          c.set_keep_alive(true);
          // httplib sends a request's headers and body in two writes; without TCP_NODELAY (curl
          // sets it too) the body would wait on the server's delayed ACK and this would measure Nagle.
          c.set_tcp_nodelay(true);
          auto g = c.Get("/jobs/batch_size?job_id=bench-1");
          if (!g || g->status != 200) {
            ++failures;
            return;
          }
          const auto trial = json::parse(g->body);
          json report = {{"job_id", "bench-1"},
                         {"batch_size", trial["batch_size"]},
                         {"trial_number", trial["trial_number"]},
                         {"time", 0.0},
                         {"energy", 0.0},
                         {"metric", 0.1},
                         {"current_epoch", 0}};
          lat[static_cast<std::size_t>(i)].reserve(100000);
          while (!go.load()) std::this_thread::yield();
          for (int epoch = 1; !stop.load(std::memory_order_relaxed); ++epoch) {
            report["current_epoch"] = epoch;
            report["time"] = epoch * 10.0;
            report["energy"] = epoch * 2000.0;
            const auto t0 = std::chrono::steady_clock::now();
            auto res = c.Post("/report", report.dump(), "application/json");
            if (!res || res->status != 200 || res->body.find("\"stop_train\":false") == std::string::npos) {
              ++failures;
              return;
            }
            lat[static_cast<std::size_t>(i)].push_back(
                std::chrono::duration<float, std::micro>(std::chrono::steady_clock::now() - t0).count());
          }
        });
      const auto t0 = std::chrono::steady_clock::now();
      go = true;
      std::this_thread::sleep_for(kDuration);
      stop = true;
      for (auto& t : threads) t.join();
      const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::vector<float> all;
      for (const auto& l : lat) all.insert(all.end(), l.begin(), l.end());
      std::sort(all.begin(), all.end());
      rps = static_cast<double>(all.size()) / secs;
      p99_us = all.empty() ? 0 : all[all.size() * 99 / 100];
    }
    (*server)->stop();
    serving.join();
  }
  std::filesystem::remove_all(dir);
  if (failures > 0 || rps == 0) return state.SkipWithError("reports failed");
  state.counters["rps"] = rps;
  state.counters["p99_us"] = p99_us;
}
BENCHMARK(BM_BsoReportRps)->Iterations(1)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
