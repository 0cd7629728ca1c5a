#include "erg/optimizers/pipeline_frequency/cost_model.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace erg::pipeline_frequency {
namespace {

TEST(CostModel, RecoversAnExactExponential) {
  // cost(t) = 4·e^{−0.15 (t − 10)} + 1.5 at the durations a profile might give.
  std::vector<CostPoint> pts;
  for (double t : {10.0, 12.0, 15.0, 19.0, 26.0, 40.0}) pts.push_back({t, 4 * std::exp(-0.15 * (t - 10)) + 1.5});
  const auto m = CostModel::fit(pts);
  ASSERT_TRUE(m) << m.error().message;
  EXPECT_EQ(m->kind, CostModel::Kind::kExponential);
  EXPECT_NEAR(m->b, -0.15, 1e-4);
  EXPECT_NEAR(m->c, 1.5, 1e-3);
  for (const auto& p : pts) EXPECT_NEAR((*m)(p.units), p.cost_j, 1e-4);
  EXPECT_NEAR((*m)(33.0), 4 * std::exp(-0.15 * 23) + 1.5, 1e-4);
}

TEST(CostModel, NoisyFrontierFitIsDecreasingAndConvex) {
  const std::vector<CostPoint> pts = {{11, 2.53}, {13, 2.08}, {16, 1.69}, {20, 1.36}, {29, 1.16}};
  const auto m = CostModel::fit(pts);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->kind, CostModel::Kind::kExponential);
  EXPECT_GT(m->a, 0);
  EXPECT_LT(m->b, 0);
  double sse = 0;
  for (const auto& p : pts) sse += std::pow((*m)(p.units) - p.cost_j, 2);
  EXPECT_LT(sse, 0.01);
  for (int t = 11; t < 29; ++t) {
    EXPECT_LT((*m)(t + 1), (*m)(t));
    EXPECT_GE((*m)(t) - (*m)(t + 1), (*m)(t + 1) - (*m)(t + 2) - 1e-12);
  }
}

TEST(CostModel, FewPoints) {
  const std::vector<CostPoint> one = {{5, 2.0}};
  const auto c = CostModel::fit(one);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->kind, CostModel::Kind::kConstant);
  EXPECT_EQ((*c)(5), 2.0);
  const std::vector<CostPoint> two = {{8, 1.0}, {4, 3.0}};
  const auto l = CostModel::fit(two);
  ASSERT_TRUE(l);
  EXPECT_EQ(l->kind, CostModel::Kind::kLinear);
  EXPECT_DOUBLE_EQ((*l)(4), 3.0);
  EXPECT_DOUBLE_EQ((*l)(6), 2.0);
  EXPECT_DOUBLE_EQ((*l)(8), 1.0);
  EXPECT_FALSE(CostModel::fit({}));
  const std::vector<CostPoint> repeated = {{4, 1.0}, {4, 2.0}};
  EXPECT_FALSE(CostModel::fit(repeated));
}

}  // namespace
}  // namespace erg::pipeline_frequency
