#include "erg/optimizers/pipeline_frequency/phillips_dessouky.hpp"

#include <gtest/gtest.h>

#include <algorithm>

namespace erg::pipeline_frequency {
namespace {

std::vector<int> sorted(std::vector<int> v) {
  std::sort(v.begin(), v.end());
  return v;
}

TEST(MinCut, PlainNetworkHandChecked) {
  // s=0 → 1 → t=3 and s → 2 → t; capacities 4, 1 and 2, 3: the cut is {1→t, s→2}, value 3.
  const std::vector<BoundedArc> arcs = {{0, 1, 0, 4}, {1, 3, 0, 1}, {0, 2, 0, 2}, {2, 3, 0, 3}};
  const auto cut = min_cut_with_lower_bounds(4, 0, 3, arcs);
  ASSERT_TRUE(cut);
  ASSERT_TRUE(*cut);
  EXPECT_TRUE((*cut)->bounded);
  EXPECT_EQ((*cut)->value, 3);
  EXPECT_EQ((*cut)->source_side, (std::vector<bool>{true, true, false, false}));
}

TEST(MinCut, LowerBoundOnABackwardArcLowersTheCut) {
  // s=0 → a=1 (upper 2), 1 → t=3 (upper 10), 1 → 2 (lower 1, upper 10), s → 2 (upper 10),
  // 2 → t (upper 2). Cut {s, 2} | {1, t}: forward s→1 (2) and 2→t (2), backward 1→2 (−1) = 3,
  // less than any cut without the backward arc (s→1 + s→2 = 12, 1→t + 2→t = 12, ...).
  const std::vector<BoundedArc> arcs = {{0, 1, 0, 2}, {1, 3, 0, 10}, {1, 2, 1, 10}, {0, 2, 0, 10}, {2, 3, 0, 2}};
  const auto cut = min_cut_with_lower_bounds(4, 0, 3, arcs);
  ASSERT_TRUE(cut);
  ASSERT_TRUE(*cut);
  EXPECT_EQ((*cut)->value, 3);
  EXPECT_EQ((*cut)->source_side, (std::vector<bool>{true, false, true, false}));
}

TEST(MinCut, InfeasibleLowerBoundsAndUnboundedCuts) {
  // Flow through 1→2 must be at least 5 but s→1 carries at most 3.
  const std::vector<BoundedArc> infeasible = {{0, 1, 0, 3}, {1, 2, 5, 9}, {2, 3, 0, 9}};
  const auto none = min_cut_with_lower_bounds(4, 0, 3, infeasible);
  ASSERT_TRUE(none);
  EXPECT_FALSE(*none);
  const std::vector<BoundedArc> unbounded = {{0, 1, 0, kUnbounded}, {1, 2, 0, kUnbounded}};
  const auto cut = min_cut_with_lower_bounds(3, 0, 2, unbounded);
  ASSERT_TRUE(cut);
  ASSERT_TRUE(*cut);
  EXPECT_FALSE((*cut)->bounded);
  const std::vector<BoundedArc> bad = {{0, 1, 4, 3}};
  EXPECT_FALSE(min_cut_with_lower_bounds(2, 0, 1, bad));
}

// Activities with a cost table: `c_max` at max_units, rising by `step` per unit faster (linear).
TradeoffActivity linear(int min_units, int max_units, double c_max, double step) {
  TradeoffActivity a{min_units, max_units, {}};
  for (int d = min_units; d <= max_units; ++d) a.cost_j.push_back(c_max + step * (max_units - d));
  return a;
}

TEST(PhillipsDessouky, CriticalPathAndCheapestSpeedUpOnAChain) {
  // 0 → 1 in series, plus 2 in parallel (off the critical path): durations 3, 4 and 2.
  std::vector<TradeoffActivity> acts = {linear(1, 3, 10, 5), linear(2, 4, 10, 1), linear(1, 2, 1, 1)};
  auto pd = PhillipsDessouky::create(acts, {{0, 1}});
  ASSERT_TRUE(pd) << pd.error().message;
  EXPECT_EQ(pd->makespan(), 7);
  EXPECT_EQ(pd->critical(), (std::vector<bool>{true, true, false}));
  auto s = pd->step();
  ASSERT_TRUE(s);
  ASSERT_TRUE(*s);
  EXPECT_EQ((*s)->sped_up, std::vector<int>{1});  // 1 J per unit, not 5
  EXPECT_TRUE((*s)->slowed_down.empty());
  EXPECT_EQ((*s)->makespan_after, 6);
  EXPECT_NEAR((*s)->cost_change_j, 1.0, 1e-9);
  EXPECT_EQ(pd->durations(), (std::vector<int>{3, 3, 2}));
}

TEST(PhillipsDessouky, ParallelPathsAreCutTogether) {
  // Two parallel activities of equal length: both must shorten; the cut costs 2 + 3.
  auto pd = PhillipsDessouky::create({linear(1, 4, 0, 2), linear(1, 4, 0, 3)}, {});
  ASSERT_TRUE(pd);
  auto s = pd->step();
  ASSERT_TRUE(s && *s);
  EXPECT_EQ(sorted((*s)->sped_up), (std::vector<int>{0, 1}));
  EXPECT_NEAR((*s)->cost_change_j, 5.0, 1e-9);
  EXPECT_EQ(pd->makespan(), 3);
}

TEST(PhillipsDessouky, CutThatSlowsAnActivityDown) {
  // A → C → E, A → D, B → E; F after A off the critical path. At durations A2 B4 C2 D4 E2 F1
  // every path through A..E is 6 long. Shortening A costs 2/unit, E 2, B and D 10; C was sped up
  // earlier (it may lengthen, saving 1) and costs 10 to shorten further. The cheapest way to
  // 5 units is: shorten A and E (4), lengthen C back (−1) — 3 in all; without the slow-down the
  // best would be 4.
  enum { A, B, C, D, E, F };
  std::vector<TradeoffActivity> acts = {linear(1, 2, 0, 2),  linear(3, 4, 0, 10), linear(1, 3, 0, 0),
                                        linear(3, 4, 0, 10), linear(1, 2, 0, 2),  linear(1, 1, 0, 0)};
  acts[C] = {1, 3, {20, 10, 9}};  // from 2: shorten 10, lengthen saves 1
  auto pd =
      PhillipsDessouky::create(acts, {{A, C}, {A, D}, {C, E}, {B, E}, {A, F}}, std::vector<int>{2, 4, 2, 4, 2, 1});
  ASSERT_TRUE(pd) << pd.error().message;
  EXPECT_EQ(pd->makespan(), 6);
  EXPECT_EQ(pd->critical(), (std::vector<bool>{true, true, true, true, true, false}));
  auto s = pd->step();
  ASSERT_TRUE(s) << s.error().message;
  ASSERT_TRUE(*s);
  EXPECT_EQ(sorted((*s)->sped_up), (std::vector<int>{A, E}));
  EXPECT_EQ((*s)->slowed_down, std::vector<int>{C});
  EXPECT_FALSE((*s)->without_slow_down);
  EXPECT_EQ((*s)->makespan_after, 5);
  EXPECT_NEAR((*s)->cost_change_j, 3.0, 1e-9);
  EXPECT_EQ(pd->durations(), (std::vector<int>{1, 4, 3, 4, 1, 1}));
}

TEST(PhillipsDessouky, StopsWhenALongestPathIsAllFastest) {
  auto pd = PhillipsDessouky::create({linear(2, 3, 0, 1), linear(1, 1, 0, 0)}, {{0, 1}});
  ASSERT_TRUE(pd);
  auto s = pd->step();
  ASSERT_TRUE(s && *s);
  EXPECT_EQ(pd->makespan(), 3);
  auto end = pd->step();
  ASSERT_TRUE(end);
  EXPECT_FALSE(*end);
  EXPECT_EQ(pd->makespan(), 3);
}

TEST(PhillipsDessouky, RejectsBadProblems) {
  EXPECT_FALSE(PhillipsDessouky::create({}, {}));
  EXPECT_FALSE(PhillipsDessouky::create({{1, 2, {1.0}}}, {}));            // wrong table size
  EXPECT_FALSE(PhillipsDessouky::create({{1, 2, {1.0, 2.0}}}, {}));       // cost rises with time
  EXPECT_FALSE(PhillipsDessouky::create({{1, 3, {3.0, 2.9, 0.0}}}, {}));  // not convex
  EXPECT_FALSE(PhillipsDessouky::create({linear(1, 2, 0, 1), linear(1, 2, 0, 1)}, {{0, 1}, {1, 0}}));
  EXPECT_FALSE(PhillipsDessouky::create({linear(1, 2, 0, 1)}, {}, std::vector<int>{3}));
}

}  // namespace
}  // namespace erg::pipeline_frequency
