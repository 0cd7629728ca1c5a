#pragma once
/// Turns the raw, wrapping RAPL counter into a monotonic 64-bit energy total. Pure (no I/O, no
/// clock), so every wrap case is unit-tested on plain numbers.

#include <chrono>
#include <cstdint>

#include "erg/core/units.hpp"

namespace erg::rapl {

/// The stated maximum power of one RAPL domain (package or DRAM), used to bound how much energy
/// can have been spent between two reads. 1000 W is Zeus's figure (RAPL_COUNTER_MAX_INCREASE =
/// 1000 W × 0.1 s) and is above any shipping CPU package (the largest server TDPs are ~500 W).
inline constexpr Watts kDefaultMaxPower{1000.0};

/// Wrap-compensating accumulator for one counter. Not thread-safe (the owner locks).
///
/// `energy_uj` counts up and wraps to 0 at `max_energy_range_uj` (R); the kernel does not
/// accumulate for sysfs readers. Rules:
///  - the first update is the baseline: it returns 0 and only records the raw value;
///  - raw ≥ last: delta = raw − last;
///  - raw < last: one wrap, delta = (R − last) + raw (a wrap to exactly 0 gives R − last);
///  - the total never decreases.
///
/// Several wraps between two reads leave no trace in the raw values: the counter only tells the
/// energy modulo R. The candidates are d, d + R, d + 2R, ... where d is the delta above.
/// update(raw, elapsed) narrows them with time:
///  - the stated maximum power P bounds the energy by P × elapsed; candidates above it are
///    impossible. When even d + R exceeds the bound (the normal case, guaranteed while the
///    keepalive reads at least every R / P) the answer is d and nothing is guessed;
///  - otherwise the update is *ambiguous* and counted in ambiguous_updates(). The chosen
///    candidate is the one nearest the energy the average power of the earlier unambiguous
///    timed updates predicts (average × elapsed), clamped to the bound; with no such history
///    it is d. This is exact whenever the power during the gap stays within R / (2 × elapsed)
///    of that average, and never exceeds what P allows.
/// update(raw) without a time hint always takes d (like zeusd and Zeus's polling process).
///
/// A change that no energy explains — more than P allows in the elapsed time plus a second,
/// whether as an increase or as the wrap a decrease implies — is a counter reset (a driver reload
/// restarts it) or a corrupt reading. It adds nothing, counts in implausible_updates(), and the
/// new value becomes the baseline (a reset keeps counting from there; after a corrupt reading the
/// next one is judged the same way). Counting a decrease as a wrap would add a whole range
/// (262 kJ on a package).
class WrapAccumulator {
 public:
  /// `max_range_uj` is the zone's max_energy_range_uj. With 0 (unknown) a decrease is treated as
  /// a counter reset (delta = raw) and no wrap is inferred.
  explicit WrapAccumulator(std::uint64_t max_range_uj, Watts max_power = kDefaultMaxPower)
      : max_range_uj_(max_range_uj), max_power_(max_power) {}

  /// Feeds one raw reading; returns the accumulated energy in µJ since the baseline.
  std::uint64_t update(std::uint64_t raw_uj);
  /// Feeds one raw reading taken `elapsed` after the previous one (ignored for the baseline;
  /// zero or negative means unknown); returns the accumulated energy in µJ since the baseline.
  std::uint64_t update(std::uint64_t raw_uj, std::chrono::nanoseconds elapsed);

  [[nodiscard]] bool has_baseline() const { return has_baseline_; }
  /// Accumulated energy since the baseline, µJ.
  [[nodiscard]] std::uint64_t accumulated_uj() const { return accumulated_uj_; }
  /// The last raw value fed.
  [[nodiscard]] std::uint64_t last_raw_uj() const { return last_raw_uj_; }
  /// Wraps counted so far (observed decreases plus inferred extra wraps).
  [[nodiscard]] std::uint64_t wraps() const { return wraps_; }
  /// Updates where more than one candidate was physically possible (see the class comment).
  [[nodiscard]] std::uint64_t ambiguous_updates() const { return ambiguous_updates_; }
  /// Changes that no energy explains (see the class comment).
  [[nodiscard]] std::uint64_t implausible_updates() const { return implausible_updates_; }
  [[nodiscard]] std::uint64_t max_range_uj() const { return max_range_uj_; }
  [[nodiscard]] Watts max_power() const { return max_power_; }

 private:
  std::uint64_t max_range_uj_;
  Watts max_power_;
  bool has_baseline_ = false;
  std::uint64_t last_raw_uj_ = 0;
  std::uint64_t accumulated_uj_ = 0;
  std::uint64_t wraps_ = 0;
  std::uint64_t ambiguous_updates_ = 0;
  std::uint64_t implausible_updates_ = 0;
  // Energy and time of the unambiguous timed updates: the average power used to pick a candidate.
  std::uint64_t timed_energy_uj_ = 0;
  std::chrono::nanoseconds timed_elapsed_{0};
};

}  // namespace erg::rapl
