#include "erg/measure/energy_monitor.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>

#include "erg/measure/counter_tracker.hpp"
#include "erg/measure/power_monitor.hpp"

namespace erg::measure {
namespace {

/// How many update periods a window must span before its counter figure is trusted.
constexpr double kShortWindowPeriods = 2.0;

struct GpuCounter {
  unsigned index;
  std::shared_ptr<Gpu> gpu;
  bool has_counter;
  std::optional<std::chrono::microseconds> period;
  CounterTracker tracker;      // mJ
  std::optional<Error> error;  // last read error
};

struct CpuCounter {
  unsigned index;
  std::shared_ptr<Cpu> cpu;
  bool dram;
  CounterTracker package;  // µJ
  CounterTracker dram_tracker;
  std::optional<Error> error;
};

// Ended windows' map nodes kept for reuse: enough for the usual nesting of a few windows.
constexpr std::size_t kSpareWindowNodes = 8;

struct WindowState {
  std::chrono::nanoseconds start{0};
  std::chrono::nanoseconds start_wall{0};
  std::vector<double> gpu_mj;
  std::vector<std::uint64_t> gpu_anomalies;
  std::vector<double> cpu_uj;
  std::vector<double> dram_uj;
  std::vector<std::uint64_t> cpu_anomalies;
};

/// CSV per RFC 4180: quote a field only when it needs it.
std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) {
    if (c == '"') q += '"';
    q += c;
  }
  return q + "\"";
}

std::string fmt_double(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6f", v);
  return buf;
}

}  // namespace

struct EnergyMonitor::Impl {
  const Clock* clock;
  EnergyMonitorOptions options;
  std::vector<unsigned> gpu_indices;
  std::vector<unsigned> cpu_indices;
  std::vector<GpuCounter> gpus;
  std::vector<CpuCounter> cpus;
  std::unique_ptr<PowerMonitor> power_monitor;  // for GPUs without an energy counter
  int log_fd = -1;

  mutable std::mutex mu;
  using Windows = std::map<std::string, WindowState>;
  Windows windows;
  // Under mu: map nodes of ended windows, reused by the next begin_window (their vectors and
  // name keep their capacity), and the end edge's readings. A window edge in steady state
  // allocates nothing but the Measurement it returns.
  std::vector<Windows::node_type> spare_nodes;
  WindowState end_scratch;

  ~Impl() {
    if (log_fd >= 0) ::close(log_fd);
  }

  /// Reads every counter once (under mu) into `state`-shaped vectors. `wall`: the clock's wall
  /// time now (for the age of GPU counters).
  void read_counters(WindowState& s, std::chrono::nanoseconds wall) {
    s.gpu_mj.resize(gpus.size());
    s.gpu_anomalies.resize(gpus.size());
    for (std::size_t i = 0; i < gpus.size(); ++i) {
      auto& g = gpus[i];
      double extra_mj = 0.0;
      if (g.has_counter) {
        auto r = g.gpu->energy_reading();
        if (r) {
          // The tracker sees raw counter values only; the age correction applies to this
          // edge alone, so it can never be mistaken for a counter anomaly.
          g.tracker.update(r->energy.value());
          g.error.reset();
          if (options.extrapolate_counters && r->updated_at && r->power) {
            const auto cap = g.period.value_or(std::chrono::milliseconds(100));
            auto age = std::clamp<std::chrono::nanoseconds>(wall - *r->updated_at, std::chrono::nanoseconds(0), cap);
            extra_mj = r->power->value() * (static_cast<double>(age.count()) * 1e-9);
          }
        } else {
          g.error = r.error();
        }
      }
      s.gpu_mj[i] = g.tracker.accumulated() + extra_mj;
      s.gpu_anomalies[i] = g.tracker.anomalies();
    }
    s.cpu_uj.resize(cpus.size());
    s.dram_uj.resize(cpus.size());
    s.cpu_anomalies.resize(cpus.size());
    for (std::size_t i = 0; i < cpus.size(); ++i) {
      auto& c = cpus[i];
      auto e = c.cpu->package_energy();
      if (e) {
        c.package.update(e->value());
        c.error.reset();
      } else {
        c.error = e.error();
      }
      if (c.dram) {
        auto d = c.cpu->dram_energy();
        if (d)
          c.dram_tracker.update(d->value());
        else
          c.error = d.error();
      }
      s.cpu_uj[i] = c.package.accumulated();
      s.dram_uj[i] = c.dram_tracker.accumulated();
      s.cpu_anomalies[i] = c.package.anomalies() + c.dram_tracker.anomalies();
    }
  }

