#include "erg/core/result.hpp"

#include <gtest/gtest.h>

#include "erg/core/device.hpp"

namespace erg {
namespace {

Result<int> parse_positive(int v) {
  if (v <= 0) return fail(ErrorCode::kInvalidArgument, "value must be positive");
  return v;
}

TEST(Result, CarriesValueOrError) {
  auto good = parse_positive(3);
  ASSERT_TRUE(good);
  EXPECT_EQ(*good, 3);
  auto bad = parse_positive(-1);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(bad.error().what(), "value must be positive");
}

TEST(Result, ErrorCodeNamesAreStable) {
  EXPECT_EQ(to_string(ErrorCode::kNotSupported), "not_supported");
  EXPECT_EQ(to_string(ErrorCode::kNoPermission), "no_permission");
  EXPECT_EQ(to_string(ErrorCode::kGpuLost), "gpu_lost");
}

TEST(PowerDomainNames, RoundTrip) {
  for (auto d : {PowerDomain::kDeviceInstant, PowerDomain::kDeviceAverage, PowerDomain::kMemoryAverage}) {
    auto parsed = parse_power_domain(to_string(d));
    ASSERT_TRUE(parsed);
    EXPECT_EQ(*parsed, d);
  }
  auto bad = parse_power_domain("gpu");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(bad.error().message.find("'gpu'"), std::string::npos);
}

}  // namespace
}  // namespace erg
