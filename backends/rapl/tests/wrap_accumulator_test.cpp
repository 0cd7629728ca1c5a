#include "erg/backends/rapl/wrap_accumulator.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <limits>
#include <random>
#include <vector>

namespace erg::rapl {
namespace {

using std::chrono::milliseconds;

TEST(WrapAccumulator, FirstUpdateIsTheBaseline) {
  WrapAccumulator acc(1000);
  EXPECT_FALSE(acc.has_baseline());
  EXPECT_EQ(acc.update(700), 0u);
  EXPECT_TRUE(acc.has_baseline());
  EXPECT_EQ(acc.update(750), 50u);
  EXPECT_EQ(acc.update(750), 50u);  // Equal is not a wrap.
  EXPECT_EQ(acc.wraps(), 0u);
}

TEST(WrapAccumulator, SingleWrap) {
  WrapAccumulator acc(1000);
  acc.update(900);
  EXPECT_EQ(acc.update(100), 200u);  // 100 to the top, 100 after.
  EXPECT_EQ(acc.wraps(), 1u);
  EXPECT_EQ(acc.update(300), 400u);
}

TEST(WrapAccumulator, WrapToExactlyZero) {
  WrapAccumulator acc(1000);
  acc.update(600);
  EXPECT_EQ(acc.update(0), 400u);
  EXPECT_EQ(acc.wraps(), 1u);
  EXPECT_EQ(acc.update(0), 400u);  // Staying at 0 is no second wrap.
  EXPECT_EQ(acc.update(10), 410u);
  EXPECT_EQ(acc.wraps(), 1u);
}

TEST(WrapAccumulator, BaselineAtZeroAndAtTheTop) {
  WrapAccumulator acc(1000);
  acc.update(0);
  EXPECT_EQ(acc.update(999), 999u);
  EXPECT_EQ(acc.update(1000), 1000u);  // The range's own value (some kernels report it).
  EXPECT_EQ(acc.update(5), 1005u);
}

// Zeus tests/device/cpu/test_rapl.py::test_rapl_polling_process: every decrease is one wrap.
TEST(WrapAccumulator, ZeusSequenceCountsEightWraps) {
  const std::uint64_t range = 100000;
  WrapAccumulator acc(range);
  for (std::uint64_t raw : {100000, 90000, 80000, 70000, 60000, 50000, 40000, 50000, 20000, 10000}) acc.update(raw);
  EXPECT_EQ(acc.wraps(), 8u);
  // (last raw + wraps × range) − first raw.
  EXPECT_EQ(acc.accumulated_uj(), 10000 + 8 * range - 100000);
}

TEST(WrapAccumulator, SeveralWrapsBetweenReadsInferredFromTime) {
  // Range 10 J, stated maximum 50 W; the package draws a steady 20 W, read every 100 ms (2 J per
  // read).
  const std::uint64_t range = 10'000'000;
  WrapAccumulator acc(range, Watts(50.0));
  std::uint64_t true_uj = 0;
  acc.update(0, milliseconds(0));
  for (int i = 0; i < 20; ++i) {  // 2 s, four wraps, each seen.
    true_uj += 2'000'000;
    acc.update(true_uj % range, milliseconds(100));
  }
  EXPECT_EQ(acc.accumulated_uj(), true_uj);
  EXPECT_EQ(acc.wraps(), 4u);
  EXPECT_EQ(acc.ambiguous_updates(), 0u);  // 50 W × 0.1 s = 5 J: a second wrap is impossible.

  // Then no read for 2.3 s: 46 J, that is four whole wraps plus 6 J, and the raw value alone
  // shows only 6 J.
  true_uj += 46'000'000;
  acc.update(true_uj % range, milliseconds(2300));
  EXPECT_EQ(acc.accumulated_uj(), true_uj);
  EXPECT_EQ(acc.wraps(), 4u + 4u);
  EXPECT_EQ(acc.ambiguous_updates(), 1u);

  // A gap with a decrease: 5.5 wraps in 2.75 s at 20 W.
  true_uj += 55'000'000;
  acc.update(true_uj % range, milliseconds(2750));
  EXPECT_EQ(acc.accumulated_uj(), true_uj);
  EXPECT_EQ(acc.wraps(), 8u + 1u + 5u);
  EXPECT_EQ(acc.ambiguous_updates(), 2u);
}

TEST(WrapAccumulator, NoHistoryTakesTheSmallestCandidate) {
  WrapAccumulator acc(1'000'000, Watts(1000.0));
  acc.update(100, milliseconds(0));
  // 10 s could hold up to 10 kJ: ambiguous, but no average power to go by.
  EXPECT_EQ(acc.update(200, std::chrono::seconds(10)), 100u);
  EXPECT_EQ(acc.ambiguous_updates(), 1u);
  EXPECT_EQ(acc.wraps(), 0u);
}

TEST(WrapAccumulator, InferenceNeverExceedsTheStatedMaximumPower) {
  // Range 1 J; history says 100 W; after 10 s the average predicts 1000 J, but a 0.25 W maximum
  // allows at most 2.5 J, so two extra wraps at most.
  WrapAccumulator acc(1'000'000, Watts(0.25));
  acc.update(0, milliseconds(0));
  // Establish history: 100 W over 1 ms is 0.1 J (bound 0.25 mJ ≪ range, so not ambiguous).
  acc.update(100'000, milliseconds(1));
  acc.update(100'100, std::chrono::seconds(10));
  EXPECT_EQ(acc.wraps(), 2u);
  EXPECT_EQ(acc.accumulated_uj(), 100'100u + 2'000'000u);
}

TEST(WrapAccumulator, AChangeNoEnergyExplainsIsNotCounted) {
  // A package's real range (262 kJ) and the default 1000 W: a read 10 ms after another can show
  // at most ~1 kJ more (the bound includes a second of slack).
  const std::uint64_t range = 262'143'328'850;
  WrapAccumulator acc(range);
  acc.update(100'000'000'000, milliseconds(0));
  acc.update(100'000'002'000, milliseconds(10));
  EXPECT_EQ(acc.accumulated_uj(), 2'000u);
  // A corrupt (torn) reading below the last: as a wrap it would be 252 kJ in 10 ms.
  EXPECT_EQ(acc.update(90'000'004'000, milliseconds(10)), 2'000u);
  EXPECT_EQ(acc.implausible_updates(), 1u);
  EXPECT_EQ(acc.wraps(), 0u);
  // The next, correct reading is 10 kJ above the corrupt one: also no energy, also counted.
  EXPECT_EQ(acc.update(100'000'006'000, milliseconds(10)), 2'000u);
  EXPECT_EQ(acc.implausible_updates(), 2u);
  // And from there on, as before.
  EXPECT_EQ(acc.update(100'000'008'500, milliseconds(10)), 4'500u);
  // A counter that restarts (a driver reload) counts on from its new value.
  EXPECT_EQ(acc.update(1'000, milliseconds(10)), 4'500u);
  EXPECT_EQ(acc.update(3'000, milliseconds(10)), 6'500u);
  EXPECT_EQ(acc.implausible_updates(), 3u);
  // A real wrap in a short interval is still a wrap.
  acc.update(range - 1'000, std::chrono::seconds(300));  // 262 kJ in 300 s: plausible
  EXPECT_EQ(acc.update(500, milliseconds(10)), 6'500u + (range - 1'000 - 3'000) + 1'500u);
  EXPECT_EQ(acc.wraps(), 1u);
  EXPECT_EQ(acc.implausible_updates(), 3u);
}

TEST(WrapAccumulator, UntimedUpdatesNeverInfer) {
  WrapAccumulator acc(1000, Watts(1e9));
  acc.update(10);
  EXPECT_EQ(acc.update(20), 10u);
  EXPECT_EQ(acc.ambiguous_updates(), 0u);
}

TEST(WrapAccumulator, UnknownRangeTreatsDecreaseAsReset) {
  WrapAccumulator acc(0);
  acc.update(500);
  EXPECT_EQ(acc.update(700), 200u);
  EXPECT_EQ(acc.update(100), 300u);  // Restarted: counts the 100 since the restart.
  EXPECT_EQ(acc.wraps(), 0u);
}

TEST(WrapAccumulator, AResetToMoreThanThePowerAllowsIsNotCounted) {
  // Found by estimator_fuzz: with the range unknown (or a raw value above it), a decrease was
  // taken as a restart and its raw value counted whole, however much energy that meant.
  WrapAccumulator unknown(0);
  unknown.update(500'000'000'000, milliseconds(0));
  EXPECT_EQ(unknown.update(400'000'000'000, milliseconds(10)), 0u) << "400 kJ in 10 ms";
  EXPECT_EQ(unknown.implausible_updates(), 1u);
  EXPECT_EQ(unknown.update(400'000'002'000, milliseconds(10)), 2'000u);
  // A restart that is plausible still counts from 0.
  EXPECT_EQ(unknown.update(1'000, milliseconds(10)), 3'000u);
  // A raw value above the stated range, then a lower one: the same rule.
  WrapAccumulator above(1'000'000);
  above.update(5'000'000'000, milliseconds(0));
  EXPECT_EQ(above.update(4'000'000'000, milliseconds(10)), 0u);
  EXPECT_EQ(above.implausible_updates(), 1u);
}

TEST(WrapAccumulator, TheTotalSaturatesNeverWraps) {
  // Found by estimator_fuzz: 2^64 µJ (5 TWh) is out of reach of any real counter, but a total
  // that wrapped past it would decrease.
  constexpr auto kMax = std::numeric_limits<std::uint64_t>::max();
  WrapAccumulator acc(0, Watts(1e12));
  acc.update(0, milliseconds(0));
  EXPECT_EQ(acc.update(kMax - 10, std::chrono::hours(100'000)), kMax - 10);
  EXPECT_EQ(acc.update(5, std::chrono::seconds(1)), kMax - 5);  // a restart counts its 5
  EXPECT_EQ(acc.update(20, std::chrono::seconds(1)), kMax);
  EXPECT_EQ(acc.update(30, std::chrono::seconds(1)), kMax);
}

TEST(WrapAccumulator, MonotonicOverRandomWalk) {
  const std::uint64_t range = 1'000'000;
  WrapAccumulator acc(range);
  std::mt19937_64 rng(42);
  std::uniform_int_distribution<std::uint64_t> step(0, range - 1);  // < one wrap per read.
  std::uint64_t true_uj = 123'456;
  acc.update(true_uj % range);
  const std::uint64_t start = true_uj;
  std::uint64_t previous = 0;
  for (int i = 0; i < 10000; ++i) {
    true_uj += step(rng);
    const auto total = acc.update(true_uj % range);
    ASSERT_GE(total, previous);
    previous = total;
  }
  EXPECT_EQ(acc.accumulated_uj(), true_uj - start);
}

}  // namespace
}  // namespace erg::rapl
