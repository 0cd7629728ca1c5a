#include "erg/measure/timeline.hpp"

#include <algorithm>
#include <cmath>

namespace erg::measure {

Timeline::Timeline(std::size_t capacity) : capacity_(capacity == 0 ? 0 : std::max<std::size_t>(capacity, 2)) {}

void Timeline::push(Sample s) {
  const std::size_t slot = head_ + size_;
  if (slot == chunks_.size() * kChunk) {
    // Not value-initialized: only the pages the samples are written to become resident.
    chunks_.push_back(std::unique_ptr<Sample[]>(new Sample[kChunk]));
  }
  chunks_[slot / kChunk][slot % kChunk] = s;
  ++size_;
  if (capacity_ != 0 && size_ > capacity_) {
    ++head_;
    --size_;
    if (head_ == kChunk) {
      chunks_.pop_front();
      head_ = 0;
    }
  }
}

bool Timeline::add_power(std::chrono::nanoseconds t, double watts) {
  if (size_ == 0) {
    push({t.count(), 0.0});
    last_power_ = watts;
    return true;
  }
  const Sample& last = at(size_ - 1);
  if (watts == last_power_) return false;  // dedup: hold-last already covers it
  std::int64_t tn = std::max(t.count(), last.t_ns);
  double cum = last.cum_j + last_power_ * static_cast<double>(tn - last.t_ns) * 1e-9;
  push({tn, cum});
  last_power_ = watts;
  return true;
}

void Timeline::add_energy(std::chrono::nanoseconds t, double joules) {
  energy_series_ = true;
  if (size_ == 0) {
    push({t.count(), joules});
    last_power_ = 0.0;
    return;
  }
  const Sample& last = at(size_ - 1);
  if (t.count() <= last.t_ns) return;
  double dt = static_cast<double>(t.count() - last.t_ns) * 1e-9;
  double p = std::max(0.0, (joules - last.cum_j) / dt);
  push({t.count(), std::max(joules, last.cum_j)});
  last_power_ = p;
}

double Timeline::power_of(std::size_t i) const {
  if (i + 1 >= size_) return last_power_;
  const Sample& a = at(i);
  const Sample& b = at(i + 1);
  if (b.t_ns == a.t_ns) return 0.0;
  return (b.cum_j - a.cum_j) / (static_cast<double>(b.t_ns - a.t_ns) * 1e-9);
}

std::size_t Timeline::upper_bound(std::int64_t t) const {
  std::size_t lo = 0;
  std::size_t hi = size_;
  while (lo < hi) {
    std::size_t mid = lo + (hi - lo) / 2;
    if (at(mid).t_ns <= t)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

double Timeline::cumulative_at(std::int64_t t) const {
  const std::size_t ub = upper_bound(t);
  const Sample& s = at(ub == 0 ? 0 : ub - 1);
  return s.cum_j + power_of(ub == 0 ? 0 : ub - 1) * static_cast<double>(t - s.t_ns) * 1e-9;
}

std::optional<std::chrono::nanoseconds> Timeline::first_time() const {
  if (size_ == 0) return std::nullopt;
  return std::chrono::nanoseconds(at(0).t_ns);
}

std::optional<PowerPoint> Timeline::latest() const {
  if (size_ == 0 || (energy_series_ && size_ < 2)) return std::nullopt;
  return PowerPoint{std::chrono::nanoseconds(at(size_ - 1).t_ns), last_power_};
}

std::optional<PowerPoint> Timeline::nearest(std::chrono::nanoseconds t) const {
  if (size_ == 0 || (energy_series_ && size_ < 2)) return std::nullopt;
  std::size_t ub = upper_bound(t.count());
  std::size_t best;
  if (ub == 0) {
    best = 0;
  } else if (ub == size_) {
    best = size_ - 1;
  } else {
    std::int64_t before = t.count() - at(ub - 1).t_ns;
    std::int64_t after = at(ub).t_ns - t.count();
    best = after < before ? ub : ub - 1;  // ties go to the earlier sample
  }
  return PowerPoint{std::chrono::nanoseconds(at(best).t_ns), power_of(best)};
}

std::vector<PowerPoint> Timeline::between(std::chrono::nanoseconds t0, std::chrono::nanoseconds t1) const {
  std::vector<PowerPoint> out;
  if (size_ == 0 || t1 < t0) return out;
  // An energy series' last sample has no power after it yet unless there are two.
  const std::size_t n = energy_series_ && size_ < 2 ? 0 : size_;
  std::size_t i = upper_bound(t0.count() - 1);
  for (; i < n && at(i).t_ns <= t1.count(); ++i) out.push_back({std::chrono::nanoseconds(at(i).t_ns), power_of(i)});
  return out;
}

std::optional<double> Timeline::power_at(std::chrono::nanoseconds t) const {
  if (size_ == 0 || (energy_series_ && size_ < 2)) return std::nullopt;
  const std::size_t ub = upper_bound(t.count());
  if (ub == 0) return std::nullopt;
  return power_of(ub - 1);
}

Result<double> Timeline::energy(std::chrono::nanoseconds t0, std::chrono::nanoseconds t1) const {
  if (size_ == 0) return fail(ErrorCode::kUnavailable, "no sample yet");
  if (t0.count() < at(0).t_ns)
    return fail(ErrorCode::kInvalidArgument,
                "the interval starts " +
                    std::to_string(static_cast<double>(at(0).t_ns - t0.count()) * 1e-9).substr(0, 8) +
                    " s before the oldest sample kept (nothing is extrapolated)");
  if (t1 <= t0) return 0.0;
  return std::max(0.0, cumulative_at(t1.count()) - cumulative_at(t0.count()));
}

}  // namespace erg::measure
