#include "erg/core/clock.hpp"

#include <gtest/gtest.h>

namespace erg {
namespace {

TEST(VirtualClock, MovesOnlyWhenTold) {
  VirtualClock clock(std::chrono::seconds(5));
  EXPECT_EQ(clock.now(), std::chrono::seconds(5));
  EXPECT_EQ(clock.now(), std::chrono::seconds(5));
  clock.advance(std::chrono::milliseconds(250));
  EXPECT_EQ(clock.now(), std::chrono::milliseconds(5250));
  auto wall = clock.wall_now();
  clock.advance(std::chrono::seconds(1));
  EXPECT_EQ(clock.wall_now() - wall, std::chrono::seconds(1));
}

TEST(SteadyClock, IsMonotonic) {
  auto& c = SteadyClock::instance();
  auto a = c.now();
  auto b = c.now();
  EXPECT_LE(a, b);
  EXPECT_GT(c.wall_now(), std::chrono::seconds(1'600'000'000));
}

}  // namespace
}  // namespace erg
