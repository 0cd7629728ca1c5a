#include "erg/optimizers/profile/profile.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <utility>

#include "erg/measure/energy_monitor.hpp"

namespace erg::profile {
namespace {

const Clock& clock_of(const Environment& env) { return env.clock != nullptr ? *env.clock : SteadyClock::instance(); }

void log(const Environment& env, const std::string& line) {
  if (env.log) env.log(line);
}

std::string format(const char* fmt, auto... args) {
  char buf[256];
  std::snprintf(buf, sizeof buf, fmt, args...);
  return buf;
}

Result<double> reduce(const Environment& env, double value, ReduceOp op) {
  if (!env.all_reduce) return value;
  return env.all_reduce(value, op);
}

/// Cancels the trial's window unless it was ended: a target that throws, or an error, leaves no
/// window open behind it.
class WindowGuard {
 public:
  explicit WindowGuard(const Meter& meter) : meter_(meter) {}
  ~WindowGuard() {
    if (open_ && meter_.cancel_window) meter_.cancel_window();
  }
  WindowGuard(const WindowGuard&) = delete;
  WindowGuard& operator=(const WindowGuard&) = delete;
  void opened() { open_ = true; }
  void closed() { open_ = false; }

 private:
  const Meter& meter_;
  bool open_ = false;
};

Result<void> check_meter(const Meter& meter) {
  if (!meter.sync || !meter.begin_window || !meter.end_window || !meter.temperature)
    return fail(ErrorCode::kInvalidArgument, "a profiling Meter needs sync, begin_window, end_window and temperature");
  return ok();
}

Result<void> check_counts(int num_warmup_iterations, int num_calibration_iterations) {
  if (num_warmup_iterations < 0) return fail(ErrorCode::kInvalidArgument, "num_warmup_iterations must be ≥ 0");
  if (num_calibration_iterations < 1)
    return fail(ErrorCode::kInvalidArgument, "num_calibration_iterations must be ≥ 1");
  return ok();
}

struct TrialSpec {
  Seconds cooldown{0.0};
  Seconds measurement{0.0};
  int warmup_iterations = 0;
  Seconds iteration{0.0};
};

Result<TrialResult> run_trial(const Target& target, const Meter& meter, const TrialSpec& spec, const Environment& env) {
  const double ratio = spec.measurement.count() / spec.iteration.count();
  const auto iterations = static_cast<std::uint64_t>(std::max(1.0, std::ceil(ratio)));
  if (spec.cooldown.count() > 0.0) {
    const Clock& clock = clock_of(env);
    clock.sleep_until(clock.now() + std::chrono::duration_cast<std::chrono::nanoseconds>(spec.cooldown));
  }
  for (int i = 0; i < spec.warmup_iterations; ++i) target();
  if (auto r = meter.sync(); !r) return fail(r.error());
  auto before = meter.temperature();
  if (!before) return fail(before.error());

  WindowGuard guard(meter);
  if (auto r = meter.begin_window(); !r) return fail(r.error());
  guard.opened();
  for (std::uint64_t i = 0; i < iterations; ++i) target();
  auto window = meter.end_window();
  guard.closed();
  if (!window) return fail(window.error());
  auto after = meter.temperature();
  if (!after) return fail(after.error());

  auto energy = reduce(env, window->energy.value(), ReduceOp::kSum);
  if (!energy) return fail(energy.error());
  auto time = reduce(env, window->time.count(), ReduceOp::kMax);
  if (!time) return fail(time.error());
  auto t_before = reduce(env, *before, ReduceOp::kSum);
  if (!t_before) return fail(t_before.error());
  auto t_after = reduce(env, *after, ReduceOp::kSum);
  if (!t_after) return fail(t_after.error());
  auto world = reduce(env, 1.0, ReduceOp::kSum);  // the number of ranks
  if (!world) return fail(world.error());
  if (!(*world >= 1.0)) return fail(ErrorCode::kInvalidArgument, "all_reduce gave a world size below 1");

  const double n = static_cast<double>(iterations);
  return TrialResult{Joules(*energy / n), Seconds(*time / n), Joules(*energy),  Seconds(*time),
                     iterations,          *t_before / *world, *t_after / *world};
}

SweepResult summarize(Seconds measurement, Seconds cooldown, std::vector<TrialResult> trials, Joules threshold) {
  const double n = static_cast<double>(trials.size());
  double mean = 0, before = 0, after = 0, time = 0, energy = 0;
  for (const auto& t : trials) {
    mean += t.energy_per_iter.value();
    before += t.temperature_before;
    after += t.temperature_after;
    time += t.total_time.count();
    energy += t.total_energy.value();
  }
  mean /= n;
  double ss = 0;
  for (const auto& t : trials) ss += (t.energy_per_iter.value() - mean) * (t.energy_per_iter.value() - mean);
  const double std = trials.size() >= 2 ? std::sqrt(ss / (n - 1.0)) : 0.0;  // sample standard deviation
  return SweepResult{measurement, cooldown,  std::move(trials), Joules(mean),       Joules(std),
                     before / n,  after / n, Seconds(time / n), Joules(energy / n), std < threshold.value()};
}

Result<void> check_options(const SweepOptions& o) {
  if (o.num_trials < 1) return fail(ErrorCode::kInvalidArgument, "num_trials must be ≥ 1");
  if (o.num_warmup_trials < 0) return fail(ErrorCode::kInvalidArgument, "num_warmup_trials must be ≥ 0");
  if (auto r = check_counts(o.num_warmup_iterations, o.num_calibration_iterations); !r) return r;
  if (o.iteration_duration && !(o.iteration_duration->count() > 0.0))
    return fail(ErrorCode::kInvalidArgument, "iteration_duration must be > 0 s");
  return ok();
}

Result<void> check_durations(const std::vector<Seconds>& values, const char* what, bool zero_ok) {
  for (auto v : values)
    if (!(zero_ok ? v.count() >= 0.0 : v.count() > 0.0))
      return fail(ErrorCode::kInvalidArgument,
                  std::string(what) + (zero_ok ? " durations must be ≥ 0 s" : " durations must be > 0 s"));
  return ok();
}

enum class Swept { kMeasurement, kCooldown };

Result<SweepReport> sweep(const Target& target, const Meter& meter, std::vector<Seconds> values, Seconds fixed,
                          Swept swept, const SweepOptions& o, Seconds iteration, const Environment& env) {
  const bool cooldown_sweep = swept == Swept::kCooldown;
  const char* swept_name = cooldown_sweep ? "cooldown_duration" : "measurement_duration";
  if (o.num_warmup_trials > 0) {
    // Warm-up trials heat the GPU to its working state: no cooldown, no warm-up iterations, the
    // longest window of the sweep.
    const Seconds window = cooldown_sweep ? fixed : *std::max_element(values.begin(), values.end());
    log(env, format("Running %d warm-up trial(s)", o.num_warmup_trials));
    for (int i = 0; i < o.num_warmup_trials; ++i) {
      if (auto r = run_trial(target, meter, TrialSpec{Seconds(0.0), window, 0, iteration}, env); !r)
        return fail(r.error());
      log(env, format("Warm-up trial %d/%d done", i + 1, o.num_warmup_trials));
    }
  }
  SweepReport report;
  report.sweep_name = swept_name;
  report.fixed_name = cooldown_sweep ? "measurement_duration" : "cooldown_duration";
  report.fixed_value = fixed;
  for (auto value : values) {
    const Seconds cooldown = cooldown_sweep ? value : fixed;
    const Seconds measurement = cooldown_sweep ? fixed : value;
    log(env, format("Sweeping %s=%.1f s: %d trials", swept_name, value.count(), o.num_trials));
    std::vector<TrialResult> trials;
    for (int i = 0; i < o.num_trials; ++i) {
      auto t = run_trial(target, meter, TrialSpec{cooldown, measurement, o.num_warmup_iterations, iteration}, env);
      if (!t) return fail(t.error());
      trials.push_back(*t);
      log(env, format("Trial %d/%d done", i + 1, o.num_trials));
    }
    report.entries.push_back(summarize(measurement, cooldown, std::move(trials), o.trial_stddev_threshold));
  }
  report.sweep_values = std::move(values);
  log(env, to_string(report));
  return report;
}

Result<Seconds> iteration_of(const Target& target, const Meter& meter, const SweepOptions& o, const Environment& env) {
  if (o.iteration_duration) return *o.iteration_duration;
  return calibrate_iteration_duration(target, meter, o.num_warmup_iterations, o.num_calibration_iterations, env);
}

Result<SweepReport> profile_one(const Target& target, const Meter& meter, std::vector<Seconds> range, Seconds fixed,
                                Swept swept, const SweepOptions& options, const Environment& env) {
  if (auto r = check_meter(meter); !r) return fail(r.error());
  if (auto r = check_options(options); !r) return fail(r.error());
  if (range.empty()) range = default_search_range();
  const bool cooldown_sweep = swept == Swept::kCooldown;
  if (auto r = check_durations(range, cooldown_sweep ? "cooldown" : "measurement", cooldown_sweep); !r)
    return fail(r.error());
  if (auto r = check_durations({fixed}, cooldown_sweep ? "measurement" : "cooldown", !cooldown_sweep); !r)
    return fail(r.error());
  auto iteration = iteration_of(target, meter, options, env);
  if (!iteration) return fail(iteration.error());
  return sweep(target, meter, std::move(range), fixed, swept, options, *iteration, env);
}

}  // namespace

std::vector<Seconds> default_search_range() {
  std::vector<Seconds> out;
  for (int s = 1; s <= 10; ++s) out.emplace_back(s);
  return out;
}

std::string to_string(const SweepResult& r) {
  return format(
      "measurement=%.1f s  cooldown=%.1f s  mean=%.4f J  std=%.4f J  temp_before=%.1f °C  "
      "temp_after=%.1f °C  [%s]",
      r.measurement_duration.count(), r.cooldown_duration.count(), r.energy_mean.value(), r.energy_std.value(),
      r.avg_temperature_before, r.avg_temperature_after, r.is_valid ? "VALID" : "INVALID");
}

std::string to_string(const SweepReport& report) {
  std::string out = format("Sweep %s (fixed %s=%.1f s):", report.sweep_name.c_str(), report.fixed_name.c_str(),
                           report.fixed_value.count());
  const bool cooldown_sweep = report.sweep_name == "cooldown_duration";
  std::vector<std::string> prefixes;
  std::size_t width = 0;
  for (const auto& e : report.entries) {
    const double v = cooldown_sweep ? e.cooldown_duration.count() : e.measurement_duration.count();
    prefixes.push_back(format("%s=%.1f s", report.sweep_name.c_str(), v));
    width = std::max(width, prefixes.back().size());
  }
  for (std::size_t i = 0; i < report.entries.size(); ++i) {
    const auto& e = report.entries[i];
    out += "\n  " + prefixes[i] + std::string(width - prefixes[i].size(), ' ') +
           format("  mean=%.4f J  std=%.4f J  temp_before=%.1f °C  temp_after=%.1f °C  [%s]", e.energy_mean.value(),
                  e.energy_std.value(), e.avg_temperature_before, e.avg_temperature_after,
                  e.is_valid ? "VALID" : "INVALID");
  }
  return out;
}

Result<Seconds> calibrate_iteration_duration(const Target& target, const Meter& meter, int num_warmup_iterations,
                                             int num_calibration_iterations, const Environment& env) {
  if (auto r = check_meter(meter); !r) return fail(r.error());
  if (auto r = check_counts(num_warmup_iterations, num_calibration_iterations); !r) return fail(r.error());
  const Clock& clock = clock_of(env);
  for (int i = 0; i < num_warmup_iterations; ++i) target();
  if (auto r = meter.sync(); !r) return fail(r.error());
  const auto start = clock.now();
  for (int i = 0; i < num_calibration_iterations; ++i) target();
  if (auto r = meter.sync(); !r) return fail(r.error());
  const Seconds elapsed = clock.now() - start;
  auto slowest = reduce(env, elapsed.count() / num_calibration_iterations, ReduceOp::kMax);
  if (!slowest) return fail(slowest.error());
  if (!(*slowest > 0.0))
    return fail(ErrorCode::kUnavailable,
                "the calibration iterations took no measurable time; pass iteration_duration instead");
  log(env, format("Calibrated iteration duration: %.3f ms", *slowest * 1e3));
  return Seconds(*slowest);
}

Result<SweepReport> profile_measurement_duration(const Target& target, const Meter& meter,
                                                 std::vector<Seconds> measurement_duration_search_range,
                                                 Seconds cooldown_duration, const SweepOptions& options,
                                                 const Environment& env) {
  return profile_one(target, meter, std::move(measurement_duration_search_range), cooldown_duration,
                     Swept::kMeasurement, options, env);
}

Result<SweepReport> profile_cooldown_duration(const Target& target, const Meter& meter,
                                              std::vector<Seconds> cooldown_duration_search_range,
                                              Seconds measurement_duration, const SweepOptions& options,
                                              const Environment& env) {
  return profile_one(target, meter, std::move(cooldown_duration_search_range), measurement_duration, Swept::kCooldown,
                     options, env);
}

Result<std::pair<SweepReport, SweepReport>> profile_parameters(const Target& target, const Meter& meter,
                                                               std::vector<Seconds> measurement_duration_search_range,
                                                               std::vector<Seconds> cooldown_duration_search_range,
                                                               const SweepOptions& options, const Environment& env) {
  if (auto r = check_meter(meter); !r) return fail(r.error());
  SweepOptions o = options;
  o.iteration_duration.reset();
  if (auto r = check_options(o); !r) return fail(r.error());
  auto m_range =
      measurement_duration_search_range.empty() ? default_search_range() : std::move(measurement_duration_search_range);
  auto c_range =
      cooldown_duration_search_range.empty() ? default_search_range() : std::move(cooldown_duration_search_range);
  if (auto r = check_durations(m_range, "measurement", false); !r) return fail(r.error());
  if (auto r = check_durations(c_range, "cooldown", true); !r) return fail(r.error());
  auto iteration =
      calibrate_iteration_duration(target, meter, o.num_warmup_iterations, o.num_calibration_iterations, env);
  if (!iteration) return fail(iteration.error());
  o.iteration_duration = *iteration;
  const Seconds longest_cooldown = *std::max_element(c_range.begin(), c_range.end());
  const Seconds longest_window = *std::max_element(m_range.begin(), m_range.end());
  auto measurement = profile_measurement_duration(target, meter, std::move(m_range), longest_cooldown, o, env);
  if (!measurement) return fail(measurement.error());
  o.num_warmup_trials = 0;  // the GPU is warm from the first sweep
  auto cooldown = profile_cooldown_duration(target, meter, std::move(c_range), longest_window, o, env);
  if (!cooldown) return fail(cooldown.error());
  return std::pair{std::move(*measurement), std::move(*cooldown)};
}

Result<TrialResult> measure(const Target& target, const Meter& meter, Seconds measurement_duration,
                            Seconds cooldown_duration, const MeasureOptions& options, const Environment& env) {
  if (auto r = check_meter(meter); !r) return fail(r.error());
  if (options.warmup_settle_duration && options.warmup_settle_duration->count() < 0.0)
    return fail(ErrorCode::kInvalidArgument, "warmup_settle_duration must be non-negative");
  if (!(measurement_duration.count() > 0.0))
    return fail(ErrorCode::kInvalidArgument, "measurement_duration must be > 0 s");
  if (!(cooldown_duration.count() >= 0.0)) return fail(ErrorCode::kInvalidArgument, "cooldown_duration must be ≥ 0 s");
  auto iteration = calibrate_iteration_duration(target, meter, options.num_warmup_iterations,
                                                options.num_calibration_iterations, env);
  if (!iteration) return fail(iteration.error());
  int warmup = options.num_warmup_iterations;
  if (options.warmup_settle_duration)
    warmup = static_cast<int>(std::max(1.0, std::ceil(options.warmup_settle_duration->count() / iteration->count())));
  return run_trial(target, meter, TrialSpec{cooldown_duration, measurement_duration, warmup, *iteration}, env);
}

// --- a Meter over an EnergyMonitor ---------------------------------------------------------------

Meter monitor_meter(measure::EnergyMonitor& monitor, std::vector<std::shared_ptr<Gpu>> gpus, std::string window_name) {
  auto name = std::make_shared<const std::string>(std::move(window_name));
  auto sync_name = std::make_shared<const std::string>(*name + ".sync");
  auto devices = std::make_shared<const std::vector<std::shared_ptr<Gpu>>>(std::move(gpus));
  Meter m;
  // EnergyMonitor synchronizes when a window edge asks it to: a window cancelled with sync is a
  // synchronization and nothing else.
  m.sync = [&monitor, sync_name]() -> Result<void> {
    if (auto r = monitor.begin_window(*sync_name, /*sync=*/false, /*restart=*/true); !r) return r;
    return monitor.cancel_window(*sync_name, /*sync=*/true);
  };
  m.begin_window = [&monitor, name] { return monitor.begin_window(*name, /*sync=*/false); };
  m.end_window = [&monitor, name]() -> Result<WindowReading> {
    auto r = monitor.end_window(*name, /*sync=*/true);
    if (!r) return fail(r.error());
    auto missing = r->missing_devices();
    for (const auto& d : missing)
      if (d.rfind("gpu", 0) == 0)
        return fail(ErrorCode::kUnavailable, "the energy of " + d + " over the trial's window is unknown");
    return WindowReading{r->time, r->gpu_energy()};
  };
  m.cancel_window = [&monitor, name] { (void)monitor.cancel_window(*name); };
  m.temperature = [&monitor, devices]() -> Result<double> {
    const auto& ids = monitor.gpu_indices();
    if (ids.empty()) return fail(ErrorCode::kInvalidArgument, "the monitor measures no GPU");
    double sum = 0;
    for (unsigned id : ids) {
      if (id >= devices->size()) return fail(ErrorCode::kNotFound, "GPU " + std::to_string(id) + " is not in the list");
      auto c = (*devices)[id]->temperature();
      if (!c) return fail(c.error());
      sum += *c;
    }
    return sum / static_cast<double>(ids.size());
  };
  return m;
}

}  // namespace erg::profile
