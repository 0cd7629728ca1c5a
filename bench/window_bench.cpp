// Cost of one begin+end measurement window.
//   BM_WindowOverhead: 8 GPUs + 2 CPU packages through in-process zero-cost fake devices, so
//     the figure is erg's own bookkeeping (window map, counter trackers, measurement).
//   BM_WindowOverheadSimNvml: 8 GPUs through the dlopen'ed simulated libnvidia-ml.so.1 (each
//     read takes the simulation's process-shared lock and advances its model; for context).

#include <benchmark/benchmark.h>

#include <memory>

#include "erg/measure/energy_monitor.hpp"
#include "erg/sim/fake_devices.hpp"
#include "sim_gpus.hpp"

namespace {

void run_windows(benchmark::State& state, erg::measure::EnergyMonitor& monitor) {
  const std::string name = "bench";
  for (auto _ : state) {
    auto b = monitor.begin_window(name, /*sync=*/false);
    auto m = monitor.end_window(name, /*sync=*/false);
    benchmark::DoNotOptimize(m);
    if (!b || !m) state.SkipWithError("window failed");
  }
}

void BM_WindowOverhead(benchmark::State& state) {
  std::vector<std::shared_ptr<erg::Gpu>> gpus;
  std::vector<std::shared_ptr<erg::Cpu>> cpus;
  for (unsigned i = 0; i < 8; ++i) gpus.push_back(std::make_shared<erg::sim::FakeGpu>(i));
  for (unsigned i = 0; i < 2; ++i) cpus.push_back(std::make_shared<erg::sim::FakeCpu>(i));
  auto monitor = erg::measure::EnergyMonitor::create(gpus, cpus);
  if (!monitor) return state.SkipWithError(monitor.error().message.c_str());
  run_windows(state, **monitor);
}
BENCHMARK(BM_WindowOverhead);

void BM_WindowOverheadSimNvml(benchmark::State& state) {
  auto sim = erg::bench::sim_gpus("8xA100,cpus=0", 8);
  if (!sim) return state.SkipWithError(sim.error().message.c_str());
  auto monitor = erg::measure::EnergyMonitor::create(sim->gpus, {});
  if (!monitor) return state.SkipWithError(monitor.error().message.c_str());
  run_windows(state, **monitor);
}
BENCHMARK(BM_WindowOverheadSimNvml);

}  // namespace

BENCHMARK_MAIN();
