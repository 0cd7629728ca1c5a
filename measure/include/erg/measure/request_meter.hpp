#pragma once
/// RequestMeter: the bookkeeping an inference server needs for per-request energy. The server
/// calls begin(id) when a request enters its batch and end(id, tokens) when it leaves; the meter
/// stamps both on its clock (the clock the energy segments use) and attributes a measured
/// interval among the finished requests (attribute_requests, attribution.hpp).
///
/// Thread-safe: begin, end and the readers may be called from any thread.

#include <chrono>
#include <map>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "erg/core/clock.hpp"
#include "erg/core/result.hpp"
#include "erg/measure/attribution.hpp"

namespace erg::measure {

class RequestMeter {
 public:
  /// `clock`: nullptr = the steady clock. Must outlive the meter.
  explicit RequestMeter(const Clock* clock = nullptr);

  /// A request enters the batch now. AlreadyExists if `id` is in flight or finished and not yet
  /// forgotten (ids name requests in attribution results, so they must be unique).
  Result<void> begin(const std::string& id);
  /// The request leaves the batch now, having produced `tokens` (≥ 0). NotFound if `id` is not in
  /// flight; InvalidArgument for negative tokens.
  Result<void> end(const std::string& id, double tokens);

  [[nodiscard]] std::size_t in_flight() const;
  /// The finished requests, in the order they ended.
  [[nodiscard]] std::vector<RequestSpan> finished() const;
  /// Splits the segments' energy among the finished requests. A request still in flight is not
  /// charged: its share of the segments goes to the others or stays unattributed, so attribute
  /// an interval once every request overlapping it has ended.
  [[nodiscard]] Result<Attribution> attribute(std::span<const EnergySegment> segments,
                                              const AttributionOptions& options = {}) const;
  /// Drops the finished requests that ended at or before `t` (their interval is settled).
  void forget_until(std::chrono::nanoseconds t);

 private:
  const Clock* clock_;
  mutable std::mutex mutex_;
  std::map<std::string, std::chrono::nanoseconds, std::less<>> started_;
  std::vector<RequestSpan> finished_;
};

}  // namespace erg::measure
