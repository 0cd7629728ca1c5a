// Cost of reading a GPU through the NVML backend over the dlopen'ed simulated driver.
// The simulated driver takes a process-shared lock and advances its model on every call, so
// these figures are an upper bound for erg's own overhead, not hardware figures.

#include <benchmark/benchmark.h>

#include <memory>

#include "sim_gpus.hpp"

namespace {

struct SimGpus {
  static erg::bench::SimGpus& get() {
    static erg::bench::SimGpus s = std::move(*erg::bench::sim_gpus("8xA100", 8));
    return s;
  }
};

void BM_NvmlSimTotalEnergy(benchmark::State& state) {
  auto& gpu = *SimGpus::get().gpus.at(0);
  for (auto _ : state) benchmark::DoNotOptimize(gpu.total_energy());
}
BENCHMARK(BM_NvmlSimTotalEnergy);

void BM_NvmlSimInstantPower(benchmark::State& state) {
  auto& gpu = *SimGpus::get().gpus.at(0);
  for (auto _ : state) benchmark::DoNotOptimize(gpu.power(erg::PowerDomain::kDeviceInstant));
}
BENCHMARK(BM_NvmlSimInstantPower);

}  // namespace

BENCHMARK_MAIN();
