#pragma once
/// Per-process GPU energy attribution (issue 23): splits a GPU's measured energy over an interval
/// among the processes that ran on it, from the driver's per-process utilization samples, with a
/// bound on every figure. docs/attribution.md, "Processes", states the model at length.
///
/// Model. Over the interval [start, end] of duration T the GPU's energy E (a counter difference
/// with its error bound e_E) splits into
///   idle        = min(P_idle · T, E), from a calibrated idle model (measured while the GPU ran
///                 nothing, never "the minimum seen");
///   active      = E − idle, shared among processes by their GPU-busy time U_i: each utilization
///                 sample (pid, timestamp, sm %) covers the sample period P before its timestamp,
///                 and adds sm/100 × (its overlap with the interval) to U_i;
///   process i   = active · U_i / Σ U;
///   unattributed = E − idle − Σ processes: the active energy when no process was seen busy
///                 (otherwise 0 up to rounding). So idle + Σ processes + unattributed = E exactly.
/// The model's assumption: every process draws the same energy per unit of SM activity, at every
/// moment of the interval (ProcessAttributionOptions::model_error states how far that may be off).
///
/// Bound on process i (docs/attribution.md derives it):
///   |active| · (δU_i + w_i · Σ_j δU_j) / (Σ U − Σ δU)   sampling: w_i = U_i / Σ U
///   + w_i · (e_E + δP_idle · T)                           the measured energy and the idle model
///   + model_error · energy_i                              the model's assumption
/// with δU_i = 0.005 · Σ overlaps (whole-percent rounding) + at each end of the interval, for the
/// busy share β of the samples around it: β(1 − β)·P (a sample straddling the end is spread
/// evenly over its period) + β·edge_uncertainty (the end itself is known only that well) +
/// max(β, 1 − β)·τ where the driver has not sampled the last τ before the end yet (that tail
/// is extrapolated from the latest samples).
///
/// Thread-safety: the functions are pure; a ProcessMeter is not thread-safe (one owner).

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "erg/core/clock.hpp"
#include "erg/core/device.hpp"
#include "erg/core/result.hpp"
#include "erg/core/units.hpp"
#include "erg/measure/attribution.hpp"

namespace erg::measure {

/// The device's power while it runs nothing.
struct IdleModel {
  Watts power{0.0};
  Watts error{0.0};  ///< |true idle power − power| ≤ error (calibration spread and the sensor's error)
  Seconds calibrated_over{0.0};
};

/// Calibrates an idle model from segments measured while the device ran nothing (no process, no
/// load): power = Σ E / Σ T; error = Σ e_s / Σ T + half the range of the segments' mean powers.
/// Segments need not be contiguous. InvalidArgument: none, end ≤ start, negative energy or bound.
Result<IdleModel> calibrate_idle(std::span<const EnergySegment> idle_segments);

struct ProcessAttributionOptions {
  IdleModel idle;
  /// The driver's per-process utilization sample period. NVML does not report it (1/6 s to 1 s
  /// per its header); infer_sample_period() estimates it from the samples' timestamps.
  std::chrono::nanoseconds sample_period{166'666'667};
  /// How far the interval's ends may be from the instants its energy starts and ends: 0 when the
  /// readings carry the counter's update time, the counter's update period when they carry the
  /// time of the read.
  std::chrono::nanoseconds edge_uncertainty{0};
  /// Relative error of the model's assumption (equal energy per unit of SM activity for every
  /// process, at every moment). 5 % covers clock changes, transients and noise on the simulated
  /// GPU (docs/attribution.md); different kernels on real hardware can exceed it.
  double model_error = 0.05;
};

/// One process's part.
struct ProcessEnergy {
  std::uint32_t pid = 0;
  Joules energy{0.0};  ///< its share of the active energy
  Joules bound{0.0};   ///< |energy − truth| ≤ bound under the model
  Seconds busy{0.0};   ///< U_i: GPU-busy time seen in its samples inside the interval
  double share = 0.0;  ///< U_i / Σ U
  std::size_t samples = 0;
};

struct ProcessAttribution {
  /// False when the GPU's energy cannot be split among processes (MIG enabled: NVML reports no
  /// per-process utilization); `reason` says why and every figure but `measured` is 0 — never
  /// an attribution of 0 J to the processes.
  bool attributable = true;
  std::string reason;
  std::chrono::nanoseconds start{0}, end{0};  ///< wall time of the interval's ends
  Joules measured{0.0};
  Joules measured_bound{0.0};
  Joules idle{0.0};
  Joules idle_bound{0.0};
  Joules unattributed{0.0};  ///< measured − idle − Σ processes (documented remainder)
  Joules unattributed_bound{0.0};
  std::vector<ProcessEnergy> processes;  ///< by pid
  /// Σ processes.
  [[nodiscard]] Joules attributed() const;
};

/// Splits `interval`'s energy (start/end: wall time, the base of the samples' timestamps)
/// among the processes of `samples` (any order; samples outside the interval are ignored).
/// InvalidArgument: end ≤ start, negative energy error, sample period ≤ 0, negative
/// edge_uncertainty, model_error outside [0, 1), negative idle power or error, sm % over 100.
Result<ProcessAttribution> attribute_processes(const EnergySegment& interval,
                                               std::span<const ProcessUtilizationSample> samples,
                                               const ProcessAttributionOptions& options);

/// The result for a GPU whose energy cannot be attributed (the reason, the measured energy).
ProcessAttribution not_attributable(const EnergySegment& interval, std::string reason);

/// The median gap between one process's consecutive samples (the driver's sample period);
/// nullopt with fewer than two such gaps.
std::optional<std::chrono::nanoseconds> infer_sample_period(std::span<const ProcessUtilizationSample> samples);

/// Reads a GPU for attribute_processes: the energy counter at begin() and end(), and every
/// per-process utilization sample in between (poll() at least every few seconds: the driver keeps
/// a bounded buffer). On a GPU that reports no per-process utilization because MIG is enabled,
/// end() returns a not-attributable result saying so. The GPU and clock must outlive the meter.
class ProcessMeter {
 public:
  ProcessMeter(Gpu& gpu, const Clock& clock, ProcessAttributionOptions options);

