#include "erg/measure/counter_tracker.hpp"

#include <gtest/gtest.h>

namespace erg::measure {
namespace {

TEST(CounterTracker, FirstReadIsBaselineThenDeltas) {
  CounterTracker t;
  EXPECT_EQ(t.update(5000.0), 0.0);
  EXPECT_EQ(t.update(5200.0), 200.0);
  EXPECT_EQ(t.update(5200.0), 200.0);
  EXPECT_EQ(t.anomalies(), 0u);
}

TEST(CounterTracker, ResetAddsEnergySinceRestart) {
  CounterTracker t;
  t.update(1'000'000.0);
  t.update(1'000'500.0);
  EXPECT_EQ(t.update(300.0), 800.0);  // driver reload: counter restarted from 0, then 300 more
  EXPECT_EQ(t.anomalies(), 1u);
  EXPECT_EQ(t.update(400.0), 900.0);
}

TEST(CounterTracker, BackwardsAddsNothingAndNeverDecreases) {
  CounterTracker t;
  t.update(10'000.0);
  t.update(10'400.0);
  EXPECT_EQ(t.update(10'100.0), 400.0);
  EXPECT_EQ(t.anomalies(), 1u);
  EXPECT_EQ(t.update(10'200.0), 500.0);
}

// With a known schedule the tracker is told how many updates surely fell in the span: a step back
// loses exactly those (each bridged at one update's expected increase, bounded by its ceiling);
// none lost means an exact figure with nothing bridged.
TEST(CounterTracker, BackwardsWithAScheduleBridgesTheUpdatesInTheSpanOnly) {
  CounterTracker t;
  t.update(10'000.0);
  t.update(10'400.0);
  CounterBridge none{
      .estimate = 0, .ceiling = 50, .span_ns = 4'000'000, .updates = 0, .per_update = 40, .per_update_ceiling = 44};
  EXPECT_EQ(t.update(9'000.0, none), 400.0);
  EXPECT_EQ(t.anomaly_record().backwards, 1u);
  EXPECT_EQ(t.anomaly_record().bridged_ns, 0);
  EXPECT_EQ(t.anomaly_record().error_bound, 0.0);
  EXPECT_EQ(t.update(9'040.0), 440.0);  // counting goes on from the new value
  CounterBridge two = none;
  two.updates = 2;
  EXPECT_EQ(t.update(5'000.0, two), 520.0);
  EXPECT_EQ(t.anomaly_record().bridged, 80.0);
  EXPECT_EQ(t.anomaly_record().bridged_ns, 4'000'000);
  EXPECT_EQ(t.anomaly_record().error_bound, 80.0);  // each update: max(40, 44 − 40)
}

// After a restart the raw value holds the updates since it; only the span's others are lost.
TEST(CounterTracker, RestartWithAScheduleCountsRawAndTheUpdatesBeforeIt) {
  CounterTracker t;
  t.update(1'000'000.0);
  CounterBridge b{
      .estimate = 0, .ceiling = 200, .span_ns = 150'000'000, .updates = 2, .per_update = 40, .per_update_ceiling = 44};
  EXPECT_EQ(t.update(38.0, b), 38.0 + 40.0);  // one update after the restart (raw), one before it
  EXPECT_EQ(t.raw_updates(), 1);
  EXPECT_EQ(t.anomaly_record().restarts, 1u);
  EXPECT_EQ(t.anomaly_record().error_bound, 40.0);
  CounterTracker u;
  u.update(1'000'000.0);
  b.updates = 1;
  EXPECT_EQ(u.update(41.0, b), 41.0);  // the span's one update came after the restart: exact
  EXPECT_EQ(u.anomaly_record().error_bound, 0.0);
  EXPECT_EQ(u.anomaly_record().bridged_ns, 0);
}

// An update left undecided adds its ceiling to the bound at once; if it later proves taken, its
// estimate joins the figure.
TEST(CounterTracker, UndecidedUpdateBoundsFirstThenAddsIfTaken) {
  CounterTracker t;
  t.update(10'000.0);
  t.update(5'000.0, CounterBridge{.estimate = 0,
                                  .ceiling = 44,
                                  .span_ns = 3'000'000,
                                  .updates = 0,
                                  .per_update = 40,
                                  .per_update_ceiling = 44});
  t.add_undecided(44.0, 3'000'000);
  EXPECT_EQ(t.accumulated(), 0.0);
  EXPECT_EQ(t.anomaly_record().error_bound, 44.0);
  EXPECT_EQ(t.anomaly_record().bridged_ns, 3'000'000);
  EXPECT_EQ(t.add_estimate(40.0), 40.0);
  EXPECT_EQ(t.anomaly_record().bridged, 40.0);
  EXPECT_EQ(t.anomaly_record().error_bound, 44.0);
}

// A shortfall (an advance the caller knows to be short: a step back hidden by an update) is
// counted apart from the decreases and bounded; the value stays the counter's.
TEST(CounterTracker, ShortfallIsCountedAndBoundedNotAdded) {
  CounterTracker t;
  t.update(10'000.0);
  EXPECT_EQ(t.update(10'010.0), 10.0);  // an update of 40 less a step of 30
  EXPECT_EQ(t.last_raw(), 10'010.0);
  t.add_shortfall(34.0);
  EXPECT_EQ(t.accumulated(), 10.0);
  EXPECT_EQ(t.anomaly_record().shortfalls, 1u);
  EXPECT_EQ(t.anomaly_record().error_bound, 34.0);
  EXPECT_EQ(t.anomaly_record().bridged, 0.0);
  EXPECT_EQ(t.anomalies(), 0u) << "a shortfall is no decrease";
}

}  // namespace
}  // namespace erg::measure
