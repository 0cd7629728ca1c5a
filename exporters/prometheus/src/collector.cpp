#include "erg/exporters/prometheus/collector.hpp"

#include <prometheus/text_serializer.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <mutex>
#include <optional>
#include <set>

#include "erg/exporters/prometheus/metric_names.hpp"
#include "erg/measure/energy_monitor.hpp"
#include "erg/measure/process_tracker.hpp"

#ifndef ERG_VERSION
#define ERG_VERSION "unknown"
#endif

namespace erg::prom {

namespace pm = ::prometheus;

namespace {

using Labels = std::vector<pm::ClientMetric::Label>;

/// Attempts of a device read that fails with an error that can pass (timeout, I/O, unknown driver
/// error): tried again at once, as erg's monitors do; a lost GPU is not retried.
constexpr int kReadAttempts = 5;

template <class Read>
auto read_retrying(Read&& read) {
  auto r = read();
  for (int attempt = 1; !r && attempt < kReadAttempts && transient(r.error().code); ++attempt) r = read();
  return r;
}

/// A read that failed for a reason other than the device lacking the capability.
template <class R>
bool failed(const R& r) {
  return !r && r.error().code != ErrorCode::kNotSupported;
}

pm::MetricFamily family(const char* name, const char* help, pm::MetricType type) {
  pm::MetricFamily f;
  f.name = name;
  f.help = help;
  f.type = type;
  return f;
}

void add(pm::MetricFamily& f, Labels labels, double value) {
  pm::ClientMetric m;
  m.label = std::move(labels);
  if (f.type == pm::MetricType::Counter)
    m.counter.value = value;
  else
    m.gauge.value = value;
  f.metric.push_back(std::move(m));
}

Labels with(Labels labels, std::string name, std::string value) {
  labels.push_back({std::move(name), std::move(value)});
  return labels;
}

/// A counter fed from a monotonic source (the RAPL backend's wrap-compensated total): counts
/// from 0 at the first read, only moves forward; a source that went back (a reset) adds nothing
/// for that read and is followed from its new value.
struct FollowedCounter {
  std::optional<double> seen_j;
  double shown_j = 0.0;
  void advance(double now_j) {
    if (seen_j && now_j > *seen_j) shown_j += now_j - *seen_j;
    seen_j = now_j;
  }
};

struct GpuState {
  Labels labels;
  bool has_counter = true;
  std::vector<PowerDomain> domains;
  bool temperature = false;
  double shown_j = 0.0;  // never decreases
  std::uint64_t anomalies = 0;
  std::uint64_t read_errors = 0;
};

struct CpuState {
  Labels labels;
  bool has_dram = false;
  FollowedCounter package, dram;
  std::uint64_t read_errors = 0;
};

struct SocState {
  Labels labels;  // index and name; each rail adds rail and kind
  std::vector<Labels> rail_labels;
  std::vector<FollowedCounter> rails;
  std::uint64_t read_errors = 0;
};

/// A process as the exporter's series know it: its pid and when the tracker first saw it (a
/// reused pid is another process).
using ProcKey = std::pair<std::uint32_t, std::chrono::nanoseconds>;

struct GpuProcState {
  std::unique_ptr<measure::ProcessTracker> tracker;
  std::set<ProcKey> shown;     // with series of their own
  std::set<ProcKey> overflow;  // summed into pid="other" for their whole life
  double other_j = 0.0, other_bound_j = 0.0;
  double exited_j = 0.0, exited_bound_j = 0.0;
  bool had_other = false;  // the "other" series, once there, stays (a counter)
  // The parts as shown: an interval's unattributed remainder can be a rounding error below 0,
  // and a counter never goes back.
  double measured_j = 0.0, idle_j = 0.0, unattributed_j = 0.0;
  struct Pod {
    double j = 0.0, bound_j = 0.0;
  };
  std::map<std::string, Pod> pods;  // by UID: the pods with a process on this GPU and a series
};

/// The window every scrape peeks at: each GPU's energy since the first scrape.
constexpr const char* kWindow = "erg-prometheus";

bool label_name_ok(const std::string& n) {
  if (n.empty() || (n.size() >= 2 && n[0] == '_' && n[1] == '_')) return false;
  for (std::size_t i = 0; i < n.size(); ++i) {
    const char c = n[i];
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    if (!alpha && !(i > 0 && c >= '0' && c <= '9')) return false;
  }
  return true;
}

}  // namespace

Result<void> check_user_labels(const std::map<std::string, std::string>& labels) {
  for (const auto& [name, value] : labels) {
    if (!label_name_ok(name))
      return fail(ErrorCode::kInvalidArgument, "label '" + name +
                                                   "' is not a Prometheus label name "
                                                   "([a-zA-Z_][a-zA-Z0-9_]*, not starting with __)");
    for (const char* own :
         {"index", "uuid", "name", "node", "domain", "device", "version", "exporter", "simulated", "rail", "kind"})
      if (name == own) return fail(ErrorCode::kInvalidArgument, "label '" + name + "' is set by erg itself");
  }
  return ok();
}

namespace {
/// The labels the per-process series add, reserved while they are on.
Result<void> check_process_labels(const std::map<std::string, std::string>& labels) {
  for (const auto& [name, value] : labels)
    for (const char* own : {"pid", "comm", "container", "pod", "part"})
      if (name == own)
        return fail(ErrorCode::kInvalidArgument,
                    "label '" + name + "' is set by erg itself (per-process metrics are on)");
  return ok();
}
}  // namespace

Result<std::pair<std::string, std::string>> parse_label(std::string_view text) {
  const auto eq = text.find('=');
  if (eq == std::string_view::npos)
    return fail(ErrorCode::kInvalidArgument, "label '" + std::string(text) + "' must be NAME=VALUE");
  std::pair<std::string, std::string> kv{std::string(text.substr(0, eq)), std::string(text.substr(eq + 1))};
  if (auto checked = check_user_labels({kv}); !checked) return fail(checked.error());
  return kv;
}

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0 || buf[0] == '\0') return "localhost";
  return buf;
}

