#pragma once
/// PowerMonitor: a background sampler of GPU power (and CPU package/DRAM power derived from
/// energy deltas, and SoC rail power) with bounded, queryable timelines (Zeus's PowerMonitor, reference/zeus.md
/// §1.2, but one native thread instead of one spawned process per domain).
///
/// RAII: sampling starts in create() — which takes the first round of samples itself, so the
/// timelines start at creation — and stops (the thread is joined) in stop() or the destructor.
/// Move-only through unique_ptr. Queries are thread-safe and O(log n) in the number of stored
/// samples. They never extrapolate: an interval that starts before the oldest retained sample
/// or ends after now is an error. A transient read error skips a round (counted in
/// read_errors()); a device that fails for good (a lost GPU, errors in a row) is recorded in
/// errors() and no longer sampled: its power and energy past that moment are errors naming it,
/// never its last sample held on. The others keep being sampled.

#include <chrono>
#include <cstddef>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "erg/core/clock.hpp"
#include "erg/core/device.hpp"
#include "erg/core/result.hpp"
#include "erg/measure/timeline.hpp"

namespace erg::measure {

/// What PowerMonitor samples: a GPU power domain, or a CPU package's package/DRAM power.
enum class CpuDomain { kPackage, kDram };

struct PowerMonitorOptions {
  /// GPUs to sample (positions in the given list). nullopt = all.
  std::optional<std::vector<unsigned>> gpu_indices;
  /// GPU power domains. Empty = every domain the first sampled GPU supports (Zeus probes
  /// GPU 0; we probe each GPU and sample a domain on the GPUs that have it). A requested
  /// domain that no sampled GPU supports is an error.
  std::vector<PowerDomain> domains;
  /// Also sample CPU package and DRAM power (derived from energy deltas).
  bool cpus = true;
  /// Sampling period. nullopt = inferred: half the fastest GPU model's update period, at most
  /// 100 ms (as Zeus; sampling twice per update sees every change).
  std::optional<std::chrono::microseconds> period;
  /// Samples kept per device per domain (12 bytes each, storage growing as they come); 0 (the
  /// default, as Zeus) keeps every sample; otherwise the oldest are dropped beyond it.
  std::size_t max_samples = 0;
  /// Time source for sample timestamps; nullptr = the steady clock. Must outlive the monitor.
  const Clock* clock = nullptr;
  /// Start the background thread. Tests on a virtual clock set false and call sample_once().
  bool start_thread = true;
  /// SoC modules (Jetson) whose rails are sampled too: one rail_power() read per round gives one
  /// timeline per rail (rails in the SoC's capabilities().rails order). With no GPU sampled and
  /// no `period`, the period is half the fastest SoC's sensor update period (1 to 100 ms).
  std::vector<std::shared_ptr<Soc>> socs;
};

/// A device that stopped being sampled, and why.
struct SamplingError {
  std::string device;  ///< "gpu0", "cpu1"
  Error error;
};

class PowerMonitor {
 public:
  /// Errors: InvalidArgument for an unknown GPU index, a requested domain no GPU supports,
  /// or nothing to sample (no GPU, CPU or SoC).
  static Result<std::unique_ptr<PowerMonitor>> create(std::vector<std::shared_ptr<Gpu>> gpus,
                                                      std::vector<std::shared_ptr<Cpu>> cpus,
                                                      PowerMonitorOptions options = {});
  ~PowerMonitor();
  PowerMonitor(const PowerMonitor&) = delete;
  PowerMonitor& operator=(const PowerMonitor&) = delete;

  /// Stops sampling and joins the thread. Idempotent.
  void stop();
  /// Takes one round of samples now (what the thread does each period).
  void sample_once();

  [[nodiscard]] std::chrono::microseconds period() const;
  [[nodiscard]] const std::vector<unsigned>& gpu_indices() const;
  [[nodiscard]] const std::vector<PowerDomain>& domains() const;
  /// Whether `domain` is sampled on `gpu`.
  [[nodiscard]] bool sampled(unsigned gpu, PowerDomain domain) const;
  [[nodiscard]] std::vector<SamplingError> errors() const;
  /// Reads of `gpu` that failed so far, including the transient ones that only skipped a round
  /// (the timeline holds the last sample across such a gap). 0 for a GPU not sampled.
  [[nodiscard]] std::uint64_t read_errors(unsigned gpu) const;
  /// Rounds of sampling done so far.
  [[nodiscard]] std::uint64_t rounds() const;
  /// CPU time the sampling thread has used so far (erg's own overhead); nullopt when no
  /// thread runs.
  [[nodiscard]] std::optional<std::chrono::nanoseconds> sampler_cpu_time() const;

