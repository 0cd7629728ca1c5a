#pragma once
/// Measurement windows whose energy is split at UTC hour boundaries, the base of CarbonMonitor
/// and CostMonitor (an hour's carbon intensity or price applies to the energy used in it).
///
/// Method: a window's energy is the EnergyMonitor's (all of it, from begin_window to
/// end_window). Inside the window, a light sampler peeks every open window's cumulative energy
/// at each UTC hour boundary (EnergyMonitor::peek_window: no synchronization, the end edge
/// extrapolated from the counter's last update). The energy between two successive samples is
/// spread over the hours between them in proportion to time, so samples on the boundaries make
/// the split exact. Error: a sample taken late by d (a busy machine) moves about P·d joules
/// (P: power at the boundary) to the earlier hour, plus the peek's extrapolation (at most one
/// counter update period of a power change, ~100 ms on NVIDIA); the window's total is never
/// affected. A window that spans no boundary has exactly one share.
///
/// Thread-safe: windows may be begun and ended from any thread.

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "erg/carbon/provider.hpp"
#include "erg/core/clock.hpp"
#include "erg/core/device.hpp"
#include "erg/core/result.hpp"
#include "erg/measure/energy_monitor.hpp"
#include "erg/measure/measurement.hpp"

namespace erg::carbon {

/// The part of a window inside one UTC hour.
struct HourShare {
  UtcHour hour;
  Seconds time{0.0};  ///< How much of the window lies in this hour.
  /// Energy per device in this hour, joules: "gpu0", "cpu0" (package), "dram0". A device whose
  /// energy the window does not know (see Measurement::missing_devices) is absent.
  std::map<std::string, double> energy_j;
  [[nodiscard]] double total_j() const;
};

/// A window's measurement and its hourly split (in time order; the shares' energies add up
/// to the measurement's, device by device).
struct HourlyMeasurement {
  measure::Measurement energy;
  std::vector<HourShare> hours;
};

/// The per-device energies of a measurement: "gpu<i>", "cpu<i>", "dram<i>" -> joules (devices
/// with unknown energy left out).
std::map<std::string, double> device_energies(const measure::Measurement& m);

/// Splits the energy between successive samples (wall time since the Unix epoch, cumulative
/// per-device joules since the window's start) over UTC hours, in proportion to time. The
/// first sample is the window's start (all zero), the last its end. Pure function.
std::vector<HourShare> split_by_hour(
    const std::vector<std::pair<std::chrono::nanoseconds, std::map<std::string, double>>>& samples);

struct HourlyOptions {
  /// Options of the EnergyMonitor the windows run on (clock, indices, settle, ...).
  measure::EnergyMonitorOptions energy;
  /// Sample at hour boundaries from a background thread (default). false: nothing runs in the
  /// background, and the owner calls sample_due() (tests on a virtual clock).
  bool boundary_thread = true;
  /// Called (from the sampler) with each UTC hour that has just ended while a window was open,
  /// after its samples were taken: the monitors fetch that hour's intensity or price while
  /// the provider still has it. Must not call back into the monitor.
  std::function<void(UtcHour)> on_hour_end;
};

class HourlyEnergyMonitor {
 public:
  /// Errors as EnergyMonitor::create.
  static Result<std::unique_ptr<HourlyEnergyMonitor>> create(std::vector<std::shared_ptr<Gpu>> gpus,
                                                             std::vector<std::shared_ptr<Cpu>> cpus,
                                                             HourlyOptions options = {});
  /// Windows on an EnergyMonitor the caller owns (it must outlive the result; `options.energy`
  /// is unused). Windows begun on it directly are not split.
  static std::unique_ptr<HourlyEnergyMonitor> wrap(measure::EnergyMonitor& monitor, const Clock& clock,
                                                   HourlyOptions options = {});
  ~HourlyEnergyMonitor();
  HourlyEnergyMonitor(const HourlyEnergyMonitor&) = delete;
  HourlyEnergyMonitor& operator=(const HourlyEnergyMonitor&) = delete;

  /// As EnergyMonitor::begin_window (AlreadyExists for an open name).
  Result<void> begin_window(const std::string& name, bool sync = true);
  /// As EnergyMonitor::end_window, with the hourly split. NotFound for an unknown name.
  Result<HourlyMeasurement> end_window(const std::string& name, bool sync = true);
  /// Ends a window without a measurement.
  Result<void> cancel_window(const std::string& name);
  [[nodiscard]] std::vector<std::string> open_windows() const;

  /// With boundary_thread off: the monitor-clock time of the next UTC hour boundary.
  [[nodiscard]] std::chrono::nanoseconds next_boundary_time() const;
  /// With boundary_thread off: samples every open window if an hour boundary has passed since
  /// its last sample, then calls on_hour_end for each hour that ended.
  void sample_due();

  [[nodiscard]] measure::EnergyMonitor& energy_monitor();
  [[nodiscard]] const Clock& clock() const;

 private:
  struct Impl;
  explicit HourlyEnergyMonitor(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace erg::carbon
