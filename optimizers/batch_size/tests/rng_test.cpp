#include "erg/optimizers/batch_size/rng.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

namespace erg::batch_size {
namespace {

TEST(Rng, SameSeedSameSequenceOtherSeedOther) {
  Rng a(42), b(42), c(43);
  bool differs = false;
  for (int i = 0; i < 100; ++i) {
    const auto x = a.next_u64();
    EXPECT_EQ(x, b.next_u64());
    differs |= x != c.next_u64();
  }
  EXPECT_TRUE(differs);
}

TEST(Rng, StateRoundTripContinuesTheSequence) {
  Rng a(7);
  for (int i = 0; i < 13; ++i) (void)a.normal(0, 1);
  const std::string s = a.state();
  EXPECT_TRUE(s.starts_with("xoshiro256ss:")) << s;
  auto b = Rng::restore(s);
  ASSERT_TRUE(b) << b.error().message;
  EXPECT_EQ(*b, a);
  for (int i = 0; i < 50; ++i) {
    EXPECT_EQ(a.uniform(), b->uniform());
    EXPECT_EQ(a.normal(3, 2), b->normal(3, 2));
    EXPECT_EQ(a.permutation(5), b->permutation(5));
  }
}

TEST(Rng, RestoreRejectsOtherText) {
  for (const char* s : {"", "xoshiro256ss:", "xoshiro256ss:00,00,00,00", "mt19937:1",
                        "xoshiro256ss:0000000000000000,0000000000000000,0000000000000000,0000000000000000",
                        "xoshiro256ss:000000000000000g,0000000000000001,0000000000000000,0000000000000000",
                        "xoshiro256ss:0000000000000001,0000000000000001,0000000000000000,0000000000000000,"}) {
    auto r = Rng::restore(s);
    ASSERT_FALSE(r) << s;
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  }
}

TEST(Rng, DrawsHaveTheirDistributions) {
  Rng r(1);
  const int n = 200000;
  double sum = 0, sq = 0;
  int counts[6] = {};
  for (int i = 0; i < n; ++i) {
    const double x = r.normal(5.0, 2.0);
    sum += x;
    sq += x * x;
    const double u = r.uniform();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    const auto k = r.below(6);
    ASSERT_LT(k, 6u);
    ++counts[k];
  }
  const double mean = sum / n;
  EXPECT_NEAR(mean, 5.0, 0.02);
  EXPECT_NEAR(std::sqrt(sq / n - mean * mean), 2.0, 0.02);
  for (int c : counts) EXPECT_NEAR(c, n / 6.0, n / 6.0 * 0.03);
  EXPECT_EQ(r.normal(3.5, 0.0), 3.5);
}

TEST(Rng, PermutationIsAPermutationAndVaries) {
  Rng r(9);
  auto p = r.permutation(6);
  auto sorted = p;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, (std::vector<std::size_t>{0, 1, 2, 3, 4, 5}));
  bool varies = false;
  for (int i = 0; i < 20; ++i) varies |= r.permutation(6) != p;
  EXPECT_TRUE(varies);
  EXPECT_TRUE(r.permutation(0).empty());
}

}  // namespace
}  // namespace erg::batch_size