  /// Latest power of `gpu`, or the stored sample nearest to `time`. NotFound if `gpu` or
  /// `domain` is not sampled; Unavailable if no sample yet.
  Result<Watts> gpu_power(unsigned gpu, PowerDomain domain = PowerDomain::kDeviceInstant,
                          std::optional<std::chrono::nanoseconds> time = std::nullopt) const;
  /// Power timeline of `gpu` with start ≤ t ≤ end (monitor clock).
  Result<std::vector<PowerPoint>> gpu_timeline(unsigned gpu, PowerDomain domain, std::chrono::nanoseconds start,
                                               std::chrono::nanoseconds end) const;
  /// Energy of `gpu` from `start` to `end`, integrating the timeline with hold-last (power
  /// between samples is the earlier sample's; the last sample is held to `end`). InvalidArgument
  /// when `start` is before the oldest retained sample or `end` is later than now.
  Result<Joules> gpu_energy(unsigned gpu, PowerDomain domain, std::chrono::nanoseconds start,
                            std::chrono::nanoseconds end) const;

  Result<Watts> cpu_power(unsigned cpu, CpuDomain domain,
                          std::optional<std::chrono::nanoseconds> time = std::nullopt) const;
  Result<std::vector<PowerPoint>> cpu_timeline(unsigned cpu, CpuDomain domain, std::chrono::nanoseconds start,
                                               std::chrono::nanoseconds end) const;
  Result<Joules> cpu_energy(unsigned cpu, CpuDomain domain, std::chrono::nanoseconds start,
                            std::chrono::nanoseconds end) const;

  /// The power of rail `rail` (position in capabilities().rails) of SoC `soc` (its index()),
  /// latest or the stored sample nearest to `time`; timeline and energy as for GPUs. NotFound if
  /// the SoC or rail is not sampled; Unavailable if no sample yet.
  Result<Watts> soc_power(unsigned soc, unsigned rail,
                          std::optional<std::chrono::nanoseconds> time = std::nullopt) const;
  Result<std::vector<PowerPoint>> soc_timeline(unsigned soc, unsigned rail, std::chrono::nanoseconds start,
                                               std::chrono::nanoseconds end) const;
  Result<Joules> soc_energy(unsigned soc, unsigned rail, std::chrono::nanoseconds start,
                            std::chrono::nanoseconds end) const;

  /// Samples stored over all series (for memory accounting).
  [[nodiscard]] std::size_t stored_samples() const;
  /// Bytes the series' storage holds (allocated chunks) over all series.
  [[nodiscard]] std::size_t allocated_bytes() const;
  /// The power held by `gpu`'s (or a CPU's) series at `time`: the reading at or before it;
  /// NotFound / Unavailable as gpu_power.
  Result<Watts> gpu_power_at(unsigned gpu, PowerDomain domain, std::chrono::nanoseconds time) const;
  Result<Watts> cpu_power_at(unsigned cpu, CpuDomain domain, std::chrono::nanoseconds time) const;

 private:
  struct Impl;
  explicit PowerMonitor(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

/// Infers how often `gpu`'s instant power reading changes by polling it for at most `budget`
/// and taking the shortest interval between updates; nullopt if it never changed. Updates are
/// the driver's update stamps where they track updates, else changes of value; a change counts
/// only when two prompt reads (≤ 1.5 ms apart) bracket it, so a poller delayed by preemption
/// does not see a short period (unless no change was bracketed tightly at all). (Zeus polls
/// 1000 times and takes the shortest interval between changes; native reads are ~1 µs so we
/// poll for a duration instead.)
std::optional<std::chrono::microseconds> infer_update_period(
    Gpu& gpu, std::chrono::milliseconds budget = std::chrono::milliseconds(600));

/// Half the fastest of the inferred periods (one per distinct GPU model), capped at 100 ms;
/// 100 ms if none changed.
std::chrono::microseconds infer_sampling_period(const std::vector<std::shared_ptr<Gpu>>& gpus);

}  // namespace erg::measure
