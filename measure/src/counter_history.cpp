#include "erg/measure/counter_history.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <iterator>

namespace erg::measure {
namespace {

constexpr double kNsPerS = 1e9;
// A bracket this narrow pins an update's time well enough to fit the schedule to it.
constexpr double kNarrowNs = 3e6;
// Stamps that differ by more than this between two reads of one value move with the reads.
constexpr std::int64_t kStampSlackNs = 50'000;
// A stamp this far outside the bracket of reads around its update is not the update's time (the
// driver's clock and the monitor's are converted through the wall clock: a few µs apart).
constexpr std::int64_t kStampBracketSlackNs = 200'000;
// Updates in a row whose stamps lie inside their brackets before stamps are trusted (and after
// stamps were once seen outside a bracket).
constexpr int kStampInside = 3;
constexpr int kStampInsideAgain = 16;
// The schedule check: an update contradicts the schedule when its pinned time is more than
// kCheckSigmas σ (plus half its bracket and this floor) off its predicted time, or when its
// bracket holds no predicted update within that margin. This many
// contradictions among the last kCheckWindow checked updates drop the schedule.
constexpr double kCheckSigmas = 4.0;
// The floor is below the follower's lead (4σ + 0.3 ms): an update its read just before the
// predicted time already shows came earlier than the schedule allows.
constexpr double kCheckFloorNs = 200'000;
constexpr int kCheckWindow = 6;
constexpr int kCheckMisses = 3;
constexpr std::uint64_t kCheckAfterLock = 8;
constexpr double kCheckShare = 0.05;
// Pinned updates the lock is tried on (the most recent ones since the last change).
constexpr std::size_t kLockPoints = 12;
// The fit forgets: a pinned update this many updates older than the newest weighs e⁻¹ as much
// (a schedule that drifts is followed; a fixed one still fits to dozens of updates).
constexpr double kForgetUpdates = 100.0;
// Updates the schedule is fitted to (the most recent ones).
constexpr std::size_t kFitPoints = 48;
// A counter whose updates come this close together is read as continuous.
constexpr double kContinuousNs = 2e6;
// Before the lock: the spacings the period is measured from (the most recent ones), and how much
// longer than that period (drift and jitter, unknown yet) a value may be shown.
constexpr std::size_t kPrelockSpacings = 16;
constexpr double kPrelockSlack = 0.05;

double normal_pdf(double x) { return 0.3989422804014327 * std::exp(-0.5 * x * x); }
double normal_cdf(double x) { return 0.5 * std::erfc(-x * 0.7071067811865476); }

}  // namespace

CounterHistory::CounterHistory(std::chrono::nanoseconds nominal_period, std::size_t capacity)
    : nominal_(nominal_period.count() > 0 ? nominal_period : std::chrono::milliseconds(100)),
      capacity_(std::max<std::size_t>(capacity, 8)) {}

bool CounterHistory::narrow(const Record& r) const {
  const double limit = period_ > 0.0 ? std::min(kNarrowNs, period_ / 4.0) : kNarrowNs;
  return static_cast<double>(r.hi - r.lo) <= limit;
}

void CounterHistory::note_stamps(const CounterRead& read) {
  if (records_.empty() || !read.stamp_ns || !records_.back().stamp) return;
  const Record& last = records_.back();
  if (read.value != last.value) return;
  // The same value read again: an update-time stamp repeats, a read-time stamp moves.
  if (std::llabs(*read.stamp_ns - *last.stamp) <= kStampSlackNs && read.t_ns - last.last_seen > kStampSlackNs)
    ++stamp_same_;
  else if (std::llabs(*read.stamp_ns - *last.stamp) > kStampSlackNs)
    ++stamp_moved_;
  if (stamp_moved_ >= 2 && schedule_.stamps_are_update_times != false) trust_stamps(false);
}

void CounterHistory::check_stamp(const Record& r) {
  // A stamp that is the update's time lies inside the bracket of reads around the update: after
  // the last read that still showed the old value, by the first that showed this one. Equality
  // of repeated stamps alone does not prove it (a stamp of the period's start, or one floored to
  // the second, repeats as well).
  if (!r.stamp || r.open) return;
  const bool inside = *r.stamp >= r.lo - kStampBracketSlackNs && *r.stamp <= r.hi + kStampBracketSlackNs;
  if (inside) {
    ++stamp_inside_;
  } else {
    stamp_inside_ = 0;
    ++stamp_outside_;
  }
  const bool trusted = schedule_.stamps_are_update_times.value_or(false);
  if (trusted && !inside) {
    trust_stamps(false);
  } else if (!inside && !schedule_.stamps_are_update_times) {
    schedule_.stamps_are_update_times = false;
  } else if (!trusted && stamp_moved_ == 0 && stamp_same_ >= 3 &&
             stamp_inside_ >= (stamp_outside_ > 0 ? kStampInsideAgain : kStampInside)) {
    trust_stamps(true);
  }
}

void CounterHistory::trust_stamps(bool trust) {
  const bool was = schedule_.stamps_are_update_times.value_or(false);
  schedule_.stamps_are_update_times = trust;
  if (was == trust) return;
  // Stamps become (or stop being) the evidence of update times: relock on what is now trusted.
  schedule_.locked = false;
  schedule_.continuous = false;
  miss_bits_ = 0;
  checks_ = 0;
  for (auto& r : records_)
    if (r.seq >= learn_from_) r.index.reset(), r.outlier = false;
  try_lock();
}

void CounterHistory::add(const CounterRead& read) {
  const std::uint64_t before = updates_seen_;
  add_record(read);
  // The tail rate changes only with a new update (a repeated value changes no update's time).
  if (updates_seen_ != before && !records_.empty()) tail_rate_ = rate_before(records_.size() - 1);
}

void CounterHistory::add_record(const CounterRead& read) {
  if (reads_ > 0 && read.t_ns < last_read_) return;
  ++reads_;
  last_read_ = read.t_ns;
  note_stamps(read);
  if (!records_.empty() && read.value == records_.back().value) {
    Record& last = records_.back();
    last.last_seen = std::max(last.last_seen, std::min(read.asked_ns.value_or(read.t_ns), read.t_ns));
    // Before the lock the update's time is bounded by reads alone, and this one still showing the
    // value says it came at most a period before (see estimate): it may move later.
    if (!schedule_.locked && !narrow(last)) {
      const std::int64_t time = estimate(last);
      if (time != last.time) {
        last.time = time;
        tail_rate_ = rate_before(records_.size() - 1);
      }
    }
    return;
  }
  Record r;
  r.value = read.value;
  // Changed by t_ns at the latest; shown from when the driver was asked (or t_ns) at the earliest.
  r.hi = read.t_ns;
  r.last_seen = std::min(read.asked_ns.value_or(read.t_ns), read.t_ns);
  // The first value was produced at most one period before it was first read (`open`: the
  // period is the nominal one until it is measured).
  r.open = records_.empty();
  r.lo = r.open ? read.t_ns - static_cast<std::int64_t>(nominal_.count()) : records_.back().last_seen;
  r.stamp = read.stamp_ns;
  r.power = read.power;
  r.seq = next_seq_++;
  r.untrusted = schedule_.relearning;
  const Record* prev = records_.empty() ? nullptr : &records_.back();
  if (schedule_.locked && !schedule_.continuous) assign_index(r, prev);
  records_.push_back(r);
  ++updates_seen_;
  while (records_.size() > capacity_) records_.pop_front();
  check_stamp(records_.back());
  if (!schedule_.locked) {
    try_lock();
    if (!schedule_.locked) {
      records_.back().time = estimate(records_.back());
      place_open_before_narrow();
    }
    return;
  }
  if (schedule_.continuous) {
    records_.back().time = records_.back().hi;
    return;
  }
  if (!records_.back().index)
    assign_index(records_.back(), records_.size() > 1 ? &records_[records_.size() - 2] : nullptr);
  // Every update is checked against the schedule before it is fitted: a schedule the recent
  // updates contradict is dropped and learned again (never re-examined in a loop).
  if (narrow(records_.back())) pin_wanted_ = false;
  if (const int c = check(records_.back()); c == 2) {
    pin_wanted_ = true;
  } else if (c >= 0) {
    // An update that contradicts the schedule is not fitted (the fit would bend toward a change
    // and widen its jitter until the change passes the check): it counts toward a relearn.
    if (c == 1 && (narrow(records_.back()) || records_.back().stamp)) ++schedule_.outliers;
    if (c == 1 && !drifting_) records_.back().outlier = true;
    note_check(c == 1);
    if (!schedule_.locked) {
      records_.back().time = estimate(records_.back());
      return;
    }
  }
  const bool trusted = schedule_.stamps_are_update_times.value_or(false) && records_.back().stamp;
  if (trusted || narrow(records_.back())) {
    refit();  // also re-estimates the recent records' times
  } else {
    records_.back().time = estimate(records_.back());
  }
}

int CounterHistory::check(const Record& r) const {
  if (!r.index || r.open || period_ <= 0.0) return -1;
  // A young schedule (locked on a few updates) is still being corrected by the updates that
  // follow: the first ones after the lock are fitted, not judged.
  if (r.seq < lock_seq_ + kCheckAfterLock) return -1;
  const double predicted = grid(static_cast<double>(*r.index));
  // The margin: kCheckSigmas σ, and at least a twentieth of a period (σ is fitted from a few
  // pinned updates and may be small beside what the schedule does between them; anything
  // within a twentieth of a period the fit follows).
  const double tight = kCheckSigmas * sigma_ + kCheckFloorNs;
  const double margin = std::max(tight, kCheckShare * period_);
  if (schedule_.stamps_are_update_times.value_or(false) && r.stamp)
    return std::abs(static_cast<double>(*r.stamp) - predicted) > margin ? 1 : 0;
  // The update lies inside its bracket for sure, whatever its width: a predicted time outside it
  // by more than the margin contradicts the schedule (a wide bracket from a starved reader holds
  // the update its index is given, the latest the schedule puts before its end).
  const double lo = static_cast<double>(r.lo), hi = static_cast<double>(r.hi);
  if (predicted + margin < lo || predicted - margin > hi) return 1;
  // Shown already by a read made more than kCheckSigmas σ before the update was due (the
  // follower's read just before it): earlier than the schedule expects, by how much the bracket
  // does not say. The next update is pinned to tell (wants_pinned_update).
  if (!narrow(r) && predicted - tight > hi) return 2;
  return 0;
}

void CounterHistory::note_check(bool miss) {
  miss_bits_ = ((miss_bits_ << 1U) | (miss ? 1U : 0U)) & ((1U << kCheckWindow) - 1U);
  for (int i = kCheckWindow - 1; i > 0; --i) miss_seq_[i] = miss_seq_[i - 1];
  miss_seq_[0] = records_.back().seq;
  checks_ = std::min(checks_ + 1, kCheckWindow);
  if (std::popcount(miss_bits_) >= kCheckMisses) relearn();
}

void CounterHistory::relearn() {
  // The schedule no longer describes the updates. It is learned again from the first update
  // that contradicted it on; until then, values around those updates are plain reads.
  std::uint64_t from = records_.back().seq;
  for (int i = 0; i < checks_; ++i)
    if ((miss_bits_ >> static_cast<unsigned>(i)) & 1U) from = miss_seq_[i];
  ++schedule_.relearns;
  drifting_ = false;
  anchors_.clear();
  schedule_.locked = false;
  schedule_.continuous = false;
  schedule_.relearning = true;
  miss_bits_ = 0;
  checks_ = 0;
  learn_from_ = from;
  for (auto& r : records_) {
    r.index.reset();
    r.outlier = false;
    if (r.seq >= from) r.untrusted = true;
  }
}

void CounterHistory::try_lock() {
  const bool stamps = schedule_.stamps_are_update_times.value_or(false);
  // Candidate update times: trusted stamps, or midpoints of narrow brackets, in record order.
  std::vector<std::pair<std::size_t, double>> points;
  for (std::size_t i = 1; i < records_.size(); ++i) {
    const Record& r = records_[i];
    if (r.seq < learn_from_ || r.open) continue;
    if (stamps && r.stamp)
      points.emplace_back(i, static_cast<double>(*r.stamp));
    else if (!stamps && static_cast<double>(r.hi - r.lo) <= kNarrowNs)
      points.emplace_back(i, 0.5 * static_cast<double>(r.hi + r.lo));
  }
  if (points.size() > kLockPoints) points.erase(points.begin(), points.end() - kLockPoints);
  // Spacings between consecutive records that are both points.
  std::vector<double> spacings;
  for (std::size_t p = 1; p < points.size(); ++p)
    if (points[p].first == points[p - 1].first + 1) spacings.push_back(points[p].second - points[p - 1].second);
  if (spacings.size() < 2) return;
  const double shortest = *std::min_element(spacings.begin(), spacings.end());
  if (shortest < kContinuousNs) {
    // Changes on (almost) every read: a continuous counter, whose read value is current.
    int fast = 0;
    for (double s : spacings) fast += s < kContinuousNs ? 1 : 0;
    if (fast >= 4) {
      schedule_.locked = schedule_.continuous = true;
      schedule_.relearning = false;
      schedule_.period = std::chrono::nanoseconds(static_cast<std::int64_t>(shortest));
      for (auto& r : records_)
        if (r.seq >= learn_from_) r.time = r.hi, r.untrusted = false;
    }
    return;
  }
  // The period: the median spacing of single-period spacings. Every spacing must be a whole
  // number of periods, give or take the jitter (a read may have missed an update).
  std::vector<double> sorted = spacings;
  std::sort(sorted.begin(), sorted.end());
  const double median = sorted[sorted.size() / 2];
  const double guess = median / std::max(1.0, std::round(median / shortest));
  double sum = 0, count = 0;
  for (double s : spacings) {
    const double k = s / guess;
    if (std::round(k) < 1.0 || std::abs(k - std::round(k)) > 0.3) return;
    sum += s, count += std::round(k);
  }
  period_ = sum / count;
  phase_ = points.back().second;  // index 0 = the newest pinned update
  sigma_ = std::max(0.005 * period_, 2e5);
  schedule_.locked = true;
  schedule_.continuous = false;
  lock_seq_ = next_seq_;
  const Record* prev = nullptr;
  for (auto& r : records_) {
    r.index.reset();
    if (r.seq < learn_from_) continue;  // before a change: placed by the schedule of its time
    assign_index(r, prev);
    prev = &r;
  }
  fit();
  // Every record learned from is placed by the new schedule.
  for (auto& r : records_)
    if (r.seq >= learn_from_) r.time = estimate(r), r.untrusted = false;
  schedule_.relearning = false;
  fix_open_index();
  estimate_times();
}

void CounterHistory::assign_index(Record& r, const Record* prev) const {
  const bool stamps = schedule_.stamps_are_update_times.value_or(false);
  std::int64_t idx;
  if (stamps && r.stamp) {
    idx = std::llround((static_cast<double>(*r.stamp) - phase_) / period_);
  } else if (narrow(r)) {
    idx = std::llround((0.5 * static_cast<double>(r.lo + r.hi) - phase_) / period_);
  } else {
    // The latest update scheduled by the first read of the value — unless the jitter leaves room
    // for one more or one fewer: then the value decides, by the per-period energy each choice
    // implies against the recent rate (a read that came late may have missed an early update).
    const double hi = static_cast<double>(r.hi);
    idx = static_cast<std::int64_t>(std::floor((hi - phase_) / period_));
    const double per_period = prev != nullptr && prev->index ? recent_period_energy() : 0.0;
    if (per_period > 0.0) {
      const double spread = 3.0 * sigma_;
      double best = 1e300;
      std::int64_t choice = idx;
      for (std::int64_t j = idx - 1; j <= idx + 1; ++j) {
        if (j <= *prev->index) continue;
        const double g = grid(static_cast<double>(j));
        if (g - spread > hi || g + spread <= static_cast<double>(r.lo)) continue;  // impossible in time
        const double implied = (r.value - prev->value) / static_cast<double>(j - *prev->index);
        const double miss = std::abs(std::log(std::max(implied, 1e-9) / per_period));
        if (miss < best) best = miss, choice = j;
      }
      idx = choice;
    }
  }
  if (prev != nullptr && prev->index && idx <= *prev->index) idx = *prev->index + 1;
  r.index = idx;
}

double CounterHistory::prelock_period() const {
  // Before the lock: the nominal period, or the median spacing of consecutive narrow records
  // (within half to one and a half nominal periods) where that is more than 10 % off it. The
  // most recent spacings only: it is asked on every read before the lock (see estimate).
  std::array<double, kPrelockSpacings> spacings{};
  std::size_t count = 0;
  const double n = static_cast<double>(nominal_.count());
  for (std::size_t i = records_.size(); i-- > 1 && count < spacings.size();) {
    const Record& a = records_[i - 1];
    const Record& b = records_[i];
    if (!narrow(a) || !narrow(b)) continue;
    const double s = 0.5 * static_cast<double>(b.lo + b.hi - a.lo - a.hi);
    if (s > 0.5 * n && s < 1.5 * n) spacings[count++] = s;
  }
  if (count == 0) return n;
  const auto end = spacings.begin() + static_cast<std::ptrdiff_t>(count);
  std::nth_element(spacings.begin(), spacings.begin() + static_cast<std::ptrdiff_t>(count / 2), end);
  // One spacing carries two updates' jitter; the nominal period stands unless it contradicts it.
  const double measured = spacings[count / 2];
  return std::abs(measured - n) > 0.1 * n ? measured : n;
}

double CounterHistory::prelock_hold() const { return (1.0 + kPrelockSlack) * prelock_period(); }

void CounterHistory::place_open_before_narrow() {
  // Before the lock, the first value's update is known only to precede its first read. Once the
  // next update is pinned by a narrow bracket, the first one was a period before it: every read
  // between the two showed the first value, so no update lies between them. Far better than the
  // half-period guess, which leaves a window edge in the first period off by up to half a
  // period of energy. Redone as the pre-lock period estimate improves.
  if (records_.size() < 2) return;
  Record& first = records_[0];
  const Record& next = records_[1];
  if (!first.open || narrow(first) || !narrow(next)) return;
  const double mid = 0.5 * static_cast<double>(next.lo + next.hi);
  first.time = std::min(static_cast<std::int64_t>(std::llround(mid - prelock_period())), first.hi);
}

void CounterHistory::fix_open_index() {
  // The first value's update lies within a period before its first read; when that read came
  // within the jitter of an update, the schedule alone cannot tell whether the read saw it. Its
  // value can: the increment to the next update is one period's energy per index between them,
  // and the updates after it say how much a period's energy is.
  if (records_.size() < 3 || !records_.front().open || !records_[1].index) return;
  if (schedule_.stamps_are_update_times.value_or(false) && records_.front().stamp) return;
  double per_period = 0;
  int n = 0;
  for (std::size_t k = 2; k < records_.size() && n < 4; ++k) {
    const Record& a = records_[k - 1];
    const Record& b = records_[k];
    if (!a.index || !b.index || *b.index <= *a.index) break;
    per_period += (b.value - a.value) / static_cast<double>(*b.index - *a.index);
    ++n;
  }
  if (n == 0 || per_period <= 0.0) return;
  per_period /= n;
  Record& first = records_.front();
  const Record& next = records_[1];
  const double hi = static_cast<double>(first.hi);
  // A young schedule fitted to a few updates can place an old index a few ms off: let the value
  // decide within 5 % of a period of the boundary.
  const double spread = std::max(3.0 * sigma_, 0.05 * period_);
  const auto base = static_cast<std::int64_t>(std::floor((hi - phase_) / period_));
  double best = 1e300;
  std::optional<std::int64_t> choice;
  for (std::int64_t j = base - 1; j <= base + 1; ++j) {
    if (j >= *next.index) continue;
    const double g = grid(static_cast<double>(j));
    if (g - spread > hi || g + spread < hi - period_ - spread) continue;  // impossible in time
    const double implied = (next.value - first.value) / static_cast<double>(*next.index - j);
    const double miss = std::abs(std::log(std::max(implied, 1e-9) / per_period));
    if (miss < best) best = miss, choice = j;
  }
  if (choice) first.index = *choice;
}

double CounterHistory::recent_period_energy() const {
  // The mean increment per update over the last few consecutive indexed records.
  double sum = 0;
  int n = 0;
  for (std::size_t k = records_.size(); k-- > 1 && n < 4;) {
    const Record& a = records_[k - 1];
    const Record& b = records_[k];
    if (!a.index || !b.index || *b.index <= *a.index) break;
    sum += (b.value - a.value) / static_cast<double>(*b.index - *a.index);
    ++n;
  }
  return n > 0 ? sum / n : 0.0;
}

void CounterHistory::refit() {
  fit();
  fix_open_index();
  estimate_times();
}

void CounterHistory::fit() {
  const bool stamps = schedule_.stamps_are_update_times.value_or(false);
  struct Point {
    double j, m, var;
    Record* r;
  };
  std::vector<Point> pts;
  for (auto it = records_.rbegin(); it != records_.rend() && pts.size() < kFitPoints; ++it) {
    if (!it->index || it->outlier || it->seq < learn_from_) continue;
    if (stamps && it->stamp) {
      pts.push_back({static_cast<double>(*it->index), static_cast<double>(*it->stamp), 0.0, &*it});
    } else if (!stamps && narrow(*it)) {
      const double w = static_cast<double>(it->hi - it->lo);
      pts.push_back({static_cast<double>(*it->index), 0.5 * static_cast<double>(it->hi + it->lo), w * w / 12.0, &*it});
    }
  }
  // At most twice: a pinned update more than a quarter period off the first fit is left out (it
  // is one late or early update; a schedule that many contradict is dropped by the check in
  // add_record, never here) and the rest fitted again.
  for (int pass = 0; pass < 2 && pts.size() >= 2; ++pass) {
    // Weighted least squares of m = phase + j·period; older updates weigh less (drift).
    const double newest = pts.front().j;
    double sw = 0, sj = 0, sm = 0, sjj = 0, sjm = 0;
    for (const auto& p : pts) {
      const double w = std::exp(-(newest - p.j) / kForgetUpdates) / (sigma_ * sigma_ + p.var + 1e6);
      sw += w, sj += w * p.j, sm += w * p.m, sjj += w * p.j * p.j, sjm += w * p.j * p.m;
    }
    const double det = sw * sjj - sj * sj;
    if (det > 0) {
      double period = (sw * sjm - sj * sm) / det;
      // A young schedule (a few jittery updates) can be a percent off in period, and an old
      // update's time extrapolated back from it a few ms off. Where the data agree with the
      // nominal period (within 5 %), it is a prior worth 0.2 % of a period: decisive while few
      // updates are fitted, negligible after a few dozen.
      const double nominal = static_cast<double>(nominal_.count());
      if (std::abs(period - nominal) < 0.05 * nominal) {
        const double sigma_p = 0.002 * nominal;
        const double wp = 1.0 / (sigma_p * sigma_p);
        const double det_p = sw * (sjj + wp) - sj * sj;
        period = (sw * (sjm + wp * nominal) - sj * sm) / det_p;
      }
      const double phase = (sm - period * sj) / sw;
      if (period > 0.5 * period_ && period < 1.5 * period_) period_ = period, phase_ = phase;
    }
    // Jitter: the residuals beyond what the brackets' own widths explain, shrunk toward the
    // prior while few updates are known.
    double ss = 0;
    for (const auto& p : pts) {
      const double r = p.m - line(p.j);
      ss += std::max(0.0, r * r - p.var);
    }
    const double n = static_cast<double>(pts.size());
    const double prior = std::max(0.005 * period_, 2e5);
    sigma_ = std::sqrt((ss + 2.0 * prior * prior) / (n + 2.0));
    sigma_ = std::clamp(sigma_, 2e4, period_ / 10.0);
    // Drift: consecutive pinned updates' offsets from the line are alike (a random walk) where
    // independent jitter makes them differ by √2 σ. Then the schedule is followed through the
    // pinned offsets, and its σ is how much they differ from one pinned update to the next.
    anchors_.clear();
    drifting_ = false;
    if (pts.size() >= 6) {
      double diff = 0, var = 0;
      for (std::size_t i = 0; i < pts.size(); ++i) {
        const double r = pts[i].m - line(pts[i].j);
        var += r * r;
        if (i > 0) {
          const double d = r - (pts[i - 1].m - line(pts[i - 1].j));
          diff += d * d;
        }
      }
      diff /= static_cast<double>(pts.size() - 1);
      var /= static_cast<double>(pts.size());
      if (diff < 0.5 * var && var > 4.0 * prior * prior) {
        drifting_ = true;
        for (auto it = pts.rbegin(); it != pts.rend(); ++it) anchors_.emplace_back(it->j, it->m - line(it->j));
        sigma_ = std::clamp(std::sqrt(0.5 * diff), 2e4, period_ / 10.0);
      }
    }
    if (drifting_) break;  // each pinned update is followed, none left out
    const auto off = [&](const Point& p) { return std::abs(p.m - line(p.j)) > period_ / 4.0; };
    if (pass == 1 || std::none_of(pts.begin(), pts.end(), off)) break;
    for (const auto& p : pts)
      if (off(p)) p.r->outlier = true, ++schedule_.outliers;
    std::erase_if(pts, off);
  }
  schedule_.period = std::chrono::nanoseconds(static_cast<std::int64_t>(std::llround(period_)));
  schedule_.jitter = std::chrono::nanoseconds(static_cast<std::int64_t>(std::llround(sigma_)));
  schedule_.fitted_updates = pts.size();
}

double CounterHistory::drift_at(double index) const {
  if (anchors_.empty()) return 0.0;
  if (index <= anchors_.front().first) return anchors_.front().second;
  if (index >= anchors_.back().first) return anchors_.back().second;
  auto it = std::lower_bound(anchors_.begin(), anchors_.end(), index,
                             [](const std::pair<double, double>& a, double j) { return a.first < j; });
  const auto& [j1, r1] = *it;
  const auto& [j0, r0] = *std::prev(it);
  return j1 > j0 ? r0 + (r1 - r0) * (index - j0) / (j1 - j0) : r1;
}

void CounterHistory::estimate_times() {
  // The recent records: older ones were estimated when they were recent and only pending
  // window edges, which are recent, read them.
  const std::size_t n = records_.size();
  for (std::size_t i = n > 64 ? n - 64 : 0; i < n; ++i)
    if (records_[i].seq >= learn_from_) records_[i].time = estimate(records_[i]);
}

std::int64_t CounterHistory::estimate(const Record& r) const {
  // The first value's bracket opens a period before its first read: the measured period once
  // locked (it may be far from the nominal one), the nominal one until then.
  const std::int64_t lo_ns =
      r.open && schedule_.locked && period_ > 0.0 ? r.hi - static_cast<std::int64_t>(period_ + 3.0 * sigma_) : r.lo;
  const double lo = static_cast<double>(lo_ns), hi = static_cast<double>(r.hi);
  if (schedule_.stamps_are_update_times.value_or(false) && r.stamp)
    return r.open ? std::min(*r.stamp, r.hi) : std::clamp(*r.stamp, std::min(r.lo + 1, r.hi), r.hi);
  if (!schedule_.locked || !r.index) {
    // No schedule yet: the middle of a narrow bracket; else, the update lies anywhere in the
    // last nominal period before the first read — and no more than a period (plus a slack)
    // before the last read that still showed the value, or that read would have shown the next
    // one — so in the middle of what is left (the extrapolation at the read's power then
    // carries the value to any instant; a plain difference would instead give a window inside
    // one period 0 J or a whole period's energy). Without the last read's bound, a value first
    // read just after its update and read again most of a period later was placed half a period
    // too early, and edges after it extrapolated into the cap: a window there measured 0 J.
    if (narrow(r)) return static_cast<std::int64_t>(0.5 * (lo + hi));
    const double half = 0.5 * static_cast<double>(nominal_.count());
    const double held = std::max(lo, static_cast<double>(r.last_seen) - prelock_hold());
    return std::clamp(static_cast<std::int64_t>(hi - std::min(half, 0.5 * (hi - held))), std::min(r.lo + 1, r.hi),
                      r.hi);
  }
  // The schedule's prediction, truncated to the bracket.
  const double mu = grid(static_cast<double>(*r.index));
  double t = mu;
  if (sigma_ > 0.0) {
    const double a = (lo - mu) / sigma_, b = (hi - mu) / sigma_;
    const double z = normal_cdf(b) - normal_cdf(a);
    if (z > 1e-9) t = mu + sigma_ * (normal_pdf(a) - normal_pdf(b)) / z;
  }
  // (Two reads in one nanosecond leave lo == hi: the bound is then hi itself.)
  return std::clamp(static_cast<std::int64_t>(std::llround(t)), std::min(lo_ns + 1, r.hi), r.hi);
}

double CounterHistory::rate_before(std::size_t k) const {
  // The average rate over the last few consecutive updates: the best guess of the next period's
  // increment (one period's increment alone is a noisy sample of it).
  constexpr std::size_t kSpan = 4;
  std::size_t first = k;
  while (first > 0 && k - first < kSpan) {
    const Record& r = records_[first];
    const Record& p = records_[first - 1];
    const bool consecutive = (r.index && p.index) ? *r.index == *p.index + 1 : narrow(r) && narrow(p);
    if (!consecutive || r.time <= p.time) break;
    --first;
  }
  if (first < k)
    return (records_[k].value - records_[first].value) / static_cast<double>(records_[k].time - records_[first].time);
  if (records_[k].power) return *records_[k].power / kNsPerS;
  return 0.0;
}

std::optional<UpdateStep> CounterHistory::last_step() const {
  const std::size_t n = records_.size();
  if (n < 2) return std::nullopt;
  const Record& r = records_[n - 1];
  const Record& p = records_[n - 2];
  if (p.open) return std::nullopt;
  UpdateStep s;
  s.increase = r.value - p.value;
  s.least_span_ns = r.lo - p.hi;
  s.most_span_ns = r.hi - p.lo;
  if (schedule_.locked && !schedule_.continuous && r.index && p.index) s.updates = *r.index - *p.index;
  return s;
}

std::optional<CounterEstimate> CounterHistory::value_at(std::int64_t t_ns) const {
  if (records_.empty() || t_ns < records_.front().time) return std::nullopt;
  // The last update at or before t (times are non-decreasing): window edges are recent, so look
  // at the newest two first.
  const std::size_t n = records_.size();
  std::size_t k;
  if (t_ns >= records_[n - 1].time) {
    k = n - 1;
  } else if (n >= 2 && t_ns >= records_[n - 2].time) {
    k = n - 2;
  } else {
    auto it = std::upper_bound(records_.begin(), records_.end(), t_ns,
                               [](std::int64_t t, const Record& r) { return t < r.time; });
    k = static_cast<std::size_t>(it - records_.begin()) - 1;
  }
  const Record& r = records_[k];
  // Around updates the schedule did not place (it was found contradicted and is being learned
  // again), the value is the plain read.
  if (r.untrusted || (k + 1 < n ? records_[k + 1].untrusted : schedule_.relearning)) return plain_at(t_ns, k);
  if (k + 1 < records_.size()) {
    const Record& next = records_[k + 1];
    const double span = static_cast<double>(next.time - r.time);
    const double frac = span > 0 ? static_cast<double>(t_ns - r.time) / span : 0.0;
    CounterEstimate e{r.value + (next.value - r.value) * std::clamp(frac, 0.0, 1.0), true};
    // Updates missed between the two: their indices say so, or (before the lock) the span.
    const bool missed = (r.index && next.index)
                            ? *next.index - *r.index > 1
                            : span > 1.5 * (period_ > 0.0 ? period_ : static_cast<double>(nominal_.count()));
    if (missed) e.unread_ns = next.time - r.time, e.unread_from = r.time;
    return e;
  }
  if (schedule_.continuous) return CounterEstimate{r.value, false};
  // Extrapolate from the last update, at most one period (plus jitter): the counter cannot
  // have counted longer without a new update, which a later read would show.
  // Before the lock: the period the reads measure so far, with the slack the update's time was
  // placed with.
  const double cap = schedule_.locked ? period_ + 3.0 * sigma_ : prelock_hold();
  const double dt = std::min(static_cast<double>(t_ns - r.time), cap);
  return CounterEstimate{r.value + tail_rate_ * std::max(0.0, dt), false};
}

std::optional<CounterEstimate> CounterHistory::plain_at(std::int64_t t_ns, std::size_t k) const {
  // The value the last read at or before t showed (records are in the order of their first
  // read) — but never less than the last update placed by the trusted schedule at or before t
  // (record k is the last placed at or before t): that schedule may place an update before the
  // read that first showed it, and the value must not fall back where the two meet.
  auto it = std::upper_bound(records_.begin(), records_.end(), t_ns,
                             [](std::int64_t t, const Record& r) { return t < r.hi; });
  double value = it == records_.begin() ? records_.front().value : std::prev(it)->value;
  for (std::size_t j = k + 1, scanned = 0; j-- > 0 && scanned < 64; ++scanned)
    if (!records_[j].untrusted) {
      value = std::max(value, records_[j].value);
      break;
    }
  CounterEstimate e{value, last_read_ >= t_ns};
  e.plain = true;
  return e;
}

std::optional<double> CounterHistory::grid_position(std::int64_t t_ns) const {
  if (!schedule_.locked || schedule_.continuous || period_ <= 0.0) return std::nullopt;
  return (static_cast<double>(t_ns) - phase_) / period_;
}

bool CounterHistory::final_at(std::int64_t t_ns) const {
  if (records_.empty()) return false;
  // While relearning, the value is a plain read: final once a read at or after t was made.
  return records_.back().time > t_ns || (schedule_.relearning && last_read_ >= t_ns);
}

std::optional<std::int64_t> CounterHistory::update_expected_after(std::int64_t t_ns) const {
  if (!schedule_.locked || schedule_.continuous) return std::nullopt;
  double j = std::ceil((static_cast<double>(t_ns) - 3.0 * sigma_ - phase_) / period_);
  if (last_index() && j <= static_cast<double>(*last_index()) && records_.back().time <= t_ns)
    j = static_cast<double>(*last_index()) + 1.0;
  return static_cast<std::int64_t>(std::llround(grid(j) + 3.0 * sigma_));
}

std::optional<std::int64_t> CounterHistory::predicted_time(std::int64_t index) const {
  if (!schedule_.locked || schedule_.continuous) return std::nullopt;
  return static_cast<std::int64_t>(std::llround(grid(static_cast<double>(index))));
}

std::optional<std::int64_t> CounterHistory::last_index() const {
  if (records_.empty()) return std::nullopt;
  return records_.back().index;
}

std::optional<std::int64_t> CounterHistory::last_update_time() const {
  if (records_.empty()) return std::nullopt;
  return records_.back().time;
}

std::optional<std::int64_t> CounterHistory::last_read_time() const {
  if (reads_ == 0) return std::nullopt;
  return last_read_;
}

}  // namespace erg::measure
