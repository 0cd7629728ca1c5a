#include "erg/optimizers/pipeline_frequency/profile.hpp"

#include <gtest/gtest.h>

namespace erg::pipeline_frequency {
namespace {

TEST(ProfileCsv, ParsesColumnsInAnyOrderWithExtraColumnsAndCrlf) {
  const auto p = parse_profile_csv(
      "energy,stage,note,instruction,time,frequency\r\n"
      "3.5,0,x,forward,0.0125,1410\r\n"
      "\r\n"
      "7.25,1,y,backward,0.025,1170\r\n");
  ASSERT_TRUE(p) << p.error().message;
  ASSERT_EQ(p->rows.size(), 2u);
  EXPECT_EQ(p->num_stages(), 2);
  EXPECT_EQ(p->rows[0].stage, 0);
  EXPECT_EQ(p->rows[0].instruction, Instruction::kForward);
  EXPECT_EQ(p->rows[0].frequency_mhz, 1410);
  EXPECT_DOUBLE_EQ(p->rows[0].time_s, 0.0125);
  EXPECT_DOUBLE_EQ(p->rows[0].energy_j, 3.5);
  EXPECT_EQ(p->rows[1].instruction, Instruction::kBackward);
  EXPECT_EQ(p->rows[1].frequency_mhz, 1170);
}

TEST(ProfileCsv, MissingColumnIsNamed) {
  const auto p = parse_profile_csv("stage,instruction,frequency,time\n0,forward,1410,0.1\n");
  ASSERT_FALSE(p);
  EXPECT_EQ(p.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(p.error().message.find("'energy'"), std::string::npos) << p.error().message;
}

TEST(ProfileCsv, NonNumericValueNamesLineAndColumn) {
  const auto p =
      parse_profile_csv("stage,instruction,frequency,time,energy\n0,forward,1410,0.1,1\n0,backward,1410,fast,1\n");
  ASSERT_FALSE(p);
  EXPECT_NE(p.error().message.find("line 3"), std::string::npos) << p.error().message;
  EXPECT_NE(p.error().message.find("column time"), std::string::npos) << p.error().message;
  EXPECT_NE(p.error().message.find("'fast'"), std::string::npos) << p.error().message;
}

TEST(ProfileCsv, RejectsBadRows) {
  const std::string head = "stage,instruction,frequency,time,energy\n";
  EXPECT_FALSE(parse_profile_csv(head + "0,sideways,1410,0.1,1\n"));
  EXPECT_FALSE(parse_profile_csv(head + "-1,forward,1410,0.1,1\n"));
  EXPECT_FALSE(parse_profile_csv(head + "0.5,forward,1410,0.1,1\n"));
  EXPECT_FALSE(parse_profile_csv(head + "0,forward,1410,0,1\n"));
  EXPECT_FALSE(parse_profile_csv(head + "0,forward,1410,0.1\n"));
  EXPECT_FALSE(parse_profile_csv(head));
  EXPECT_FALSE(parse_profile_csv(""));
  const auto dup = parse_profile_csv(head + "0,forward,1410,0.1,1\n0,forward,1410,0.2,1\n");
  ASSERT_FALSE(dup);
  EXPECT_NE(dup.error().message.find("already on line 2"), std::string::npos) << dup.error().message;
}

TEST(CandidateOptions, EffectiveEnergyParetoQuantizationAndDedup) {
  // time (s), energy (J) at 70 W blocking power; unit 10 ms.
  const std::vector<ProfileRow> rows = {
      {0, Instruction::kForward, 1400, 0.010, 3.0},  // cost 3.0 − 0.7 = 2.3, 1 unit
      {0, Instruction::kForward, 1200, 0.0125,
       2.5},  // cost 1.625, 2 units (rounded up): 1000 MHz fits 2 units too → dropped
      {0, Instruction::kForward, 1100, 0.0150, 2.2},  // cost 1.15, 2 units → dropped likewise
      {0, Instruction::kForward, 1000, 0.0200, 2.5},  // cost 1.1, 2 units: the slowest of its units → kept
      {0, Instruction::kForward, 900, 0.0300, 3.8},   // cost 1.7: dominated by 1000 MHz → dropped
      {0, Instruction::kForward, 800, 0.0400, 3.95},  // cost 1.15: slower and costlier → dropped
  };
  const auto c = candidate_options(rows, 70.0, 0.010);
  ASSERT_TRUE(c) << c.error().message;
  ASSERT_EQ(c->options.size(), 2u);
  EXPECT_EQ(c->options[0].frequency_mhz, 1000);
  EXPECT_EQ(c->options[0].units, 2);
  EXPECT_NEAR(c->options[0].cost_j, 1.1, 1e-12);
  EXPECT_EQ(c->options[1].frequency_mhz, 1400);
  EXPECT_EQ(c->options[1].units, 1);
  EXPECT_NEAR(c->options[1].cost_j, 2.3, 1e-12);
  EXPECT_EQ(c->max_units(), 2);
  EXPECT_EQ(c->min_units(), 1);
  EXPECT_EQ(c->option_for(5).frequency_mhz, 1000);
  EXPECT_EQ(c->option_for(2).frequency_mhz, 1000);
  EXPECT_EQ(c->option_for(1).frequency_mhz, 1400);
  EXPECT_EQ(c->option_for(0).frequency_mhz, 1400);
  EXPECT_FALSE(candidate_options({}, 70, 0.01));
  EXPECT_FALSE(candidate_options(rows, 70, 0));
}

}  // namespace
}  // namespace erg::pipeline_frequency
