#include "erg/optimizers/power_limit/optimizer.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

#include "erg/measure/energy_monitor.hpp"

namespace erg::power_limit {
namespace {

constexpr const char* kNoPermission =
    "SYS_ADMIN capability is required to modify GPU power limits. See docs/power-limit-optimizer.md (privileges): "
    "run as root, with CAP_SYS_ADMIN (--cap-add SYS_ADMIN in a container), or through ergd (ERG_DAEMON_SOCK).";

long long watts_floor(MilliWatts limit) { return static_cast<long long>(std::floor(limit.value() / 1000.0)); }

class MonitorWindows final : public ProfileWindows {
 public:
  explicit MonitorWindows(measure::EnergyMonitor& monitor) : monitor_(monitor) {}
  Result<void> begin_window(const std::string& name) override { return monitor_.begin_window(name); }
  Result<WindowFigures> end_window(const std::string& name) override {
    auto m = monitor_.end_window(name);
    if (!m) return fail(m.error());
    WindowFigures f{Joules(0.0), m->time};
    for (const auto& g : m->gpus) {
      if (!g.energy)
        return fail(g.error ? *g.error
                            : Error{ErrorCode::kInternal, "GPU " + std::to_string(g.index) + ": energy unknown"});
      f.energy += *g.energy;
    }
    return f;
  }
  Result<void> cancel_window(const std::string& name) override { return monitor_.cancel_window(name); }

 private:
  measure::EnergyMonitor& monitor_;
};

}  // namespace

std::shared_ptr<ProfileWindows> monitor_windows(measure::EnergyMonitor& monitor) {
  return std::make_shared<MonitorWindows>(monitor);
}

std::string_view state_name(const State& state) {
  static constexpr std::string_view kNames[] = {"Ready", "Warmup", "Profiling", "Done"};
  return kNames[state.index()];
}

struct PowerLimitOptimizer::Impl {
  std::vector<std::shared_ptr<Gpu>> gpus;
  std::shared_ptr<ProfileWindows> windows;
  OptimizerOptions options;
  std::vector<MilliWatts> limits;
  std::vector<PowerLimitMeasurement> measurements;
  State state = Ready{};
  std::optional<MilliWatts> current;
  std::vector<MilliWatts> set_history;
  std::unique_ptr<RestoreGuard> guard;
  bool restored = false;

  void log(const std::string& line) const {
    if (options.log) options.log(line);
  }

  /// Every GPU to `limit`, unless it is the limit the optimizer set last.
  Result<void> set_limit(MilliWatts limit) {
    log("Setting power limit to " + std::to_string(watts_floor(limit)) + " W.");
    if (restored) return fail(ErrorCode::kInvalidArgument, "the optimizer has restored the default limits");
    if (current && *current == limit) return ok();
    for (auto& g : gpus)
      if (auto r = g->set_power_limit(limit); !r) {
        if (r.error().code == ErrorCode::kNoPermission) return fail(ErrorCode::kNoPermission, kNoPermission);
        return r;
      }
    current = limit;
    set_history.push_back(limit);
    return ok();
  }

