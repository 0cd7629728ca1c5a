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
  /// With a known update schedule: the updates it surely puts in the span (−1: schedule unknown),
  /// one update's expected increase, and the most one update can add (negative: unknown). The
  /// counter's figure for exactly those updates is what an anomaly can take away: a step back
  /// loses them all, a restart those before it (the updates `raw` holds are counted by it).
  std::int64_t updates = -1;
  double per_update = 0.0;
  double per_update_ceiling = -1.0;
};

/// The anomalies absorbed so far (cumulative; a window takes the difference of two snapshots).
struct CounterAnomalies {
  std::uint64_t restarts = 0;   ///< The counter restarted from (near) zero: a driver reload.
  std::uint64_t backwards = 0;  ///< The counter stepped back by more than it could have counted.
  /// The counter advanced by less than the caller knows the span added (see add_shortfall): a
  /// step back that coincided with an update. The value keeps the counter's advance (it is never
  /// raised on suspicion); the bound says how much it may be low.
  std::uint64_t shortfalls = 0;
  /// Spans whose energy is (partly) an estimate: an update the anomaly took away, or one it may
  /// have taken (pending a decision).
  std::int64_t bridged_ns = 0;
  double bridged = 0.0;  ///< The estimated part of the accumulated value.
  /// Bound on the error of the estimated part: each estimated update lies between 0 and one
  /// update's ceiling (without a schedule: the span's ceiling, or the estimate's double when no
  /// ceiling is known); an update that may or may not have been taken adds its ceiling; a shortfall
  /// adds its own (add_shortfall).
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
  /// since; otherwise it went backwards and what it counted over the span is unknown. With a
  /// known schedule the span counts `raw` (restart only) plus one expected update's increase for
  /// each update the anomaly took away (see CounterBridge::updates; after a restart, those
  /// `raw` does not hold); without one, the estimate (after a restart: max(raw, estimate)).
  /// Either way the result never decreases. Not thread-safe; callers lock.
  double update(double raw, const CounterBridge& bridge = {}) {
    last_raw_in_updates_ = 0;
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
      restart ? ++anomalies_.restarts : ++anomalies_.backwards;
      if (bridge.updates >= 0 && bridge.per_update > 0.0) {
        // The updates `raw` holds since a restart: at least one when it counted anything.
        const std::int64_t held =
            restart && raw > 0.0 ? std::max<std::int64_t>(1, std::llround(raw / bridge.per_update)) : 0;
        last_raw_in_updates_ = held;
        const std::int64_t lost = std::max<std::int64_t>(0, bridge.updates - held);
        const double estimated = bridge.per_update * static_cast<double>(lost);
        accumulated_ += (restart ? raw : 0.0) + estimated;
        if (lost > 0) {
          const double per = bridge.per_update_ceiling >= 0.0 ? std::max(bridge.per_update_ceiling, bridge.per_update)
                                                              : 2.0 * bridge.per_update;
          anomalies_.bridged += estimated;
          anomalies_.bridged_ns += bridge.span_ns;
          anomalies_.error_bound += static_cast<double>(lost) * std::max(bridge.per_update, per - bridge.per_update);
        }
      } else {
        const double counted = restart ? std::max(raw, estimate) : estimate;
        accumulated_ += counted;
        const double ceiling = bridge.ceiling >= 0.0 ? std::max(bridge.ceiling, counted) : 2.0 * counted;
        anomalies_.bridged += counted;
        anomalies_.bridged_ns += bridge.span_ns;
        anomalies_.error_bound += std::max(counted, ceiling - counted);
      }
    }
    last_ = raw;
    return accumulated_;
  }

  /// After an update() that absorbed a restart with a known schedule: the updates the new raw
  /// value was taken to hold (0 otherwise).
  [[nodiscard]] std::int64_t raw_updates() const { return last_raw_in_updates_; }

  /// An update the last anomaly may have taken away, to be decided by the reads after it: its
  /// ceiling joins the error bound (and `span_ns` the bridged time) until then, and stays.
  void add_undecided(double ceiling, std::int64_t span_ns) {
    anomalies_.error_bound += std::max(0.0, ceiling);
    anomalies_.bridged_ns += span_ns;
  }
  /// The last advance was smaller than the caller knows the counter counted over its span (a step
  /// back hidden by an update that added more): counted as a shortfall, and `bound` (the most the
  /// advance can be short of the truth) joins the error bound. The value is left as counted.
  void add_shortfall(double bound) {
    ++anomalies_.shortfalls;
    anomalies_.error_bound += std::max(0.0, bound);
  }
  /// Adds energy found later to have been taken by the last anomaly (an update the counter made
  /// before it stepped back, learned from the reads after it); its bound was added with
  /// add_undecided.
  double add_estimate(double amount) {
    amount = std::max(0.0, amount);
    accumulated_ += amount;
    anomalies_.bridged += amount;
    return accumulated_;
  }

  [[nodiscard]] double accumulated() const { return accumulated_; }
  /// The last raw reading (nullopt before the first).
  [[nodiscard]] std::optional<double> last_raw() const { return last_; }
  /// Number of decreases absorbed so far.
  [[nodiscard]] std::uint64_t anomalies() const { return anomalies_.count(); }
  [[nodiscard]] const CounterAnomalies& anomaly_record() const { return anomalies_; }

 private:
  std::optional<double> last_;
  double accumulated_ = 0.0;
  std::int64_t last_raw_in_updates_ = 0;
  CounterAnomalies anomalies_;
};

}  // namespace erg::measure
