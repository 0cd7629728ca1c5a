#include "erg/measure/timeline.hpp"

#include <algorithm>
#include <cmath>

namespace erg::measure {

Timeline::Timeline(std::size_t capacity) : capacity_(capacity == 0 ? 0 : std::max<std::size_t>(capacity, 2)) {}

static_assert(sizeof(std::uint32_t) + sizeof(double) == Timeline::kBytesPerSample);

void Timeline::push(Sample s) {
  // Times to the µs, and a new chunk when the current one is full or its 32-bit µs offsets
  // cannot reach this sample.
  Chunk* c = chunks_.empty() ? nullptr : chunks_.back().get();
  const std::int64_t dt_us = c == nullptr ? 0 : (s.t_ns - c->base_ns) / 1000;
  if (c == nullptr || c->count == kChunk || dt_us > static_cast<std::int64_t>(UINT32_MAX)) {
    // Not value-initialized: only the pages the samples are written to become resident.
    auto fresh = std::unique_ptr<Chunk>(new Chunk);
    fresh->base_ns = s.t_ns;
    fresh->first = dropped_ + size_;
    fresh->count = 0;
    chunks_.push_back(std::move(fresh));
    c = chunks_.back().get();
  }
  c->dt_us[c->count] = static_cast<std::uint32_t>((s.t_ns - c->base_ns) / 1000);
  c->cum_j[c->count] = s.cum_j;
  ++c->count;
  ++size_;
  last_ = {c->base_ns + static_cast<std::int64_t>(c->dt_us[c->count - 1]) * 1000, s.cum_j};
  if (capacity_ != 0 && size_ > capacity_) {
    ++dropped_;
    --size_;
    const Chunk& front = *chunks_.front();
    if (dropped_ >= front.first + front.count) chunks_.pop_front();
  }
}

Timeline::Sample Timeline::at(std::size_t i) const {
  const std::size_t abs = dropped_ + i;
  // Chunks are full but for a rare early start (a gap of over 71 minutes): find by first index.
  std::size_t lo = 0, hi = chunks_.size();
  const std::size_t guess = (abs - chunks_.front()->first) / kChunk;
  if (guess < hi && chunks_[guess]->first <= abs && abs < chunks_[guess]->first + chunks_[guess]->count) {
    lo = guess;
  } else {
    while (hi - lo > 1) {
      const std::size_t mid = lo + (hi - lo) / 2;
      (chunks_[mid]->first <= abs ? lo : hi) = mid;
    }
  }
  const Chunk& c = *chunks_[lo];
  const std::size_t k = abs - c.first;
  return {c.base_ns + static_cast<std::int64_t>(c.dt_us[k]) * 1000, c.cum_j[k]};
}

bool Timeline::add_power(std::chrono::nanoseconds t, double watts) {
  if (size_ == 0) {
    push({t.count(), 0.0});
    last_power_ = watts;
    return true;
  }
  const Sample last = last_;
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
    last_change_ = last_;
    last_power_ = 0.0;
    return;
  }
  const Sample last = last_;
  if (t.count() <= last.t_ns) return;
  if (joules <= last.cum_j) {
    // The counter has not moved: a step it has yet to take, or no power at all.
    push({t.count(), last.cum_j});
    if (t.count() - last_change_.t_ns > kStaleNs) last_power_ = 0.0, has_power_ = true;
    return;
  }
  // The average since the previous change: a counter that sat still for a few readings (behind
  // its own update) and then moved spent that energy over the whole span.
  const double dt = static_cast<double>(t.count() - last_change_.t_ns) * 1e-9;
  push({t.count(), joules});
  last_power_ = (joules - last_change_.cum_j) / dt;
  last_change_ = last_;
  has_power_ = true;
}

double Timeline::power_of(std::size_t i) const {
  if (i + 1 >= size_) return last_power_;
  const Sample a = at(i);
  const Sample b = at(i + 1);
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
  const Sample s = at(ub == 0 ? 0 : ub - 1);
  return s.cum_j + power_of(ub == 0 ? 0 : ub - 1) * static_cast<double>(t - s.t_ns) * 1e-9;
}

std::optional<std::chrono::nanoseconds> Timeline::first_time() const {
  if (size_ == 0) return std::nullopt;
  return std::chrono::nanoseconds(at(0).t_ns);
}

std::optional<PowerPoint> Timeline::latest() const {
  if (size_ == 0 || (energy_series_ && !has_power_)) return std::nullopt;
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
