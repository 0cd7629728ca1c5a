#pragma once
/// EnergyMonitor: named measurement windows over GPUs and CPU packages that nest and overlap
/// in any order (Zeus's ZeusMonitor, reference/zeus.md §1.1).
///
/// A window reads every monitored counter at begin and at end; the difference is the energy.
/// GPUs without an energy counter (pre-Volta) are measured by integrating a PowerMonitor
/// timeline that the monitor starts for them. All counter anomalies (driver-reload resets,
/// counters going backwards) are absorbed by one CounterTracker per counter: energy never goes
/// negative and an affected window says so.
///
/// Thread-safe: windows may be begun and ended from any thread.

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "erg/core/clock.hpp"
#include "erg/core/device.hpp"
#include "erg/core/result.hpp"
#include "erg/measure/measurement.hpp"

namespace erg::measure {

class PowerMonitor;

enum class LogFormat { kCsv, kJsonLines };

struct EnergyMonitorOptions {
  /// GPUs to monitor, by erg index (position in the given GPU list). nullopt = all.
  std::optional<std::vector<unsigned>> gpu_indices;
  /// CPU packages to monitor, by package index. nullopt = all available; a requested index
  /// that is not available is an error.
  std::optional<std::vector<unsigned>> cpu_indices;
  /// For a GPU whose counter did not move during a window, report instant power × time.
  bool approx_instant_energy = false;
  /// Account for the age of a GPU energy counter at each window edge: a counter that updates
  /// every ~100 ms is up to one period stale when read, so an edge adds the instant power ×
  /// the time since the driver last updated it (both come from the same driver call; the age
  /// is capped at one update period). Exact while power is steady since the last update.
  /// Off: plain counter differences, as Zeus computes them.
  bool extrapolate_counters = true;
  /// Append one row per ended window (not cancelled ones), flushed per row.
  std::optional<std::filesystem::path> log_file;
  LogFormat log_format = LogFormat::kCsv;
  /// Called with the monitored GPU indices before counters are read when a window asks for
  /// synchronization (the Python layer plugs torch/jax/cupy in here).
  std::function<void(const std::vector<unsigned>&)> sync;
  /// Time source; nullptr = the steady clock. Must outlive the monitor.
  const Clock* clock = nullptr;
  /// Sampling period of the PowerMonitor started for GPUs without an energy counter;
  /// nullopt = inferred from the hardware.
  std::optional<std::chrono::microseconds> power_sample_period;
};

class EnergyMonitor {
 public:
  /// Errors: InvalidArgument for an unknown GPU index; NotFound for a requested CPU package
  /// that is not available; Io if the log file cannot be created.
  static Result<std::unique_ptr<EnergyMonitor>> create(std::vector<std::shared_ptr<Gpu>> gpus,
                                                       std::vector<std::shared_ptr<Cpu>> cpus,
                                                       EnergyMonitorOptions options = {});
  ~EnergyMonitor();
  EnergyMonitor(const EnergyMonitor&) = delete;
  EnergyMonitor& operator=(const EnergyMonitor&) = delete;

  /// Starts window `name`. AlreadyExists ("Measurement window '<name>' already exists") if a
  /// window of that name is open, unless `restart`, which replaces it.
  Result<void> begin_window(const std::string& name, bool sync = true, bool restart = false);
  /// Ends window `name` and returns its measurement. NotFound ("Measurement window '<name>'
  /// does not exist") for an unknown name.
  Result<Measurement> end_window(const std::string& name, bool sync = true);
  /// Ends window `name` without a measurement or log row; `sync`: synchronize first, as
  /// end_window would (Zeus's end_window(cancel=True) does).
  Result<void> cancel_window(const std::string& name, bool sync = false);
  /// Restarts window `name` from now (begins it if it does not exist).
  Result<void> restart_window(const std::string& name, bool sync = true);
  /// Cancels every open window; returns their names.
  std::vector<std::string> reset_windows();

  /// Monitored GPUs (erg indices) and CPU packages (package indices), in order.
  [[nodiscard]] const std::vector<unsigned>& gpu_indices() const;
  [[nodiscard]] const std::vector<unsigned>& cpu_indices() const;
  /// Names of the open windows.
  [[nodiscard]] std::vector<std::string> open_windows() const;
  /// The sampler measuring GPUs without an energy counter, if any.
  [[nodiscard]] PowerMonitor* power_monitor() const;

 private:
  struct Impl;
  explicit EnergyMonitor(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace erg::measure
