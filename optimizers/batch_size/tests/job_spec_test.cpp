#include "erg/optimizers/batch_size/job_spec.hpp"

#include <gtest/gtest.h>

namespace erg::batch_size {
namespace {

JobSpec good() {
  JobSpec s;
  s.batch_sizes = {8, 16, 32};
  s.default_batch_size = 16;
  return s;
}

TEST(JobSpec, DefaultsAreZeus) {
  const JobSpec s;
  EXPECT_EQ(s.eta_knob, 0.5);
  ASSERT_TRUE(s.beta_knob.has_value());
  EXPECT_EQ(*s.beta_knob, 2.0);
  EXPECT_EQ(s.target_metric, 0.5);
  EXPECT_TRUE(s.higher_is_better_metric);
  EXPECT_EQ(s.max_epochs, 100);
  EXPECT_EQ(s.num_pruning_rounds, 2);
  EXPECT_EQ(s.window_size, 0);
  EXPECT_EQ(s.mab_prior_mean, 0.0);
  EXPECT_EQ(s.mab_prior_precision, 0.0);
  EXPECT_EQ(s.mab_num_explorations, 2);
  EXPECT_FALSE(s.mab_seed.has_value());
}

TEST(JobSpec, ValidSpecPasses) { EXPECT_TRUE(validate(good())); }

TEST(JobSpec, RejectsEachBadField) {
  struct Case {
    const char* field;
    void (*spoil)(JobSpec&);
  };
  const Case cases[] = {
      {"batch_sizes", [](JobSpec& s) { s.batch_sizes.clear(); }},
      {"batch_sizes",
       [](JobSpec& s) {
         s.batch_sizes = {8, 16, 16};
       }},
      {"batch_sizes",
       [](JobSpec& s) {
         s.batch_sizes = {0, 16};
       }},
      {"default_batch_size", [](JobSpec& s) { s.default_batch_size = 64; }},
      {"eta_knob", [](JobSpec& s) { s.eta_knob = 1.5; }},
      {"eta_knob", [](JobSpec& s) { s.eta_knob = -0.1; }},
      {"beta_knob", [](JobSpec& s) { s.beta_knob = 0.0; }},
      {"max_epochs", [](JobSpec& s) { s.max_epochs = 0; }},
      {"num_pruning_rounds", [](JobSpec& s) { s.num_pruning_rounds = -1; }},
      {"window_size", [](JobSpec& s) { s.window_size = -2; }},
      {"mab_prior_precision", [](JobSpec& s) { s.mab_prior_precision = -1; }},
      {"mab_num_explorations", [](JobSpec& s) { s.mab_num_explorations = 0; }},
  };
  for (const auto& c : cases) {
    JobSpec s = good();
    c.spoil(s);
    auto r = validate(s);
    ASSERT_FALSE(r) << c.field;
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(r.error().message.find(c.field), std::string::npos) << r.error().message;
  }
}

TEST(JobSpec, NoEarlyStopAndInformativePriorAreAllowed) {
  JobSpec s = good();
  s.beta_knob.reset();
  s.mab_num_explorations = 0;
  s.mab_prior_precision = 0.1;
  EXPECT_TRUE(validate(s));
}

TEST(ZeusCost, WeighsEnergyAgainstTimeAtMaxPower) {
  // η·E + (1−η)·P·T = 0.25·1000 + 0.75·300·10
  EXPECT_DOUBLE_EQ(zeus_cost(Joules(1000), Seconds(10), 0.25, Watts(300)), 250.0 + 2250.0);
  EXPECT_DOUBLE_EQ(zeus_cost(Joules(1000), Seconds(10), 1.0, Watts(300)), 1000.0);
  EXPECT_DOUBLE_EQ(zeus_cost(Joules(1000), Seconds(10), 0.0, Watts(300)), 3000.0);
}

}  // namespace
}  // namespace erg::batch_size