  Result<MilliWatts> optimum() const {
    auto w = options.selector->select(measurements);
    if (!w) return fail(w.error());
    const bool measured = std::any_of(measurements.begin(), measurements.end(),
                                      [&](const PowerLimitMeasurement& m) { return m.power_limit == *w; });
    if (!measured)
      return fail(ErrorCode::kInvalidArgument, "the selector '" + options.selector->describe() + "' picked " +
                                                   std::to_string(w->value()) + " W, which was not measured");
    // Zeus keeps whole watts; clamp into the GPUs' range (a limit of fractional watts floors).
    const MilliWatts mw = std::clamp(MilliWatts(*w), limits.back(), limits.front());
    log("Optimal power limit is " + std::to_string(watts_floor(mw)) + " W.");
    return mw;
  }
};

std::string PowerLimitOptimizer::window_name(MilliWatts limit) {
  return "__GlobalPowerLimitOptimizer_" + std::to_string(watts_floor(limit));
}

Result<std::unique_ptr<PowerLimitOptimizer>> PowerLimitOptimizer::create(std::vector<std::shared_ptr<Gpu>> gpus,
                                                                         std::shared_ptr<ProfileWindows> windows,
                                                                         OptimizerOptions options) {
  if (options.warmup_steps < 1) return fail(ErrorCode::kInvalidArgument, "warmup_steps must be positive.");
  if (options.profile_steps < 1) return fail(ErrorCode::kInvalidArgument, "profile_steps must be positive.");
  if (!(options.pl_step.value() > 0)) return fail(ErrorCode::kInvalidArgument, "pl_step must be positive.");
  const double step_mw = std::round(MilliWatts(options.pl_step).value());
  if (step_mw < 1) return fail(ErrorCode::kInvalidArgument, "pl_step must be at least 1 mW.");
  if (gpus.empty()) return fail(ErrorCode::kInvalidArgument, "the power-limit optimizer needs at least one GPU");
  if (!windows) return fail(ErrorCode::kInvalidArgument, "the power-limit optimizer needs measurement windows");
  if (!options.selector) {
    auto s = zeus_cost_selector(0.5, static_cast<unsigned>(gpus.size()));
    if (!s) return fail(s.error());
    options.selector = *s;
  }

  // Homogeneous GPUs: one set of limits for all.
  std::optional<PowerLimitConstraints> range;
  for (auto& g : gpus) {
    auto c = g->power_limit_constraints();
    if (!c) return fail(c.error());
    if (range && (range->min != c->min || range->max != c->max))
      return fail(ErrorCode::kInvalidArgument, "Power limits ranges are not uniform across GPUs.");
    range = *c;
  }
  auto impl = std::make_unique<Impl>();
  for (double mw = range->max.value(); mw >= range->min.value(); mw -= step_mw) impl->limits.emplace_back(mw);

  // Persistence mode keeps the limits set while no process holds the GPU.
  for (auto& g : gpus)
    if (auto r = g->set_persistence_mode(true); !r) {
      if (r.error().code == ErrorCode::kNoPermission) return fail(ErrorCode::kNoPermission, kNoPermission);
      return fail(r.error());
    }

  impl->gpus = gpus;
  impl->windows = std::move(windows);
  impl->options = std::move(options);
  // From here on the default limits come back however the optimizer ends.
  impl->guard = std::make_unique<RestoreGuard>(gpus, impl->options.restore_on_signals);

  const auto& path = impl->options.profile_path;
  std::error_code ec;
  if (path && std::filesystem::exists(*path, ec)) {
    auto loaded = load_profile(*path);
    if (!loaded) return fail(loaded.error());
    impl->measurements = std::move(*loaded);
    impl->log("Loaded previous profiling results from '" + path->string() + "'.");
    auto best = impl->optimum();
    if (!best) return fail(best.error());
    impl->state = Done{*best};
    if (auto r = impl->set_limit(*best); !r) return fail(r.error());
  } else {
    impl->log(path ? "JIT Profiling enabled. Profile will be saved to '" + path->string() + "'."
                   : std::string("JIT profiling enabled."));
    impl->log("Will wait " + std::to_string(impl->options.wait_steps) + " step(s) before profiling.");
    impl->state = Ready{impl->limits.front(), impl->options.wait_steps + 1};
    impl->log("Set power limit to the maximum before starting.");
    if (auto r = impl->set_limit(impl->limits.front()); !r) return fail(r.error());
  }
  return std::unique_ptr<PowerLimitOptimizer>(new PowerLimitOptimizer(std::move(impl)));
}

PowerLimitOptimizer::PowerLimitOptimizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
PowerLimitOptimizer::~PowerLimitOptimizer() = default;  // the guard restores

Result<void> PowerLimitOptimizer::on_step_begin() {
  Impl& s = *impl_;
  if (auto* ready = std::get_if<Ready>(&s.state)) {
    if (--ready->steps > 0) return ok();
    const MilliWatts next = ready->next_power_limit;
    s.log("Starting warmup for power limit " + std::to_string(watts_floor(next)) + " W.");
    if (auto r = s.set_limit(next); !r) {
      ready->steps = 1;  // try again at the next step
      return r;
    }
    s.state = Warmup{next, s.options.warmup_steps};
  } else if (auto* warmup = std::get_if<Warmup>(&s.state)) {
    if (--warmup->steps > 0) return ok();
    const MilliWatts limit = warmup->current_power_limit;
    s.log("Starting actual profiling for power limit " + std::to_string(watts_floor(limit)) + " W.");
    if (auto r = s.windows->begin_window(window_name(limit)); !r) {
      warmup->steps = 1;
      return r;
    }
    s.state = Profiling{limit, s.options.profile_steps};
  } else if (auto* profiling = std::get_if<Profiling>(&s.state)) {
    if (--profiling->steps > 0) return ok();
    const MilliWatts limit = profiling->current_power_limit;
    auto local = s.windows->end_window(window_name(limit));
    if (!local) {  // the window is gone: profile this limit again from its warmup
      s.state = Ready{limit, 1};
      return fail(local.error());
    }
    s.log("Finished profiling for power limit " + std::to_string(watts_floor(limit)) + " W.");
    WindowFigures all = *local;
    if (s.options.reduce) {
      auto r = s.options.reduce(*local);
      if (!r) {
        s.state = Ready{limit, 1};
        return fail(r.error());
      }
      all = *r;
    }
    s.measurements.push_back(
        PowerLimitMeasurement{Watts(static_cast<double>(watts_floor(limit))), all.energy, all.time});
    const auto it = std::find(s.limits.begin(), s.limits.end(), limit);
    if (it == s.limits.end() || std::next(it) == s.limits.end()) {
      auto best = s.optimum();
      if (!best) return fail(best.error());
      s.state = Done{*best};
      if (auto r = s.set_limit(*best); !r) return r;
      if (s.options.profile_path) {
        if (auto r = save_profile(*s.options.profile_path, s.measurements); !r) return r;
        s.log("JIT profiling results saved to '" + s.options.profile_path->string() + "'.");
      }
    } else {
      const MilliWatts next = *std::next(it);
      s.log("Starting warmup for power limit " + std::to_string(watts_floor(next)) + " W.");
      s.state = Warmup{next, s.options.warmup_steps};
      if (auto r = s.set_limit(next); !r) {
        s.state = Ready{next, 1};
        return r;
      }
    }
  }
  return ok();
}

Result<void> PowerLimitOptimizer::on_epoch_end() {
  Impl& s = *impl_;
  MilliWatts interrupted;
  if (const auto* w = std::get_if<Warmup>(&s.state)) {
    interrupted = w->current_power_limit;
    s.log("Warmup phase for " + std::to_string(watts_floor(interrupted)) +
          " W interrupted by the end of a training epoch.");
  } else if (const auto* p = std::get_if<Profiling>(&s.state)) {
    interrupted = p->current_power_limit;
    s.log("Profiling phase for " + std::to_string(watts_floor(interrupted)) +
          " W interrupted by the end of a training epoch.");
    if (auto r = s.windows->cancel_window(window_name(interrupted)); !r && r.error().code != ErrorCode::kNotFound)
      return r;
  } else {
    return ok();
  }
  s.state = Ready{interrupted, 1};
  return s.set_limit(s.limits.front());
}

const State& PowerLimitOptimizer::state() const { return impl_->state; }
const std::vector<MilliWatts>& PowerLimitOptimizer::power_limits() const { return impl_->limits; }
const std::vector<PowerLimitMeasurement>& PowerLimitOptimizer::measurements() const { return impl_->measurements; }
std::optional<MilliWatts> PowerLimitOptimizer::optimal_power_limit() const {
  if (const auto* d = std::get_if<Done>(&impl_->state)) return d->optimal_power_limit;
  return std::nullopt;
}
std::optional<MilliWatts> PowerLimitOptimizer::current_power_limit() const { return impl_->current; }
const std::vector<MilliWatts>& PowerLimitOptimizer::limits_set() const { return impl_->set_history; }
const OptimumSelector& PowerLimitOptimizer::selector() const { return *impl_->options.selector; }

Result<void> PowerLimitOptimizer::restore() {
  impl_->restored = true;
  impl_->current.reset();
  return impl_->guard->restore();
}

}  // namespace erg::power_limit
