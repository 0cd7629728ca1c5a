// Per-request attribution on hand-computed cases: both rules, idle split, bounds, errors.

#include "erg/measure/attribution.hpp"

#include <gtest/gtest.h>

namespace erg::measure {
namespace {

using namespace std::chrono_literals;

constexpr double kEps = 1e-9;

// One 10 s segment of 100 J (10 W); A in flight 0–4 s, B 2–6 s, nobody 6–10 s.
std::vector<EnergySegment> one_segment() { return {{0s, 10s, Joules(100.0), Joules(1.0), Watts(2.0)}}; }
std::vector<RequestSpan> two_requests() { return {{"A", 0s, 4s, 40.0}, {"B", 2s, 6s, 120.0}}; }

TEST(Attribution, TimeInBatchSharesEquallyWhileInFlight) {
  auto r = attribute_requests(one_segment(), two_requests());
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->requests.size(), 2u);
  // A: 2 s alone (20 J) + 2 s shared (10 J); B the mirror; 6–10 s (40 J) unattributed.
  EXPECT_NEAR(r->requests[0].energy.value(), 30.0, kEps);
  EXPECT_NEAR(r->requests[1].energy.value(), 30.0, kEps);
  EXPECT_NEAR(r->unattributed.value(), 40.0, kEps);
  EXPECT_EQ((r->attributed() + r->unattributed).value(), r->measured.value());
  EXPECT_NEAR(r->requests[0].in_flight.count(), 4.0, kEps);
  // Bound: weight integral W = 3 s; 2 W × min(3, 7) + 1 J × 3/10.
  EXPECT_NEAR(r->requests[0].bound.value(), 6.3, kEps);
  EXPECT_NEAR(*r->requests[0].joules_per_token, 30.0 / 40.0, kEps);
  EXPECT_NEAR(*r->requests[1].joules_per_token, 30.0 / 120.0, kEps);
  EXPECT_NEAR(*r->requests[1].joules_per_token_bound, 6.3 / 120.0, kEps);
  EXPECT_NEAR(r->unattributed_bound.value(), 1.0 + 2 * 6.3, kEps);
}

TEST(Attribution, TokenShareWeighsByTokenRate) {
  AttributionOptions o;
  o.rule = SplitRule::kTokenShare;
  auto r = attribute_requests(one_segment(), two_requests(), o);
  ASSERT_TRUE(r) << r.error().message;
  // Rates 10 and 30 tokens/s: in the shared 2 s (20 J) A gets 1/4 (5 J), B 3/4 (15 J).
  EXPECT_NEAR(r->requests[0].energy.value(), 25.0, kEps);
  EXPECT_NEAR(r->requests[1].energy.value(), 35.0, kEps);
  EXPECT_NEAR(r->unattributed.value(), 40.0, kEps);
  // While both are in flight the energy per token is the same for both: 20 J / (2 s × 40 tok/s).
  EXPECT_NEAR(*r->requests[0].joules_per_token, 25.0 / 40.0, kEps);
  // W_A = 2 + 0.5 s: 2 W × 2.5 + 1 J × 0.25.
  EXPECT_NEAR(r->requests[0].bound.value(), 5.25, kEps);
  EXPECT_EQ(r->rule, SplitRule::kTokenShare);
}

TEST(Attribution, TokenShareWithoutTokensFallsBackToEqualShares) {
  AttributionOptions o;
  o.rule = SplitRule::kTokenShare;
  std::vector<RequestSpan> req{{"A", 0s, 4s, 0.0}, {"B", 2s, 6s, 0.0}};
  auto r = attribute_requests(one_segment(), req, o);
  ASSERT_TRUE(r);
  EXPECT_NEAR(r->requests[0].energy.value(), 30.0, kEps);
  EXPECT_FALSE(r->requests[0].joules_per_token);
}

TEST(Attribution, IdlePowerSplitsIdleAndActive) {
  AttributionOptions o;
  o.idle_power = Watts(4.0);  // 40 J idle, 60 J (6 W) active over the 10 s
  auto r = attribute_requests(one_segment(), two_requests(), o);
  ASSERT_TRUE(r);
  EXPECT_NEAR(r->requests[0].energy.value(), 30.0, kEps);  // same total: idle shared by the same rule
  EXPECT_NEAR(r->requests[0].idle.value(), 12.0, kEps);    // 4 W × 3 s of weight
  o.attribute_idle = false;
  r = attribute_requests(one_segment(), two_requests(), o);
  ASSERT_TRUE(r);
  EXPECT_NEAR(r->requests[0].energy.value(), 18.0, kEps);  // 6 W × 3 s
  EXPECT_NEAR(r->requests[0].idle.value(), 0.0, kEps);
  EXPECT_NEAR(r->unattributed.value(), 64.0, kEps);
  EXPECT_EQ((r->attributed() + r->unattributed).value(), r->measured.value());
  // An idle power above the segment's mean power leaves no active energy, never a negative one.
  o.idle_power = Watts(50.0);
  r = attribute_requests(one_segment(), two_requests(), o);
  ASSERT_TRUE(r);
  EXPECT_NEAR(r->requests[0].energy.value(), 0.0, kEps);
  EXPECT_NEAR(r->unattributed.value(), 100.0, kEps);
}

TEST(Attribution, EachSegmentHasItsOwnPower) {
  // 10 W in 0–1 s, 30 W in 1–2 s; A in flight 0.5–1.5 s, B the whole time.
  std::vector<EnergySegment> seg{{0ms, 1000ms, Joules(10.0)}, {1000ms, 2000ms, Joules(30.0)}};
  std::vector<RequestSpan> req{{"A", 500ms, 1500ms, 1.0}, {"B", 0ms, 2000ms, 1.0}};
  auto r = attribute_requests(seg, req);
  ASSERT_TRUE(r);
  EXPECT_NEAR(r->requests[0].energy.value(), 2.5 + 7.5, kEps);
  EXPECT_NEAR(r->requests[1].energy.value(), 5.0 + 2.5 + 7.5 + 15.0, kEps);
  EXPECT_NEAR(r->unattributed.value(), 0.0, kEps);
  EXPECT_EQ(r->requests[0].bound.value(), 0.0);  // no swing, no measurement error
}

TEST(Attribution, PartsOutsideTheSegmentsAreNotCharged) {
  std::vector<RequestSpan> req{{"early", -5s, 1s, 10.0}, {"late", 20s, 30s, 10.0}, {"empty", 3s, 3s, 0.0}};
  auto r = attribute_requests(one_segment(), req);
  ASSERT_TRUE(r);
  EXPECT_NEAR(r->requests[0].energy.value(), 10.0, kEps);
  EXPECT_NEAR(r->requests[0].in_flight.count(), 1.0, kEps);
  EXPECT_EQ(r->requests[1].energy.value(), 0.0);
  EXPECT_EQ(*r->requests[1].joules_per_token, 0.0);
  EXPECT_EQ(r->requests[2].energy.value(), 0.0);
  EXPECT_NEAR(r->unattributed.value(), 90.0, kEps);
}

TEST(Attribution, RejectsInvalidInput) {
  auto bad = [](std::vector<EnergySegment> s, std::vector<RequestSpan> q) {
    auto r = attribute_requests(s, q);
    return !r && r.error().code == ErrorCode::kInvalidArgument;
  };
  EXPECT_TRUE(bad({}, {}));
  EXPECT_TRUE(bad({{1s, 1s, Joules(1.0)}}, {}));
  EXPECT_TRUE(bad({{0s, 1s, Joules(1.0)}, {2s, 3s, Joules(1.0)}}, {}));  // a gap
  EXPECT_TRUE(bad({{0s, 1s, Joules(-1.0)}}, {}));
  EXPECT_TRUE(bad(one_segment(), {{"A", 2s, 1s, 1.0}}));
  EXPECT_TRUE(bad(one_segment(), {{"A", 0s, 1s, -1.0}}));
  EXPECT_TRUE(bad(one_segment(), {{"A", 0s, 1s, 1.0}, {"A", 1s, 2s, 1.0}}));
  AttributionOptions o;
  o.idle_power = Watts(-1.0);
  EXPECT_FALSE(attribute_requests(one_segment(), two_requests(), o));
}

}  // namespace
}  // namespace erg::measure
