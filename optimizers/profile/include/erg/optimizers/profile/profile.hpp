#pragma once
/// Thermally stable energy profiling (Zeus's zeus/profile.py, reference/zeus.md §1.10): finds a
/// measurement window and a cooldown long enough that repeated measurements of one workload
/// agree, and measures a workload that way.
///
/// A trial: sleep the cooldown (the GPU sheds the heat of earlier work) → run the warm-up
/// iterations → synchronize → read the temperature → one measurement window over
/// ceil(measurement_duration / iteration_duration) iterations (iteration_duration from a
/// calibration run, or given) → read the temperature. A sweep runs `num_trials` trials per
/// swept value; a value is *valid* when the sample standard deviation of the trials' energy per
/// iteration is below `trial_stddev_threshold` (joules, absolute).
///
/// Distributed: each rank profiles its own GPUs with the same calls, and a Collective reduces each
/// trial across ranks (energy summed, time the slowest rank's, temperature the ranks' mean).
///
/// Everything the profiler touches comes through seams so that tests run without sleeping: a
/// Clock (calibration timing and cooldown sleeps; a VirtualClock moves instead of waiting), a
/// Meter (windows, synchronization, temperature), a Collective. The target function is a plain
/// callable; exceptions it throws propagate (the trial's open window is cancelled first). Not
/// thread-safe: one profiling call at a time per Meter.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "erg/core/clock.hpp"
#include "erg/core/device.hpp"
#include "erg/core/result.hpp"
#include "erg/core/units.hpp"

namespace erg::measure {
class EnergyMonitor;
}

