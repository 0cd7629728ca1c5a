#include "prometheus_exposition.hpp"

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <map>
#include <mutex>

#include "erg/daemon/metric_names.hpp"
#include "erg/measure/energy_monitor.hpp"
#include "replies.hpp"

namespace erg::daemon {

namespace {

using Labels = std::map<std::string, std::string>;

/// A Prometheus counter fed from a RAPL counter (wraps compensated by the backend): it starts at
/// the counter's value, as a driver counter is exposed, and only moves forward; a counter that
/// went back restarts the metric from its new value.
struct Counter {
  prometheus::Counter* metric = nullptr;
  std::optional<double> seen_j;

  void advance(double now_j) {
    metric->Increment(seen_j && now_j < *seen_j ? now_j : now_j - seen_j.value_or(0.0));
    seen_j = now_j;
  }
};

/// A device's series, withdrawn while the device does not answer (so no value is frozen) and
/// added again, from zero, when it does.
template <class Metric>
struct Series {
  prometheus::Family<Metric>* family = nullptr;
  Labels labels;
  Metric* metric = nullptr;
  Metric& get() {
    if (metric == nullptr) metric = &family->Add(labels);
    return *metric;
  }
  void withdraw() {
    if (metric != nullptr) family->Remove(metric);
    metric = nullptr;
  }
};

struct GpuSeries {
  Series<prometheus::Counter> energy;
  double shown_j = 0.0;          // the energy series' value (0 while withdrawn)
  std::optional<double> base_j;  // the driver counter's value when following began
  bool has_counter = true;
  std::uint64_t anomalies_shown = 0;
  Series<prometheus::Gauge> power, limit;
  prometheus::Gauge* up = nullptr;
  prometheus::Counter* anomalies = nullptr;
};

struct CpuSeries {
  Series<prometheus::Counter> energy, dram;
  Counter energy_counter, dram_counter;
  bool has_dram = false;
  prometheus::Gauge* up = nullptr;
};

}  // namespace

/// The window every scrape peeks at: its energy so far per GPU.
constexpr const char* kWindow = "ergd-metrics";

struct PrometheusExposition::Impl {
  std::mutex mutex;
  // Follows the GPU energy counters from the first scrape on (its follower reads each counter
  // around every update), so a counter that steps back or restarts between two scrapes is
  // bridged and counted, not missed: a step back smaller than what the GPU drew since the last
  // scrape leaves the counter above its last value, and reading at scrapes alone would take it
  // for progress. Plain counter differences (no edge estimate): a scrape shows the counter as
  // the driver has it now.
  std::unique_ptr<measure::EnergyMonitor> monitor;
  std::vector<unsigned> followed;  // GPUs with a counter, by index
  std::vector<std::shared_ptr<Gpu>> gpus;
  std::vector<std::shared_ptr<Cpu>> cpus;
  std::shared_ptr<prometheus::Registry> registry = std::make_shared<prometheus::Registry>();
  std::vector<GpuSeries> gpu;
  std::vector<CpuSeries> cpu;
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
  auto& gu = prometheus::BuildGauge()
                 .Name(metrics::kGpuUp)
                 .Help("1 if the GPU answered the last scrape; 0 while it does not (its other series withdrawn)")
                 .Register(registry);
  auto& ga = prometheus::BuildCounter()
                 .Name(metrics::kGpuCounterAnomalies)
                 .Help("Times the GPU's energy counter went back (restart or step back)")
                 .Register(registry);
  auto& ce =
      prometheus::BuildCounter().Name(metrics::kCpuEnergy).Help("CPU package energy, RAPL (J)").Register(registry);
  auto& de = prometheus::BuildCounter().Name(metrics::kDramEnergy).Help("DRAM energy, RAPL (J)").Register(registry);
  auto& cu = prometheus::BuildGauge()
                 .Name(metrics::kCpuUp)
                 .Help("1 if the CPU package answered the last scrape; 0 while it does not")
                 .Register(registry);
  for (unsigned i = 0; i < m.gpus.size(); ++i) {
    Labels labels{{"index", std::to_string(i)}, {"uuid", m.gpus[i]->uuid()}, {"name", m.gpus[i]->name()}};
    GpuSeries s;
    s.energy = {&ge, labels};
    s.has_counter = m.gpus[i]->capabilities().energy_counter;
    s.power = {&gp, labels};
    s.limit = {&gl, labels};
    s.up = &gu.Add(labels);
    s.anomalies = s.has_counter ? &ga.Add(labels) : nullptr;
    m.gpu.push_back(std::move(s));
  }
  for (unsigned i = 0; i < m.cpus.size(); ++i) {
    Labels labels{{"index", std::to_string(i)}, {"name", m.cpus[i]->name()}};
    CpuSeries s;
    s.energy = {&ce, labels};
    s.dram = {&de, labels};
    s.has_dram = m.cpus[i]->capabilities().dram;
    s.up = &cu.Add(labels);
    m.cpu.push_back(std::move(s));
  }
}

PrometheusExposition::~PrometheusExposition() = default;

std::string PrometheusExposition::scrape() {
  Impl& m = *impl_;
  std::lock_guard lock(m.mutex);
  if (!m.monitor) {
    for (unsigned i = 0; i < m.gpus.size(); ++i)
      if (m.gpu[i].has_counter) {
        m.followed.push_back(i);
        if (auto e = read_retrying([&] { return m.gpus[i]->total_energy(); })) m.gpu[i].base_j = Joules(*e).value();
      }
    measure::EnergyMonitorOptions o;
    o.gpu_indices = m.followed;
    o.cpu_indices = std::vector<unsigned>{};
    o.extrapolate_counters = false;
    auto made = measure::EnergyMonitor::create(m.gpus, {}, o);
    if (made && (*made)->begin_window(kWindow, false)) m.monitor = std::move(*made);
  }
  std::optional<measure::Measurement> so_far;
  if (m.monitor)
    if (auto r = m.monitor->peek_window(kWindow)) so_far = std::move(*r);
  for (unsigned i = 0; i < m.gpus.size(); ++i) {
    Gpu& g = *m.gpus[i];
    GpuSeries& s = m.gpu[i];
    // A read that fails for good (after the retries a transient error gets) takes the GPU down.
    const measure::GpuEnergy* energy = nullptr;
    if (so_far)
      for (const auto& ge : so_far->gpus)
        if (ge.index == i) energy = &ge;
    auto p = read_retrying([&] { return g.power(PowerDomain::kDeviceInstant); });
    auto l = read_retrying([&] { return g.power_limit(); });
    auto down = [](const auto& r) { return !r && r.error().code != ErrorCode::kNotSupported; };
    const bool counter_down = s.has_counter && (energy == nullptr || !energy->energy || !s.base_j);
    if (counter_down || down(p) || down(l)) {
      s.up->Set(0);
      s.energy.withdraw();
      s.shown_j = 0.0;
      s.power.withdraw();
      s.limit.withdraw();
      continue;
    }
    s.up->Set(1);
    if (s.has_counter) {
      // The driver counter's value at the start plus what it counted since, with steps and
      // restarts bridged by the monitor.
      const double now_j = *s.base_j + Joules(*energy->energy).value();
      s.energy.get().Increment(std::max(0.0, now_j - s.shown_j));
      s.shown_j = std::max(s.shown_j, now_j);
      const std::uint64_t anomalies = energy->counter_restarts + energy->counter_backwards;
      if (anomalies > s.anomalies_shown) s.anomalies->Increment(static_cast<double>(anomalies - s.anomalies_shown));
      s.anomalies_shown = std::max(s.anomalies_shown, anomalies);
    }
    if (p) s.power.get().Set(Watts(*p).value());
    if (l) s.limit.get().Set(Watts(*l).value());
  }
  for (unsigned i = 0; i < m.cpus.size(); ++i) {
    Cpu& c = *m.cpus[i];
    CpuSeries& s = m.cpu[i];
    auto e = read_retrying([&] { return c.package_energy(); });
    auto d = s.has_dram ? read_retrying([&] { return c.dram_energy(); }) : Result<MicroJoules>(MicroJoules(0));
    if (!e || !d) {
      s.up->Set(0);
      s.energy.withdraw();
      s.dram.withdraw();
      s.energy_counter.seen_j.reset();
      s.dram_counter.seen_j.reset();
      continue;
    }
    s.up->Set(1);
    s.energy_counter.metric = &s.energy.get();
    s.energy_counter.advance(Joules(*e).value());
    if (s.has_dram) {
      s.dram_counter.metric = &s.dram.get();
      s.dram_counter.advance(Joules(*d).value());
    }
  }
  prometheus::TextSerializer serializer;
  return serializer.Serialize(m.registry->Collect());
}

}  // namespace erg::daemon
