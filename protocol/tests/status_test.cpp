#include "erg/protocol/status.hpp"

#include <gtest/gtest.h>

namespace erg::protocol {
namespace {

TEST(Status, MapsLikeZeusd) {
  EXPECT_EQ(http_status(ErrorCode::kNotFound), 400);
  EXPECT_EQ(http_status(ErrorCode::kInvalidArgument), 400);
  EXPECT_EQ(http_status(ErrorCode::kNotSupported), 400);
  EXPECT_EQ(http_status(ErrorCode::kNoPermission), 403);
  EXPECT_EQ(http_status(ErrorCode::kGpuLost), 500);
  EXPECT_EQ(http_status(ErrorCode::kDriverError), 500);
  EXPECT_EQ(http_status(ErrorCode::kInternal), 500);
}

TEST(Status, WorstPrefersServerErrors) {
  EXPECT_EQ(worst_status(400, 500), 500);
  EXPECT_EQ(worst_status(403, 400), 403);
  EXPECT_EQ(worst_status(500, 403), 500);
}

TEST(Status, ClientSideCodes) {
  EXPECT_EQ(error_code_for_status(403), ErrorCode::kNoPermission);
  EXPECT_EQ(error_code_for_status(401), ErrorCode::kNoPermission);
  EXPECT_EQ(error_code_for_status(400), ErrorCode::kInvalidArgument);
  EXPECT_EQ(error_code_for_status(404), ErrorCode::kNotFound);
  EXPECT_EQ(error_code_for_status(500), ErrorCode::kDriverError);
}

}  // namespace
}  // namespace erg::protocol