struct Collector::Impl {
  std::mutex mutex;
  CollectorOptions options;
  Labels common;  // node and user labels, after the device's own
  std::vector<std::shared_ptr<Gpu>> gpus;
  std::vector<std::shared_ptr<Cpu>> cpus;
  std::vector<GpuState> gpu;
  std::vector<CpuState> cpu;
  std::vector<SocState> soc;
  // Follows the GPU energy counters from the first scrape on (its follower reads each counter
  // around every update), so a counter that steps back or restarts between two scrapes is
  // bridged and counted, not missed: a step back smaller than what the GPU drew since the last
  // scrape leaves the counter above its last value, and reading at scrapes alone would take it
  // for progress. Plain counter differences (no edge estimate): a scrape shows what the driver
  // counted up to now.
  std::unique_ptr<measure::EnergyMonitor> monitor;
  bool monitor_tried = false;
  std::vector<GpuProcState> procs;  // per GPU, when process_metrics
  std::size_t shown_total = 0;      // processes with series of their own, all GPUs
  std::size_t pods_total = 0;       // pod series, all GPUs

  std::vector<pm::MetricFamily> collect();
  void collect_processes(std::vector<pm::MetricFamily>& out);
};

Result<std::shared_ptr<Collector>> Collector::create(std::vector<std::shared_ptr<Gpu>> gpus,
                                                     std::vector<std::shared_ptr<Cpu>> cpus, CollectorOptions options) {
  if (auto checked = check_user_labels(options.labels); !checked) return fail(checked.error());
  if (options.process_metrics)
    if (auto checked = check_process_labels(options.labels); !checked) return fail(checked.error());
  auto impl = std::make_unique<Impl>();
  Impl& m = *impl;
  m.options = std::move(options);
  if (!m.options.node.empty()) m.common.push_back({"node", m.options.node});
  for (const auto& [k, v] : m.options.labels) m.common.push_back({k, v});
  m.gpus = std::move(gpus);
  m.cpus = std::move(cpus);
  for (unsigned i = 0; i < m.gpus.size(); ++i) {
    GpuState s;
    s.labels = {{"index", std::to_string(i)}, {"name", m.gpus[i]->name()}, {"uuid", m.gpus[i]->uuid()}};
    s.labels.insert(s.labels.end(), m.common.begin(), m.common.end());
    const auto caps = m.gpus[i]->capabilities();
    s.has_counter = caps.energy_counter;
    s.domains = caps.power_domains;
    s.temperature = caps.temperature;
    m.gpu.push_back(std::move(s));
    GpuProcState ps;
    if (m.options.process_metrics && caps.running_processes) {
      measure::ProcessTrackerOptions to;
      to.attribution.idle.power = Watts(m.options.process_idle_power_w);
      to.attribution.idle.error = Watts(m.options.process_idle_error_w);
      to.proc_root = m.options.proc_root;
      ps.tracker = std::make_unique<measure::ProcessTracker>(*m.gpus[i], SteadyClock::instance(), to);
    }
    m.procs.push_back(std::move(ps));
  }
  for (unsigned i = 0; i < m.cpus.size(); ++i) {
    CpuState s;
    s.labels = {{"index", std::to_string(i)}, {"name", m.cpus[i]->name()}};
    s.labels.insert(s.labels.end(), m.common.begin(), m.common.end());
    s.has_dram = m.cpus[i]->capabilities().dram;
    m.cpu.push_back(std::move(s));
  }
  for (const auto& soc : m.options.socs) {
    SocState s;
    s.labels = {{"index", std::to_string(soc->index())}, {"name", soc->name()}};
    for (const auto& r : soc->capabilities().rails) {
      Labels l = s.labels;
      l.push_back({"rail", r.name});
      l.push_back({"kind", std::string(to_string(r.kind))});
      l.insert(l.end(), m.common.begin(), m.common.end());
      s.rail_labels.push_back(std::move(l));
    }
    s.rails.resize(s.rail_labels.size());
    s.labels.insert(s.labels.end(), m.common.begin(), m.common.end());
    m.soc.push_back(std::move(s));
  }
  return std::shared_ptr<Collector>(new Collector(std::move(impl)));
}

