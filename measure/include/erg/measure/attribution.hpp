#pragma once
/// Per-request energy attribution (issue 23): splits a device's measured energy over an interval
/// among inference requests that overlap in time, by a stated rule, with a bound on each figure.
///
/// Model. The interval is cut into contiguous measured segments (a counter update period, an
/// EnergyMonitor window, ...), each with its energy and that figure's own error bound. Within a
/// segment the power is taken as constant at the segment's mean; the caller states how far the
/// true power may swing inside it (max − min, from a power timeline or the device's range).
/// Optionally an idle power (calibrated when the device is idle) separates each segment's idle
/// energy, min(idle power × duration, energy), from its active energy.
///
/// Rules, applied instant by instant to the requests in flight (start ≤ t < end):
///  - time-in-batch (the default): every request in flight gets an equal share;
///  - token share: a request's weight is its token rate, tokens / (end − start) (its tokens are
///    taken as produced evenly over its lifetime), so at every instant the energy per token is the
///    same for every request in flight; when no request in flight has tokens, equal shares.
/// Energy at instants with no request in flight is unattributed; so is idle energy when
/// `attribute_idle` is false (a request is then charged only the energy above idle).
/// Shares sum to the measured energy: unattributed = measured − Σ request energies, so
/// attributed + unattributed equals the measured energy to floating-point rounding.
///
/// Bound on each request's figure, summed over segments s with duration d_s, power swing ΔP_s,
/// energy error e_s and the request's weight integral W = ∫_s w(t) dt:
///     ΔP_s · min(W, d_s − W) + e_s · W / d_s.
/// Why: the estimate charges the mean power P̄ over W, the truth ∫ P(t) w(t) dt; since
/// ∫_s (P − P̄) dt = 0, the difference is ∫ (P − P̄) w = −∫ (P − P̄)(1 − w), and |P − P̄| ≤ ΔP_s.
/// The idle power is taken as exact (its calibration error is the caller's to add).

#include <chrono>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "erg/core/result.hpp"
#include "erg/core/units.hpp"

namespace erg::measure {

/// One measured piece of the interval. Segments must be contiguous and in time order.
struct EnergySegment {
  std::chrono::nanoseconds start{0};
  std::chrono::nanoseconds end{0};
  Joules energy{0.0};
  Joules error_bound{0.0};  ///< how far `energy` may be from the truth (e.g. GpuEnergy::error_bound)
  Watts power_swing{0.0};   ///< max − min true power inside the segment
};

/// A request as the server reports it. Parts outside the segments are not charged.
struct RequestSpan {
  std::string id;
  std::chrono::nanoseconds start{0};
  std::chrono::nanoseconds end{0};
  double tokens = 0.0;
};

enum class SplitRule { kTimeInBatch, kTokenShare };

struct AttributionOptions {
  SplitRule rule = SplitRule::kTimeInBatch;
  /// The device's calibrated idle power; nullopt: no idle/active split (all energy is active).
  std::optional<Watts> idle_power;
  /// With idle_power: charge requests their share of idle energy too (true) or only of the
  /// energy above idle (false; the idle energy is then unattributed).
  bool attribute_idle = true;
};

struct RequestShare {
  std::string id;
  Joules energy{0.0};                      ///< the request's share (idle part included when attributed)
  Joules idle{0.0};                        ///< the idle part of `energy`
  Joules bound{0.0};                       ///< |energy − truth| ≤ bound under the model (see the file comment)
  Seconds in_flight{0.0};                  ///< time inside the segments while in flight
  std::optional<double> joules_per_token;  ///< nullopt for a request without tokens
  std::optional<double> joules_per_token_bound;  ///< bound / tokens
};

struct Attribution {
  SplitRule rule = SplitRule::kTimeInBatch;
  Joules measured{0.0};      ///< Σ segment energies
  Joules unattributed{0.0};  ///< measured − Σ request energies
  Joules unattributed_bound{0.0};
  std::vector<RequestShare> requests;  ///< in the order given
  [[nodiscard]] Joules attributed() const;
};

/// Splits the segments' energy among `requests` by `options.rule`.
/// InvalidArgument: no segments, a segment with end ≤ start or not contiguous with the previous
/// one, negative energy/bound/swing/tokens/idle power, a request with end < start, or a duplicate id.
Result<Attribution> attribute_requests(std::span<const EnergySegment> segments, std::span<const RequestSpan> requests,
                                       const AttributionOptions& options = {});

std::string_view to_string(SplitRule rule);

}  // namespace erg::measure
