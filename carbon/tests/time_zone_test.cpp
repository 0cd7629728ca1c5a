#include "erg/carbon/time_zone.hpp"

#include <gtest/gtest.h>

#include <filesystem>

namespace erg::carbon {
namespace {

using namespace std::chrono;

sys_seconds at(int y, unsigned mo, unsigned d, int h) { return sys_days{year{y} / month{mo} / day{d}} + hours{h}; }

bool have_tzdata() { return std::filesystem::exists("/usr/share/zoneinfo/America/Los_Angeles"); }

TEST(TimeZone, OffsetsFollowDaylightSavingTime) {
  if (!have_tzdata()) GTEST_SKIP() << "tzdata is not installed (./dev deps installs it)";
  auto la = TimeZone::load("America/Los_Angeles");
  ASSERT_TRUE(la) << la.error().message;
  EXPECT_EQ(la->offset_at(at(2026, 1, 15, 12)), hours(-8));
  EXPECT_EQ(la->offset_at(at(2026, 7, 15, 12)), hours(-7));
  // 2026-03-08: clocks go forward at 02:00 PST = 10:00 UTC.
  EXPECT_EQ(la->offset_at(at(2026, 3, 8, 9)), hours(-8));
  EXPECT_EQ(la->offset_at(at(2026, 3, 8, 10)), hours(-7));
  auto berlin = TimeZone::load("Europe/Berlin");
  ASSERT_TRUE(berlin);
  EXPECT_EQ(berlin->offset_at(at(2026, 1, 15, 12)), hours(1));
  EXPECT_EQ(berlin->offset_at(at(2026, 7, 15, 12)), hours(2));
  EXPECT_EQ(la->to_local(at(2026, 1, 15, 2)), at(2026, 1, 14, 18));
}

TEST(TimeZone, UtcAndErrors) {
  auto utc = TimeZone::load("UTC");
  ASSERT_TRUE(utc);
  EXPECT_EQ(utc->offset_at(at(2026, 7, 1, 0)), seconds(0));
  auto unknown = TimeZone::load("Mars/Olympus_Mons");
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error().code, ErrorCode::kNotFound);
  EXPECT_NE(unknown.error().message.find("Mars/Olympus_Mons"), std::string::npos);
  EXPECT_FALSE(TimeZone::load("../../etc/passwd"));
  auto garbage = TimeZone::parse("not a tz file at all, not at all, not at all, nope", "x");
  ASSERT_FALSE(garbage);
  EXPECT_EQ(garbage.error().code, ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace erg::carbon
