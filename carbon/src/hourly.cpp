#include "erg/carbon/hourly.hpp"

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <set>
#include <thread>

namespace erg::carbon {

using namespace std::chrono;

double HourShare::total_j() const {
  double sum = 0.0;
  for (const auto& [device, j] : energy_j) sum += j;
  return sum;
}

std::map<std::string, double> device_energies(const measure::Measurement& m) {
  std::map<std::string, double> out;
  for (const auto& g : m.gpus)
    if (g.energy) out["gpu" + std::to_string(g.index)] = g.energy->value();
  for (const auto& c : m.cpus) {
    out["cpu" + std::to_string(c.index)] = c.package.value();
    if (c.dram) out["dram" + std::to_string(c.index)] = c.dram->value();
  }
  return out;
}

std::vector<HourShare> split_by_hour(
    const std::vector<std::pair<nanoseconds, std::map<std::string, double>>>& samples) {
  std::vector<HourShare> out;
  if (samples.empty()) return out;
  const nanoseconds t0 = samples.front().first, t1 = samples.back().first;
  auto hour_of = [](nanoseconds t) { return utc_hour_of(floor<seconds>(sys_time<nanoseconds>(t))); };
  auto start_ns = [](UtcHour h) { return duration_cast<nanoseconds>(h.time_since_epoch()); };
  // One share per hour the window overlaps (a window of no length: the hour it is in).
  std::map<UtcHour, std::size_t> index;
  for (UtcHour h = hour_of(t0);; h += hours(1)) {
    const nanoseconds hs = start_ns(h), he = hs + hours(1);
    const nanoseconds overlap = std::min(he, t1) - std::max(hs, t0);
    if (overlap > nanoseconds(0) || out.empty()) {
      HourShare s;
      s.hour = h;
      s.time = Seconds(duration<double>(std::max(overlap, nanoseconds(0))).count());
      index[h] = out.size();
      out.push_back(std::move(s));
    }
    if (he >= t1) break;
  }
  // Every device that the last sample knows; its series skips samples that lack it (the energy
  // across such a gap is spread over it in proportion to time, as between any two samples).
  for (const auto& [device, total] : samples.back().second) {
    std::vector<std::pair<nanoseconds, double>> points{{t0, 0.0}};
    for (std::size_t i = 1; i < samples.size(); ++i) {
      auto it = samples[i].second.find(device);
      if (it != samples[i].second.end()) points.emplace_back(samples[i].first, it->second);
    }
    if (points.back().first != t1) points.emplace_back(t1, total);
    for (auto& share : out) share.energy_j.emplace(device, 0.0);
    for (std::size_t i = 1; i < points.size(); ++i) {
      const auto [ta, va] = points[i - 1];
      const auto [tb, vb] = points[i];
      const double delta = vb - va;
      if (tb <= ta) {
        out[index.count(hour_of(ta)) ? index[hour_of(ta)] : 0].energy_j[device] += delta;
        continue;
      }
      const double span = duration<double>(tb - ta).count();
      for (UtcHour h = hour_of(ta); start_ns(h) < tb; h += hours(1)) {
        const nanoseconds overlap = std::min(start_ns(h) + hours(1), tb) - std::max(start_ns(h), ta);
        if (overlap <= nanoseconds(0)) continue;
        auto it = index.find(h);
        if (it == index.end()) continue;  // cannot happen: [ta, tb] lies inside [t0, t1]
        out[it->second].energy_j[device] += delta * (duration<double>(overlap).count() / span);
      }
    }
  }
  return out;
}

struct HourlyEnergyMonitor::Impl {
  std::unique_ptr<measure::EnergyMonitor> owned;
  measure::EnergyMonitor* monitor = nullptr;
  const Clock* clock = nullptr;
  HourlyOptions options;

  struct Window {
    UtcHour last_hour;  ///< The hour of the latest sample (or of the begin).
    std::vector<std::pair<nanoseconds, std::map<std::string, double>>> samples;  ///< Boundary peeks.
  };
  mutable std::mutex mu;
  std::map<std::string, Window> windows;

  std::mutex thread_mu;
  std::condition_variable cv;
  bool stop = false;
  std::thread thread;

  [[nodiscard]] UtcHour wall_hour() const {
    return utc_hour_of(floor<seconds>(sys_time<nanoseconds>(clock->wall_now())));
  }

  void sample_due() {
    std::set<UtcHour> ended;
    {
      std::lock_guard lock(mu);
      const UtcHour now = wall_hour();
      for (auto& [name, w] : windows) {
        if (now <= w.last_hour) continue;
        auto m = monitor->peek_window(name);
        // A failed peek leaves no sample: the energy around it is spread over the longer gap.
        if (m) w.samples.emplace_back(m->start_wall + duration_cast<nanoseconds>(m->time), device_energies(*m));
        for (UtcHour h = w.last_hour; h < now; h += hours(1)) ended.insert(h);
        w.last_hour = now;
      }
    }
    if (options.on_hour_end)
      for (auto h : ended) options.on_hour_end(h);
  }

