#include <prometheus/text_serializer.h>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <limits>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "erg/exporters/prometheus/metric_names.hpp"
#include "erg/measure/energy_monitor.hpp"
#include "pusher.hpp"

namespace erg::prom {

namespace pm = ::prometheus;

namespace {

// Zeus's HELP texts.
constexpr const char* kGpuHelp = "GPU energy consumption";
constexpr const char* kCpuHelp = "CPU energy consumption";
constexpr const char* kDramHelp = "DRAM energy consumption";
constexpr const char* kPowerHelp = "Records power consumption for GPU over time";

enum Domain { kGpu, kCpu, kDram };
const char* family_name(Domain d) {
  return d == kGpu ? names::kPushGpuEnergy : d == kCpu ? names::kPushCpuEnergy : names::kPushDramEnergy;
}
const char* help(Domain d) { return d == kGpu ? kGpuHelp : d == kCpu ? kCpuHelp : kDramHelp; }

std::string serialize(const std::vector<pm::MetricFamily>& families) {
  pm::TextSerializer s;
  return s.Serialize(families);
}

/// Per-device energies of a measurement, by domain and index (devices whose energy is known).
std::map<Domain, std::map<unsigned, double>> energies(const measure::Measurement& m) {
  std::map<Domain, std::map<unsigned, double>> out;
  for (const auto& g : m.gpus)
    if (g.energy) out[kGpu][g.index] = Joules(*g.energy).value();
  for (const auto& c : m.cpus) {
    out[kCpu][c.index] = Joules(c.package).value();
    if (c.dram) out[kDram][c.index] = Joules(*c.dram).value();
  }
  return out;
}

Result<std::unique_ptr<measure::EnergyMonitor>> make_monitor(std::vector<std::shared_ptr<Gpu>> gpus,
                                                             std::vector<std::shared_ptr<Cpu>> cpus) {
  measure::EnergyMonitorOptions o;
  o.cpu_indices = std::vector<unsigned>{};
  for (const auto& c : cpus) o.cpu_indices->push_back(c->index());
  return measure::EnergyMonitor::create(std::move(gpus), std::move(cpus), o);
}

}  // namespace

// ---- EnergyHistogram --------------------------------------------------------------------------

struct EnergyHistogram::Impl {
  std::unique_ptr<Pusher> pusher;
  std::unique_ptr<measure::EnergyMonitor> monitor;
  std::map<Domain, std::vector<double>> buckets;
  struct Series {
    std::vector<std::uint64_t> counts;  // per bucket, not cumulative
    double sum = 0.0;
    std::uint64_t count = 0;
  };
  std::mutex mutex;
  std::map<std::string, std::map<Domain, std::map<unsigned, Series>>> windows;  // by window name