  bool syncs(bool sync) const { return sync && options.sync && !gpu_indices.empty(); }
  void sync_if(bool sync) {
    if (syncs(sync)) options.sync(gpu_indices);
  }

  void write_log_row(const Measurement& m) {
    if (log_fd < 0) return;
    std::string row;
    if (options.log_format == LogFormat::kCsv) {
      row = fmt_double(static_cast<double>(m.start_wall.count()) * 1e-9) + "," + csv_field(m.name) + "," +
            fmt_double(m.time.count());
      for (const auto& g : m.gpus) row += "," + fmt_double(g.energy.value());
      for (const auto& c : m.cpus) {
        row += "," + fmt_double(c.package.value());
        if (c.dram) row += "," + fmt_double(c.dram->value());
      }
    } else {
      nlohmann::json j;
      j["start_time"] = static_cast<double>(m.start_wall.count()) * 1e-9;
      j["window_name"] = m.name;
      j["elapsed_time"] = m.time.count();
      for (const auto& g : m.gpus) j["gpu" + std::to_string(g.index) + "_energy"] = g.energy.value();
      for (const auto& c : m.cpus) {
        j["cpu" + std::to_string(c.index) + "_energy"] = c.package.value();
        if (c.dram) j["dram" + std::to_string(c.index) + "_energy"] = c.dram->value();
      }
      row = j.dump();
    }
    row += "\n";
    // One write(2) per row: a crash loses at most the row being written.
    const char* p = row.data();
    std::size_t left = row.size();
    while (left > 0) {
      ssize_t n = ::write(log_fd, p, left);
      if (n < 0) {
        if (errno == EINTR) continue;
        break;
      }
      p += n;
      left -= static_cast<std::size_t>(n);
    }
  }
};

