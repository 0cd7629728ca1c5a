// Perseus planning (bench/report: perseus_plan_ms, target 50 ms): a 4-stage × 8-micro-batch
// synchronous 1F1B pipeline, 6 frequencies per instruction (1410 to 210 MHz in 240 MHz steps) from
// erg's synthetic profile (synthetic_profile.hpp documents its time and power model), every plan
// from the cheapest to the fastest at a 1 ms time unit. Includes fitting the cost models and
// building the DAG; excludes parsing a CSV and writing files.

#include <benchmark/benchmark.h>

#include <array>

#include "erg/optimizers/pipeline_frequency/planner.hpp"
#include "erg/optimizers/pipeline_frequency/synthetic_profile.hpp"

namespace {

using namespace erg::pipeline_frequency;

void BM_PerseusPlan4x8(benchmark::State& state) {
  constexpr std::array<int, 6> kMhz = {1410, 1170, 930, 690, 450, 210};
  const auto profile = synthetic_profile(4, kMhz);
  const PlannerOptions options{4, 8, 0.001, 70.0};
  for (auto _ : state) {
    auto f = plan_pipeline(profile, options);
    if (!f) {
      state.SkipWithError(f.error().message.c_str());
      return;
    }
    benchmark::DoNotOptimize(f->plans.data());
    state.counters["plans"] = static_cast<double>(f->plans.size());
    state.counters["iterations"] = f->iterations;
  }
}
BENCHMARK(BM_PerseusPlan4x8)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
