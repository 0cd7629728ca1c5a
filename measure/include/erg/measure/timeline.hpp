#pragma once
/// A power timeline of one device in one domain, stored as cumulative energy.
///
/// Each stored sample is 16 bytes: a timestamp and the energy integrated up to it. Power between
/// two samples is held at the earlier sample's value (hold-last), so the energy over any interval
/// within the timeline is C(t1) − C(t0) with C found by binary search: O(log n) in the number of
/// samples, exact for piecewise-constant power. Repeated equal readings are not stored
/// (deduplicated); integration still covers them.
///
/// Storage grows with the samples, in chunks of 4096 samples allocated when first needed (a
/// new timeline costs one chunk, of which only the pages written are resident): 16 bytes per
/// sample amortised. Unbounded by default; with a capacity, the oldest samples are dropped.
///
/// Queries never extrapolate: before the oldest retained sample there is no data (an error), and
/// the last sample's power is held only as far as the caller says time has passed.
///
/// Not thread-safe; PowerMonitor locks around it.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <vector>

#include "erg/core/result.hpp"

namespace erg::measure {

struct PowerPoint {
  std::chrono::nanoseconds time;  ///< Monitor clock.
  double watts;
};

class Timeline {
 public:
  /// `capacity` = 0: unbounded; else at least 2 samples are kept and older ones dropped.
  explicit Timeline(std::size_t capacity = 0);

  /// Adds a power reading taken at `t` (non-decreasing). Returns false if it was a repeat of
  /// the previous value and was not stored.
  bool add_power(std::chrono::nanoseconds t, double watts);
  /// Adds a cumulative energy reading (joules, any origin) taken at `t`; power over the
  /// preceding interval is derived from the difference, so there is none before the second.
  /// For counters (CPU packages).
  void add_energy(std::chrono::nanoseconds t, double joules);

  [[nodiscard]] std::size_t size() const { return size_; }
  [[nodiscard]] std::size_t capacity() const { return capacity_; }
  [[nodiscard]] bool empty() const { return size_ == 0; }
  /// Bytes held by the samples' chunks.
  [[nodiscard]] std::size_t allocated_bytes() const { return chunks_.size() * kChunk * kBytesPerSample; }

  /// The oldest retained sample's time (queries start here at the earliest).
  [[nodiscard]] std::optional<std::chrono::nanoseconds> first_time() const;
  /// Latest reading; nullopt while there is none, or (energy series) no power yet.
  [[nodiscard]] std::optional<PowerPoint> latest() const;
  /// The stored reading nearest to `t` (ties go to the earlier one); nullopt as latest().
  [[nodiscard]] std::optional<PowerPoint> nearest(std::chrono::nanoseconds t) const;
  /// Stored readings with t0 ≤ time ≤ t1, in time order.
  [[nodiscard]] std::vector<PowerPoint> between(std::chrono::nanoseconds t0, std::chrono::nanoseconds t1) const;
  /// The power held at `t` (the reading at or before it); nullopt before the first reading.
  [[nodiscard]] std::optional<double> power_at(std::chrono::nanoseconds t) const;
  /// Energy (J) from t0 to t1 with hold-last. InvalidArgument when t0 is before the oldest
  /// retained sample (no data there: nothing is extrapolated backwards); Unavailable when empty.
  /// The caller bounds t1 by the time lived (PowerMonitor: its clock's now).
  [[nodiscard]] Result<double> energy(std::chrono::nanoseconds t0, std::chrono::nanoseconds t1) const;

  /// Bytes per stored sample (the benchmark's figure).
  static constexpr std::size_t kBytesPerSample = 16;
  /// Samples per chunk.
  static constexpr std::size_t kChunk = 4096;

 private:
  struct Sample {
    std::int64_t t_ns;
    double cum_j;  ///< Energy integrated from the first sample ever to t_ns.
  };
  static_assert(sizeof(Sample) == kBytesPerSample);

  [[nodiscard]] const Sample& at(std::size_t i) const {
    const std::size_t j = head_ + i;
    return chunks_[j / kChunk][j % kChunk];
  }
  [[nodiscard]] double power_of(std::size_t i) const;           ///< Power held from sample i.
  [[nodiscard]] std::size_t upper_bound(std::int64_t t) const;  ///< First i with t_i > t.
  [[nodiscard]] double cumulative_at(std::int64_t t) const;     ///< t ≥ the first sample's time.
  void push(Sample s);

  std::deque<std::unique_ptr<Sample[]>> chunks_;
  std::size_t head_ = 0;  ///< Index of the oldest sample in chunks_.front().
  std::size_t size_ = 0;
  std::size_t capacity_ = 0;
  double last_power_ = 0.0;  ///< Power held from the newest sample.
  bool energy_series_ = false;
};

}  // namespace erg::measure