  std::string body(const std::string& window) {
    std::vector<pm::MetricFamily> out;
    for (auto& [domain, series] : windows[window]) {
      pm::MetricFamily f{family_name(domain), help(domain), pm::MetricType::Histogram, {}};
      const auto& b = buckets[domain];
      for (auto& [index, s] : series) {
        pm::ClientMetric m;
        m.label = {{"index", std::to_string(index)}};
        m.histogram.sample_count = s.count;
        m.histogram.sample_sum = s.sum;
        std::uint64_t cumulative = 0;
        for (std::size_t i = 0; i < b.size(); ++i) {
          cumulative += s.counts[i];
          m.histogram.bucket.push_back({cumulative, b[i]});
        }
        m.histogram.bucket.push_back({s.count, std::numeric_limits<double>::infinity()});
        f.metric.push_back(std::move(m));
      }
      out.push_back(std::move(f));
    }
    return serialize(out);
  }
};

Result<std::unique_ptr<EnergyHistogram>> EnergyHistogram::create(std::vector<std::shared_ptr<Gpu>> gpus,
                                                                 std::vector<std::shared_ptr<Cpu>> cpus,
                                                                 PushOptions options, std::vector<double> gpu_buckets,
                                                                 std::vector<double> cpu_buckets,
                                                                 std::vector<double> dram_buckets) {
  for (auto [b, what] :
       {std::pair{&gpu_buckets, "GPU"}, std::pair{&cpu_buckets, "CPU"}, std::pair{&dram_buckets, "DRAM"}}) {
    if (b->empty())
      return fail(ErrorCode::kInvalidArgument, std::string(what) +
                                                   " bucket range cannot be empty; give buckets or leave the "
                                                   "argument out for the defaults");
    std::sort(b->begin(), b->end());
  }
  auto pusher = Pusher::create(std::move(options));
  if (!pusher) return fail(pusher.error());
  auto monitor = make_monitor(std::move(gpus), std::move(cpus));
  if (!monitor) return fail(monitor.error());
  auto impl = std::make_unique<Impl>();
  impl->pusher = std::move(*pusher);
  impl->monitor = std::move(*monitor);
  impl->buckets = {{kGpu, gpu_buckets}, {kCpu, cpu_buckets}, {kDram, dram_buckets}};
  return std::unique_ptr<EnergyHistogram>(new EnergyHistogram(std::move(impl)));
}

EnergyHistogram::EnergyHistogram(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
EnergyHistogram::~EnergyHistogram() = default;

Result<void> EnergyHistogram::begin_window(const std::string& name, bool sync) {
  return impl_->monitor->begin_window("__EnergyHistogram_" + name, sync);
}

Result<void> EnergyHistogram::end_window(const std::string& name, bool sync) {
  auto m = impl_->monitor->end_window("__EnergyHistogram_" + name, sync);
  if (!m) return fail(m.error().code, "EnergyHistogram window '" + name + "' is not open");
  std::string body;
  {
    std::lock_guard lock(impl_->mutex);
    for (const auto& [domain, by_index] : energies(*m)) {
      const auto& b = impl_->buckets[domain];
      for (const auto& [index, joules] : by_index) {
        auto& s = impl_->windows[name][domain][index];
        s.counts.resize(b.size());
        const auto at = std::lower_bound(b.begin(), b.end(), joules);
        if (at != b.end()) ++s.counts[static_cast<std::size_t>(at - b.begin())];
        s.sum += joules;
        ++s.count;
        const char* dev = domain == kGpu ? "GPU" : domain == kCpu ? "CPU" : "DRAM";
        if (joules > b.back() || joules < b.front())
          impl_->pusher->report("EnergyHistogram window '" + name + "': " + dev + " " + std::to_string(index) +
                                " energy " + std::to_string(joules) + " J is outside the buckets [" +
                                std::to_string(b.front()) + ", " + std::to_string(b.back()) + "]");
      }
    }
    body = impl_->body(name);
  }
  impl_->pusher->submit(name, "histogram", std::move(body));
  return ok();
}

std::uint64_t EnergyHistogram::push_errors() const { return impl_->pusher->errors(); }
bool EnergyHistogram::flush(std::chrono::milliseconds timeout) { return impl_->pusher->flush(timeout); }

// ---- periodic windows (counter, gauge) ---------------------------------------------------------

namespace {

/// One window's updater thread: calls `tick` every `period` until stopped (stop returns at once).
class Updater {
 public:
  Updater(std::chrono::milliseconds period, std::function<void()> tick)
      : thread_([this, period, tick = std::move(tick)] {
          std::unique_lock lock(mutex_);
          while (!cv_.wait_for(lock, period, [&] { return stop_; })) {
            lock.unlock();
            tick();
            lock.lock();
          }
        }) {}
  ~Updater() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace

struct EnergyCumulativeCounter::Impl {
  std::unique_ptr<Pusher> pusher;
  std::unique_ptr<measure::EnergyMonitor> monitor;
  std::chrono::milliseconds period{};
  struct Window {
    std::mutex mutex;
    std::map<Domain, std::map<unsigned, double>> shown;  // never decreases
    std::unique_ptr<Updater> updater;
  };
  std::mutex mutex;
  std::map<std::string, std::shared_ptr<Window>> windows;

  void update(const std::string& name, Window& w, const measure::Measurement& m) {
    std::vector<pm::MetricFamily> out;
    std::lock_guard lock(w.mutex);
    for (const auto& [domain, by_index] : energies(m))
      for (const auto& [index, joules] : by_index) w.shown[domain][index] = std::max(w.shown[domain][index], joules);
    for (const auto& [domain, by_index] : w.shown) {
      // Zeus's prometheus_client exposes a Counter as <name>_total.
      pm::MetricFamily f{std::string(family_name(domain)) + "_total", help(domain), pm::MetricType::Counter, {}};
      for (const auto& [index, joules] : by_index) {
        pm::ClientMetric c;
        c.label = {{"index", std::to_string(index)}};
        c.counter.value = joules;
        f.metric.push_back(std::move(c));
      }
      out.push_back(std::move(f));
    }
    pusher->submit(name, "counter", serialize(out));
  }
};

Result<std::unique_ptr<EnergyCumulativeCounter>> EnergyCumulativeCounter::create(
    std::vector<std::shared_ptr<Gpu>> gpus, std::vector<std::shared_ptr<Cpu>> cpus,
    std::chrono::milliseconds update_period, PushOptions options) {
  if (update_period.count() <= 0) return fail(ErrorCode::kInvalidArgument, "update_period must be greater than 0");
  auto pusher = Pusher::create(std::move(options));
  if (!pusher) return fail(pusher.error());
  auto monitor = make_monitor(std::move(gpus), std::move(cpus));
  if (!monitor) return fail(monitor.error());
  auto impl = std::make_unique<Impl>();
  impl->pusher = std::move(*pusher);
  impl->monitor = std::move(*monitor);
  impl->period = update_period;
  return std::unique_ptr<EnergyCumulativeCounter>(new EnergyCumulativeCounter(std::move(impl)));
}

EnergyCumulativeCounter::EnergyCumulativeCounter(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
EnergyCumulativeCounter::~EnergyCumulativeCounter() {
  std::vector<std::string> open;
  {
    std::lock_guard lock(impl_->mutex);
    for (auto& [name, w] : impl_->windows) open.push_back(name);
  }
  for (const auto& name : open) (void)end_window(name, false);
}

Result<void> EnergyCumulativeCounter::begin_window(const std::string& name, bool sync) {
  std::lock_guard lock(impl_->mutex);
  if (impl_->windows.count(name))
    return fail(ErrorCode::kAlreadyExists, "EnergyCumulativeCounter window '" + name + "' already exists");
  const std::string key = "__EnergyCumulativeCounter_" + name;
  if (auto b = impl_->monitor->begin_window(key, sync); !b) return fail(b.error());
  auto w = std::make_shared<Impl::Window>();
  Impl* impl = impl_.get();
  w->updater = std::make_unique<Updater>(impl_->period, [impl, name, key, raw = w.get()] {
    if (auto m = impl->monitor->peek_window(key)) impl->update(name, *raw, *m);
  });
  impl_->windows[name] = std::move(w);
  return ok();
}

Result<void> EnergyCumulativeCounter::end_window(const std::string& name, bool sync) {
  std::shared_ptr<Impl::Window> w;
  {
    std::lock_guard lock(impl_->mutex);
    auto it = impl_->windows.find(name);
    if (it == impl_->windows.end())
      return fail(ErrorCode::kNotFound, "EnergyCumulativeCounter window '" + name + "' is not open");
    w = std::move(it->second);
    impl_->windows.erase(it);
  }
  w->updater.reset();  // returns at once: the updater waits on a condition variable, not a sleep
  auto m = impl_->monitor->end_window("__EnergyCumulativeCounter_" + name, sync);
  if (!m) return fail(m.error());
  impl_->update(name, *w, *m);  // the final value, pushed in the background
  return ok();
}

std::uint64_t EnergyCumulativeCounter::push_errors() const { return impl_->pusher->errors(); }
bool EnergyCumulativeCounter::flush(std::chrono::milliseconds timeout) { return impl_->pusher->flush(timeout); }

// ---- PowerGauge --------------------------------------------------------------------------------

struct PowerGauge::Impl {
  std::unique_ptr<Pusher> pusher;
  std::vector<std::shared_ptr<Gpu>> gpus;
  std::chrono::milliseconds period{};
  std::mutex mutex;
  std::map<std::string, std::unique_ptr<Updater>> windows;

  void update(const std::string& name) {
    pm::MetricFamily f{names::kPushGpuPower, kPowerHelp, pm::MetricType::Gauge, {}};
    for (unsigned i = 0; i < gpus.size(); ++i) {
      auto p = gpus[i]->power(PowerDomain::kDeviceInstant);
      if (!p) continue;  // no value rather than a stale one
      pm::ClientMetric g;
      g.label = {{"index", std::to_string(i)}};
      g.gauge.value = Watts(*p).value();
      f.metric.push_back(std::move(g));
    }
    pusher->submit(name, "gauge", serialize({f}));
  }
};

Result<std::unique_ptr<PowerGauge>> PowerGauge::create(std::vector<std::shared_ptr<Gpu>> gpus,
                                                       std::chrono::milliseconds update_period, PushOptions options) {
  if (update_period.count() <= 0) return fail(ErrorCode::kInvalidArgument, "update_period must be greater than 0");
  auto pusher = Pusher::create(std::move(options));
  if (!pusher) return fail(pusher.error());
  auto impl = std::make_unique<Impl>();
  impl->pusher = std::move(*pusher);
  impl->gpus = std::move(gpus);
  impl->period = update_period;
  return std::unique_ptr<PowerGauge>(new PowerGauge(std::move(impl)));
}

PowerGauge::PowerGauge(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
PowerGauge::~PowerGauge() {
  std::lock_guard lock(impl_->mutex);
  impl_->windows.clear();
}

Result<void> PowerGauge::begin_window(const std::string& name, bool) {
  std::lock_guard lock(impl_->mutex);
  if (impl_->windows.count(name))
    return fail(ErrorCode::kAlreadyExists, "PowerGauge metric '" + name + "' already exists");
  impl_->update(name);  // the first value at once
  Impl* impl = impl_.get();
  impl_->windows[name] = std::make_unique<Updater>(impl_->period, [impl, name] { impl->update(name); });
  return ok();
}

Result<void> PowerGauge::end_window(const std::string& name, bool) {
  std::unique_ptr<Updater> u;
  {
    std::lock_guard lock(impl_->mutex);
    auto it = impl_->windows.find(name);
    if (it == impl_->windows.end()) return fail(ErrorCode::kNotFound, "PowerGauge window '" + name + "' is not open");
    u = std::move(it->second);
    impl_->windows.erase(it);
  }
  u.reset();
  impl_->update(name);  // the final value, pushed in the background
  return ok();
}

std::uint64_t PowerGauge::push_errors() const { return impl_->pusher->errors(); }
bool PowerGauge::flush(std::chrono::milliseconds timeout) { return impl_->pusher->flush(timeout); }

}  // namespace erg::prom