EnergyMonitor::EnergyMonitor(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
EnergyMonitor::~EnergyMonitor() = default;

Result<std::unique_ptr<EnergyMonitor>> EnergyMonitor::create(std::vector<std::shared_ptr<Gpu>> gpus,
                                                             std::vector<std::shared_ptr<Cpu>> cpus,
                                                             EnergyMonitorOptions options) {
  auto impl = std::make_unique<Impl>();
  impl->clock = options.clock != nullptr ? options.clock : &SteadyClock::instance();

  if (options.gpu_indices) {
    std::set<unsigned> seen;
    for (unsigned i : *options.gpu_indices) {
      if (i >= gpus.size())
        return fail(ErrorCode::kInvalidArgument,
                    "GPU index " + std::to_string(i) + " is out of range (" + std::to_string(gpus.size()) + " GPUs)");
      if (!seen.insert(i).second)
        return fail(ErrorCode::kInvalidArgument, "GPU index " + std::to_string(i) + " repeated");
      impl->gpu_indices.push_back(i);
    }
  } else {
    for (unsigned i = 0; i < gpus.size(); ++i) impl->gpu_indices.push_back(i);
  }
  std::vector<unsigned> old_gpus;
  for (unsigned i : impl->gpu_indices) {
    bool counter = gpus[i]->capabilities().energy_counter;
    impl->gpus.push_back(GpuCounter{i, gpus[i], counter, gpus[i]->capabilities().energy_update_period, {}, {}});
    if (!counter) old_gpus.push_back(i);
  }

  if (options.cpu_indices) {
    for (unsigned want : *options.cpu_indices) {
      auto it = std::find_if(cpus.begin(), cpus.end(), [want](const auto& c) { return c->index() == want; });
      if (it == cpus.end())
        return fail(ErrorCode::kNotFound, "CPU package " + std::to_string(want) + " is not available");
      impl->cpu_indices.push_back(want);
      impl->cpus.push_back(CpuCounter{want, *it, (*it)->capabilities().dram, {}, {}, {}});
    }
  } else {
    for (auto& c : cpus) {
      impl->cpu_indices.push_back(c->index());
      impl->cpus.push_back(CpuCounter{c->index(), c, c->capabilities().dram, {}, {}, {}});
    }
  }

  if (!old_gpus.empty()) {
    PowerMonitorOptions pm;
    pm.gpu_indices = old_gpus;
    pm.cpus = false;
    pm.clock = impl->clock;
    pm.period = options.power_sample_period;
    pm.domains = {PowerDomain::kDeviceInstant};
    auto monitor = PowerMonitor::create(gpus, {}, pm);
    if (!monitor) return fail(monitor.error());
    impl->power_monitor = std::move(*monitor);
  }

  if (options.log_file) {
    std::error_code ec;
    if (options.log_file->has_parent_path()) std::filesystem::create_directories(options.log_file->parent_path(), ec);
    int fd = ::open(options.log_file->c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0)
      return fail(ErrorCode::kIo, "cannot create log file " + options.log_file->string() + ": " + std::strerror(errno));
    impl->log_fd = fd;
    if (options.log_format == LogFormat::kCsv) {
      // Zeus's exact header first, then CPU and DRAM columns.
      std::string header = "start_time,window_name,elapsed_time";
      for (unsigned i : impl->gpu_indices) header += ",gpu" + std::to_string(i) + "_energy";
      for (const auto& c : impl->cpus) {
        header += ",cpu" + std::to_string(c.index) + "_energy";
        if (c.dram) header += ",dram" + std::to_string(c.index) + "_energy";
      }
      header += "\n";
      if (::write(fd, header.data(), header.size()) != static_cast<ssize_t>(header.size()))
        return fail(ErrorCode::kIo,
                    "cannot write log file " + options.log_file->string() + ": " + std::strerror(errno));
    }
  }
  impl->spare_nodes.reserve(kSpareWindowNodes);  // recycling a node never allocates
  impl->options = std::move(options);
  return std::unique_ptr<EnergyMonitor>(new EnergyMonitor(std::move(impl)));
}

Result<void> EnergyMonitor::begin_window(const std::string& name, bool sync, bool restart) {
  if (impl_->syncs(sync)) {
    {  // fail before waiting for the devices
      std::lock_guard lock(impl_->mu);
      if (!restart && impl_->windows.count(name))
        return fail(ErrorCode::kAlreadyExists, "Measurement window '" + name + "' already exists");
    }
    impl_->sync_if(sync);
  }
  std::lock_guard lock(impl_->mu);
  auto& windows = impl_->windows;
  auto it = windows.find(name);
  if (it != windows.end() && !restart)
    return fail(ErrorCode::kAlreadyExists, "Measurement window '" + name + "' already exists");
  // Read into a detached node first: the window opens (or restarts) only once its counters are
  // read, so a read that throws leaves no half-started window behind.
  Impl::Windows::node_type node;
  if (!impl_->spare_nodes.empty()) {
    node = std::move(impl_->spare_nodes.back());
    impl_->spare_nodes.pop_back();
  } else {
    Impl::Windows one;
    one.emplace(name, WindowState{});
    node = one.extract(one.begin());
  }
  WindowState& s = node.mapped();
  s.start_wall = impl_->clock->wall_now();
  s.start = impl_->clock->now();
  impl_->read_counters(s, s.start_wall);
  if (it != windows.end()) {  // restart: the new start replaces the old one
    std::swap(it->second, s);
    if (impl_->spare_nodes.size() < kSpareWindowNodes) impl_->spare_nodes.push_back(std::move(node));
  } else {
    node.key() = name;
    windows.insert(std::move(node));
  }
  return ok();
}

Result<void> EnergyMonitor::restart_window(const std::string& name, bool sync) {
  return begin_window(name, sync, true);
}

Result<void> EnergyMonitor::cancel_window(const std::string& name, bool sync) {
  if (impl_->syncs(sync)) {
    {
      std::lock_guard lock(impl_->mu);
      if (!impl_->windows.count(name))
        return fail(ErrorCode::kNotFound, "Measurement window '" + name + "' does not exist");
    }
    impl_->sync_if(sync);
  }
  std::lock_guard lock(impl_->mu);
  if (impl_->windows.erase(name) == 0)
    return fail(ErrorCode::kNotFound, "Measurement window '" + name + "' does not exist");
  return ok();
}

std::vector<std::string> EnergyMonitor::reset_windows() {
  std::lock_guard lock(impl_->mu);
  std::vector<std::string> names;
  for (const auto& [n, s] : impl_->windows) names.push_back(n);
  impl_->windows.clear();
  return names;
}

Result<Measurement> EnergyMonitor::end_window(const std::string& name, bool sync) {
  if (impl_->syncs(sync) || impl_->options.approx_instant_energy) {
    std::lock_guard lock(impl_->mu);  // fail before reading power or waiting for the devices
    if (!impl_->windows.count(name))
      return fail(ErrorCode::kNotFound, "Measurement window '" + name + "' does not exist");
  }
  // Instant power is read before synchronizing, as Zeus does, so it reflects the work.
  std::vector<std::optional<Watts>> instant;
  if (impl_->options.approx_instant_energy) {
    instant.resize(impl_->gpus.size());
    for (std::size_t i = 0; i < impl_->gpus.size(); ++i) {
      auto p = impl_->gpus[i].gpu->power(PowerDomain::kDeviceInstant);
      if (p) instant[i] = Watts(*p);
    }
  }
  impl_->sync_if(sync);

  Measurement m;
  m.gpus.reserve(impl_->gpus.size());
  m.cpus.reserve(impl_->cpus.size());
  {
    std::lock_guard lock(impl_->mu);
    auto it = impl_->windows.find(name);
    if (it == impl_->windows.end())
      return fail(ErrorCode::kNotFound, "Measurement window '" + name + "' does not exist");
    auto node = impl_->windows.extract(it);
    const WindowState& start = node.mapped();
    WindowState& end = impl_->end_scratch;
    end.start = impl_->clock->now();
    impl_->read_counters(end, impl_->clock->wall_now());
    m.name = name;
    m.start_wall = start.start_wall;
    m.time = Seconds(static_cast<double>((end.start - start.start).count()) * 1e-9);
    for (std::size_t i = 0; i < impl_->gpus.size(); ++i) {
      const auto& g = impl_->gpus[i];
      GpuEnergy ge;
      ge.index = g.index;
      if (g.has_counter) {
        ge.energy = MilliJoules(std::max(0.0, end.gpu_mj[i] - start.gpu_mj[i]));
        ge.source = EnergySource::kCounter;
        ge.affected = end.gpu_anomalies[i] != start.gpu_anomalies[i];
        if (g.period)
          ge.short_window = m.time.count() < kShortWindowPeriods * std::chrono::duration<double>(*g.period).count();
        if (g.error) {
          ge.error = g.error;
          ge.affected = true;
        }
      } else {
        ge.source = EnergySource::kIntegrated;
        if (impl_->power_monitor) {
          auto e = impl_->power_monitor->gpu_energy(g.index, PowerDomain::kDeviceInstant, start.start, end.start);
          if (e) {
            ge.energy = *e;
          } else {
            ge.error = e.error();
          }
          ge.short_window = m.time.count() <
                            kShortWindowPeriods * std::chrono::duration<double>(impl_->power_monitor->period()).count();
        }
      }
      if (impl_->options.approx_instant_energy && ge.energy.value() == 0.0 && instant[i]) {
        ge.energy = *instant[i] * m.time;
        ge.source = EnergySource::kInstantApprox;
      }
      m.gpus.push_back(std::move(ge));
    }
    for (std::size_t i = 0; i < impl_->cpus.size(); ++i) {
      const auto& c = impl_->cpus[i];
      CpuEnergy ce;
      ce.index = c.index;
      ce.package = MicroJoules(end.cpu_uj[i] - start.cpu_uj[i]);
      if (c.dram) ce.dram = MicroJoules(end.dram_uj[i] - start.dram_uj[i]);
      ce.affected = end.cpu_anomalies[i] != start.cpu_anomalies[i];
      if (c.error) {
        ce.error = c.error;
        ce.affected = true;
      }
      m.cpus.push_back(std::move(ce));
    }
    impl_->write_log_row(m);
    if (impl_->spare_nodes.size() < kSpareWindowNodes) impl_->spare_nodes.push_back(std::move(node));
  }
  return m;
}

const std::vector<unsigned>& EnergyMonitor::gpu_indices() const { return impl_->gpu_indices; }
const std::vector<unsigned>& EnergyMonitor::cpu_indices() const { return impl_->cpu_indices; }
PowerMonitor* EnergyMonitor::power_monitor() const { return impl_->power_monitor.get(); }

std::vector<std::string> EnergyMonitor::open_windows() const {
  std::lock_guard lock(impl_->mu);
  std::vector<std::string> names;
  for (const auto& [n, s] : impl_->windows) names.push_back(n);
  return names;
}

}  // namespace erg::measure