  /// Starts an interval at the energy counter's current reading. Errors: the GPU's.
  Result<void> begin();
  /// Fetches the samples newer than the last one seen. NotSupported (MIG) is remembered for end().
  Result<void> poll();
  /// Ends the interval at the counter's current reading. `energy_error`: the counter figure's
  /// error bound as a share of it (the sensor's accuracy). InvalidArgument without begin(), or
  /// when the counter has not updated since.
  Result<void> end(double energy_error = 0.03);
  /// Attributes the ended interval. Call it a sample period after end() (1/6 s to 1 s), once the
  /// driver has sampled past the end; earlier, the tail after its latest sample is extrapolated
  /// from that sample and the bounds widen by the tail's length. A process that starts in that
  /// tail and has no sample yet is not seen. Not attributable (MIG) when the driver reports no
  /// per-process utilization.
  Result<ProcessAttribution> attribute();

  /// The samples gathered since begin().
  [[nodiscard]] const std::vector<ProcessUtilizationSample>& samples() const { return samples_; }

 private:
  struct Reading {
    double joules = 0.0;
    std::chrono::nanoseconds wall{0};
  };
  Result<Reading> read();

  Gpu& gpu_;
  const Clock& clock_;
  ProcessAttributionOptions options_;
  std::optional<Reading> start_;
  std::optional<EnergySegment> interval_;
  std::chrono::microseconds last_seen_{0};
  std::vector<ProcessUtilizationSample> samples_;
  std::optional<std::string> not_supported_;
};

/// Measures `gpu` for `duration` on `clock` (a virtual clock moves itself) and attributes it:
/// ProcessMeter polled every `poll_period` (1 s: well inside the driver's sample buffer), ended,
/// then attributed once a sample period has passed. The function erg top, ergd and the exporter
/// call. Errors: the GPU's; InvalidArgument for a duration or poll period ≤ 0.
Result<ProcessAttribution> measure_processes(Gpu& gpu, const Clock& clock, std::chrono::nanoseconds duration,
                                             const ProcessAttributionOptions& options, double energy_error = 0.03,
                                             std::chrono::nanoseconds poll_period = std::chrono::seconds(1));

/// Calibrates the GPU's idle model by measuring it for `duration` (at least a few counter
/// periods; 3 s is plenty) while it runs nothing. Unavailable, naming the processes, when the
/// GPU lists running processes at the start or the end (it is not idle); a GPU that cannot list
/// them is taken at its word. `energy_error` as in ProcessMeter::end.
Result<IdleModel> calibrate_idle(Gpu& gpu, const Clock& clock, std::chrono::nanoseconds duration,
                                 double energy_error = 0.03);

}  // namespace erg::measure
