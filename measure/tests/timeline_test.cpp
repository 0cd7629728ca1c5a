#include "erg/measure/timeline.hpp"

#include <gtest/gtest.h>

namespace erg::measure {
namespace {

using std::chrono::milliseconds;
using std::chrono::nanoseconds;
using std::chrono::seconds;

TEST(Timeline, ConstantPowerIntegratesToPowerTimesTimeEvenWithOneSample) {
  Timeline t(16);
  t.add_power(seconds(10), 100.0);
  // Deduplicated repeats are not stored...
  EXPECT_FALSE(t.add_power(seconds(11), 100.0));
  EXPECT_EQ(t.size(), 1u);
  // ...but the energy over any window is still power × time (Zeus returns 0 J here).
  EXPECT_DOUBLE_EQ(*t.energy(seconds(10), seconds(11)), 100.0);
  EXPECT_DOUBLE_EQ(*t.energy(milliseconds(10'250), milliseconds(10'750)), 50.0);
  // Before the first sample there is no data: an error, never the first power held backwards.
  auto before = t.energy(seconds(9), seconds(10));
  ASSERT_FALSE(before);
  EXPECT_EQ(before.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(before.error().message.find("before the oldest sample"), std::string::npos);
}

TEST(Timeline, HoldLastPiecewiseExact) {
  Timeline t(16);
  t.add_power(seconds(0), 100.0);
  t.add_power(seconds(1), 200.0);
  t.add_power(seconds(3), 50.0);
  EXPECT_DOUBLE_EQ(*t.energy(seconds(0), seconds(1)), 100.0);
  EXPECT_DOUBLE_EQ(*t.energy(seconds(0), seconds(3)), 500.0);
  EXPECT_DOUBLE_EQ(*t.energy(milliseconds(500), milliseconds(1500)), 150.0);
  EXPECT_DOUBLE_EQ(*t.energy(seconds(3), seconds(5)), 100.0);  // last held forward
  EXPECT_DOUBLE_EQ(*t.energy(seconds(2), seconds(2)), 0.0);
}

TEST(Timeline, QueriesNearestLatestBetween) {
  Timeline t(16);
  EXPECT_FALSE(t.latest());
  EXPECT_FALSE(t.energy(seconds(0), seconds(1)));
  t.add_power(seconds(1), 10.0);
  t.add_power(seconds(2), 20.0);
  t.add_power(seconds(4), 40.0);
  EXPECT_DOUBLE_EQ(t.latest()->watts, 40.0);
  EXPECT_NEAR(t.nearest(milliseconds(1400))->watts, 10.0, 1e-9);
  EXPECT_NEAR(t.nearest(milliseconds(1500))->watts, 10.0, 1e-9);  // tie → earlier
  EXPECT_NEAR(t.nearest(milliseconds(3500))->watts, 40.0, 1e-9);
  auto mid = t.between(seconds(2), seconds(4));
  ASSERT_EQ(mid.size(), 2u);
  EXPECT_EQ(mid[0].time, seconds(2));
  EXPECT_NEAR(mid[0].watts, 20.0, 1e-9);
  EXPECT_NEAR(mid[1].watts, 40.0, 1e-9);
}

TEST(Timeline, BoundedAndStillCorrectForRecentWindows) {
  Timeline t(8);
  for (int i = 0; i < 100; ++i) t.add_power(seconds(i), i % 2 ? 100.0 : 200.0);
  EXPECT_EQ(t.size(), 8u);
  EXPECT_EQ(t.capacity(), 8u);
  EXPECT_NEAR(*t.energy(seconds(95), seconds(97)), 300.0, 1e-6);
}

TEST(Timeline, EnergyReadingsGivePowerFromTheSecondOn) {
  Timeline t(8);
  t.add_energy(seconds(0), 1000.0);
  // One energy reading is no power yet (erg power shows none rather than 0 W).
  EXPECT_FALSE(t.latest());
  EXPECT_FALSE(t.nearest(seconds(0)));
  EXPECT_FALSE(t.power_at(seconds(1)));
  EXPECT_TRUE(t.between(seconds(0), seconds(1)).empty());
  t.add_energy(seconds(2), 1300.0);
  EXPECT_NEAR(t.latest()->watts, 150.0, 1e-9);
  EXPECT_NEAR(*t.power_at(seconds(1)), 150.0, 1e-9);
  EXPECT_NEAR(*t.energy(seconds(0), seconds(2)), 300.0, 1e-9);
}

TEST(Timeline, ACounterThatHasNotMovedYetIsNotZeroWatts) {
  // A counter read faster than it updates (RAPL ~1 ms; later when its writer is late) repeats
  // its value: that is no news about power, not 0 W. The next change is averaged over the whole
  // span since the one before; a counter still for longer than kStaleNs is at 0 W.
  Timeline t;
  t.add_energy(milliseconds(0), 10.0);
  t.add_energy(milliseconds(2), 10.0);
  EXPECT_FALSE(t.latest()) << "no power known yet, not 0 W";
  t.add_energy(milliseconds(4), 10.0);
  t.add_energy(milliseconds(6), 10.6);  // 0.6 J over the 6 ms since the last change
  EXPECT_NEAR(t.latest()->watts, 100.0, 1e-9);
  t.add_energy(milliseconds(8), 10.6);
  EXPECT_NEAR(t.latest()->watts, 100.0, 1e-9) << "still the average since the last change";
  t.add_energy(milliseconds(10), 11.0);
  EXPECT_NEAR(t.latest()->watts, 100.0, 1e-9);
  EXPECT_NEAR(*t.energy(milliseconds(0), milliseconds(10)), 1.0, 1e-12) << "exact at the samples";
  t.add_energy(milliseconds(70), 11.0);  // 60 ms without a change
  EXPECT_EQ(t.latest()->watts, 0.0);
}

TEST(Timeline, UnboundedStorageGrowsInChunksOfTwelveBytesASample) {
  Timeline t;  // unbounded (the default)
  EXPECT_EQ(t.capacity(), 0u);
  EXPECT_EQ(t.allocated_bytes(), 0u) << "nothing before the first sample";
  const std::size_t n = 3 * Timeline::kChunk + 17;
  for (std::size_t i = 0; i < n; ++i) t.add_power(milliseconds(static_cast<long>(i)), static_cast<double>(i % 7));
  EXPECT_EQ(t.size(), n);
  EXPECT_GE(t.allocated_bytes(), 4 * Timeline::kChunk * Timeline::kBytesPerSample);
  EXPECT_LE(t.allocated_bytes(), 4 * (Timeline::kChunk * Timeline::kBytesPerSample + 64)) << "four chunks";
  EXPECT_LE(static_cast<double>(t.allocated_bytes()) / static_cast<double>(n), 12.0 * 1.34);
  // Every sample is still there: the energy over the whole span is the exact hold-last sum.
  double want = 0;
  for (std::size_t i = 0; i + 1 < n; ++i) want += static_cast<double>(i % 7) * 1e-3;
  EXPECT_NEAR(*t.energy(milliseconds(0), milliseconds(static_cast<long>(n - 1))), want, 1e-9);
}

TEST(Timeline, ACapacityDropsTheOldestAcrossChunks) {
  const std::size_t cap = Timeline::kChunk + 100;
  Timeline t(cap);
  const std::size_t n = 5 * Timeline::kChunk;
  for (std::size_t i = 0; i < n; ++i) t.add_power(milliseconds(static_cast<long>(i)), static_cast<double>(i % 3 + 1));
  EXPECT_EQ(t.size(), cap);
  EXPECT_LE(t.allocated_bytes(), 3 * (Timeline::kChunk * Timeline::kBytesPerSample + 64)) << "old chunks are freed";
  EXPECT_EQ(*t.first_time(), milliseconds(static_cast<long>(n - cap)));
  EXPECT_FALSE(t.energy(milliseconds(0), milliseconds(10))) << "dropped data is not invented";
  double want = 0;
  for (std::size_t i = n - 10; i + 1 < n; ++i) want += static_cast<double>(i % 3 + 1) * 1e-3;
  EXPECT_NEAR(*t.energy(milliseconds(static_cast<long>(n - 10)), milliseconds(static_cast<long>(n - 1))), want, 1e-9);
}

TEST(Timeline, AGapLongerThanAChunkCanSpanStartsANewChunk) {
  // µs offsets of 32 bits reach 71 minutes: a device whose power did not change for two hours
  // (nothing stored meanwhile) gets a fresh chunk, and the integral over the gap stays exact.
  Timeline t;
  t.add_power(seconds(0), 100.0);
  t.add_power(seconds(1), 50.0);
  t.add_power(seconds(7200), 80.0);
  t.add_power(seconds(7201), 10.0);
  EXPECT_EQ(t.size(), 4u);
  EXPECT_NEAR(*t.energy(seconds(0), seconds(7201)), 100.0 + 50.0 * 7199 + 80.0, 1e-6);
  EXPECT_NEAR(*t.energy(seconds(3600), seconds(7200) + milliseconds(500)), 50.0 * 3600 + 40.0, 1e-6);
  EXPECT_NEAR(t.nearest(seconds(7000))->watts, 80.0, 1e-9);
}

TEST(Timeline, TimesAreKeptToTheMicrosecond) {
  Timeline t;
  t.add_power(nanoseconds(1'000'000'123), 100.0);
  t.add_power(nanoseconds(2'000'000'999), 0.0);
  EXPECT_EQ(t.first_time()->count(), 1'000'000'123);
  EXPECT_EQ(t.latest()->time.count(), 2'000'000'123) << "1.000000876 s after the first, to the µs";
}

}  // namespace
}  // namespace erg::measure
