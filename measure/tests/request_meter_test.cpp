// RequestMeter on a virtual clock: stamps, errors, attribution of what it recorded.

#include "erg/measure/request_meter.hpp"

#include <gtest/gtest.h>

namespace erg::measure {
namespace {

using namespace std::chrono_literals;

TEST(RequestMeter, StampsRequestsOnItsClockAndAttributesThem) {
  VirtualClock clock(0s);
  RequestMeter meter(&clock);
  ASSERT_TRUE(meter.begin("A"));
  clock.advance(2s);
  ASSERT_TRUE(meter.begin("B"));
  clock.advance(2s);
  ASSERT_TRUE(meter.end("A", 40.0));
  EXPECT_EQ(meter.in_flight(), 1u);
  clock.advance(2s);
  ASSERT_TRUE(meter.end("B", 120.0));
  const auto done = meter.finished();
  ASSERT_EQ(done.size(), 2u);
  EXPECT_EQ(done[0].id, "A");
  EXPECT_EQ(done[0].start, 0s);
  EXPECT_EQ(done[0].end, 4s);
  EXPECT_EQ(done[1].start, 2s);
  EXPECT_EQ(done[1].tokens, 120.0);
  // The hand-computed case of attribution_test: 100 J over 10 s, A 30 J and B 30 J.
  const std::vector<EnergySegment> seg{{0s, 10s, Joules(100.0)}};
  auto r = meter.attribute(seg);
  ASSERT_TRUE(r);
  EXPECT_NEAR(r->requests[0].energy.value(), 30.0, 1e-9);
  EXPECT_NEAR(r->requests[1].energy.value(), 30.0, 1e-9);
  meter.forget_until(5s);
  ASSERT_EQ(meter.finished().size(), 1u);
  EXPECT_EQ(meter.finished()[0].id, "B");
}

TEST(RequestMeter, RejectsDuplicatesUnknownIdsAndNegativeTokens) {
  VirtualClock clock(0s);
  RequestMeter meter(&clock);
  ASSERT_TRUE(meter.begin("A"));
  EXPECT_EQ(meter.begin("A").error().code, ErrorCode::kAlreadyExists);
  EXPECT_EQ(meter.end("B", 1.0).error().code, ErrorCode::kNotFound);
  EXPECT_EQ(meter.end("A", -1.0).error().code, ErrorCode::kInvalidArgument);
  ASSERT_TRUE(meter.end("A", 1.0));
  EXPECT_EQ(meter.begin("A").error().code, ErrorCode::kAlreadyExists);  // finished, not forgotten
  EXPECT_EQ(meter.end("A", 1.0).error().code, ErrorCode::kNotFound);
  meter.forget_until(clock.now());
  EXPECT_TRUE(meter.begin("A"));
}

}  // namespace
}  // namespace erg::measure
