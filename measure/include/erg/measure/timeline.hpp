#pragma once
/// A bounded power timeline of one device in one domain, stored as cumulative energy.
///
/// Each stored sample is 16 bytes: a timestamp and the energy integrated up to it. Power
/// between two samples is held at the earlier sample's value (hold-last), so the energy over
/// any interval is C(t1) − C(t0) with C found by binary search: O(log n) in the number of
/// samples, exact for piecewise-constant power, and correct when power is constant over the
/// whole interval (hold the last sample to the interval's edges). Repeated equal readings are
/// not stored (deduplicated); integration still covers them.
///
/// Not thread-safe; PowerMonitor locks around it.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace erg::measure {

struct PowerPoint {
  std::chrono::nanoseconds time;  ///< Monitor clock.
  double watts;
};

class Timeline {
 public:
  /// `capacity` ≥ 2 samples are kept; older ones are dropped.
  explicit Timeline(std::size_t capacity);

  /// Adds a power reading taken at `t` (non-decreasing). Returns false if it was a repeat of
  /// the previous value and was not stored.
  bool add_power(std::chrono::nanoseconds t, double watts);
  /// Adds a cumulative energy reading (joules, any origin) taken at `t`; power over the
  /// preceding interval is derived from the difference. For counters (CPU packages).
  void add_energy(std::chrono::nanoseconds t, double joules);

  [[nodiscard]] std::size_t size() const { return size_; }
  [[nodiscard]] std::size_t capacity() const { return buf_.size(); }
  [[nodiscard]] bool empty() const { return size_ == 0; }

  /// Latest reading.
  [[nodiscard]] std::optional<PowerPoint> latest() const;
  /// The stored reading nearest to `t` (ties go to the earlier one).
  [[nodiscard]] std::optional<PowerPoint> nearest(std::chrono::nanoseconds t) const;
  /// Stored readings with t0 ≤ time ≤ t1, in time order.
  [[nodiscard]] std::vector<PowerPoint> between(std::chrono::nanoseconds t0, std::chrono::nanoseconds t1) const;
  /// Energy (J) from t0 to t1 with hold-last; before the first stored sample the first
  /// power is held backwards. nullopt if empty.
  [[nodiscard]] std::optional<double> energy(std::chrono::nanoseconds t0, std::chrono::nanoseconds t1) const;

  /// Bytes per stored sample (the benchmark's figure).
  static constexpr std::size_t kBytesPerSample = 16;

 private:
  struct Sample {
    std::int64_t t_ns;
    double cum_j;  ///< Energy integrated from the first sample ever to t_ns.
  };
  static_assert(sizeof(Sample) == kBytesPerSample);

  [[nodiscard]] const Sample& at(std::size_t i) const { return buf_[(head_ + i) % buf_.size()]; }
  [[nodiscard]] double power_of(std::size_t i) const;           ///< Power held from sample i.
  [[nodiscard]] std::size_t upper_bound(std::int64_t t) const;  ///< First i with t_i > t.
  [[nodiscard]] double cumulative_at(std::int64_t t) const;
  void push(Sample s);

  std::vector<Sample> buf_;
  std::size_t head_ = 0;
  std::size_t size_ = 0;
  double last_power_ = 0.0;  ///< Power held from the newest sample.
};

}  // namespace erg::measure
