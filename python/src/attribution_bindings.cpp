// erg._core.attribution: per-process and per-request energy (issue 23) — measure's
// attribute_processes / ProcessMeter / calibrate_idle, a RequestMeter that reads a GPU's counter
// at each request's boundaries, and ergd's /attribution through the client library. Only
// translates (STYLE.md habit 13): results are dicts of plain numbers; errors go through
// module.cpp's one translator. Device and socket calls release the GIL.

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#if ERG_PYTHON_WITH_CLIENT
#include "erg/client/attribution.hpp"
#endif
#include "erg/core/clock.hpp"
#include "erg/core/device.hpp"
#include "erg/measure/power_monitor.hpp"
#include "erg/measure/process_attribution.hpp"
#include "erg/measure/request_meter.hpp"

namespace py = pybind11;

namespace erg_python {
[[noreturn]] void raise_error(erg::Error error);
}  // namespace erg_python

namespace {

using erg_python::raise_error;
using std::chrono::nanoseconds;
namespace measure = erg::measure;

template <class T>
T unwrap(erg::Result<T> r) {
  if (!r) raise_error(std::move(r.error()));
  return std::move(*r);
}
void unwrap(erg::Result<void> r) {
  if (!r) raise_error(std::move(r.error()));
}

double secs(nanoseconds t) { return std::chrono::duration<double>(t).count(); }
nanoseconds nanos(double s) { return std::chrono::round<nanoseconds>(std::chrono::duration<double>(s)); }

py::dict process_dict(const measure::ProcessAttribution& a) {
  py::dict d;
  d["attributable"] = a.attributable;
  d["reason"] = a.reason;
  d["start"] = secs(a.start);
  d["end"] = secs(a.end);
  d["measured"] = a.measured.value();
  d["measured_bound"] = a.measured_bound.value();
  d["idle"] = a.idle.value();
  d["idle_bound"] = a.idle_bound.value();
  d["unattributed"] = a.unattributed.value();
  d["unattributed_bound"] = a.unattributed_bound.value();
  py::dict procs;
  for (const auto& p : a.processes) {
    py::dict e;
    e["energy"] = p.energy.value();
    e["bound"] = p.bound.value();
    e["busy"] = p.busy.count();
    e["share"] = p.share;
    e["samples"] = p.samples;
    procs[py::int_(p.pid)] = e;
  }
  d["processes"] = procs;
  return d;
}

measure::ProcessAttributionOptions process_options(double idle_power, double idle_error,
                                                   std::optional<double> sample_period, double edge_uncertainty,
                                                   double model_error) {
  measure::ProcessAttributionOptions o;
  o.idle.power = erg::Watts(idle_power);
  o.idle.error = erg::Watts(idle_error);
  if (sample_period) o.sample_period = nanos(*sample_period);
  o.edge_uncertainty = nanos(edge_uncertainty);
  o.model_error = model_error;
  return o;
}

/// A ProcessMeter that keeps its GPU alive.
struct PyProcessMeter {
  std::shared_ptr<erg::Gpu> gpu;
  measure::ProcessMeter meter;
  PyProcessMeter(std::shared_ptr<erg::Gpu> g, measure::ProcessAttributionOptions o)
      : gpu(std::move(g)), meter(*gpu, erg::SteadyClock::instance(), std::move(o)) {}
};

/// Per-request energy on one GPU: the counter is read at every request's start and end (its
/// update time, on the monotonic clock the requests are stamped with), and attribute() splits
/// the energy between consecutive readings among the requests (attribute_requests).
class GpuRequestMeter {
 public:
  GpuRequestMeter(std::shared_ptr<erg::Gpu> gpu, std::optional<double> power_swing, std::string rule,
                  std::optional<double> idle_power, bool attribute_idle, double energy_error,
                  std::optional<double> unseen_share, bool power_timeline)
      : gpu_(std::move(gpu)), energy_error_(energy_error) {
    // A100 and H100 sensors sample about 25 ms of each 100 ms period (Yang et al., "Part-time
    // power measurements", 2024): the counter misses up to the swing over the unseen 75 %.
    const std::string& name = gpu_->name();
    unseen_ = unseen_share.value_or(
        name.find("A100") != std::string::npos || name.find("H100") != std::string::npos ? 0.75 : 0.0);
    if (!(unseen_ >= 0 && unseen_ <= 1))
      raise_error({erg::ErrorCode::kInvalidArgument, "unseen_share must be in [0, 1]"});
    if (rule == "time_in_batch")
      options_.rule = measure::SplitRule::kTimeInBatch;
    else if (rule == "token_share")
      options_.rule = measure::SplitRule::kTokenShare;
    else
      raise_error(
          {erg::ErrorCode::kInvalidArgument, "rule must be 'time_in_batch' or 'token_share', got '" + rule + "'"});
    if (idle_power) options_.idle_power = erg::Watts(*idle_power);
    options_.attribute_idle = attribute_idle;
    if (power_swing) {
      swing_ = *power_swing;
    } else {
      if (power_timeline) {
        // The swing inside each segment from the GPU's instant power, sampled on a native thread.
        measure::PowerMonitorOptions o;
        o.cpus = false;
        o.domains = {erg::PowerDomain::kDeviceInstant};
        auto m = measure::PowerMonitor::create({gpu_}, {}, o);
        if (m) power_ = std::move(*m);
      }
      // Lacking a power timeline, the device's range: 0 to its power limit.
      auto l = gpu_->power_limit();
      swing_ = l ? erg::Watts(*l).value() : 1000.0;
    }
    if (!(swing_ >= 0)) raise_error({erg::ErrorCode::kInvalidArgument, "power_swing must be ≥ 0 W"});
    if (!(energy_error_ >= 0)) raise_error({erg::ErrorCode::kInvalidArgument, "energy_error must be ≥ 0"});
  }

