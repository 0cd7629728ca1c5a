#pragma once
/// TemperatureMonitor: a background sampler of GPU core temperature with bounded, queryable
/// timelines (Zeus's TemperatureMonitor, reference/zeus.md §1.3, but one native thread instead
/// of a spawned process).
///
/// RAII: sampling starts in create() — which takes the first round itself, so every timeline
/// starts at creation — and stops (the thread is joined) in stop() or the destructor. Move-only
/// through unique_ptr. A reading equal to the GPU's previous one is not stored (deduplicated, as
/// Zeus does), so a timeline holds the moments the temperature changed. Queries are thread-safe
/// and O(log n) in the stored samples.
///
/// A GPU whose temperature cannot be read (NotSupported) or that is lost stops being sampled at
/// once; one with a transient error (timeout, unknown driver error) skips rounds, and stops after
/// kGpuRetries in a row. Such a GPU is listed in errors(); its timeline keeps what was stored,
/// and its current temperature is an error naming it, never its last reading held on.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "erg/core/clock.hpp"
#include "erg/core/device.hpp"
#include "erg/core/result.hpp"
#include "erg/measure/power_monitor.hpp"  // SamplingError

namespace erg::measure {

struct TemperatureMonitorOptions {
  /// GPUs to sample (positions in the given list). nullopt = all.
  std::optional<std::vector<unsigned>> gpu_indices;
  /// Sampling period. 1 s by default, as Zeus: a GPU's temperature moves over seconds, and each
  /// read is a driver call.
  std::chrono::microseconds period{1'000'000};
  /// Samples kept per GPU; 0 (the default, as Zeus) keeps every sample, otherwise the oldest
  /// are dropped beyond it.
  std::size_t max_samples = 0;
  /// Time source for sample timestamps; nullptr = the steady clock. Must outlive the monitor.
  const Clock* clock = nullptr;
  /// Start the background thread. Tests on a virtual clock set false and call sample_once().
  bool start_thread = true;
};

/// One stored reading.
struct TemperaturePoint {
  std::chrono::nanoseconds time;  ///< Monitor clock, when the reading was taken.
  int celsius;
};

class TemperatureMonitor {
 public:
  /// Consecutive rounds with a transient error after which a GPU stops being sampled.
  static constexpr int kGpuRetries = 5;

  /// Errors: InvalidArgument for an unknown or repeated GPU index, no GPU to sample, or a
  /// period that is not positive.
  static Result<std::unique_ptr<TemperatureMonitor>> create(std::vector<std::shared_ptr<Gpu>> gpus,
                                                            TemperatureMonitorOptions options = {});
  ~TemperatureMonitor();
  TemperatureMonitor(const TemperatureMonitor&) = delete;
  TemperatureMonitor& operator=(const TemperatureMonitor&) = delete;

  /// Stops sampling and joins the thread. Idempotent.
  void stop();
  /// Takes one round of readings now (what the thread does each period). Not concurrently with
  /// itself: tests without the thread call it.
  void sample_once();

  [[nodiscard]] std::chrono::microseconds period() const;
  [[nodiscard]] const std::vector<unsigned>& gpu_indices() const;
  /// Whether `gpu` is monitored and still being sampled.
  [[nodiscard]] bool sampled(unsigned gpu) const;
  /// GPUs that stopped being sampled, and why.
  [[nodiscard]] std::vector<SamplingError> errors() const;
  /// Rounds of sampling done so far.
  [[nodiscard]] std::uint64_t rounds() const;

  /// Latest temperature of `gpu` (°C), or the stored reading nearest to `time` (ties go to the
  /// earlier one). NotFound if `gpu` is not monitored; Unavailable before its first reading; the
  /// GPU's own error (e.g. NotSupported, GpuLost) for "now" or a time after it stopped being
  /// sampled.
  Result<int> temperature(unsigned gpu, std::optional<std::chrono::nanoseconds> time = std::nullopt) const;
  /// Stored readings of `gpu` with start ≤ t ≤ end (monitor clock), in time order. NotFound if
  /// `gpu` is not monitored.
  Result<std::vector<TemperaturePoint>> timeline(unsigned gpu, std::chrono::nanoseconds start,
                                                 std::chrono::nanoseconds end) const;
  /// Readings stored over all GPUs.
  [[nodiscard]] std::size_t stored_samples() const;

 private:
  struct Impl;
  explicit TemperatureMonitor(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace erg::measure
