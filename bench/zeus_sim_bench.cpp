// The whole `erg simulate zeus --all` sweep (bench/report: simulate_zeus_sweep_s, target 0.3 s):
// reading and parsing the traces, then every GPU × workload pair at η 0.5, β 2, seed 1.

#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "erg/optimizers/zeus_sim/simulator.hpp"
#include "erg/optimizers/zeus_sim/trace.hpp"

namespace {

using namespace erg;

std::vector<std::string> gpus() {
  std::vector<std::string> g;
  for (auto n : zeus_sim::trace_gpus()) g.emplace_back(n);
  return g;
}

void BM_SimulateZeusSweep(benchmark::State& state) {
  const auto dir = zeus_sim::find_trace_dir();
  if (!dir) {
    state.SkipWithError(dir.error().message.c_str());
    return;
  }
  const auto all = gpus();
  for (auto _ : state) {
    auto traces = zeus_sim::load_traces(*dir);
    if (!traces) {
      state.SkipWithError(traces.error().message.c_str());
      return;
    }
    auto s = zeus_sim::sweep(*traces, all, zeus_sim::workloads(), zeus_sim::Options{});
    if (!s) {
      state.SkipWithError(s.error().message.c_str());
      return;
    }
    benchmark::DoNotOptimize(s->pairs.data());
    state.counters["pairs"] = static_cast<double>(s->pairs.size());
  }
}
BENCHMARK(BM_SimulateZeusSweep)->Unit(benchmark::kMillisecond);

// The simulation alone, traces already in memory.
void BM_SimulateZeusSweepParsed(benchmark::State& state) {
  const auto dir = zeus_sim::find_trace_dir();
  auto traces = dir ? zeus_sim::load_traces(*dir) : Result<zeus_sim::Traces>(fail(dir.error()));
  if (!traces) {
    state.SkipWithError(traces.error().message.c_str());
    return;
  }
  const auto all = gpus();
  for (auto _ : state) {
    auto s = zeus_sim::sweep(*traces, all, zeus_sim::workloads(), zeus_sim::Options{});
    benchmark::DoNotOptimize(s);
  }
}
BENCHMARK(BM_SimulateZeusSweepParsed)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
