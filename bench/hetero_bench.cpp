// Heterogeneous planning at the largest grid of Zeus's NSDI'23 traces (bench/report:
// hetero_plan_heuristic_us, hetero_plan_brute_ms): MovieLens-1M/NCF on an A40 and a V100, the 12
// batch sizes both traced (8 to 16384) × 9 and 7 power limits, global batch 16384 (the most
// splits: 16369), η 0.5. Profiles are built once; each iteration is one plan() call.

#include <benchmark/benchmark.h>

#include "erg/optimizers/hetero/planner.hpp"
#include "trace_profiles.hpp"

namespace {

using namespace erg;

struct Grid {
  hetero::Profile a40, v100;
  std::string error;
};

const Grid& grid() {
  static const Grid g = [] {
    Grid out;
    auto dir = zeus_sim::find_trace_dir();
    if (!dir) {
      out.error = dir.error().message;
      return out;
    }
    auto traces = zeus_sim::load_traces(*dir);
    if (!traces) {
      out.error = traces.error().message;
      return out;
    }
    for (const auto& w : hetero::testing::common_workloads(*traces, "a40", "v100"))
      if (w.dataset == "movielens-1m") {
        const auto common = hetero::testing::common_batch_sizes(*traces, "a40", "v100", w);
        out.a40 = hetero::testing::trace_profile(*traces, "a40", w, common);
        out.v100 = hetero::testing::trace_profile(*traces, "v100", w, common);
      }
    if (out.a40.batch_sizes.empty()) out.error = "no movielens-1m trace on both a40 and v100";
    return out;
  }();
  return g;
}

void run(benchmark::State& state, hetero::Method method) {
  const auto& g = grid();
  if (!g.error.empty()) {
    state.SkipWithError(g.error.c_str());
    return;
  }
  const hetero::PlanRequest req{{&g.a40, &g.v100}, 16384, 0.5};
  double cost = 0;
  std::uint64_t evaluations = 0;
  for (auto _ : state) {
    auto p = hetero::plan(req, method);
    if (!p) {
      state.SkipWithError(p.error().message.c_str());
      return;
    }
    benchmark::DoNotOptimize(p->gpus.data());
    cost = p->cost;
    evaluations = p->evaluations;
  }
  state.counters["cost_j"] = cost;
  state.counters["evaluations"] = static_cast<double>(evaluations);
}

void BM_HeteroPlanHeuristic(benchmark::State& state) { run(state, hetero::Method::kHeuristic); }
BENCHMARK(BM_HeteroPlanHeuristic)->Unit(benchmark::kMicrosecond);

void BM_HeteroPlanBrute(benchmark::State& state) { run(state, hetero::Method::kBrute); }
BENCHMARK(BM_HeteroPlanBrute)->Unit(benchmark::kMillisecond);

}  // namespace
BENCHMARK_MAIN();