  void run() {
    std::unique_lock lock(thread_mu);
    while (!stop) {
      const auto next = duration_cast<nanoseconds>((wall_hour() + hours(1)).time_since_epoch());
      const auto wait = std::max(next - clock->wall_now(), nanoseconds(0)) + milliseconds(1);
      cv.wait_for(lock, wait, [&] { return stop; });
      if (stop) break;
      lock.unlock();
      sample_due();
      lock.lock();
    }
  }
};

HourlyEnergyMonitor::HourlyEnergyMonitor(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

HourlyEnergyMonitor::~HourlyEnergyMonitor() {
  if (impl_ && impl_->thread.joinable()) {
    {
      std::lock_guard lock(impl_->thread_mu);
      impl_->stop = true;
    }
    impl_->cv.notify_all();
    impl_->thread.join();
  }
}

Result<std::unique_ptr<HourlyEnergyMonitor>> HourlyEnergyMonitor::create(std::vector<std::shared_ptr<Gpu>> gpus,
                                                                         std::vector<std::shared_ptr<Cpu>> cpus,
                                                                         HourlyOptions options) {
  auto impl = std::make_unique<Impl>();
  impl->clock = options.energy.clock != nullptr ? options.energy.clock : &SteadyClock::instance();
  auto m = measure::EnergyMonitor::create(std::move(gpus), std::move(cpus), options.energy);
  if (!m) return fail(m.error());
  impl->owned = std::move(*m);
  impl->monitor = impl->owned.get();
  impl->options = std::move(options);
  std::unique_ptr<HourlyEnergyMonitor> out(new HourlyEnergyMonitor(std::move(impl)));
  if (out->impl_->options.boundary_thread) out->impl_->thread = std::thread([p = out->impl_.get()] { p->run(); });
  return out;
}

std::unique_ptr<HourlyEnergyMonitor> HourlyEnergyMonitor::wrap(measure::EnergyMonitor& monitor, const Clock& clock,
                                                               HourlyOptions options) {
  auto impl = std::make_unique<Impl>();
  impl->clock = &clock;
  impl->monitor = &monitor;
  impl->options = std::move(options);
  std::unique_ptr<HourlyEnergyMonitor> out(new HourlyEnergyMonitor(std::move(impl)));
  if (out->impl_->options.boundary_thread) out->impl_->thread = std::thread([p = out->impl_.get()] { p->run(); });
  return out;
}

Result<void> HourlyEnergyMonitor::begin_window(const std::string& name, bool sync) {
  std::lock_guard lock(impl_->mu);
  if (impl_->windows.count(name))
    return fail(ErrorCode::kAlreadyExists, "Measurement window '" + name + "' already exists");
  if (auto r = impl_->monitor->begin_window(name, sync); !r) return r;
  impl_->windows[name] = Impl::Window{impl_->wall_hour(), {}};
  return ok();
}

Result<HourlyMeasurement> HourlyEnergyMonitor::end_window(const std::string& name, bool sync) {
  std::lock_guard lock(impl_->mu);
  auto it = impl_->windows.find(name);
  if (it == impl_->windows.end()) return fail(ErrorCode::kNotFound, "Measurement window '" + name + "' does not exist");
  auto m = impl_->monitor->end_window(name, sync);
  auto window = std::move(it->second);
  impl_->windows.erase(it);
  if (!m) return fail(m.error());
  HourlyMeasurement out;
  out.energy = std::move(*m);
  const nanoseconds start = out.energy.start_wall;
  const nanoseconds end = start + duration_cast<nanoseconds>(out.energy.time);
  auto totals = device_energies(out.energy);
  std::vector<std::pair<nanoseconds, std::map<std::string, double>>> samples;
  samples.emplace_back(start, std::map<std::string, double>{});
  // A peek extrapolates its end edge, so it may overshoot what the settled end measured: each
  // device's cumulative energy is kept within [previous sample, total].
  std::map<std::string, double> floor_j;
  for (auto& [t, energies] : window.samples) {
    if (t <= start || t >= end) continue;
    for (auto e = energies.begin(); e != energies.end();) {
      auto total = totals.find(e->first);
      if (total == totals.end()) {
        e = energies.erase(e);
        continue;
      }
      e->second = std::clamp(e->second, floor_j[e->first], std::max(floor_j[e->first], total->second));
      floor_j[e->first] = e->second;
      ++e;
    }
    samples.emplace_back(t, std::move(energies));
  }
  samples.emplace_back(end, std::move(totals));
  out.hours = split_by_hour(samples);
  return out;
}

Result<void> HourlyEnergyMonitor::cancel_window(const std::string& name) {
  std::lock_guard lock(impl_->mu);
  if (!impl_->windows.erase(name))
    return fail(ErrorCode::kNotFound, "Measurement window '" + name + "' does not exist");
  return impl_->monitor->cancel_window(name);
}

std::vector<std::string> HourlyEnergyMonitor::open_windows() const {
  std::lock_guard lock(impl_->mu);
  std::vector<std::string> out;
  for (const auto& [name, w] : impl_->windows) out.push_back(name);
  return out;
}

nanoseconds HourlyEnergyMonitor::next_boundary_time() const {
  const auto next = duration_cast<nanoseconds>((impl_->wall_hour() + hours(1)).time_since_epoch());
  return impl_->clock->now() + (next - impl_->clock->wall_now());
}

void HourlyEnergyMonitor::sample_due() { impl_->sample_due(); }

measure::EnergyMonitor& HourlyEnergyMonitor::energy_monitor() { return *impl_->monitor; }
const Clock& HourlyEnergyMonitor::clock() const { return *impl_->clock; }

}  // namespace erg::carbon
