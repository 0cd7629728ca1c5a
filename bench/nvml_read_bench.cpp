// Cost of reading a GPU through the NVML backend over the dlopen'ed simulated driver.
// The simulated driver takes a process-shared lock and advances its model on every call, so
// these figures are an upper bound for erg's own overhead, not hardware figures.

#include <benchmark/benchmark.h>

#include <memory>

#include "erg/backends/nvml/discovery.hpp"
#include "erg/sim/machine.hpp"
#include "erg/sim/spec.hpp"

namespace {

struct SimGpus {
  std::unique_ptr<erg::sim::Machine> machine;
  std::vector<std::shared_ptr<erg::Gpu>> gpus;
  SimGpus() {
    machine = std::move(*erg::sim::Machine::create_temp(*erg::sim::parse_spec("8xA100")));
    (void)machine->export_env();
    erg::nvml::DiscoveryOptions opts;
    opts.cuda_visible_devices = std::optional<std::string>();
    gpus = erg::nvml::discover(opts)->gpus;
  }
  static SimGpus& get() {
    static SimGpus s;
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
