#include "erg/measure/request_meter.hpp"

#include <algorithm>

namespace erg::measure {

RequestMeter::RequestMeter(const Clock* clock) : clock_(clock ? clock : &SteadyClock::instance()) {}

Result<void> RequestMeter::begin(const std::string& id) {
  const auto now = clock_->now();
  std::lock_guard lock(mutex_);
  const bool done = std::any_of(finished_.begin(), finished_.end(), [&](const RequestSpan& r) { return r.id == id; });
  if (done || !started_.emplace(id, now).second)
    return fail(ErrorCode::kAlreadyExists, "request '" + id + "' is already metered");
  return ok();
}

Result<void> RequestMeter::end(const std::string& id, double tokens) {
  const auto now = clock_->now();
  if (tokens < 0) return fail(ErrorCode::kInvalidArgument, "request '" + id + "' has negative tokens");
  std::lock_guard lock(mutex_);
  auto it = started_.find(id);
  if (it == started_.end()) return fail(ErrorCode::kNotFound, "request '" + id + "' is not in flight");
  finished_.push_back({id, it->second, now, tokens});
  started_.erase(it);
  return ok();
}

std::size_t RequestMeter::in_flight() const {
  std::lock_guard lock(mutex_);
  return started_.size();
}

std::vector<RequestSpan> RequestMeter::finished() const {
  std::lock_guard lock(mutex_);
  return finished_;
}

Result<Attribution> RequestMeter::attribute(std::span<const EnergySegment> segments,
                                            const AttributionOptions& options) const {
  const auto done = finished();
  return attribute_requests(segments, done, options);
}

void RequestMeter::forget_until(std::chrono::nanoseconds t) {
  std::lock_guard lock(mutex_);
  std::erase_if(finished_, [&](const RequestSpan& r) { return r.end <= t; });
}

}  // namespace erg::measure
