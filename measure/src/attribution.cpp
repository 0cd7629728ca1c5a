#include "erg/measure/attribution.hpp"

#include <algorithm>
#include <set>

namespace erg::measure {

using std::chrono::nanoseconds;

namespace {

double seconds(nanoseconds d) { return std::chrono::duration<double>(d).count(); }

Result<void> validate(std::span<const EnergySegment> segments, std::span<const RequestSpan> requests,
                      const AttributionOptions& options) {
  if (segments.empty()) return fail(ErrorCode::kInvalidArgument, "attribution needs at least one energy segment");
  for (std::size_t s = 0; s < segments.size(); ++s) {
    const auto& g = segments[s];
    if (g.end <= g.start) return fail(ErrorCode::kInvalidArgument, "energy segment with end <= start");
    if (s > 0 && g.start != segments[s - 1].end)
      return fail(ErrorCode::kInvalidArgument, "energy segments must be contiguous and in time order");
    if (g.energy.value() < 0 || g.error_bound.value() < 0 || g.power_swing.value() < 0)
      return fail(ErrorCode::kInvalidArgument, "energy segment with a negative energy, bound or swing");
  }
  if (options.idle_power && options.idle_power->value() < 0)
    return fail(ErrorCode::kInvalidArgument, "negative idle power");
  std::set<std::string_view> ids;
  for (const auto& r : requests) {
    if (r.end < r.start) return fail(ErrorCode::kInvalidArgument, "request '" + r.id + "' ends before it starts");
    if (r.tokens < 0) return fail(ErrorCode::kInvalidArgument, "request '" + r.id + "' has negative tokens");
    if (!ids.insert(r.id).second) return fail(ErrorCode::kInvalidArgument, "duplicate request id '" + r.id + "'");
  }
  return ok();
}

}  // namespace

Joules Attribution::attributed() const {
  Joules sum{0.0};
  for (const auto& r : requests) sum += r.energy;
  return sum;
}

std::string_view to_string(SplitRule rule) { return rule == SplitRule::kTokenShare ? "token_share" : "time_in_batch"; }

Result<Attribution> attribute_requests(std::span<const EnergySegment> segments, std::span<const RequestSpan> requests,
                                       const AttributionOptions& options) {
  if (auto v = validate(segments, requests, options); !v) return fail(v.error());
  const std::size_t n = requests.size();

  // A request's token rate is its weight under the token rule: its tokens are taken as produced
  // evenly over its whole lifetime, also the part outside the segments.
  std::vector<double> rate(n, 0.0);
  for (std::size_t i = 0; i < n; ++i)
    if (requests[i].end > requests[i].start)
      rate[i] = requests[i].tokens / seconds(requests[i].end - requests[i].start);

  Attribution out;
  out.rule = options.rule;
  out.requests.resize(n);
  for (std::size_t i = 0; i < n; ++i) out.requests[i].id = requests[i].id;

  std::vector<double> weight(n);  // this segment's ∫ w_i dt, in seconds
  std::vector<nanoseconds> cuts;
  std::vector<std::size_t> live;
  for (const auto& seg : segments) {
    out.measured += seg.energy;
    const double d = seconds(seg.end - seg.start);
    // The segment's elementary intervals: between any two consecutive request edges inside it
    // the set of requests in flight is fixed.
    cuts.assign({seg.start, seg.end});
    for (const auto& r : requests)
      for (nanoseconds t : {r.start, r.end})
        if (t > seg.start && t < seg.end) cuts.push_back(t);
    std::sort(cuts.begin(), cuts.end());
    cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
    std::fill(weight.begin(), weight.end(), 0.0);
    for (std::size_t k = 0; k + 1 < cuts.size(); ++k) {
      const nanoseconds a = cuts[k], b = cuts[k + 1];
      live.clear();
      double total_rate = 0.0;
      for (std::size_t i = 0; i < n; ++i)
        if (requests[i].start <= a && requests[i].end >= b) live.push_back(i), total_rate += rate[i];
      if (live.empty()) continue;
      const double len = seconds(b - a);
      const bool by_tokens = options.rule == SplitRule::kTokenShare && total_rate > 0.0;
      for (std::size_t i : live) weight[i] += len * (by_tokens ? rate[i] / total_rate : 1.0 / live.size());
    }
    // Constant power within the segment: idle at the calibrated idle power (never above the
    // segment's energy), the rest active.
    const Joules idle =
        options.idle_power ? std::min(*options.idle_power * (seg.end - seg.start), seg.energy) : Joules{0.0};
    const double active_power = (seg.energy - idle).value() / d;
    const double idle_power = idle.value() / d;
    for (std::size_t i = 0; i < n; ++i) {
      const double w = weight[i];
      if (w == 0.0) continue;
      auto& share = out.requests[i];
      const double idle_part = options.attribute_idle ? idle_power * w : 0.0;
      share.energy += Joules(active_power * w + idle_part);
      share.idle += Joules(idle_part);
      share.bound += Joules(seg.power_swing.value() * std::min(w, d - w) + seg.error_bound.value() * w / d);
    }
    for (std::size_t i = 0; i < n; ++i) {
      const nanoseconds a = std::max(seg.start, requests[i].start), b = std::min(seg.end, requests[i].end);
      if (b > a) out.requests[i].in_flight += Seconds(seconds(b - a));
    }
    out.unattributed_bound += seg.error_bound;
  }
  // The remainder, so that attributed + unattributed is the measured energy by construction.
  out.unattributed = out.measured - out.attributed();
  for (std::size_t i = 0; i < n; ++i) {
    auto& share = out.requests[i];
    out.unattributed_bound += share.bound;
    if (requests[i].tokens > 0) {
      share.joules_per_token = share.energy.value() / requests[i].tokens;
      share.joules_per_token_bound = share.bound.value() / requests[i].tokens;
    }
  }
  return out;
}

}  // namespace erg::measure
