#include "erg/optimizers/batch_size/gaussian_ts.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <map>

namespace erg::batch_size {
namespace {

TEST(GaussianTs, PosteriorFromFlatPrior) {
  auto ts = GaussianTs::create({32, 64}, 0.0, 0.0, 2);
  ASSERT_TRUE(ts);
  const double rewards[] = {-10.0, -12.0};
  ASSERT_TRUE(ts->fit_arm(32, rewards));
  // mean −11, population variance 1: reward precision 1, precision 0 + 2·1, mean (0 + 1·(−22)) / 2.
  const ArmState& s = ts->states().at(32);
  EXPECT_DOUBLE_EQ(s.reward_precision, 1.0);
  EXPECT_DOUBLE_EQ(s.param_precision, 2.0);
  EXPECT_DOUBLE_EQ(s.param_mean, -11.0);
  EXPECT_EQ(s.num_observations, 2);
}

TEST(GaussianTs, PosteriorWithInformativePrior) {
  auto ts = GaussianTs::create({32}, -5.0, 0.5, 2);
  ASSERT_TRUE(ts);
  const double rewards[] = {-10.0, -12.0};
  ASSERT_TRUE(ts->fit_arm(32, rewards));
  // precision 0.5 + 2·1 = 2.5; mean (0.5·(−5) + 1·(−22)) / 2.5 = −9.8
  EXPECT_DOUBLE_EQ(ts->states().at(32).param_precision, 2.5);
  EXPECT_DOUBLE_EQ(ts->states().at(32).param_mean, -9.8);
}

TEST(GaussianTs, ZeroVarianceMeansInfinitePrecisionAtTheSampleMean) {
  auto ts = GaussianTs::create({32}, -5.0, 0.5, 1);
  ASSERT_TRUE(ts);
  const double rewards[] = {-7.0, -7.0};
  ASSERT_TRUE(ts->fit_arm(32, rewards));
  const ArmState& s = ts->states().at(32);
  EXPECT_TRUE(std::isinf(s.reward_precision));
  EXPECT_TRUE(std::isinf(s.param_precision));
  EXPECT_EQ(s.param_mean, -7.0);
  // Sampling an infinitely precise arm gives its mean.
  Rng rng(3);
  EXPECT_EQ(ts->predict(rng), 32);
}

TEST(GaussianTs, RefitStartsFromThePrior) {
  auto ts = GaussianTs::create({32}, 0.0, 0.0, 1);
  ASSERT_TRUE(ts);
  const double a[] = {-1.0, -3.0};
  ASSERT_TRUE(ts->fit_arm(32, a));
  const double b[] = {-4.0, -8.0};
  ASSERT_TRUE(ts->fit_arm(32, b));
  // Only b counts: variance 4, reward precision 0.25, precision 0.5, mean −6.
  EXPECT_DOUBLE_EQ(ts->states().at(32).param_precision, 0.5);
  EXPECT_DOUBLE_EQ(ts->states().at(32).param_mean, -6.0);
  ASSERT_TRUE(ts->fit_arm(32, {}));
  EXPECT_EQ(ts->states().at(32).num_observations, 0);
  EXPECT_EQ(ts->states().at(32).param_precision, 0.0);
  EXPECT_FALSE(ts->fit_arm(99, a));
}

TEST(GaussianTs, ExploresUnderObservedArmsFirstInRandomOrder) {
  auto ts = GaussianTs::create({8, 16, 32}, 0.0, 0.0, 2);
  ASSERT_TRUE(ts);
  const double two[] = {-1.0, -2.0};
  ASSERT_TRUE(ts->fit_arm(8, two));
  Rng rng(5);
  std::map<int, int> picked;
  for (int i = 0; i < 200; ++i) ++picked[ts->predict(rng)];
  EXPECT_EQ(picked.count(8), 0u);  // fully explored
  EXPECT_GT(picked[16], 50);       // both unexplored arms come first, in random order
  EXPECT_GT(picked[32], 50);
}

TEST(GaussianTs, SamplesFavourTheBetterArm) {
  auto ts = GaussianTs::create({8, 16}, 0.0, 0.0, 2);
  ASSERT_TRUE(ts);
  const double good[] = {-10.0, -11.0, -10.5};
  const double worse[] = {-12.0, -13.0, -12.5};
  ASSERT_TRUE(ts->fit_arm(8, good));
  ASSERT_TRUE(ts->fit_arm(16, worse));
  EXPECT_EQ(ts->best_arm(), 8);
  Rng rng(11);
  int eights = 0;
  for (int i = 0; i < 1000; ++i) eights += ts->predict(rng) == 8;
  // Posterior sd ≈ 0.24 each, means 2 apart: 16 wins about 1 draw in 10^8.
  EXPECT_GT(eights, 990);
}

}  // namespace
}  // namespace erg::batch_size
