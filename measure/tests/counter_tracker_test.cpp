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

}  // namespace
}  // namespace erg::measure
