#pragma once
/// The power-limit optimizer (Zeus's GlobalPowerLimitOptimizer, reference/zeus.md §4): during
/// training it profiles each power limit from the maximum down to the minimum in `pl_step`
/// strides — a warmup of `warmup_steps` steps, then a measurement window of `profile_steps`
/// steps — picks the optimum with an OptimumSelector and keeps the GPUs there.
///
/// States: Ready(next limit, steps) → Warmup(limit, steps) → Profiling(limit, steps) → … → Done.
/// Ready lasts wait_steps + 1 step beginnings, then the next limit is set and Warmup starts;
/// Warmup's last step beginning opens the window; Profiling's last one closes it, records the
/// measurement, and sets the next limit (→ Warmup) or the optimum (→ Done). An epoch end during
/// Warmup or Profiling cancels the window, sets the maximum limit and goes back to Ready(the
/// interrupted limit, 1 step), so that limit is profiled again from its warmup. A saved profile
/// (profile_path that exists) is loaded instead: the optimizer starts in Done at its optimum.
///
/// Devices go through core's Gpu interface; windows through ProfileWindows (an
/// erg::measure::EnergyMonitor, or the Python monitor). Not thread-safe: drive it from one
/// thread (the training loop).

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "erg/core/device.hpp"
#include "erg/core/result.hpp"
#include "erg/core/units.hpp"
#include "erg/optimizers/power_limit/restore.hpp"
#include "erg/optimizers/power_limit/selector.hpp"

namespace erg::measure {
class EnergyMonitor;
}

namespace erg::power_limit {

/// What one profiling window measured on this process's GPUs.
struct WindowFigures {
  Joules energy;  ///< summed over the GPUs
  Seconds time{0.0};
};

/// Named measurement windows the optimizer profiles with.
class ProfileWindows {
 public:
  virtual ~ProfileWindows() = default;
  virtual Result<void> begin_window(const std::string& name) = 0;
  virtual Result<WindowFigures> end_window(const std::string& name) = 0;
  virtual Result<void> cancel_window(const std::string& name) = 0;
};

/// Windows of an EnergyMonitor (which must outlive the result); the energy is the sum over the
/// monitor's GPUs. A GPU whose energy is unknown makes end_window fail (its error), since a
/// profile with a missing GPU would pick the wrong limit.
std::shared_ptr<ProfileWindows> monitor_windows(measure::EnergyMonitor& monitor);

struct Ready {
  MilliWatts next_power_limit;
  unsigned steps = 0;  ///< step beginnings left before next_power_limit is set
};
struct Warmup {
  MilliWatts current_power_limit;
  unsigned steps = 0;  ///< step beginnings left before the window opens
};
struct Profiling {
  MilliWatts current_power_limit;
  unsigned steps = 0;  ///< step beginnings left before the window closes
};
struct Done {
  MilliWatts optimal_power_limit;
};
using State = std::variant<Ready, Warmup, Profiling, Done>;
/// "Ready", "Warmup", "Profiling" or "Done".
std::string_view state_name(const State& state);

struct OptimizerOptions {
  unsigned wait_steps = 1;      ///< steps to let pass before profiling (e.g. cudnn autotuning)
  unsigned warmup_steps = 10;   ///< per limit, before its window; must be ≥ 1
  unsigned profile_steps = 40;  ///< per limit, inside its window; must be ≥ 1
  Watts pl_step{25.0};          ///< stride between profiled limits; must be ≥ 1 mW
  /// Existing file: load it and skip profiling. Missing file: profile, then save it there.
  std::optional<std::filesystem::path> profile_path;
  /// nullptr: ZeusCost(η = 0.5, world_size = number of GPUs).
  std::shared_ptr<OptimumSelector> selector;
  /// Combines this process's window with the other ranks' (energy summed, time the maximum), as
  /// Zeus's all_reduce does under torch.distributed; nullptr: this process alone.
  std::function<Result<WindowFigures>(const WindowFigures&)> reduce;
  /// Receives one line per transition (Zeus's info logs); nullptr: silent.
  std::function<void(const std::string&)> log;
  /// Restore the default limits on SIGTERM/SIGINT and at exit() too (RestoreGuard); off for a
  /// program that handles those signals itself and destroys the optimizer (the CLI).
  bool restore_on_signals = true;
};

class PowerLimitOptimizer {
 public:
  /// `gpus`: the GPUs this process drives, all set to the same limit. Checks the options, that
  /// the GPUs' limit constraints are identical ("Power limits ranges are not uniform across
  /// GPUs", InvalidArgument), enables persistence mode (NoPermission: "SYS_ADMIN capability is
  /// required to modify GPU power limits ..."), then sets the maximum limit — or, with a saved
  /// profile, loads it (load_profile's errors) and sets its optimum.
  static Result<std::unique_ptr<PowerLimitOptimizer>> create(std::vector<std::shared_ptr<Gpu>> gpus,
                                                             std::shared_ptr<ProfileWindows> windows,
                                                             OptimizerOptions options = {});
  /// Restores every GPU's default limit (see RestoreGuard).
  ~PowerLimitOptimizer();
  PowerLimitOptimizer(const PowerLimitOptimizer&) = delete;
  PowerLimitOptimizer& operator=(const PowerLimitOptimizer&) = delete;

  /// Call at the beginning of every training step. Errors: the window's or the driver's, or the
  /// selector's; the state is left as it was before the failing call where it can be.
  Result<void> on_step_begin();
  /// Call at the end of every epoch.
  Result<void> on_epoch_end();

  [[nodiscard]] const State& state() const;
  /// The limits to profile, highest first (max, max − step, … ≥ min).
  [[nodiscard]] const std::vector<MilliWatts>& power_limits() const;
  [[nodiscard]] const std::vector<PowerLimitMeasurement>& measurements() const;
  /// Done's limit; nullopt before.
  [[nodiscard]] std::optional<MilliWatts> optimal_power_limit() const;
  /// The limit the optimizer last set on its GPUs.
  [[nodiscard]] std::optional<MilliWatts> current_power_limit() const;
  /// Every limit the optimizer set, in order (a limit equal to the current one is not set again).
  [[nodiscard]] const std::vector<MilliWatts>& limits_set() const;
  [[nodiscard]] const OptimumSelector& selector() const;
  /// Puts every GPU back at its default limit now; the optimizer then sets nothing more.
  Result<void> restore();

  /// The window name of a limit: "__GlobalPowerLimitOptimizer_<W>".
  static std::string window_name(MilliWatts limit);

 private:
  struct Impl;
  explicit PowerLimitOptimizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace erg::power_limit
