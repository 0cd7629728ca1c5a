#include "erg/core/units.hpp"

#include <gtest/gtest.h>

namespace erg {
namespace {

TEST(Units, ScalesConvertLosslessly) {
  MilliJoules mj(1500.0);
  Joules j = mj;
  EXPECT_DOUBLE_EQ(j.value(), 1.5);
  MicroJoules uj = j;
  EXPECT_DOUBLE_EQ(uj.value(), 1.5e6);
  MilliWatts mw = Watts(250.0);
  EXPECT_DOUBLE_EQ(mw.value(), 250000.0);
  EXPECT_DOUBLE_EQ(Megahertz(1410.0).value(), 1410.0);
}

TEST(Units, PowerTimesTimeIsEnergy) {
  Joules e = Watts(100.0) * std::chrono::milliseconds(1500);
  EXPECT_DOUBLE_EQ(e.value(), 150.0);
  Joules e2 = std::chrono::seconds(2) * MilliWatts(500.0);
  EXPECT_DOUBLE_EQ(e2.value(), 1.0);
  Watts p = MilliJoules(3000.0) / std::chrono::seconds(3);
  EXPECT_DOUBLE_EQ(p.value(), 1.0);
}

TEST(Units, ArithmeticAndComparison) {
  Joules a(2.0);
  Joules b(3.0);
  EXPECT_DOUBLE_EQ((a + b).value(), 5.0);
  EXPECT_DOUBLE_EQ((b - a).value(), 1.0);
  EXPECT_DOUBLE_EQ((a * 2.0).value(), 4.0);
  EXPECT_DOUBLE_EQ(b / a, 1.5);
  EXPECT_LT(a, b);
  EXPECT_EQ(Joules(MilliJoules(2000.0)), a);
}

}  // namespace
}  // namespace erg