Collector::Collector(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Collector::~Collector() = default;

std::vector<pm::MetricFamily> Collector::Collect() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->collect();
}

std::string Collector::scrape() const {
  pm::TextSerializer serializer;
  return serializer.Serialize(Collect());
}

std::vector<pm::MetricFamily> Collector::Impl::collect() {
  const auto t0 = std::chrono::steady_clock::now();
  if (!monitor_tried) {
    monitor_tried = true;
    std::vector<unsigned> followed;
    for (unsigned i = 0; i < gpus.size(); ++i)
      if (gpu[i].has_counter) followed.push_back(i);
    if (!followed.empty()) {
      measure::EnergyMonitorOptions o;
      o.gpu_indices = followed;
      o.cpu_indices = std::vector<unsigned>{};
      o.extrapolate_counters = false;
      auto made = measure::EnergyMonitor::create(gpus, {}, o);
      if (made && (*made)->begin_window(kWindow, false)) monitor = std::move(*made);
    }
  }
  std::optional<measure::Measurement> so_far;
  if (monitor)
    if (auto r = monitor->peek_window(kWindow)) so_far = std::move(*r);

  auto energy =
      family(names::kGpuEnergy, "GPU energy since the exporter first read the GPU (J)", pm::MetricType::Counter);
  auto power = family(names::kGpuPower, "GPU power by domain (W)", pm::MetricType::Gauge);
  auto limit = family(names::kGpuPowerLimit, "GPU power limit (W)", pm::MetricType::Gauge);
  auto temp = family(names::kGpuTemperature, "GPU core temperature (Celsius)", pm::MetricType::Gauge);
  auto gup =
      family(names::kGpuUp, "1 if the GPU answered this scrape; 0 while it does not (its other series withdrawn)",
             pm::MetricType::Gauge);
  auto anomalies =
      family(names::kGpuCounterAnomalies,
             "Times the GPU's energy counter went back (restart or step back); the energy metric bridges them",
             pm::MetricType::Counter);
  auto cpu_energy = family(names::kCpuEnergy, "CPU package energy since the exporter first read it, RAPL (J)",
                           pm::MetricType::Counter);
  auto dram_energy =
      family(names::kDramEnergy, "DRAM energy since the exporter first read it, RAPL (J)", pm::MetricType::Counter);
  auto cup =
      family(names::kCpuUp, "1 if the CPU package answered this scrape; 0 while it does not", pm::MetricType::Gauge);
  auto errors = family(names::kReadErrors, "Device reads that failed after retries", pm::MetricType::Counter);

  for (unsigned i = 0; i < gpus.size(); ++i) {
    Gpu& g = *gpus[i];
    GpuState& s = gpu[i];
    const measure::GpuEnergy* counted = nullptr;
    if (so_far)
      for (const auto& ge : so_far->gpus)
        if (ge.index == i) counted = &ge;
    std::vector<std::pair<PowerDomain, Result<MilliWatts>>> powers;
    bool down = s.has_counter && (counted == nullptr || !counted->energy);
    for (PowerDomain d : s.domains) {
      if (down) break;
      powers.emplace_back(d, read_retrying([&] { return g.power(d); }));
      down = failed(powers.back().second);
    }
    auto l =
        down ? Result<MilliWatts>(fail(ErrorCode::kUnavailable, "")) : read_retrying([&] { return g.power_limit(); });
    down = down || failed(l);
    std::optional<Result<int>> t;
    if (!down && s.temperature) {
      t = read_retrying([&] { return g.temperature(); });
      down = failed(*t);
    }
    if (down) {
      ++s.read_errors;
      add(gup, s.labels, 0);
    } else {
      add(gup, s.labels, 1);
      if (s.has_counter) {
        s.shown_j = std::max(s.shown_j, Joules(*counted->energy).value());
        add(energy, s.labels, s.shown_j);
        s.anomalies = std::max(s.anomalies, counted->counter_restarts + counted->counter_backwards);
      }
      for (auto& [d, p] : powers)
        if (p) add(power, with(s.labels, "domain", std::string(to_string(d))), Watts(*p).value());
      if (l) add(limit, s.labels, Watts(*l).value());
      if (t && *t) add(temp, s.labels, static_cast<double>(**t));
    }
    if (s.has_counter) add(anomalies, s.labels, static_cast<double>(s.anomalies));
    Labels el{{"device", "gpu"}, {"index", std::to_string(i)}};
    el.insert(el.end(), common.begin(), common.end());
    add(errors, std::move(el), static_cast<double>(s.read_errors));
  }
  for (unsigned i = 0; i < cpus.size(); ++i) {
    Cpu& c = *cpus[i];
    CpuState& s = cpu[i];
    auto e = read_retrying([&] { return c.package_energy(); });
    auto d = s.has_dram ? read_retrying([&] { return c.dram_energy(); }) : Result<MicroJoules>(MicroJoules(0));
    if (!e || !d) {
      ++s.read_errors;
      add(cup, s.labels, 0);
    } else {
      add(cup, s.labels, 1);
      s.package.advance(Joules(*e).value());
      add(cpu_energy, s.labels, s.package.shown_j);
      if (s.has_dram) {
        s.dram.advance(Joules(*d).value());
        add(dram_energy, s.labels, s.dram.shown_j);
      }
    }
    Labels el{{"device", "cpu"}, {"index", std::to_string(i)}};
    el.insert(el.end(), common.begin(), common.end());
    add(errors, std::move(el), static_cast<double>(s.read_errors));
  }

  auto soc_energy = family(names::kSocEnergy, "SoC rail energy since the exporter first read it, integrated (J)",
                           pm::MetricType::Counter);
  auto soc_power = family(names::kSocPower, "SoC rail power (W)", pm::MetricType::Gauge);
  auto sup =
      family(names::kSocUp, "1 if the SoC's rails answered this scrape; 0 while they do not", pm::MetricType::Gauge);
  for (std::size_t i = 0; i < options.socs.size(); ++i) {
    Soc& c = *options.socs[i];
    SocState& s = soc[i];
    // The backend's integral is monotonic and counts across failed reads (a rail holds its last
    // power over a gap); the followed counter starts it at 0 at the first scrape.
    auto e = read_retrying([&] { return c.rail_energy(); });
    auto p = e ? read_retrying([&] { return c.rail_power(); }) : Result<std::vector<MilliWatts>>(fail(e.error()));
    if (!e || !p) {
      ++s.read_errors;
      add(sup, s.labels, 0);
    } else {
      add(sup, s.labels, 1);
      for (std::size_t r = 0; r < s.rails.size() && r < e->size() && r < p->size(); ++r) {
        s.rails[r].advance(Joules((*e)[r]).value());
        add(soc_energy, s.rail_labels[r], s.rails[r].shown_j);
        add(soc_power, s.rail_labels[r], Watts((*p)[r]).value());
      }
    }
    Labels el{{"device", "soc"}, {"index", std::to_string(c.index())}};
    el.insert(el.end(), common.begin(), common.end());
    add(errors, std::move(el), static_cast<double>(s.read_errors));
  }

  std::vector<pm::MetricFamily> process_families;
  if (options.process_metrics) collect_processes(process_families);

  auto info = family(names::kInfo, "What is exporting: erg version, exporter, node, simulated", pm::MetricType::Gauge);
  Labels il{
      {"exporter", options.exporter}, {"simulated", options.simulated ? "true" : "false"}, {"version", ERG_VERSION}};
  il.insert(il.end(), common.begin(), common.end());
  add(info, std::move(il), 1);
  auto duration =
      family(names::kScrapeDuration, "Time this scrape spent reading the devices (s)", pm::MetricType::Gauge);
  add(duration, common, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());

  std::vector<pm::MetricFamily> out;
  for (auto* f : {&energy, &power, &limit, &temp, &gup, &anomalies, &cpu_energy, &dram_energy, &cup, &soc_energy,
                  &soc_power, &sup, &info, &duration, &errors})
    if (!f->metric.empty()) out.push_back(std::move(*f));
  for (auto& f : process_families)
    if (!f.metric.empty()) out.push_back(std::move(f));
  return out;
}

