#include "erg/measure/process_attribution.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <utility>

namespace erg::measure {
namespace {

using std::chrono::nanoseconds;

double seconds(nanoseconds d) { return static_cast<double>(d.count()) * 1e-9; }

/// Whole-percent rounding: a reported sm % is within half a percent of the true busy share.
constexpr double kQuantum = 0.005;

struct PerProcess {
  double busy = 0.0;      // U_i, s
  double overlap = 0.0;   // Σ overlaps, s
  double edge_start = 0;  // largest sm share of its samples near the start
  double edge_end = 0;    // ... near the end
  std::size_t samples = 0;
};

}  // namespace

Joules ProcessAttribution::attributed() const {
  double sum = 0.0;
  for (const auto& p : processes) sum += p.energy.value();
  return Joules(sum);
}

Result<IdleModel> calibrate_idle(std::span<const EnergySegment> idle_segments) {
  if (idle_segments.empty()) return fail(ErrorCode::kInvalidArgument, "calibrate_idle: no idle segments");
  double energy = 0.0, error = 0.0, time = 0.0;
  double lo = 0.0, hi = 0.0;
  bool first = true;
  for (const auto& s : idle_segments) {
    if (s.end <= s.start) return fail(ErrorCode::kInvalidArgument, "calibrate_idle: a segment ends before it starts");
    if (s.energy.value() < 0.0 || s.error_bound.value() < 0.0)
      return fail(ErrorCode::kInvalidArgument, "calibrate_idle: negative energy or error bound");
    const double d = seconds(s.end - s.start);
    const double p = s.energy.value() / d;
    energy += s.energy.value();
    error += s.error_bound.value();
    time += d;
    lo = first ? p : std::min(lo, p);
    hi = first ? p : std::max(hi, p);
    first = false;
  }
  return IdleModel{Watts(energy / time), Watts(error / time + 0.5 * (hi - lo)), Seconds(time)};
}

ProcessAttribution not_attributable(const EnergySegment& interval, std::string reason) {
  ProcessAttribution a;
  a.attributable = false;
  a.reason = std::move(reason);
  a.start = interval.start;
  a.end = interval.end;
  a.measured = interval.energy;
  a.measured_bound = interval.error_bound;
  return a;
}

std::optional<nanoseconds> infer_sample_period(std::span<const ProcessUtilizationSample> samples) {
  std::map<std::uint32_t, std::vector<std::int64_t>> by_pid;
  for (const auto& s : samples) by_pid[s.pid].push_back(s.timestamp.count());
  std::vector<std::int64_t> gaps;
  for (auto& [pid, ts] : by_pid) {
    std::sort(ts.begin(), ts.end());
    for (std::size_t k = 1; k < ts.size(); ++k)
      if (ts[k] > ts[k - 1]) gaps.push_back(ts[k] - ts[k - 1]);
  }
  if (gaps.size() < 2) return std::nullopt;
  std::nth_element(gaps.begin(), gaps.begin() + static_cast<std::ptrdiff_t>(gaps.size() / 2), gaps.end());
  // A process idle for a period leaves no sample, so gaps are multiples of the period: the median
  // of a busy process's gaps is the period itself.
  return std::chrono::duration_cast<nanoseconds>(std::chrono::microseconds(gaps[gaps.size() / 2]));
}

Result<ProcessAttribution> attribute_processes(const EnergySegment& interval,
                                               std::span<const ProcessUtilizationSample> samples,
                                               const ProcessAttributionOptions& options) {
  if (interval.end <= interval.start)
    return fail(ErrorCode::kInvalidArgument, "attribute_processes: the interval ends before it starts");
  if (interval.error_bound.value() < 0.0)
    return fail(ErrorCode::kInvalidArgument, "attribute_processes: negative energy error bound");
  if (options.sample_period.count() <= 0)
    return fail(ErrorCode::kInvalidArgument, "attribute_processes: the sample period must be > 0");
  if (options.edge_uncertainty.count() < 0)
    return fail(ErrorCode::kInvalidArgument, "attribute_processes: negative edge uncertainty");
  if (!(options.model_error >= 0.0 && options.model_error < 1.0))
    return fail(ErrorCode::kInvalidArgument, "attribute_processes: model_error must be within [0, 1)");
  if (options.idle.power.value() < 0.0 || options.idle.error.value() < 0.0)
    return fail(ErrorCode::kInvalidArgument, "attribute_processes: negative idle power or error");

  ProcessAttribution a;
  a.start = interval.start;
  a.end = interval.end;
  a.measured = interval.energy;
  a.measured_bound = interval.error_bound;
  const double t = seconds(interval.end - interval.start);
  const double e = interval.energy.value();
  const double e_err = interval.error_bound.value();

  // Idle: the calibrated idle power over the interval, never more than was measured.
  const double idle = std::clamp(options.idle.power.value() * t, 0.0, std::max(e, 0.0));
  const double idle_err = options.idle.error.value() * t;
  a.idle = Joules(idle);
  a.idle_bound = Joules(idle_err + (e > 0.0 ? e_err * idle / e : 0.0));
  const double active = e - idle;

  // Each sample covers (timestamp − P, timestamp]; its busy time inside the interval.
  const nanoseconds period = options.sample_period;
  const nanoseconds delta = options.edge_uncertainty;
  const double p_s = seconds(period), delta_s = seconds(delta);
  nanoseconds latest{std::numeric_limits<std::int64_t>::min()};
  for (const auto& s : samples) {
    if (s.sm_percent > 100)
      return fail(ErrorCode::kInvalidArgument, "attribute_processes: a sample of pid " + std::to_string(s.pid) +
                                                   " reports " + std::to_string(s.sm_percent) + " % (over 100)");
    latest = std::max(latest, std::chrono::duration_cast<nanoseconds>(s.timestamp));
  }
  // The driver has sampled past the end (else the tail after its latest sample is extrapolated).
  const bool any = !samples.empty();
  const bool past_end = any && latest >= interval.end;
  const nanoseconds tail =
      !any || past_end ? nanoseconds(0)
                       : std::min(interval.end - std::max(latest, interval.start), interval.end - interval.start);
  std::map<std::uint32_t, PerProcess> per;
  for (const auto& s : samples) {
    const nanoseconds hi = std::chrono::duration_cast<nanoseconds>(s.timestamp);
    const nanoseconds lo = hi - period;
    const double frac = s.sm_percent / 100.0;
    // Near an end: the sample straddles it, or may (the end is known to edge_uncertainty).
    const bool near_start = hi > interval.start - delta && hi <= interval.start + period + delta;
    const bool near_end = hi > interval.end - delta && hi <= interval.end + period + delta;
    // The latest round of samples stands in for the tail the driver has not sampled yet.
    const bool last_round = tail.count() > 0 && hi > latest - period / 2;
    const nanoseconds o_lo = std::max(lo, interval.start), o_hi = std::min(hi, interval.end);
    const double overlap = o_hi > o_lo ? seconds(o_hi - o_lo) : 0.0;
    if (overlap <= 0.0 && !near_start && !near_end && !last_round) continue;
    PerProcess& p = per[s.pid];
    if (near_start) p.edge_start = std::max(p.edge_start, frac);
    if (near_end || last_round) p.edge_end = std::max(p.edge_end, frac);
    if (last_round && tail.count() > 0) {
      p.busy += frac * seconds(tail);
      p.overlap += seconds(tail);
    }
    if (overlap > 0.0) {
      p.busy += frac * overlap;
      p.overlap += overlap;
      ++p.samples;
    }
  }

  // δU_i: rounding, and at each end a straddling sample spread evenly over its period (off by at
  // most β(1 − β)·P for a busy share β), the end's own uncertainty (β·δ), and an extrapolated
  // tail (off by at most max(β, 1 − β) per second of it).
  auto edge = [&](double beta, double tail_s) {
    return beta * (1.0 - beta) * p_s + beta * delta_s + std::max(beta, 1.0 - beta) * tail_s;
  };
  double total = 0.0, total_err = 0.0;
  std::map<std::uint32_t, double> du;
  for (const auto& [pid, p] : per) {
    const double d = kQuantum * p.overlap + edge(p.edge_start, 0.0) + edge(p.edge_end, seconds(tail));
    du[pid] = d;
    total += p.busy;
    total_err += d;
  }

  const double shared_err = e_err + idle_err;  // what moves every process in proportion
  double sum = 0.0;
  if (total > 0.0) {
    const double denom = total - total_err;
    for (const auto& [pid, p] : per) {
      if (p.busy <= 0.0 && du[pid] <= 0.0) continue;
      ProcessEnergy pe;
      pe.pid = pid;
      pe.share = p.busy / total;
      pe.energy = Joules(active * pe.share);
      pe.busy = Seconds(p.busy);
      pe.samples = p.samples;
      const double dw = denom > 0.0 ? (du[pid] + pe.share * total_err) / denom : 1.0;
      pe.bound = Joules(std::abs(active) * std::min(1.0, dw) + pe.share * shared_err +
                        options.model_error * std::abs(pe.energy.value()));
      sum += pe.energy.value();
      a.processes.push_back(pe);
    }
  }
  // The remainder, explicitly: the active energy when no process was seen busy; else rounding.
  a.unattributed = Joules(e - idle - sum);
  a.unattributed_bound = total > 0.0 ? Joules(std::abs(a.unattributed.value())) : Joules(e_err + idle_err);
  return a;
}

// --- ProcessMeter ---------------------------------------------------------------------------------

ProcessMeter::ProcessMeter(Gpu& gpu, const Clock& clock, ProcessAttributionOptions options)
    : gpu_(gpu), clock_(clock), options_(std::move(options)) {}

Result<ProcessMeter::Reading> ProcessMeter::read() {
  auto r = gpu_.energy_reading();
  if (!r) return fail(r.error());
  Reading out;
  out.joules = r->energy.value() / 1000.0;
  out.wall = r->updated_at.value_or(clock_.wall_now());
  return out;
}

Result<void> ProcessMeter::begin() {
  auto r = read();
  if (!r) return fail(r.error());
  start_ = *r;
  interval_.reset();
  samples_.clear();
  not_supported_.reset();
  // Samples up to the start cover only time before it.
  last_seen_ = std::chrono::duration_cast<std::chrono::microseconds>(r->wall);
  return ok();
}

Result<void> ProcessMeter::poll() {
  auto got = gpu_.process_utilization(last_seen_);
  if (!got) {
    if (got.error().code == ErrorCode::kNotSupported) {
      not_supported_ = got.error().message;
      return ok();
    }
    return fail(got.error());
  }
  for (const auto& s : *got) {
    last_seen_ = std::max(last_seen_, s.timestamp);
    samples_.push_back(s);
  }
  return ok();
}

Result<void> ProcessMeter::end(double energy_error) {
  if (!start_) return fail(ErrorCode::kInvalidArgument, "ProcessMeter::end without begin");
  if (!(energy_error >= 0.0)) return fail(ErrorCode::kInvalidArgument, "ProcessMeter::end: negative energy error");
  if (auto p = poll(); !p) return fail(p.error());
  auto r = read();
  if (!r) return fail(r.error());
  EnergySegment interval;
  interval.start = start_->wall;
  interval.end = r->wall;
  interval.energy = Joules(r->joules - start_->joules);
  // The counter's resolution (1 mJ at each end) besides the sensor's accuracy.
  interval.error_bound = Joules(energy_error * std::abs(interval.energy.value()) + 0.002);
  if (interval.end <= interval.start)
    return fail(ErrorCode::kInvalidArgument, "ProcessMeter::end: the counter has not updated since begin");
  interval_ = interval;
  start_.reset();
  return ok();
}

Result<ProcessAttribution> ProcessMeter::attribute() {
  if (!interval_) return fail(ErrorCode::kInvalidArgument, "ProcessMeter::attribute without begin and end");
  if (auto p = poll(); !p) return fail(p.error());
  if (not_supported_) return not_attributable(*interval_, *not_supported_);
  return attribute_processes(*interval_, samples_, options_);
}

Result<ProcessAttribution> measure_processes(Gpu& gpu, const Clock& clock, std::chrono::nanoseconds duration,
                                             const ProcessAttributionOptions& options, double energy_error,
                                             std::chrono::nanoseconds poll_period) {
  if (duration.count() <= 0 || poll_period.count() <= 0)
    return fail(ErrorCode::kInvalidArgument, "measure_processes: the duration and the poll period must be > 0");
  ProcessMeter meter(gpu, clock, options);
  if (auto r = meter.begin(); !r) return fail(r.error());
  const nanoseconds start = clock.now();
  for (nanoseconds t = start + poll_period; t < start + duration; t += poll_period) {
    clock.sleep_until(t);
    if (auto r = meter.poll(); !r) return fail(r.error());
  }
  clock.sleep_until(start + duration);
  if (auto r = meter.end(energy_error); !r) return fail(r.error());
  // The driver samples past the end within a sample period (jitter aside).
  clock.sleep_until(clock.now() + options.sample_period + options.sample_period / 4);
  return meter.attribute();
}

namespace {

Result<std::vector<GpuProcess>> busy_processes(Gpu& gpu) {
  if (!gpu.capabilities().running_processes) return std::vector<GpuProcess>{};
  return gpu.running_processes();
}

Error not_idle(const std::vector<GpuProcess>& procs) {
  std::string pids;
  for (const auto& p : procs) pids += (pids.empty() ? "" : ", ") + std::to_string(p.pid);
  return Error{ErrorCode::kUnavailable, "calibrate_idle: the GPU is not idle: it runs process(es) " + pids};
}

}  // namespace

Result<IdleModel> calibrate_idle(Gpu& gpu, const Clock& clock, std::chrono::nanoseconds duration, double energy_error) {
  if (duration.count() <= 0) return fail(ErrorCode::kInvalidArgument, "calibrate_idle: the duration must be > 0");
  if (!(energy_error >= 0.0)) return fail(ErrorCode::kInvalidArgument, "calibrate_idle: negative energy error");
  auto before = busy_processes(gpu);
  if (!before) return fail(before.error());
  if (!before->empty()) return fail(not_idle(*before));
  auto r0 = gpu.energy_reading();
  if (!r0) return fail(r0.error());
  const nanoseconds w0 = r0->updated_at.value_or(clock.wall_now());
  clock.sleep_until(clock.now() + duration);
  auto r1 = gpu.energy_reading();
  if (!r1) return fail(r1.error());
  const nanoseconds w1 = r1->updated_at.value_or(clock.wall_now());
  auto after = busy_processes(gpu);
  if (!after) return fail(after.error());
  if (!after->empty()) return fail(not_idle(*after));
  if (w1 <= w0) return fail(ErrorCode::kInvalidArgument, "calibrate_idle: the counter did not update; measure longer");
  const double joules = (r1->energy - r0->energy).value() / 1000.0;
  const EnergySegment seg{w0, w1, Joules(joules), Joules(energy_error * std::abs(joules) + 0.002), Watts(0.0)};
  return calibrate_idle(std::span<const EnergySegment>(&seg, 1));
}

}  // namespace erg::measure
