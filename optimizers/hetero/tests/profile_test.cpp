// The profile format: parsing, grid checks and the errors that name their cause.

#include "erg/optimizers/hetero/profile.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace erg::hetero {
namespace {

const char* kGood =
    "# a comment\n"
    "gpu_type,batch_size,power_limit_w,step_time_s,avg_power_w,max_power_limit_w,idle_power_w\n"
    "T4,8,60,0.20,58,70,10\n"
    "T4,8,70,0.18,66,70,10\n"
    "T4,16,60,0.38,59,70,10\n"
    "T4,16,70,oom,oom,70,10\r\n"
    "\n";

TEST(HeteroProfile, ParsesAGridWithInfeasibleCells) {
  auto p = parse_profiles(kGood, "t4.csv");
  ASSERT_TRUE(p) << p.error().message;
  ASSERT_EQ(p->size(), 1u);
  const Profile& t4 = p->front();
  EXPECT_EQ(t4.gpu_type, "T4");
  EXPECT_EQ(t4.batch_sizes, (std::vector<int>{8, 16}));
  ASSERT_EQ(t4.power_limits.size(), 2u);
  EXPECT_DOUBLE_EQ(t4.power_limits[1].value(), 70);
  EXPECT_DOUBLE_EQ(t4.max_power_limit.value(), 70);
  EXPECT_DOUBLE_EQ(t4.idle_power.value(), 10);
  ASSERT_TRUE(t4.at(0, 1));
  EXPECT_DOUBLE_EQ(t4.at(0, 1)->step_time.count(), 0.18);
  EXPECT_DOUBLE_EQ(t4.at(1, 0)->avg_power.value(), 59);
  EXPECT_FALSE(t4.at(1, 1));
  EXPECT_TRUE(t4.any_feasible());
}

TEST(HeteroProfile, ColumnsInAnyOrderAndRoundTrip) {
  auto p = parse_profile_rows(
      "idle_power_w,gpu_type,max_power_limit_w,power_limit_w,batch_size,avg_power_w,step_time_s,extra\n"
      "12,A10,150,120,32,110.5,0.25,x\n");
  ASSERT_TRUE(p) << p.error().message;
  ASSERT_EQ(p->size(), 1u);
  EXPECT_EQ((*p)[0].batch_size, 32);
  EXPECT_DOUBLE_EQ((*p)[0].measurement->step_time.count(), 0.25);
  auto again = parse_profile_rows(std::string(kProfileHeader) + "\n" + to_csv_row((*p)[0]) + "\n");
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_EQ((*again)[0].gpu_type, "A10");
  EXPECT_DOUBLE_EQ((*again)[0].measurement->avg_power.value(), 110.5);
  EXPECT_DOUBLE_EQ((*again)[0].idle_power.value(), 12);
  ProfileRow infeasible = (*p)[0];
  infeasible.measurement.reset();
  auto third = parse_profile_rows(std::string(kProfileHeader) + "\n" + to_csv_row(infeasible) + "\n");
  ASSERT_TRUE(third) << third.error().message;
  EXPECT_FALSE((*third)[0].measurement);
}

void expect_error(const std::string& csv, const std::vector<std::string>& fragments) {
  auto p = parse_profiles(csv, "x.csv");
  ASSERT_FALSE(p) << "accepted:\n" << csv;
  EXPECT_EQ(p.error().code, ErrorCode::kInvalidArgument);
  for (const auto& f : fragments) EXPECT_NE(p.error().message.find(f), std::string::npos) << p.error().message;
}

const std::string kHeader = std::string(kProfileHeader) + "\n";

TEST(HeteroProfile, MissingConfigurationsAreNamed) {
  expect_error(kHeader +
                   "A10,16,100,0.1,90,150,20\n"
                   "A10,16,150,0.09,120,150,20\n"
                   "A10,32,100,0.2,95,150,20\n",
               {"GPU type A10", "1 missing configuration", "32 @ 150 W"});
}

TEST(HeteroProfile, BadRowsAreNamedByLineAndColumn) {
  expect_error("gpu_type,batch_size,power_limit_w,step_time_s,avg_power_w,idle_power_w\n",
               {"x.csv:1", "max_power_limit_w"});
  expect_error(kHeader + "A10,sixteen,100,0.1,90,150,20\n", {"x.csv:2", "batch_size", "not an integer"});
  expect_error(kHeader + "A10,16,100,-0.1,90,150,20\n", {"x.csv:2", "step_time_s", "greater than 0"});
  expect_error(kHeader + "A10,16,200,0.1,90,150,20\n", {"power_limit_w", "above", "150"});
  expect_error(kHeader + "A10,16,100,0.1,,150,20\n", {"both be measured"});
  expect_error(kHeader + "A10,16,100,0.1,90\n", {"x.csv:2", "fields"});
  expect_error(kHeader + "A10,16,100,0.1,90,150,20\nA10,16,100,0.1,90,150,20\n", {"appears twice", "16 @ 100 W"});
  expect_error(kHeader + "A10,16,100,0.1,90,150,20\nA10,32,100,0.1,90,160,20\n", {"max_power_limit_w differs"});
  expect_error(kHeader + "A10,16,100,0.1,90,150,20\nA10,32,100,0.1,90,150,25\n", {"idle_power_w differs"});
  expect_error("", {"empty"});
}

TEST(HeteroProfile, LoadProfileWantsOneTypePerFile) {
  const auto dir = std::filesystem::temp_directory_path() / ("erg_hetero_profile_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto one = dir / "one.csv", two = dir / "two.csv";
  std::ofstream(one) << kGood;
  std::ofstream(two) << kHeader << "A10,16,100,0.1,90,150,20\nT4,16,60,0.3,55,70,10\n";
  auto p = load_profile(one);
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->gpu_type, "T4");
  auto q = load_profile(two);
  ASSERT_FALSE(q);
  EXPECT_NE(q.error().message.find("several GPU types (A10, T4)"), std::string::npos) << q.error().message;
  auto r = load_profile(dir / "absent.csv");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kNotFound);
  EXPECT_NE(r.error().message.find("absent.csv"), std::string::npos);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace erg::hetero