  void begin(const std::string& id) {
    std::lock_guard lock(mutex_);
    unwrap(read_locked());
    unwrap(meter_.begin(id));
  }
  void end(const std::string& id, double tokens) {
    std::lock_guard lock(mutex_);
    unwrap(meter_.end(id, tokens));
    last_end_ = erg::SteadyClock::instance().now();
    unwrap(read_locked());
  }

  /// Waits (≤ wait) for a counter update past the last end, then splits.
  py::dict attribute(double wait) {
    erg::Result<measure::Attribution> r = erg::fail(erg::ErrorCode::kInternal, "");
    std::vector<measure::EnergySegment> segments;
    {
      py::gil_scoped_release release;
      const auto deadline = std::chrono::steady_clock::now() + nanos(wait);
      std::lock_guard lock(mutex_);
      for (;;) {
        unwrap(read_locked());
        if (!readings_.empty() && readings_.back().first >= last_end_) break;
        if (std::chrono::steady_clock::now() >= deadline) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      for (std::size_t i = 1; i < readings_.size(); ++i) {
        measure::EnergySegment s;
        s.start = readings_[i - 1].first;
        s.end = readings_[i].first;
        double e = readings_[i].second - readings_[i - 1].second;
        s.energy = erg::Joules(e);
        const double swing = segment_swing(s.start, s.end);
        s.error_bound = erg::Joules(energy_error_ * std::abs(e) + 0.002 + unseen_error(s.start, s.end));
        s.power_swing = erg::Watts(swing);
        segments.push_back(s);
      }
      if (segments.empty())
        raise_error({erg::ErrorCode::kUnavailable, "no counter update between the requests' boundaries yet"});
      r = meter_.attribute(segments, options_);
    }
    auto a = unwrap(std::move(r));
    py::dict d;
    d["measured"] = a.measured.value();
    d["unattributed"] = a.unattributed.value();
    d["unattributed_bound"] = a.unattributed_bound.value();
    d["start"] = secs(segments.front().start);
    d["end"] = secs(segments.back().end);
    py::dict reqs;
    for (const auto& s : a.requests) {
      py::dict e;
      e["energy"] = s.energy.value();
      e["idle"] = s.idle.value();
      e["bound"] = s.bound.value();
      e["in_flight"] = s.in_flight.count();
      e["joules_per_token"] = s.joules_per_token ? py::object(py::float_(*s.joules_per_token)) : py::none();
      e["joules_per_token_bound"] =
          s.joules_per_token_bound ? py::object(py::float_(*s.joules_per_token_bound)) : py::none();
      reqs[py::str(s.id)] = e;
    }
    d["requests"] = reqs;
    return d;
  }

  [[nodiscard]] std::size_t in_flight() const { return meter_.in_flight(); }
  [[nodiscard]] bool has_timeline() const { return power_ != nullptr; }

 private:
  /// What the counter may miss over [start, end]: in each counter period, the unseen share of it
  /// at that period's swing.
  double unseen_error(nanoseconds start, nanoseconds end) const {
    if (unseen_ == 0) return 0.0;
    const nanoseconds period = gpu_->capabilities().energy_update_period.value_or(std::chrono::milliseconds(100));
    double sum = 0;
    for (nanoseconds t = start; t < end; t += period) {
      const nanoseconds u = std::min(end, t + period);
      sum += unseen_ * segment_swing(t, u) * secs(u - t);
    }
    return sum;
  }
  /// max − min of the sampled power over the segment and one sampling period either side, with
  /// a stated margin (10 % + 5 W) for what the samples miss between them; the power limit
  /// without a timeline or with fewer than two samples there.
  double segment_swing(nanoseconds start, nanoseconds end) const {
    if (!power_) return swing_;
    const nanoseconds pad = power_->period();
    auto t = power_->gpu_timeline(0, erg::PowerDomain::kDeviceInstant, start - pad, end + pad);
    if (!t || t->size() < 2) return swing_;
    double lo = (*t)[0].watts, hi = lo;
    for (const auto& p : *t) {
      lo = std::min(lo, p.watts);
      hi = std::max(hi, p.watts);
    }
    return std::min(swing_, (hi - lo) * 1.1 + 5.0);
  }

  /// The counter now, at its update time on the monotonic clock; a reading no newer than the
  /// last is not kept.
  erg::Result<void> read_locked() {
    auto r = gpu_->energy_reading();
    if (!r) return erg::fail(r.error());
    const auto& clock = erg::SteadyClock::instance();
    nanoseconds t = clock.now();
    if (r->updated_at) t -= clock.wall_now() - *r->updated_at;
    const double j = r->energy.value() / 1000.0;
    if (readings_.empty() || t > readings_.back().first) readings_.emplace_back(t, j);
    return erg::ok();
  }

  std::shared_ptr<erg::Gpu> gpu_;
  measure::RequestMeter meter_;
  measure::AttributionOptions options_;
  double swing_ = 0;
  double energy_error_ = 0.03;
  double unseen_ = 0.0;
  std::unique_ptr<measure::PowerMonitor> power_;  ///< nullptr: the swing is the power limit
  std::mutex mutex_;
  std::vector<std::pair<nanoseconds, double>> readings_;
  nanoseconds last_end_{0};
};

#if ERG_PYTHON_WITH_CLIENT
py::dict daemon_dict(const erg::client::DaemonAttribution& a) {
  py::dict d;
  d["sees_all_processes"] = a.sees_all_processes;
  d["uid"] = a.uid ? py::object(py::int_(*a.uid)) : py::none();
  d["daemon_started_ms"] = a.daemon_started_ms;
  py::dict gpus;
  for (const auto& g : a.gpus) {
    py::dict e;
    e["attributable"] = g.attributable;
    e["error"] = g.error;
    e["start_ms"] = g.start_ms;
    e["end_ms"] = g.end_ms;
    e["duration"] = g.duration_s;
    e["measured"] = g.measured_j;
    e["measured_bound"] = g.measured_bound_j;
    e["idle"] = g.idle_j;
    e["idle_bound"] = g.idle_bound_j;
    e["idle_calibrated"] = g.idle_calibrated;
    e["unattributed"] = g.unattributed_j;
    e["unattributed_bound"] = g.unattributed_bound_j;
    py::list procs;
    for (const auto& p : g.processes) {
      py::dict r;
      r["pid"] = p.pid;
      r["uid"] = p.uid ? py::object(py::int_(*p.uid)) : py::none();
      r["comm"] = p.comm;
      r["container"] = p.container ? py::object(py::str(*p.container)) : py::none();
      r["pod"] = p.pod ? py::object(py::str(*p.pod)) : py::none();
      r["energy"] = p.energy_j;
      r["bound"] = p.bound_j;
      r["power"] = p.power_w;
      r["busy"] = p.busy_s;
      r["share"] = p.share;
      procs.append(r);
    }
    e["processes"] = procs;
    py::dict o;
    o["processes"] = g.other_users.processes;
    o["energy"] = g.other_users.energy_j;
    o["bound"] = g.other_users.bound_j;
    o["power"] = g.other_users.power_w;
    e["other_users"] = o;
    gpus[py::int_(g.gpu)] = e;
  }
  d["gpus"] = gpus;
  py::dict errors;
  for (const auto& [id, err] : a.errors) errors[py::int_(id)] = err.message;
  d["errors"] = errors;
  return d;
}

#endif

}  // namespace

void bind_attribution(py::module_& m) {
  auto sub = m.def_submodule("attribution", "Energy per process and per request (erg::measure, ergd /attribution)");

  sub.def(
      "attribute_processes",
      [](double start, double end, double energy, double energy_error,
         const std::vector<std::tuple<std::uint32_t, double, unsigned>>& samples, double idle_power, double idle_error,
         std::optional<double> sample_period, double edge_uncertainty, double model_error) {
        measure::EnergySegment interval;
        interval.start = nanos(start);
        interval.end = nanos(end);
        interval.energy = erg::Joules(energy);
        interval.error_bound = erg::Joules(energy_error);
        std::vector<erg::ProcessUtilizationSample> s;
        for (const auto& [pid, t, sm] : samples) {
          erg::ProcessUtilizationSample x;
          x.pid = pid;
          x.timestamp = std::chrono::duration_cast<std::chrono::microseconds>(nanos(t));
          x.sm_percent = sm;
          s.push_back(x);
        }
        return process_dict(unwrap(measure::attribute_processes(
            interval, s, process_options(idle_power, idle_error, sample_period, edge_uncertainty, model_error))));
      },
      py::arg("start"), py::arg("end"), py::arg("energy"), py::arg("energy_error"), py::arg("samples"),
      py::arg("idle_power") = 0.0, py::arg("idle_error") = 0.0, py::arg("sample_period") = py::none(),
      py::arg("edge_uncertainty") = 0.0, py::arg("model_error") = 0.05,
      "Splits an interval's energy (seconds since the epoch, joules) among processes from samples "
      "(pid, timestamp s, sm %).");

  sub.def(
      "calibrate_idle",
      [](const std::vector<std::tuple<double, double, double, double>>& segments) {
        std::vector<measure::EnergySegment> s;
        for (const auto& [a, b, e, err] : segments) {
          measure::EnergySegment x;
          x.start = nanos(a);
          x.end = nanos(b);
          x.energy = erg::Joules(e);
          x.error_bound = erg::Joules(err);
          s.push_back(x);
        }
        auto idle = unwrap(measure::calibrate_idle(s));
        return std::make_pair(idle.power.value(), idle.error.value());
      },
      py::arg("segments"), "(power W, error W) from idle segments (start s, end s, energy J, error J).");

  py::class_<PyProcessMeter>(sub, "ProcessMeter")
      .def(
          py::init([](std::shared_ptr<erg::Gpu> gpu, double idle_power, double idle_error,
                      std::optional<double> sample_period, std::optional<double> edge_uncertainty, double model_error) {
            if (!gpu) raise_error({erg::ErrorCode::kInvalidArgument, "ProcessMeter needs a GPU"});
            // A reading's time may be the read's rather than the update's (drivers differ; the
            // capability cannot tell): by default the ends are known to a counter period.
            double edge = edge_uncertainty.value_or(
                secs(gpu->capabilities().energy_update_period.value_or(std::chrono::milliseconds(100))));
            return std::make_unique<PyProcessMeter>(
                gpu, process_options(idle_power, idle_error, sample_period, edge, model_error));
          }),
          py::arg("gpu"), py::arg("idle_power") = 0.0, py::arg("idle_error") = 0.0,
          py::arg("sample_period") = py::none(), py::arg("edge_uncertainty") = py::none(),
          py::arg("model_error") = 0.05)
      .def(
          "begin", [](PyProcessMeter& p) { unwrap(p.meter.begin()); }, py::call_guard<py::gil_scoped_release>())
      .def(
          "poll", [](PyProcessMeter& p) { unwrap(p.meter.poll()); }, py::call_guard<py::gil_scoped_release>())
      .def(
          "end", [](PyProcessMeter& p, double energy_error) { unwrap(p.meter.end(energy_error)); },
          py::arg("energy_error") = 0.03, py::call_guard<py::gil_scoped_release>())
      .def("attribute", [](PyProcessMeter& p) {
        erg::Result<measure::ProcessAttribution> r = erg::fail(erg::ErrorCode::kInternal, "");
        {
          py::gil_scoped_release release;
          r = p.meter.attribute();
        }
        return process_dict(unwrap(std::move(r)));
      });

  py::class_<GpuRequestMeter>(sub, "GpuRequestMeter")
      .def(py::init([](std::shared_ptr<erg::Gpu> gpu, std::optional<double> power_swing, std::string rule,
                       std::optional<double> idle_power, bool attribute_idle, double energy_error,
                       std::optional<double> unseen_share, bool power_timeline) {
             if (!gpu) raise_error({erg::ErrorCode::kInvalidArgument, "RequestMeter needs a GPU"});
             return std::make_unique<GpuRequestMeter>(std::move(gpu), power_swing, std::move(rule), idle_power,
                                                      attribute_idle, energy_error, unseen_share, power_timeline);
           }),
           py::arg("gpu"), py::arg("power_swing") = py::none(), py::arg("rule") = "time_in_batch",
           py::arg("idle_power") = py::none(), py::arg("attribute_idle") = true, py::arg("energy_error") = 0.03,
           py::arg("unseen_share") = py::none(), py::arg("power_timeline") = true)
      .def("begin", &GpuRequestMeter::begin, py::arg("id"), py::call_guard<py::gil_scoped_release>())
      .def("end", &GpuRequestMeter::end, py::arg("id"), py::arg("tokens") = 0.0,
           py::call_guard<py::gil_scoped_release>())
      .def("attribute", &GpuRequestMeter::attribute, py::arg("wait") = 1.0)
      .def_property_readonly("in_flight", &GpuRequestMeter::in_flight)
      .def_property_readonly("has_timeline", &GpuRequestMeter::has_timeline);

#if ERG_PYTHON_WITH_CLIENT
  sub.def(
      "from_daemon",
      [](const std::string& socket, std::vector<unsigned> gpu_ids, std::optional<std::int64_t> since_ms) {
        erg::Result<erg::client::DaemonAttribution> r = erg::fail(erg::ErrorCode::kInternal, "");
        {
          py::gil_scoped_release release;
          erg::client::Connection c(erg::client::Endpoint{socket});
          r = erg::client::get_attribution(c, gpu_ids, since_ms);
        }
        return daemon_dict(unwrap(std::move(r)));
      },
      py::arg("socket"), py::arg("gpu_ids") = std::vector<unsigned>{}, py::arg("since_ms") = py::none(),
      "ergd's GET /attribution over its Unix socket.");
#else
  sub.def(
      "from_daemon",
      [](const std::string&, std::vector<unsigned>, std::optional<std::int64_t>) -> py::dict {
        raise_error({erg::ErrorCode::kNotSupported, "this build of erg has no ergd client (ERG_BUILD_DAEMON=OFF)"});
      },
      py::arg("socket"), py::arg("gpu_ids") = std::vector<unsigned>{}, py::arg("since_ms") = py::none());
#endif
}
