#pragma once
/// EnergyMonitor: named measurement windows over GPUs and CPU packages that nest and overlap
/// in any order (Zeus's ZeusMonitor, reference/zeus.md §1.1).
///
/// A window reads every monitored counter at begin and at end. A GPU counter updates only every
/// ~100 ms, so the value read at an edge is stale by up to one period: each GPU's reads go into
/// a CounterHistory, which learns when the counter updates (without trusting the driver's
/// timestamps) and gives the counter's value at the edge instant, interpolated between the
/// updates around it. A follower reads each GPU once just after each predicted update (and now
/// and then densely around one, to keep the schedule locked), so the update after a begin edge
/// is known shortly after it; the end edge is extrapolated from the last update, or — with
/// `settle` — end_window waits for the update after it (at most about one period) and is exact
/// too. GPUs without an energy counter (pre-Volta, or an AMD counter that failed its start
/// check) are measured by integrating a PowerMonitor timeline that the monitor starts for them:
/// of instant power, or, where the GPU has only a 1 s average (AMD MI200 and older), of that
/// average over the window shifted 0.5 s later (its lag), which is exact for power that is
/// constant or linear within 0.5 s of each edge and off by at most the power swing × 0.125 s per
/// edge otherwise; windows shorter than 1 s are marked short. All counter anomalies (driver-reload resets,
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
#include "erg/measure/counter_history.hpp"
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
  /// Estimate each GPU counter's value at the edge instant (interpolated between the updates
  /// around it; see the class comment). Off: plain differences of the values read at the edges,
  /// as Zeus computes them (up to one update period of energy off at each edge).
  bool extrapolate_counters = true;
  /// Follow the GPU counters from a background thread (a few reads per update period per GPU):
  /// begin edges become exact shortly after they happen, and the update schedule stays locked.
  /// Off: edges are estimated from the edge reads alone.
  bool follow_counters = true;
  /// With follow_counters: run the follower on its own thread (default); false: nothing reads
  /// in the background, and the owner calls follow() (tests on a virtual clock).
  bool follower_thread = true;
  /// end_window waits (sleeping on the clock) until every GPU counter has updated after the end
  /// edge — at most about one update period — so the end edge is interpolated, not extrapolated.
  /// On a monitor younger than about three periods it also waits until the counter's schedule
  /// is learned (the updates it polls for pin it), since both edges are estimated against it.
  /// A GPU measured by its 1 s average power makes it wait 0.5 s past the end edge (the
  /// average's lag); without settling that last 0.5 s is extrapolated at the latest average
  /// (GpuEnergy::extrapolated says how long).
  bool settle = false;
  /// Append one row per ended window (not cancelled ones), flushed per row.
  std::optional<std::filesystem::path> log_file;
  LogFormat log_format = LogFormat::kCsv;
  /// Called with the monitored GPU indices before counters are read when a window asks for
  /// synchronization (the Python layer plugs torch/jax/cupy in here).
  std::function<void(const std::vector<unsigned>&)> sync;
  /// Time source; nullptr = the steady clock. Must outlive the monitor.
  const Clock* clock = nullptr;
  /// SoC modules (Jetson) to measure: each window reports the energy of every rail, which the
  /// SoC's backend integrates from power samples (its sampler starts with the first window).
  std::vector<std::shared_ptr<Soc>> socs;
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
  /// Ends window `name` now (its end edge is read now) and keeps it for collect_window: a
  /// caller that must not wait for the counters' next update at the edge (a training step)
  /// collects the measurement later, when that update has been read and the end edge is placed
  /// on the schedule as settle would place it. NotFound for an unknown name; AlreadyExists when
  /// a window of that name ended this way is still uncollected.
  Result<void> end_window_later(const std::string& name, bool sync = true);
  /// The measurement of window `name` ended by end_window_later, with the log row. Settles first
  /// (waits, about a period at most, for the counter updates after its end edge) where they have
  /// not been read yet: collected at once after the edge, it is end_window with settle. Collect
  /// within about a minute (the counter's kept history; older edges fall back to the values
  /// read at them). approx_instant_energy does not apply. NotFound if no window of that name
  /// awaits collection.
  Result<Measurement> collect_window(const std::string& name);
  /// Ends window `name` without a measurement or log row; `sync`: synchronize first, as
  /// end_window would (Zeus's end_window(cancel=True) does).
  Result<void> cancel_window(const std::string& name, bool sync = false);
  /// The measurement of window `name` from its begin to now, leaving it open: no
  /// synchronization, no settling (the end edge is extrapolated from the last update), no log
  /// row. Successive peeks of one window each measure from its begin, so their errors do not add
  /// up (an exporter's counters read it). NotFound for an unknown name.
  Result<Measurement> peek_window(const std::string& name);
  /// Restarts window `name` from now (begins it if it does not exist).
  Result<void> restart_window(const std::string& name, bool sync = true);
  /// Cancels every open window (and drops those ended by end_window_later and not collected);
  /// returns the open windows' names.
  std::vector<std::string> reset_windows();

  /// Monitored GPUs (erg indices) and CPU packages (package indices), in order.
  [[nodiscard]] const std::vector<unsigned>& gpu_indices() const;
  [[nodiscard]] const std::vector<unsigned>& cpu_indices() const;
  /// Names of the open windows.
  [[nodiscard]] std::vector<std::string> open_windows() const;
  /// The sampler measuring GPUs without an energy counter, if any.
  [[nodiscard]] PowerMonitor* power_monitor() const;
  /// What the monitor has learned of a GPU counter's update schedule (the counter's real update
  /// period, once measured). NotFound for a GPU not monitored or without a counter.
  [[nodiscard]] Result<UpdateSchedule> counter_schedule(unsigned gpu) const;

  /// With follower_thread off: when the follower next wants to read (monitor clock), if ever.
  [[nodiscard]] std::optional<std::chrono::nanoseconds> next_follow_time() const;
  /// With follower_thread off: performs the follower's reads that are due now.
  void follow();

 private:
  struct Impl;
  explicit EnergyMonitor(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace erg::measure
