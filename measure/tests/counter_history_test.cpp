// CounterHistory on synthetic counters: exact arithmetic, no simulator. A synthetic counter
// updates at origin + k·period + jitter(k) and then shows the energy at constant power up to that
// instant, so its value at any instant is known exactly (linear in time between updates).

#include "erg/measure/counter_history.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>

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

}  // namespace
}  // namespace erg::measure
