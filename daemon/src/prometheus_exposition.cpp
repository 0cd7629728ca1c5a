#include "prometheus_exposition.hpp"

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <map>
#include <mutex>

#include "erg/daemon/metric_names.hpp"

namespace erg::daemon {

namespace {

/// A Prometheus counter fed from a device counter that may go back.
struct Counter {
  prometheus::Counter* metric = nullptr;
  double seen_j = 0;

  void advance(double now_j) {
    metric->Increment(now_j >= seen_j ? now_j - seen_j : now_j);
    seen_j = now_j;
  }
};

}  // namespace

struct PrometheusExposition::Impl {
  std::mutex mutex;
  std::vector<std::shared_ptr<Gpu>> gpus;
  std::vector<std::shared_ptr<Cpu>> cpus;
  std::shared_ptr<prometheus::Registry> registry = std::make_shared<prometheus::Registry>();
  std::vector<Counter> gpu_energy, cpu_energy;
  std::vector<std::optional<Counter>> dram_energy;  // nullopt: the package has no DRAM domain
  std::vector<prometheus::Gauge*> gpu_power, gpu_limit;
};

PrometheusExposition::PrometheusExposition(std::vector<std::shared_ptr<Gpu>> gpus,
                                           std::vector<std::shared_ptr<Cpu>> cpus)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.gpus = std::move(gpus);
  m.cpus = std::move(cpus);
  auto& registry = *m.registry;
  auto& ge = prometheus::BuildCounter()
                 .Name(metrics::kGpuEnergy)
                 .Help("GPU energy from the driver's counter (J)")
                 .Register(registry);
  auto& gp = prometheus::BuildGauge().Name(metrics::kGpuPower).Help("Instantaneous GPU power (W)").Register(registry);
  auto& gl = prometheus::BuildGauge().Name(metrics::kGpuPowerLimit).Help("GPU power limit (W)").Register(registry);
  auto& ce =
      prometheus::BuildCounter().Name(metrics::kCpuEnergy).Help("CPU package energy, RAPL (J)").Register(registry);
  auto& de = prometheus::BuildCounter().Name(metrics::kDramEnergy).Help("DRAM energy, RAPL (J)").Register(registry);
  for (unsigned i = 0; i < m.gpus.size(); ++i) {
    std::map<std::string, std::string> labels{
        {"index", std::to_string(i)}, {"uuid", m.gpus[i]->uuid()}, {"name", m.gpus[i]->name()}};
    m.gpu_energy.push_back({&ge.Add(labels)});
    m.gpu_power.push_back(&gp.Add(labels));
    m.gpu_limit.push_back(&gl.Add(labels));
  }
  for (unsigned i = 0; i < m.cpus.size(); ++i) {
    std::map<std::string, std::string> labels{{"index", std::to_string(i)}, {"name", m.cpus[i]->name()}};
    m.cpu_energy.push_back({&ce.Add(labels)});
    m.dram_energy.push_back(m.cpus[i]->capabilities().dram ? std::optional<Counter>(Counter{&de.Add(labels)})
                                                           : std::nullopt);
  }
}

PrometheusExposition::~PrometheusExposition() = default;

std::string PrometheusExposition::scrape() {
  Impl& m = *impl_;
  std::lock_guard lock(m.mutex);
  for (unsigned i = 0; i < m.gpus.size(); ++i) {
    Gpu& g = *m.gpus[i];
    if (auto e = g.total_energy()) m.gpu_energy[i].advance(Joules(*e).value());  // kNotSupported: stays 0
    if (auto p = g.power(PowerDomain::kDeviceInstant)) m.gpu_power[i]->Set(Watts(*p).value());
    if (auto l = g.power_limit()) m.gpu_limit[i]->Set(Watts(*l).value());
  }
  for (unsigned i = 0; i < m.cpus.size(); ++i) {
    Cpu& c = *m.cpus[i];
    if (auto e = c.package_energy()) m.cpu_energy[i].advance(Joules(*e).value());
    if (m.dram_energy[i])
      if (auto e = c.dram_energy()) m.dram_energy[i]->advance(Joules(*e).value());
  }
  prometheus::TextSerializer serializer;
  return serializer.Serialize(m.registry->Collect());
}

}  // namespace erg::daemon