void Collector::Impl::collect_processes(std::vector<pm::MetricFamily>& out) {
  auto penergy = family(names::kGpuProcessEnergy, "GPU energy attributed to the process since first seen (J)",
                        pm::MetricType::Counter);
  auto pebound =
      family(names::kGpuProcessEnergyBound, "Bound of the process's attributed energy (J)", pm::MetricType::Gauge);
  auto ppower =
      family(names::kGpuProcessPower, "GPU power attributed to the process over the latest attributed interval (W)",
             pm::MetricType::Gauge);
  auto ppbound =
      family(names::kGpuProcessPowerBound, "Bound of the process's attributed power (W)", pm::MetricType::Gauge);
  auto exited =
      family(names::kGpuExitedProcessesEnergy, "GPU energy of processes that have exited (J)", pm::MetricType::Counter);
  auto parts =
      family(names::kGpuAttributionEnergy,
             "GPU energy since the first scrape by part: measured, idle, unattributed (J)", pm::MetricType::Counter);
  auto bounds = family(names::kGpuAttributionBound,
                       "Bounds of the attribution's parts: measured, idle, unattributed, exited, other (J)",
                       pm::MetricType::Gauge);
  auto pod_energy =
      family(names::kGpuPodEnergy, "GPU energy attributed to the pod's processes (J)", pm::MetricType::Counter);
  auto pod_bound = family(names::kGpuPodEnergyBound, "Bound of the pod's attributed energy (J)", pm::MetricType::Gauge);
  auto attributable = family(names::kGpuAttributable, "1 if the GPU's energy can be split among its processes (0: MIG)",
                             pm::MetricType::Gauge);
  // Every GPU's step first, and every exit, so that slots freed on one GPU are free for new
  // processes on any.
  std::vector<std::optional<measure::ProcessStep>> steps(procs.size());
  for (std::size_t i = 0; i < procs.size(); ++i) {
    GpuProcState& ps = procs[i];
    if (!ps.tracker) continue;
    auto step = ps.tracker->step();
    if (!step) continue;  // withdrawn this scrape (never a frozen value); the next step covers the gap
    steps[i] = std::move(*step);
    const auto& s = *steps[i];
    for (const auto& e : s.exited_now) {
      const ProcKey key{e.process.pid, e.process.first_seen};
      if (ps.shown.erase(key) > 0) {
        --shown_total;
        ps.exited_j += e.process.energy.value();
        ps.exited_bound_j += e.process.energy_bound.value();
      } else if (ps.overflow.erase(key) > 0) {
        if (s.updated)
          ps.other_j += e.process.interval_energy.value(), ps.other_bound_j += e.process.interval_bound.value();
      } else {  // ran only between two scrapes
        ps.exited_j += e.process.energy.value();
        ps.exited_bound_j += e.process.energy_bound.value();
      }
    }
  }
  // Pods: every process of the pod counts (live, leaving, in "other" or not) with the interval
  // attributed at this step; a pod with no process left on the GPU loses its series.
  for (std::size_t i = 0; i < procs.size(); ++i) {
    GpuProcState& ps = procs[i];
    if (!steps[i] || !steps[i]->attributable) continue;
    const auto& s = *steps[i];
    std::set<std::string> present;
    auto credit = [&](const measure::TrackedProcess& p, bool live) {
      if (!p.cgroup || !p.cgroup->pod_uid) return;
      const std::string& uid = *p.cgroup->pod_uid;
      if (live) present.insert(uid);
      auto it = ps.pods.find(uid);
      if (it == ps.pods.end()) {
        if (!live || pods_total >= options.max_process_series) return;
        it = ps.pods.emplace(uid, GpuProcState::Pod{}).first;
        ++pods_total;
      }
      if (s.updated) it->second.j += p.interval_energy.value(), it->second.bound_j += p.interval_bound.value();
    };
    for (const auto& e : s.exited_now) credit(e.process, false);
    for (const auto& p : s.processes) credit(p, true);
    for (auto it = ps.pods.begin(); it != ps.pods.end();) {
      if (present.contains(it->first)) {
        ++it;
      } else {
        it = ps.pods.erase(it);
        --pods_total;
      }
    }
  }
  for (std::size_t i = 0; i < procs.size(); ++i) {
    GpuProcState& ps = procs[i];
    if (!steps[i]) continue;
    const auto& s = *steps[i];
    const Labels& gl = gpu[i].labels;
    double other_w = 0.0, other_w_bound = 0.0;
    for (const auto& p : s.processes) {
      const ProcKey key{p.pid, p.first_seen};
      if (!ps.shown.contains(key) && !ps.overflow.contains(key)) {
        if (shown_total < options.max_process_series) {
          ps.shown.insert(key);
          ++shown_total;
        } else {
          ps.overflow.insert(key);
          ps.had_other = true;
          // Its energy so far (this interval's: it is new) goes to "other".
          ps.other_j += p.energy.value();
          ps.other_bound_j += p.energy_bound.value();
          other_w += p.power.value();
          other_w_bound += p.power_bound.value();
          continue;
        }
      } else if (ps.overflow.contains(key)) {
        if (s.updated) ps.other_j += p.interval_energy.value(), ps.other_bound_j += p.interval_bound.value();
        other_w += p.power.value();
        other_w_bound += p.power_bound.value();
        continue;
      }
      if (!s.attributable) continue;  // listed, but no figure: never 0 J for a MIG GPU's process
      Labels l = gl;
      l.insert(l.end(), {{"pid", std::to_string(p.pid)},
                         {"comm", p.comm},
                         {"container", p.cgroup ? p.cgroup->container_id.value_or("") : ""},
                         {"pod", p.cgroup ? p.cgroup->pod_uid.value_or("") : ""}});
      add(penergy, l, p.energy.value());
      add(pebound, l, p.energy_bound.value());
      add(ppower, l, p.power.value());
      add(ppbound, l, p.power_bound.value());
    }
    if (ps.had_other && s.attributable) {
      Labels l = gl;
      l.insert(l.end(), {{"pid", "other"}, {"comm", ""}, {"container", ""}, {"pod", ""}});
      add(penergy, l, ps.other_j);
      add(pebound, l, ps.other_bound_j);
      add(ppower, l, other_w);
      add(ppbound, l, other_w_bound);
    }
    for (const auto& [uid, pod] : ps.pods) {
      add(pod_energy, with(gl, "pod", uid), pod.j);
      add(pod_bound, with(gl, "pod", uid), pod.bound_j);
    }
    add(exited, gl, ps.exited_j);
    add(attributable, gl, s.attributable ? 1.0 : 0.0);
    ps.measured_j = std::max(ps.measured_j, s.measured.value());
    ps.idle_j = std::max(ps.idle_j, s.idle.value());
    ps.unattributed_j = std::max(ps.unattributed_j, s.unattributed.value());
    add(parts, with(gl, "part", "measured"), ps.measured_j);
    add(parts, with(gl, "part", "idle"), ps.idle_j);
    add(parts, with(gl, "part", "unattributed"), ps.unattributed_j);
    add(bounds, with(gl, "part", "measured"), s.measured_bound.value());
    add(bounds, with(gl, "part", "idle"), s.idle_bound.value());
    add(bounds, with(gl, "part", "unattributed"), s.unattributed_bound.value());
    add(bounds, with(gl, "part", "exited"), ps.exited_bound_j);
    add(bounds, with(gl, "part", "other"), ps.other_bound_j);
  }
  auto series = family(names::kProcessSeries, "Processes with series of their own now", pm::MetricType::Gauge);
  add(series, common, static_cast<double>(shown_total));
  auto limit = family(names::kProcessSeriesLimit, "The most processes with series of their own (--max-process-series)",
                      pm::MetricType::Gauge);
  add(limit, common, static_cast<double>(options.max_process_series));
  for (auto* f : {&penergy, &pebound, &ppower, &ppbound, &pod_energy, &pod_bound, &exited, &parts, &bounds,
                  &attributable, &series, &limit})
    out.push_back(std::move(*f));
}

}  // namespace erg::prom
