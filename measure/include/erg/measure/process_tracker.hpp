#pragma once
/// Continuous per-process attribution of one GPU (issue 23): the loop behind `erg top` and the
/// Prometheus exporter's per-process series. Each step() reads the energy counter, the driver's
/// process table and the per-process utilization samples since the last step, attributes an
/// interval between two steps' readings (consecutive intervals: no energy falls between them)
/// with attribute_processes(), and keeps per process its energy since it was first seen. A
/// process that leaves the driver's table is folded into the exited total, so
///   Σ live processes + exited + idle + unattributed = the energy measured (attributed so far)
/// exactly (to rounding), step after step.
///
/// Identity: a process is its pid and, where /proc shows it, its start time; a pid that now names
/// another process is the old one exiting and a new one appearing.
///
/// By default each interval is attributed one step after it ends (ProcessTrackerOptions::
/// attribute_late), once the driver has sampled past its end: the figures of a step are those of
/// the interval between the two previous steps' readings (ProcessStep::start, end). A process that
/// leaves the table is folded into `exited` at the step that no longer lists it, and what it drew
/// in its last interval follows at the next step (as a process known only from its samples). Not
/// thread-safe (one owner); the Gpu and Clock must outlive the tracker.

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "erg/core/clock.hpp"
#include "erg/core/device.hpp"
#include "erg/core/result.hpp"
#include "erg/core/units.hpp"
#include "erg/measure/proc_info.hpp"
#include "erg/measure/process_attribution.hpp"

namespace erg::measure {

struct ProcessTrackerOptions {
  /// The idle model, sample period and model error (edge_uncertainty is set per interval: 0 when
  /// the readings carry the counter's update time, else `counter_period`).
  ProcessAttributionOptions attribution;
  /// The energy counter figure's error bound as a share of it (the sensor's accuracy).
  double energy_error = 0.03;
  /// How far a reading's time may be from the counter's update when the backend gives no update
  /// time (NVIDIA updates the counter about every 100 ms).
  std::chrono::nanoseconds counter_period{100'000'000};
  /// Where /proc/<pid>/comm, stat and cgroup are read ("/proc"; "/host/proc" in a container).
  std::filesystem::path proc_root = "/proc";
  /// Attribute each interval one step late: step k attributes the interval that ended at step
  /// k − 1's reading, when the driver has sampled past its end (steps at least a sample period
  /// apart: 1/6 s to 1 s). Otherwise the interval ending now is attributed at once and the tail
  /// after the driver's latest sample is extrapolated, which on a 1 s interval with a 1/6 s
  /// sample period can more than double the bounds.
  bool attribute_late = true;
};

/// One live process as the tracker sees it.
struct TrackedProcess {
  std::uint32_t pid = 0;
  std::string comm;                        ///< /proc/<pid>/comm; empty when unreadable
  std::optional<CgroupInfo> cgroup;        ///< its container and pod; nullopt when unreadable
  std::optional<std::uint64_t> starttime;  ///< /proc/<pid>/stat field 22 (tells a reused pid)
  std::optional<std::uint64_t> used_memory_bytes;
  std::optional<unsigned> gpu_instance;    ///< MIG GPU instance
  std::chrono::nanoseconds first_seen{0};  ///< wall time of the step that first listed it
  double share = 0.0;                      ///< of the last interval's attributed energy
  Watts power{0.0};                        ///< attributed power over the last interval
  Watts power_bound{0.0};
  Joules interval_energy{0.0};  ///< attributed energy of the last interval
  Joules interval_bound{0.0};
  Joules energy{0.0};        ///< attributed energy since first seen
  Joules energy_bound{0.0};  ///< Σ of its intervals' bounds
};

/// A process that left at this step (its final figures, the last interval included). `listed`:
/// it had been in the driver's table at some step (false: it ran only between two steps and is
/// known only from its samples).
struct ExitedProcess {
  TrackedProcess process;
  bool listed = true;
};

/// What a step() gives.
struct ProcessStep {
  /// False on a GPU whose energy cannot be split among processes (MIG): `reason` says why; the
  /// processes are listed with no figures (never 0 W).
  bool attributable = true;
  std::string reason;
  /// A new interval was attributed (false at the first step, at the second with attribute_late,
  /// and while the counter has not updated).
  bool updated = false;
  std::chrono::nanoseconds start{0}, end{0};  ///< wall time of the last interval's ends
  Watts measured_power{0.0};                  ///< over the last interval
  Watts measured_power_bound{0.0};
  Watts idle_power{0.0};
  Watts unattributed_power{0.0};
  Watts unattributed_power_bound{0.0};
  std::vector<TrackedProcess> processes;  ///< live now, by pid
  std::vector<ExitedProcess> exited_now;  ///< left at this step
  // Totals since the first step.
  Joules measured{0.0}, measured_bound{0.0};
  Joules idle{0.0}, idle_bound{0.0};
  Joules unattributed{0.0}, unattributed_bound{0.0};
  Joules exited{0.0}, exited_bound{0.0};  ///< Σ final energies of the processes that left
  std::size_t exited_count = 0;
  std::uint64_t counter_anomalies = 0;  ///< intervals skipped because the counter went back
};

class ProcessTracker {
 public:
  ProcessTracker(Gpu& gpu, const Clock& clock, ProcessTrackerOptions options = {});

  /// Reads the GPU and attributes the interval since the previous step (see the file comment).
  /// Errors: the GPU's (energy counter, process table); a failing step changes nothing, so the
  /// next one covers the gap. NotSupported from the per-process utilization (MIG) is not an
  /// error: the step says not attributable.
  Result<ProcessStep> step();

  /// The latest successful step's result (empty before the first).
  [[nodiscard]] const ProcessStep& last() const { return last_; }

 private:
  struct Reading {
    double joules = 0.0;
    std::chrono::nanoseconds wall{0};
    bool stamped = false;
  };
  TrackedProcess describe(const GpuProcess& p, std::chrono::nanoseconds now) const;

  Gpu& gpu_;
  const Clock& clock_;
  ProcessTrackerOptions options_;
  std::optional<Reading> previous_;  ///< the start of the next interval to attribute
  std::optional<Reading> pending_;   ///< attribute_late: the end of the next interval
  std::chrono::microseconds last_seen_{0};
  std::vector<ProcessUtilizationSample> samples_;  ///< those that may still overlap a later interval
  std::vector<TrackedProcess> live_;               ///< by pid
  ProcessStep last_;
};

}  // namespace erg::measure
