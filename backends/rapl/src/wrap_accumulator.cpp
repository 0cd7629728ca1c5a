#include "erg/backends/rapl/wrap_accumulator.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace erg::rapl {

std::uint64_t WrapAccumulator::update(std::uint64_t raw_uj) { return update(raw_uj, std::chrono::nanoseconds(0)); }

std::uint64_t WrapAccumulator::update(std::uint64_t raw_uj, std::chrono::nanoseconds elapsed) {
  if (!has_baseline_) {
    has_baseline_ = true;
    last_raw_uj_ = raw_uj;
    return accumulated_uj_;
  }

  // d: the delta assuming at most one wrap.
  std::uint64_t delta = 0;
  // More than P allows in the elapsed time plus a second (which covers the reader's own timing,
  // a read stamped late or a thread preempted between reads, many times over).
  const auto beyond_bound = [&](std::uint64_t d) {
    if (elapsed.count() <= 0) return false;
    const double elapsed_s = std::chrono::duration<double>(elapsed).count();
    return static_cast<double>(d) > max_power_.value() * (elapsed_s + 1.0) * 1e6;
  };
  const auto implausible = [&] {
    ++implausible_updates_;
    last_raw_uj_ = raw_uj;
    return accumulated_uj_;
  };
  if (raw_uj >= last_raw_uj_) {
    delta = raw_uj - last_raw_uj_;
    if (beyond_bound(delta)) return implausible();
  } else if (max_range_uj_ > 0 && last_raw_uj_ <= max_range_uj_) {
    delta = (max_range_uj_ - last_raw_uj_) + raw_uj;
    if (beyond_bound(delta)) return implausible();
    ++wraps_;
  } else {
    // Unknown range (or a raw value above it): the counter restarted; count from 0 — unless
    // that is more than P allows too (a corrupt reading; found by estimator_fuzz).
    delta = raw_uj;
    if (beyond_bound(delta)) return implausible();
  }

  bool ambiguous = false;
  if (elapsed.count() > 0 && max_range_uj_ > 0) {
    const double elapsed_s = std::chrono::duration<double>(elapsed).count();
    const double range = static_cast<double>(max_range_uj_);
    const double d = static_cast<double>(delta);
    const double bound_uj = max_power_.value() * elapsed_s * 1e6;  // W × s = J; × 1e6 → µJ
    if (bound_uj >= d + range) {
      ambiguous = true;
      ++ambiguous_updates_;
      const double max_extra = std::floor((bound_uj - d) / range);
      double extra = 0.0;
      if (timed_elapsed_.count() > 0) {
        const double avg_uj_per_s =
            static_cast<double>(timed_energy_uj_) / std::chrono::duration<double>(timed_elapsed_).count();
        extra = std::clamp(std::round((avg_uj_per_s * elapsed_s - d) / range), 0.0, max_extra);
      }
      const auto extra_wraps = static_cast<std::uint64_t>(extra);
      delta += extra_wraps * max_range_uj_;
      wraps_ += extra_wraps;
    }
  }

  // Saturates rather than wraps (2^64 µJ is 5 TWh: only absurd elapsed times get there; found
  // by estimator_fuzz): the total never decreases.
  accumulated_uj_ = delta > std::numeric_limits<std::uint64_t>::max() - accumulated_uj_
                        ? std::numeric_limits<std::uint64_t>::max()
                        : accumulated_uj_ + delta;
  last_raw_uj_ = raw_uj;
  if (elapsed.count() > 0 && !ambiguous) {
    timed_energy_uj_ += delta;
    timed_elapsed_ += elapsed;
  }
  return accumulated_uj_;
}

}  // namespace erg::rapl