namespace erg::profile {

/// One measurement trial (Zeus's TrialResult; reduced over ranks when distributed).
struct TrialResult {
  Joules energy_per_iter;     ///< total_energy / iterations.
  Seconds time_per_iter;      ///< total_time / iterations.
  Joules total_energy;        ///< Energy of the measurement window.
  Seconds total_time;         ///< Length of the measurement window.
  std::uint64_t iterations;   ///< Iterations in the window.
  double temperature_before;  ///< Mean GPU temperature before the window, °C.
  double temperature_after;   ///< Mean GPU temperature after the window, °C.
};

/// One swept value over its trials (Zeus's SweepResult).
struct SweepResult {
  Seconds measurement_duration;
  Seconds cooldown_duration;
  std::vector<TrialResult> trials;
  Joules energy_mean;  ///< Mean energy_per_iter over the trials.
  Joules energy_std;   ///< Sample standard deviation of energy_per_iter (0 with one trial).
  double avg_temperature_before;
  double avg_temperature_after;
  Seconds avg_total_time;
  Joules avg_total_energy;
  bool is_valid;  ///< energy_std < trial_stddev_threshold.
};

/// A sweep of one duration with the other fixed (Zeus's SweepReport: sweep_param =
/// (sweep_name, sweep_values), fixed_param = (fixed_name, fixed_value)).
struct SweepReport {
  std::string sweep_name;  ///< "measurement_duration" or "cooldown_duration".
  std::vector<Seconds> sweep_values;
  std::string fixed_name;  ///< The other one.
  Seconds fixed_value;
  std::vector<SweepResult> entries;  ///< One per swept value, in order.
};

/// One line: durations, mean, std, temperatures and [VALID] or [INVALID].
std::string to_string(const SweepResult& result);
/// A header line and one line per swept value.
std::string to_string(const SweepReport& report);

/// What a window measured.
struct WindowReading {
  Seconds time;
  Joules energy;
};

/// What the profiler measures through. Every member but cancel_window is required.
struct Meter {
  /// Waits until the work queued on the monitored GPUs is done.
  std::function<Result<void>()> sync;
  /// Starts the trial's window (without synchronizing: the profiler has just synchronized).
  std::function<Result<void>()> begin_window;
  /// Synchronizes, ends the window and returns its time and (GPU) energy.
  std::function<Result<WindowReading>()> end_window;
  /// Ends the window without a measurement (after an error or an exception). Optional.
  std::function<void()> cancel_window;
  /// Mean temperature of the monitored GPUs, °C.
  std::function<Result<double>()> temperature;
};

/// A Meter over an EnergyMonitor: window `window_name`, GPU energy (Zeus's total_energy; a GPU
/// whose energy is unknown makes end_window fail with kUnavailable), synchronization through the
/// monitor's sync function (a window begun and cancelled with sync), and the mean temperature of
/// the monitored GPUs, read from `gpus` (the list the monitor was created with). The monitor and
/// the GPUs must outlive the Meter.
Meter monitor_meter(measure::EnergyMonitor& monitor, std::vector<std::shared_ptr<Gpu>> gpus,
                    std::string window_name = "__erg_profile_trial");

enum class ReduceOp { kSum, kMax };

/// Reduces a value over every rank. Empty: one process (the value itself).
using AllReduce = std::function<Result<double>(double value, ReduceOp op)>;

/// The seams of a profiling run besides the Meter.
struct Environment {
  /// Calibration timing and cooldown sleeps; nullptr = the steady clock.
  const Clock* clock = nullptr;
  AllReduce all_reduce;
  /// Progress lines (calibration, trial i/n, the report). Empty: none. Callers that run on
  /// several ranks usually set it on rank 0 only.
  std::function<void(const std::string&)> log;
};

/// The callable being profiled: one iteration of the workload. May throw.
using Target = std::function<void()>;

/// Zeus's default search range: 1, 2, ..., 10 s.
std::vector<Seconds> default_search_range();

struct SweepOptions {
  int num_trials = 10;                  ///< Trials per swept value (≥ 1).
  int num_warmup_trials = 2;            ///< Throw-away trials before the sweep (no cooldown, no warm-up iterations).
  Joules trial_stddev_threshold{0.01};  ///< A value is valid when energy_std is below this.
  int num_warmup_iterations = 10;       ///< Before each trial's window (and before calibration).
  int num_calibration_iterations = 100;
  /// The time of one iteration if already known; nullopt = calibrate first.
  std::optional<Seconds> iteration_duration;
};

/// Runs `num_warmup_iterations`, synchronizes, then times `num_calibration_iterations` between
/// two synchronizations; the per-iteration time, the slowest rank's. kInvalidArgument for
/// negative counts or no calibration iteration; kUnavailable when the iterations took no
/// measurable time.
Result<Seconds> calibrate_iteration_duration(const Target& target, const Meter& meter, int num_warmup_iterations,
                                             int num_calibration_iterations, const Environment& env = {});

/// Sweeps the measurement duration with the cooldown fixed. An empty range means the default.
/// kInvalidArgument for a negative or (measurement) zero duration or a bad count; a Meter or
/// Collective error as it comes.
Result<SweepReport> profile_measurement_duration(const Target& target, const Meter& meter,
                                                 std::vector<Seconds> measurement_duration_search_range = {},
                                                 Seconds cooldown_duration = std::chrono::seconds(10),
                                                 const SweepOptions& options = {}, const Environment& env = {});

/// Sweeps the cooldown duration with the measurement duration fixed.
Result<SweepReport> profile_cooldown_duration(const Target& target, const Meter& meter,
                                              std::vector<Seconds> cooldown_duration_search_range = {},
                                              Seconds measurement_duration = std::chrono::seconds(10),
                                              const SweepOptions& options = {}, const Environment& env = {});

/// Calibrates once, then sweeps the measurement duration with the cooldown fixed at the largest
/// cooldown of its range (warm-up trials before it), then the cooldown with the measurement
/// duration fixed at the largest of its range (no warm-up trials). options.iteration_duration is
/// ignored. Returns (measurement report, cooldown report).
Result<std::pair<SweepReport, SweepReport>> profile_parameters(
    const Target& target, const Meter& meter, std::vector<Seconds> measurement_duration_search_range = {},
    std::vector<Seconds> cooldown_duration_search_range = {}, const SweepOptions& options = {},
    const Environment& env = {});

struct MeasureOptions {
  int num_warmup_iterations = 10;
  int num_calibration_iterations = 100;
  /// Run the workload this long before the window instead of num_warmup_iterations (converted
  /// with the calibrated iteration time, at least one iteration; calibration still uses
  /// num_warmup_iterations). Must not be negative.
  std::optional<Seconds> warmup_settle_duration;
};

/// One trial with known durations (calibrating first): a thermally stable measurement.
Result<TrialResult> measure(const Target& target, const Meter& meter, Seconds measurement_duration,
                            Seconds cooldown_duration, const MeasureOptions& options = {}, const Environment& env = {});

}  // namespace erg::profile
