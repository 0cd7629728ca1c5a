#pragma once
/// Counter bookkeeping in one place. Hardware energy counters are cumulative but not always
/// monotonic: the NVML counter restarts from 0 when the driver reloads, AMD's has been seen
/// going backwards (ROCm/amdsmi #115), RAPL wraps (the RAPL backend already compensates
/// wraps; a residual decrease is still caught here). A tracker turns raw readings into an
/// accumulated value that never decreases and counts the anomalies it absorbed, so a
/// measurement window can say it was affected.

#include <cstdint>
#include <optional>

namespace erg::measure {

class CounterTracker {
 public:
  /// Feeds a raw cumulative reading (any unit) and returns the accumulated value since the
  /// first reading (the first reading is the baseline: 0).
  ///
  /// A decrease is an anomaly: if the new raw value is smaller than the drop (the counter
  /// plausibly restarted from 0, e.g. a driver reload), the energy since the restart (= raw)
  /// is added; otherwise (the counter went backwards) nothing is added. Either way the result
  /// never decreases and anomalies() grows by one. Not thread-safe; callers lock.
  double update(double raw) {
    if (!last_) {
      last_ = raw;
      return accumulated_;
    }
    if (raw >= *last_) {
      accumulated_ += raw - *last_;
    } else {
      ++anomalies_;
      double drop = *last_ - raw;
      if (raw > 0 && raw <= drop) accumulated_ += raw;  // restarted from zero
    }
    last_ = raw;
    return accumulated_;
  }

  [[nodiscard]] double accumulated() const { return accumulated_; }
  /// Number of decreases absorbed so far.
  [[nodiscard]] std::uint64_t anomalies() const { return anomalies_; }

 private:
  std::optional<double> last_;
  double accumulated_ = 0.0;
  std::uint64_t anomalies_ = 0;
};

}  // namespace erg::measure
