// CounterHistory on synthetic counters: exact arithmetic, no simulator. A synthetic counter
// updates at origin + k·period + jitter(k) and then shows the energy at constant power up to that
// instant, so its value at any instant is known exactly (linear in time between updates).

#include "erg/measure/counter_history.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <random>
#include <vector>

namespace erg::measure {
namespace {

using std::chrono::milliseconds;

constexpr double kMs = 1e6;

struct Counter {
  double period_ns = 100 * kMs;
  double origin_ns = 37 * kMs;
  double power_mj_per_ns = 300.0 / 1e9;  // 300 W in mJ/ns
  std::function<double(std::int64_t)> jitter = [](std::int64_t) { return 0.0; };

  double update_time(std::int64_t k) const { return origin_ns + static_cast<double>(k) * period_ns + jitter(k); }
  /// Index of the latest update at or before t.
  std::int64_t index_at(double t) const {
    auto k = static_cast<std::int64_t>(std::floor((t - origin_ns) / period_ns)) + 1;
    while (update_time(k) > t) --k;
    while (update_time(k + 1) <= t) ++k;
    return k;
  }
  /// What the counter shows at t (the energy at its latest update).
  double shown(double t) const { return power_mj_per_ns * update_time(index_at(t)); }
  /// The sensor's figure at t: linear between the updates around t (here: the energy at t).
  double truth(double t) const { return power_mj_per_ns * t; }
  CounterRead read(double t, bool stamp = false, bool stamp_is_update = true) const {
    CounterRead r;
    r.t_ns = static_cast<std::int64_t>(t);
    r.value = shown(t);
    if (stamp) r.stamp_ns = static_cast<std::int64_t>(stamp_is_update ? update_time(index_at(t)) : t);
    return r;
  }
};

/// Probe-like dense reads from t0 for `ms` milliseconds, every `step_ms`.
void dense(CounterHistory& h, const Counter& c, double t0, double ms, double step_ms = 0.5, bool stamp = false,
           bool stamp_is_update = true) {
  for (double t = t0; t < t0 + ms * kMs; t += step_ms * kMs) h.add(c.read(t, stamp, stamp_is_update));
}

TEST(CounterHistory, LocksOnDenseReadsAndInterpolatesExactly) {
  Counter c;
  CounterHistory h;
  EXPECT_FALSE(h.value_at(0));
  dense(h, c, 1000 * kMs, 350);
  ASSERT_TRUE(h.schedule().locked);
  EXPECT_FALSE(h.schedule().continuous);
  EXPECT_NEAR(static_cast<double>(h.schedule().period.count()), c.period_ns, 0.6 * kMs);
  // Between the pinned updates, the value at any instant is the truth to the bracket's width.
  for (double t = 1100 * kMs; t < 1300 * kMs; t += 7.3 * kMs) {
    auto v = h.value_at(static_cast<std::int64_t>(t));
    ASSERT_TRUE(v);
    EXPECT_TRUE(v->final);
    EXPECT_NEAR(v->value, c.truth(t), c.power_mj_per_ns * 0.3 * kMs) << t / kMs;
  }
  // Sparse reads afterwards (one per period, just after each update) keep it exact.
  for (int k = 14; k < 40; ++k) h.add(c.read(c.update_time(k) + 0.4 * kMs));
  for (double t = 1400 * kMs; t < 3700 * kMs; t += 113 * kMs) {
    auto v = h.value_at(static_cast<std::int64_t>(t));
    ASSERT_TRUE(v && v->final);
    EXPECT_NEAR(v->value, c.truth(t), c.power_mj_per_ns * 0.6 * kMs) << t / kMs;
  }
}

TEST(CounterHistory, BeforeTheScheduleIsKnownAValueIsHalfAPeriodOld) {
  // Before a lock, a value first read at r was produced somewhere in the nominal period before r:
  // half a period before on average, and the power read with it carries it forward. A window
  // inside one period then measures power × time, where a plain difference gives 0.
  Counter c;
  CounterHistory h;
  auto read = [&](double t) {
    CounterRead r = c.read(t);
    r.power = 300.0;  // W = mJ/ms: what the driver reads with the value
    h.add(r);
  };
  read(1000 * kMs);
  read(1030 * kMs);  // no update in between (the counter updates at 1037 ms)
  EXPECT_FALSE(h.schedule().locked);
  const double span = h.value_at(static_cast<std::int64_t>(1030 * kMs))->value -
                      h.value_at(static_cast<std::int64_t>(1000 * kMs))->value;
  EXPECT_NEAR(span, c.truth(1030 * kMs) - c.truth(1000 * kMs), 1e-6);
}

TEST(CounterHistory, AValueStillReadLateWasProducedLateAndCountsOnAtItsPower) {
  // Before a lock, a value first read just after its update is placed half a period before that
  // read; reads that still show it more than half a period later say it is younger than that (the
  // counter would have moved a period after it). Without that, both edges of a window there were
  // extrapolated a full period past the guessed update — the cap — and the window came out 0 J.
  Counter c;
  CounterHistory h;
  auto read = [&](double t) {
    CounterRead r = c.read(t);
    r.power = 300.0;  // W = mJ/ms
    h.add(r);
  };
  read(1037.5 * kMs);  // just after the update at 1037 ms
  read(1090 * kMs);    // a window's begin edge (the reads between went missing)
  read(1130 * kMs);    // its end edge, before the update at 1137 ms
  EXPECT_FALSE(h.schedule().locked);
  const double span = h.value_at(static_cast<std::int64_t>(1130 * kMs))->value -
                      h.value_at(static_cast<std::int64_t>(1090 * kMs))->value;
  EXPECT_NEAR(span, c.truth(1130 * kMs) - c.truth(1090 * kMs), 1e-6);
  // The next update, read densely, places the value's interpolation on the right period.
  for (double t = 1131 * kMs; t < 1140 * kMs; t += 0.5 * kMs) read(t);
  EXPECT_NEAR(h.value_at(static_cast<std::int64_t>(1090 * kMs))->value, c.truth(1090 * kMs),
              c.power_mj_per_ns * 1 * kMs);
}

TEST(CounterHistory, ExtrapolatesAtMostOnePeriodAtTheRecentRate) {
  Counter c;
  CounterHistory h;
  dense(h, c, 1000 * kMs, 400);
  ASSERT_TRUE(h.schedule().locked);
  const double last = c.update_time(c.index_at(1400 * kMs));
  // 30 ms after the last update, nothing newer read: extrapolated, not final.
  auto v = h.value_at(static_cast<std::int64_t>(last + 30 * kMs));
  ASSERT_TRUE(v);
  EXPECT_FALSE(v->final);
  EXPECT_NEAR(v->value, c.truth(last + 30 * kMs), c.power_mj_per_ns * 0.6 * kMs);
  // Far past it, the extrapolation stops after one period (plus the jitter).
  auto far = h.value_at(static_cast<std::int64_t>(last + 10'000 * kMs));
  ASSERT_TRUE(far);
  EXPECT_LT(far->value, c.truth(last + 101 * kMs + 3 * static_cast<double>(h.schedule().jitter.count())));
  EXPECT_FALSE(h.final_at(static_cast<std::int64_t>(last + 30 * kMs)));
  // The next update is expected about one period after the last.
  auto expected = h.update_expected_after(static_cast<std::int64_t>(last + 30 * kMs));
  ASSERT_TRUE(expected);
  EXPECT_NEAR(static_cast<double>(*expected), last + c.period_ns, 3 * kMs);
}

TEST(CounterHistory, StampsAreTrustedOnlyWhenTheyRepeatForOneValue) {
  Counter c;
  // Update-time stamps: a value read again carries the same stamp → trusted, exact times.
  CounterHistory update;
  dense(update, c, 1000 * kMs, 400, 0.5, /*stamp=*/true, /*stamp_is_update=*/true);
  ASSERT_TRUE(update.schedule().stamps_are_update_times.has_value());
  EXPECT_TRUE(*update.schedule().stamps_are_update_times);
  EXPECT_NEAR(update.value_at(static_cast<std::int64_t>(1234 * kMs))->value, c.truth(1234 * kMs), 1e-6);
  // Read-time stamps: they move with the reads → ignored (the schedule comes from brackets).
  CounterHistory read;
  dense(read, c, 1000 * kMs, 400, 0.5, /*stamp=*/true, /*stamp_is_update=*/false);
  ASSERT_TRUE(read.schedule().stamps_are_update_times.has_value());
  EXPECT_FALSE(*read.schedule().stamps_are_update_times);
  ASSERT_TRUE(read.schedule().locked);
  EXPECT_NEAR(read.value_at(static_cast<std::int64_t>(1234 * kMs))->value, c.truth(1234 * kMs),
              c.power_mj_per_ns * 0.3 * kMs);
}

TEST(CounterHistory, ContinuousCountersAreReadAsCurrent) {
  Counter c;
  c.period_ns = 0.2 * kMs;  // updates faster than the reads
  CounterHistory h;
  dense(h, c, 1000 * kMs, 50, 0.5);
  ASSERT_TRUE(h.schedule().locked);
  EXPECT_TRUE(h.schedule().continuous);
  EXPECT_NEAR(h.value_at(static_cast<std::int64_t>(1020 * kMs))->value, c.truth(1020 * kMs),
              c.power_mj_per_ns * 0.6 * kMs);
}

TEST(CounterHistory, LearnsAPeriodFarFromTheNominalOne) {
  Counter c;
  c.period_ns = 37.3 * kMs;
  CounterHistory h(milliseconds(100));
  dense(h, c, 500 * kMs, 200);
  ASSERT_TRUE(h.schedule().locked);
  EXPECT_NEAR(static_cast<double>(h.schedule().period.count()), c.period_ns, 0.3 * kMs);
}

TEST(CounterHistory, JitterIsMeasuredAndALateReadIsIndexedByItsValue) {
  Counter c;
  std::mt19937 rng(5);
  std::vector<double> j(400);
  for (auto& x : j) x = std::normal_distribution<double>(0, 3 * kMs)(rng);
  c.jitter = [&j](std::int64_t k) { return j[static_cast<std::size_t>((k % 400 + 400) % 400)]; };
  CounterHistory h;
  dense(h, c, 1000 * kMs, 2000);  // twenty pinned updates
  ASSERT_TRUE(h.schedule().locked);
  EXPECT_NEAR(static_cast<double>(h.schedule().jitter.count()), 3 * kMs, 1.2 * kMs);
  // A read that comes more than one period late shows two updates at once: the value tells.
  const std::int64_t k = c.index_at(3000 * kMs) + 1;
  const double late = c.update_time(k + 1) + 0.5 * kMs;  // just after update k+1
  h.add(c.read(late));
  ASSERT_TRUE(h.last_index());
  auto prev_t = c.update_time(k - 1);
  auto mid = h.value_at(static_cast<std::int64_t>(prev_t + 0.5 * (late - prev_t)));
  ASSERT_TRUE(mid);
  // The gap is interpolated over the two updates it spans, not squeezed into one.
  EXPECT_NEAR(mid->value, c.truth(prev_t + 0.5 * (late - prev_t)), c.power_mj_per_ns * 12 * kMs);
}

TEST(CounterHistory, OldRecordsAreDroppedAtCapacity) {
  Counter c;
  CounterHistory h(milliseconds(100), 16);
  dense(h, c, 1000 * kMs, 400);
  for (int k = 14; k < 60; ++k) h.add(c.read(c.update_time(k) + 0.4 * kMs));
  EXPECT_FALSE(h.value_at(static_cast<std::int64_t>(1100 * kMs))) << "older than the kept updates";
  EXPECT_TRUE(h.value_at(static_cast<std::int64_t>(c.update_time(55))));
  EXPECT_EQ(h.updates_seen(), 1u + 4u + 46u) << "the first value, four probed updates, 46 more";
}

TEST(CounterHistory, ReadsOutOfOrderAreIgnored) {
  Counter c;
  CounterHistory h;
  h.add(c.read(2000 * kMs));
  h.add(c.read(1000 * kMs));
  EXPECT_EQ(h.reads(), 1u);
}

/// A counter whose update times are given one by one (any schedule: a random walk, jumps, a
/// changed period), each showing the energy at constant power up to its update; a stamp that
/// means what `stamp` says.
struct Schedule {
  std::vector<double> times;  // update times, increasing
  double power_mj_per_ns = 300.0 / 1e9;
  enum class Stamp { kNone, kUpdate, kIntervalStart, kFloored } stamp = Stamp::kNone;

  std::size_t index_at(double t) const {
    auto it = std::upper_bound(times.begin(), times.end(), t);
    return it == times.begin() ? 0 : static_cast<std::size_t>(it - times.begin()) - 1;
  }
  double truth(double t) const { return power_mj_per_ns * t; }
  CounterRead read(double t) const {
    const std::size_t k = index_at(t);
    CounterRead r;
    r.t_ns = static_cast<std::int64_t>(t);
    r.value = power_mj_per_ns * times[k];
    switch (stamp) {
      case Stamp::kNone: break;
      case Stamp::kUpdate: r.stamp_ns = static_cast<std::int64_t>(times[k]); break;
      case Stamp::kIntervalStart: r.stamp_ns = static_cast<std::int64_t>(k > 0 ? times[k - 1] : times[k] - 1e8); break;
      case Stamp::kFloored: r.stamp_ns = static_cast<std::int64_t>(std::floor(times[k] / 1e9) * 1e9); break;
    }
    return r;
  }
};

/// Update times from 1 s on: `next(previous)` gives each one after the first.
template <typename Next>
Schedule make_schedule(double seconds, Next next) {
  Schedule s;
  for (double t = 1037 * kMs; t < (1.0 + seconds) * 1e9 + 1e9; t = next(t)) s.times.push_back(t);
  return s;
}

/// Reads like the monitor's follower, whatever the schedule: densely (every 0.5 ms) while the
/// schedule is not locked, then just before and just after each predicted update, densely
/// around one in ten, and densely again whenever an expected update did not come. Random
/// window edges from 3 s on (a fresh monitor's first edges are tested on their own): each is a
/// read too. Each edge, once final, is checked against the truth. Every update lies inside the
/// bracket of reads around it (the last read that showed the old value, the first that showed
/// the new one), and an edge placed on the schedule is off by at most the wider bracket of the
/// two updates around it (the load is constant); a plain read is off by the time since the
/// update before it, up to a whole period.
struct Follow {
  int plain_edges = 0, edges = 0;
  double worst_ms = 0.0;                           // worst unflagged edge error, in ms of the counter's power
  double worst_excess_ms = -1e9;                   // worst (error − bracket bound) of an unflagged edge
  double worst_at = 0.0;                           // where it was (s)
  std::vector<double> errors_ms, plain_errors_ms;  // every unflagged edge: erg's, a plain read's
};
double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
  return v[v.size() / 2];
}
Follow follow(CounterHistory& h, const Schedule& s, double seconds, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  Follow f;
  const double end = (1.0 + seconds) * 1e9;
  double t = 1000 * kMs;
  double next_edge = t + 2000 * kMs;
  std::vector<double> reads;
  std::vector<double> pending;  // edges to check once final
  // The bracket of reads around update k (ms).
  auto bracket_ms = [&](std::size_t k) {
    const double u = s.times[k];
    auto it = std::lower_bound(reads.begin(), reads.end(), u);
    if (it == reads.begin() || it == reads.end()) return 1e9;
    return (*it - *std::prev(it)) / kMs;
  };
  while (t < end) {
    h.add(s.read(t));
    reads.push_back(t);
    if (t >= next_edge) {
      pending.push_back(t);
      next_edge = t + std::uniform_real_distribution<double>(5, 400)(rng) * kMs;
    }
    std::erase_if(pending, [&](double e) {
      auto v = h.value_at(static_cast<std::int64_t>(e));
      if (!v || !v->final) return t - e > 2e9;  // not final after 2 s: dropped, not checked
      ++f.edges;
      if (v->plain) {
        ++f.plain_edges;
        // The value read there (or the last update the trusted schedule placed before it).
        EXPECT_GE(v->value, s.read(e).value) << "a plain edge is at least the value read there";
        EXPECT_LE(v->value, s.truth(e) + s.power_mj_per_ns * 0.2 * 1e9) << "and no more than two periods past it";
        return true;
      }
      const std::size_t k = s.index_at(e);
      const double err = std::abs(v->value - s.truth(e)) / s.power_mj_per_ns / kMs;
      const double bound = std::max(bracket_ms(k), bracket_ms(k + 1)) + 0.01;
      f.errors_ms.push_back(err);
      f.plain_errors_ms.push_back((e - s.times[k]) / kMs);
      if (err > f.worst_ms) f.worst_ms = err, f.worst_at = e / 1e9;
      f.worst_excess_ms = std::max(f.worst_excess_ms, err - bound);
      return true;
    });
    double step = 0.5 * kMs;
    const auto& sch = h.schedule();
    if (sch.locked && !sch.continuous) {
      const double sigma = static_cast<double>(sch.jitter.count());
      const auto idx = h.last_index();
      if (idx) {
        const double due = static_cast<double>(*h.predicted_time(*idx + 1));
        const bool dense_one = (*idx + 1) % 10 == 0;
        const double before = due - (dense_one ? std::max(4 * sigma, 5 * kMs) : 4 * sigma) - 0.3 * kMs;
        const double after = due + 3 * sigma + 0.3 * kMs;
        if (t < before - 0.1 * kMs)
          step = before - t;
        else if (!dense_one && t < after - 0.1 * kMs)
          step = after - t;
      }
    }
    t += std::min(step, std::max(0.1 * kMs, next_edge - t));
  }
  return f;
}

void report(const char* what, std::uint64_t seed, const Follow& f, const CounterHistory& h) {
  std::printf(
      "%s, seed %llu: %d edges (%d plain); unflagged edge error median %.2f ms (a plain read's %.2f ms), "
      "worst %.2f ms at %.3f s, worst beyond its bracket %.3f ms; relearns %llu\n",
      what, static_cast<unsigned long long>(seed), f.edges, f.plain_edges, median(f.errors_ms),
      median(f.plain_errors_ms), f.worst_ms, f.worst_at, f.worst_excess_ms,
      static_cast<unsigned long long>(h.schedule().relearns));
}

TEST(CounterHistory, APinnedUpdateFarOffTheScheduleIsLeftOutNotRelockedOnWithoutEnd) {
  // A schedule locked on a clean grid, then one update 28 % of a period late: it fits no lock
  // (the relock found the same point and refitted without end before: a stack overflow).
  Counter c;
  c.jitter = [](std::int64_t k) { return k == 30 ? 28 * kMs : 0.0; };
  CounterHistory h;
  dense(h, c, 1000 * kMs, 4000);
  ASSERT_TRUE(h.schedule().locked);
  EXPECT_EQ(h.schedule().outliers, 1u);
  EXPECT_EQ(h.schedule().relearns, 0u);
  EXPECT_NEAR(static_cast<double>(h.schedule().period.count()), c.period_ns, 0.2 * kMs);
  EXPECT_NEAR(h.value_at(static_cast<std::int64_t>(4345 * kMs))->value, c.truth(4345 * kMs),
              c.power_mj_per_ns * 0.3 * kMs);
}

TEST(CounterHistory, LargeUniformJitterNeverRecursesAndEdgesStayRightOrPlain) {
  // ±12 ms uniform around a 100 ms grid: the schedule the erg CLI crashed on (issue 30).
  for (std::uint64_t seed = 1; seed <= 3; ++seed) {
    std::mt19937_64 rng(seed);
    Schedule s;
    for (int k = 0; k < 700; ++k)
      s.times.push_back(1037 * kMs + k * 100 * kMs + std::uniform_real_distribution<double>(-12, 12)(rng) * kMs);
    CounterHistory h;
    const Follow f = follow(h, s, 60, seed);
    EXPECT_GT(f.edges, 200);
    EXPECT_LE(f.worst_excess_ms, 0.0) << "seed " << seed << ": an edge placed outside its brackets";
    // Placed on the schedule, edges are far closer than plain reads (a period's 50 ms median).
    EXPECT_LT(median(f.errors_ms), 0.25 * median(f.plain_errors_ms)) << "seed " << seed;
    report("jitter ±12 ms", seed, f, h);
  }
}

TEST(CounterHistory, APeriodLockedWrongFromAFewJitteryUpdatesDoesNotStay) {
  // ±10 ms uniform jitter: a lock from five updates could be 4 % off in period and kept for a
  // minute (issue 30: 104.4 ms). Twenty seeds, 15 s each: the period ends within 0.3 % of the
  // truth, every edge stays inside its brackets, and the median edge is far better than a plain
  // read's.
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    std::mt19937_64 rng(seed * 101);
    Schedule s;
    for (int k = 0; k < 200; ++k)
      s.times.push_back(1037 * kMs + k * 100 * kMs + std::uniform_real_distribution<double>(-10, 10)(rng) * kMs);
    CounterHistory h;
    const Follow f = follow(h, s, 15, seed);
    ASSERT_TRUE(h.schedule().locked) << "seed " << seed;
    EXPECT_NEAR(static_cast<double>(h.schedule().period.count()), 100 * kMs, 0.3 * kMs) << "seed " << seed;
    EXPECT_LE(f.worst_excess_ms, 0.0) << "seed " << seed;
    // (A seed relearned late leaves its young lock fewer narrow updates: half a plain read's.)
    EXPECT_LT(median(f.errors_ms), 0.5 * median(f.plain_errors_ms)) << "seed " << seed;
    report("jitter ±10 ms", seed, f, h);
    std::printf("  period %.3f ms, jitter %.3f ms, fitted %zu, outliers %llu\n", h.schedule().period.count() * 1e-6,
                h.schedule().jitter.count() * 1e-6, h.schedule().fitted_updates,
                static_cast<unsigned long long>(h.schedule().outliers));
  }
}

TEST(CounterHistory, ARandomWalkScheduleIsFollowedOrRelearnedNeverTrustedWrong) {
  // Each update a period ± 4 ms after the previous one: the schedule drifts without bound.
  for (std::uint64_t seed = 1; seed <= 3; ++seed) {
    std::mt19937_64 rng(seed);
    auto s = make_schedule(
        120, [&](double t) { return t + (100 + std::uniform_real_distribution<double>(-4, 4)(rng)) * kMs; });
    CounterHistory h;
    const Follow f = follow(h, s, 120, seed);
    EXPECT_GT(f.edges, 400);
    EXPECT_LE(f.worst_excess_ms, 0.0) << "seed " << seed << ": an edge placed outside its brackets";
    EXPECT_LT(median(f.errors_ms), 0.25 * median(f.plain_errors_ms)) << "seed " << seed;
    EXPECT_TRUE(h.schedule().locked || h.schedule().relearning);
    report("random walk ±4 ms", seed, f, h);
  }
}

TEST(CounterHistory, APhaseJumpIsDetectedAndTheScheduleRelearned) {
  // A clean grid whose phase jumps by 40 % of a period at 6 s.
  auto s = make_schedule(20, [](double t) { return t + 100 * kMs + (std::abs(t - 6e9) < 50 * kMs ? 40 * kMs : 0.0); });
  CounterHistory h;
  const Follow f = follow(h, s, 20, 7);
  EXPECT_EQ(h.schedule().relearns, 1u);
  EXPECT_TRUE(h.schedule().locked);
  EXPECT_FALSE(h.schedule().relearning);
  EXPECT_GT(f.plain_edges, 0) << "edges between the jump and the relock are plain reads";
  EXPECT_LE(f.worst_excess_ms, 0.0);
  EXPECT_LT(f.worst_ms, 5.0);
  report("phase jump", 7, f, h);
  // Relearned on the new phase: an instant well after the jump is exact.
  EXPECT_NEAR(h.value_at(static_cast<std::int64_t>(17.2345e9))->value, s.truth(17.2345e9),
              s.power_mj_per_ns * 0.5 * kMs);
}

TEST(CounterHistory, APeriodThatChangesIsRelearned) {
  auto s = make_schedule(20, [](double t) { return t + (t < 5e9 ? 100 : 130) * kMs; });
  CounterHistory h;
  const Follow f = follow(h, s, 20, 11);
  EXPECT_GE(h.schedule().relearns, 1u);
  ASSERT_TRUE(h.schedule().locked);
  EXPECT_NEAR(static_cast<double>(h.schedule().period.count()), 130 * kMs, 0.5 * kMs);
  EXPECT_LE(f.worst_excess_ms, 0.0);
  EXPECT_LT(f.worst_ms, 5.0);
  report("period 100 → 130 ms", 11, f, h);
}

TEST(CounterHistory, StampsOfTheIntervalStartOrFlooredToTheSecondAreNeverTrusted) {
  // Both repeat for a value (the old rule trusted them) but lie outside the bracket of reads
  // around the update: an interval-start stamp placed every update a period early.
  for (auto kind : {Schedule::Stamp::kIntervalStart, Schedule::Stamp::kFloored}) {
    auto s = make_schedule(5, [](double t) { return t + 100 * kMs; });
    s.stamp = kind;
    CounterHistory h;
    for (double t = 1000 * kMs; t < 6e9; t += 0.5 * kMs) h.add(s.read(t));
    ASSERT_TRUE(h.schedule().stamps_are_update_times.has_value());
    EXPECT_FALSE(*h.schedule().stamps_are_update_times);
    ASSERT_TRUE(h.schedule().locked);
    EXPECT_NEAR(h.value_at(static_cast<std::int64_t>(4.321e9))->value, s.truth(4.321e9), s.power_mj_per_ns * 0.3 * kMs);
  }
}

TEST(CounterHistory, UpdateStampsAreTrustedAndDroppedWhenTheyStopAgreeingWithTheReads) {
  auto s = make_schedule(12, [](double t) { return t + 100 * kMs; });
  s.stamp = Schedule::Stamp::kUpdate;
  CounterHistory h;
  for (double t = 1000 * kMs; t < 4e9; t += 0.5 * kMs) h.add(s.read(t));
  ASSERT_TRUE(h.schedule().stamps_are_update_times.value_or(false));
  EXPECT_NEAR(h.value_at(static_cast<std::int64_t>(3.2345e9))->value, s.truth(3.2345e9), 1e-6);
  // The driver starts stamping the interval's start (a driver update, a different clock).
  s.stamp = Schedule::Stamp::kIntervalStart;
  for (double t = 4e9; t < 8e9; t += 0.5 * kMs) h.add(s.read(t));
  EXPECT_FALSE(h.schedule().stamps_are_update_times.value_or(true));
  ASSERT_TRUE(h.schedule().locked);
  EXPECT_NEAR(h.value_at(static_cast<std::int64_t>(7.2345e9))->value, s.truth(7.2345e9), s.power_mj_per_ns * 0.3 * kMs);
}

// The newest update against the one before it: the increase, and the least and most time
// between them that the reads bracketing each leave.
TEST(CounterHistory, LastStepBracketsTheSpanBetweenTheNewestUpdates) {
  Counter c;
  CounterHistory h;
  EXPECT_FALSE(h.last_step());
  dense(h, c, 1000 * kMs, 350);  // locks
  ASSERT_TRUE(h.schedule().locked);
  // Update k at 1437 ms, k + 1 at 1537 ms: reads 1 ms before and 2 ms after each.
  h.add(c.read(1436 * kMs));
  h.add(c.read(1439 * kMs));
  h.add(c.read(1536 * kMs));
  h.add(c.read(1539 * kMs));
  auto s = h.last_step();
  ASSERT_TRUE(s);
  EXPECT_NEAR(s->increase, c.power_mj_per_ns * 100 * kMs, 1e-6);
  EXPECT_EQ(s->least_span_ns, static_cast<std::int64_t>(97 * kMs));  // 1536 − 1439
  EXPECT_EQ(s->most_span_ns, static_cast<std::int64_t>(103 * kMs));  // 1539 − 1436
  EXPECT_EQ(s->updates, 1);
}

}  // namespace
}  // namespace erg::measure
