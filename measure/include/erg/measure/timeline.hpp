#pragma once
/// A power timeline of one device in one domain, stored as cumulative energy.
///
/// Each stored sample is a timestamp and the energy integrated up to it. Power between two
/// samples is held at the earlier sample's value (hold-last), so the energy over any interval
/// within the timeline is C(t1) − C(t0) with C found by binary search: O(log n) in the number of
/// samples, exact for piecewise-constant power. Repeated equal readings are not stored
/// (deduplicated); integration still covers them.
///
/// Storage grows with the samples, in chunks of 4096 samples allocated when first needed (a new
/// timeline costs one chunk, of which only the pages written are resident). A sample takes 12
/// bytes: the energy (a double) and its time as µs after its chunk's first sample (32 bits, so a
/// chunk spans at most 71 minutes; a longer gap between stored samples starts a new chunk).
/// Times are kept to the µs. Unbounded by default; with a capacity, the oldest are dropped.
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
  /// For counters (CPU packages). A counter updates in steps (RAPL about every ms, later when
  /// its writer is late), so a reading that repeats the last value within kStaleNs of its last
  /// change says nothing new about power: the latest power stays the average since the change
  /// before (none yet, rather than 0 W); the next change gives the average over the whole span.
  void add_energy(std::chrono::nanoseconds t, double joules);
  /// How long a counter may repeat its value before the series reports 0 W.
  static constexpr std::int64_t kStaleNs = 50'000'000;

  [[nodiscard]] std::size_t size() const { return size_; }
  [[nodiscard]] std::size_t capacity() const { return capacity_; }
  [[nodiscard]] bool empty() const { return size_ == 0; }
  /// Bytes held by the samples' chunks.
  [[nodiscard]] std::size_t allocated_bytes() const { return chunks_.size() * sizeof(Chunk); }

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
  static constexpr std::size_t kBytesPerSample = 12;
  /// Samples per chunk.
  static constexpr std::size_t kChunk = 4096;

 private:
  struct Sample {
    std::int64_t t_ns;
    double cum_j;  ///< Energy integrated from the first sample ever to t_ns.
  };
  /// Struct of arrays: no padding between a sample's 4-byte time and 8-byte energy.
  struct Chunk {
    std::int64_t base_ns = 0;     ///< Time of the chunk's first sample.
    std::size_t first = 0;        ///< Absolute index (since the timeline began) of its first sample.
    std::uint32_t count = 0;      ///< Samples written.
    std::uint32_t dt_us[kChunk];  ///< µs after base_ns.
    double cum_j[kChunk];
  };

  [[nodiscard]] Sample at(std::size_t i) const;                 ///< i-th retained sample.
  [[nodiscard]] double power_of(std::size_t i) const;           ///< Power held from sample i.
  [[nodiscard]] std::size_t upper_bound(std::int64_t t) const;  ///< First i with t_i > t.
  [[nodiscard]] double cumulative_at(std::int64_t t) const;     ///< t ≥ the first sample's time.
  void push(Sample s);

  std::deque<std::unique_ptr<Chunk>> chunks_;
  std::size_t dropped_ = 0;  ///< Samples dropped from the front (absolute index of the oldest).
  std::size_t size_ = 0;
  std::size_t capacity_ = 0;
  double last_power_ = 0.0;  ///< Power held from the newest sample.
  Sample last_{};            ///< The newest sample, exactly.
  bool energy_series_ = false;
  // Energy series: the last sample whose value changed, and whether a power is known yet.
  Sample last_change_{};
  bool has_power_ = false;
};

}  // namespace erg::measure
