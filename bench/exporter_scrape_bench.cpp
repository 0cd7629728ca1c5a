// One scrape of the Prometheus collector (ergd's /metrics, `erg exporter`) over the simulated
// machine: 8 GPUs (NVML backend over the simulated driver) and 2 CPU packages with DRAM (RAPL over
// the simulated powercap tree), read and rendered in the text format, as a scrape does.
// bench/report: exporter_scrape_us. The simulated driver takes a process-shared lock and advances
// its model on every call, so this is erg's cost plus the simulator's, not a hardware figure.

#include <benchmark/benchmark.h>

#include <memory>

#include "erg/exporters/prometheus/collector.hpp"
#include "sim_gpus.hpp"

namespace {

void BM_ExporterScrape8Gpu2Cpu(benchmark::State& state) {
  auto sim = erg::bench::sim_gpus("8xA100,cpus=2", 8);
  if (!sim || sim->cpus.size() != 2) {
    state.SkipWithError(sim ? "expected 2 simulated CPU packages" : sim.error().message.c_str());
    return;
  }
  erg::prom::CollectorOptions o;
  o.node = "bench";
  o.exporter = "erg-exporter";
  o.simulated = true;
  auto collector = erg::prom::Collector::create(sim->gpus, sim->cpus, o);
  if (!collector) {
    state.SkipWithError(collector.error().message.c_str());
    return;
  }
  std::size_t bytes = (*collector)->scrape().size();  // first scrape starts following the counters
  for (auto _ : state) {
    auto text = (*collector)->scrape();
    bytes = text.size();
    benchmark::DoNotOptimize(text);
  }
  state.counters["exposition_bytes"] = static_cast<double>(bytes);
}
BENCHMARK(BM_ExporterScrape8Gpu2Cpu)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
