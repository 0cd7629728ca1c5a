// The profiling bookkeeping: run order, resuming from rows already written, out-of-memory batch
// sizes skipped at lower limits, and rows that disagree with the requested grid.

#include "erg/optimizers/hetero/profiler.hpp"

#include <gtest/gtest.h>

namespace erg::hetero {
namespace {

ProfileGrid grid() { return ProfileGrid{"T4", {32, 8, 16}, {Watts(60), Watts(70)}, Watts(70), Watts(10)}; }

Measurement fake(int b, Watts l) { return Measurement{Seconds(0.01 * b * 70 / l.value()), Watts(l.value() - 2)}; }

TEST(HeteroProfiler, RunsEveryConfigurationOnceAndResumes) {
  std::vector<std::pair<int, double>> ran;
  std::vector<ProfileRow> sunk;
  auto run = [&](int b, Watts l) -> Result<std::optional<Measurement>> {
    ran.emplace_back(b, l.value());
    if (b == 16 && l == Watts(60)) return fail(ErrorCode::kIo, "interrupted");  // the first run stops here
    return std::optional<Measurement>(fake(b, l));
  };
  auto sink = [&](const ProfileRow& r) -> Result<void> {
    sunk.push_back(r);
    return ok();
  };
  auto first = run_profile(grid(), {}, run, sink);
  ASSERT_FALSE(first);
  EXPECT_EQ(first.error().message, "interrupted");
  // Ascending batch sizes, limits from the top.
  EXPECT_EQ(ran, (std::vector<std::pair<int, double>>{{8, 70}, {8, 60}, {16, 70}, {16, 60}}));
  ASSERT_EQ(sunk.size(), 3u);

  // Resume from what the sink kept: only the rest runs.
  ran.clear();
  auto run2 = [&](int b, Watts l) -> Result<std::optional<Measurement>> {
    ran.emplace_back(b, l.value());
    return std::optional<Measurement>(fake(b, l));
  };
  auto second = run_profile(grid(), sunk, run2, nullptr);
  ASSERT_TRUE(second) << second.error().message;
  EXPECT_EQ(ran, (std::vector<std::pair<int, double>>{{16, 60}, {32, 70}, {32, 60}}));
  auto profiles = build_profiles(*second);
  ASSERT_TRUE(profiles) << profiles.error().message;
  ASSERT_EQ(profiles->size(), 1u);
  EXPECT_EQ(profiles->front().cells.size(), 6u);
}

TEST(HeteroProfiler, OutOfMemoryAtTheTopLimitSkipsLowerLimits) {
  std::vector<std::pair<int, double>> ran;
  auto run = [&](int b, Watts l) -> Result<std::optional<Measurement>> {
    ran.emplace_back(b, l.value());
    if (b == 32) return std::optional<Measurement>();
    return std::optional<Measurement>(fake(b, l));
  };
  auto rows = run_profile(grid(), {}, run, nullptr);
  ASSERT_TRUE(rows) << rows.error().message;
  EXPECT_EQ(ran.size(), 5u);  // 32 @ 60 W is not tried
  auto p = build_profiles(*rows);
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_FALSE(p->front().at(2, 0));
  EXPECT_FALSE(p->front().at(2, 1));
  EXPECT_TRUE(p->front().at(1, 0));
}

TEST(HeteroProfiler, ExistingRowsMustMatchTheGrid) {
  ProfileRow other{"A10", 8, Watts(70), fake(8, Watts(70)), Watts(70), Watts(10)};
  auto r = remaining_configurations(grid(), {other});
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("another GPU type"), std::string::npos) << r.error().message;
  ProfileRow outside{"T4", 64, Watts(70), fake(64, Watts(70)), Watts(70), Watts(10)};
  r = remaining_configurations(grid(), {outside});
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("64 @ 70 W: outside"), std::string::npos) << r.error().message;
  ProfileRow idle{"T4", 8, Watts(70), fake(8, Watts(70)), Watts(70), Watts(12)};
  r = remaining_configurations(grid(), {idle});
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("idle_power_w differ"), std::string::npos) << r.error().message;
  ProfileGrid too_high = grid();
  too_high.power_limits.push_back(Watts(80));
  r = remaining_configurations(too_high, {});
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("80 W"), std::string::npos) << r.error().message;
}

}  // namespace
}  // namespace erg::hetero
