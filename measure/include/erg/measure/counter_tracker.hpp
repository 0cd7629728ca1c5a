#pragma once
/// Counter bookkeeping in one place. Hardware energy counters are cumulative but not always
/// monotonic: the NVML counter restarts from 0 when the driver reloads, AMD's has been seen
/// going backwards (ROCm/amdsmi #115), RAPL wraps (the RAPL backend already compensates
/// wraps; a residual decrease is still caught here). A tracker turns raw readings into an
/// accumulated value that never decreases and counts the anomalies it absorbed, so a
/// measurement window can say it was affected and by how much it may be off.
///
/// Across an anomaly the counter's own figure for the span between the read before it and the
/// read after it is lost (or only partly kept, after a restart): the caller bridges that span
/// with an estimate (the counter's recent rate × the span) and a ceiling (the most the device
/// can draw × the span), and the tracker keeps the error bound that bridging implies.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>

namespace erg::measure {

/// What the caller knows of the span between the previous read and this one.
struct CounterBridge {
  double estimate = 0.0;  ///< Expected increase over the span (recent rate × span), in counter units.
  /// Most the counter can plausibly have increased over the span (peak power × span); a raw value
  /// above it after a decrease cannot be a restart. Negative: unknown (no ceiling).
  double ceiling = -1.0;
  std::int64_t span_ns = 0;  ///< The span's length.
  /// With a known update schedule: the updates it puts in the span (−1: unknown) and one
  /// update's expected increase. After a restart, the updates the counter's own count does not
  /// hold (those before the restart) are added at that increase.
  std::int64_t updates = -1;
  double per_update = 0.0;
};

/// The anomalies absorbed so far (cumulative; a window takes the difference of two snapshots).
struct CounterAnomalies {
  std::uint64_t restarts = 0;   ///< The counter restarted from (near) zero: a driver reload.
  std::uint64_t backwards = 0;  ///< The counter stepped back by more than it could have counted.
  std::int64_t bridged_ns = 0;  ///< Spans whose energy is (partly) an estimate.
  double bridged = 0.0;         ///< The estimated part of the accumulated value.
  /// Bound on the error of the estimated part: over each bridged span the truth lies between 0
  /// and the ceiling (or the estimate's double when no ceiling is known).
  double error_bound = 0.0;
  [[nodiscard]] std::uint64_t count() const { return restarts + backwards; }
};

class CounterTracker {
 public:
  /// Feeds a raw cumulative reading (any unit) and returns the accumulated value since the
  /// first reading (the first reading is the baseline: 0).
  ///
  /// A decrease is an anomaly. If the new raw value is no more than the drop and no more than
  /// the bridge's ceiling, the counter restarted from 0 (e.g. a driver reload) and counted `raw`
  /// since: the span counts `raw` plus the updates before the restart (with a known schedule:
  /// the span's updates less those `raw` holds; without: max(raw, estimate)). Otherwise the
  /// counter went backwards: what it counted over the span is unknown and the estimate stands
  /// for it. Either way the result never decreases. Not thread-safe; callers lock.
  double update(double raw, const CounterBridge& bridge = {}) {
    if (!last_) {
      last_ = raw;
      return accumulated_;
    }
    if (raw >= *last_) {
      accumulated_ += raw - *last_;
    } else {
      const double drop = *last_ - raw;
      const double estimate = std::max(0.0, bridge.estimate);
      const bool restart = raw >= 0.0 && raw <= drop && (bridge.ceiling < 0.0 || raw <= bridge.ceiling);
      double counted = 0.0;
      if (restart) {
        ++anomalies_.restarts;
        if (bridge.updates >= 0 && bridge.per_update > 0.0) {
          const auto in_raw = static_cast<std::int64_t>(std::llround(raw / bridge.per_update));
          counted = raw + bridge.per_update * static_cast<double>(std::max<std::int64_t>(0, bridge.updates - in_raw));
        } else {
          counted = std::max(raw, estimate);
        }
      } else {
        ++anomalies_.backwards;
        counted = estimate;
      }
      accumulated_ += counted;
      const double ceiling = bridge.ceiling >= 0.0 ? std::max(bridge.ceiling, counted) : 2.0 * counted;
      anomalies_.bridged += counted;
      anomalies_.bridged_ns += bridge.span_ns;
      anomalies_.error_bound += std::max(counted, ceiling - counted);
    }
    last_ = raw;
    return accumulated_;
  }

  /// Adds energy found later to have been lost in the last anomaly's span (an update the
  /// counter made before it stepped back, learned from the reads after it), with its bound.
  double add_estimate(double amount, double ceiling) {
    amount = std::max(0.0, amount);
    accumulated_ += amount;
    anomalies_.bridged += amount;
    anomalies_.error_bound += std::max(amount, (ceiling >= 0.0 ? std::max(ceiling, amount) : 2.0 * amount) - amount);
    return accumulated_;
  }

  [[nodiscard]] double accumulated() const { return accumulated_; }
  /// Number of decreases absorbed so far.
  [[nodiscard]] std::uint64_t anomalies() const { return anomalies_.count(); }
  [[nodiscard]] const CounterAnomalies& anomaly_record() const { return anomalies_; }

 private:
  std::optional<double> last_;
  double accumulated_ = 0.0;
  CounterAnomalies anomalies_;
};

}  // namespace erg::measure
