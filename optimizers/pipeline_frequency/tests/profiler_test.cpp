#include "erg/optimizers/pipeline_frequency/profiler.hpp"

#include <gtest/gtest.h>

#include <map>
#include <tuple>
#include <vector>

namespace erg::pipeline_frequency {
namespace {

// Energies per frequency from a table; every call is recorded so the test sees the order tried.
struct FakeGpu {
  std::map<int, double> energy;  // MHz -> J
  std::vector<std::tuple<int, Instruction, int>> calls;
  MeasureInstruction fn() {
    return [this](int stage, Instruction instruction, int mhz) -> Result<InstructionMeasurement> {
      calls.emplace_back(stage, instruction, mhz);
      return InstructionMeasurement{1000.0 / mhz, energy.at(mhz) * (stage + 1)};
    };
  }
};

TEST(Sweep, HighestFirstAndStopsAfterFiveRisesInARow) {
  // Falls to 1000 MHz, rises at 900, falls again at 800 (restarting the count), then rises five
  // times: 700 … 300. 200 must never be tried.
  FakeGpu gpu;
  gpu.energy = {{1400, 10}, {1300, 9},  {1200, 8},  {1100, 7},  {1000, 6},  {900, 6.5}, {800, 6.2},
                {700, 6.3}, {600, 6.4}, {500, 6.5}, {400, 6.6}, {300, 6.7}, {200, 6.8}};
  SweepOptions o;
  o.stages = 2;
  o.frequencies_mhz = {200, 300, 400, 500, 600, 700, 800, 900, 1000, 1100, 1200, 1300, 1400};  // any order
  auto p = sweep_frequencies(o, gpu.fn());
  ASSERT_TRUE(p) << p.error().message;
  ASSERT_EQ(p->rows.size(), 2u * 2u * 12u);
  ASSERT_EQ(gpu.calls.size(), p->rows.size());
  EXPECT_EQ(gpu.calls.front(), std::make_tuple(0, Instruction::kForward, 1400));
  EXPECT_EQ(gpu.calls[11], std::make_tuple(0, Instruction::kForward, 300));
  EXPECT_EQ(gpu.calls[12], std::make_tuple(0, Instruction::kBackward, 1400));
  EXPECT_EQ(gpu.calls.back(), std::make_tuple(1, Instruction::kBackward, 300));
  for (const auto& r : p->rows) EXPECT_NE(r.frequency_mhz, 200);
  EXPECT_DOUBLE_EQ(p->rows[24].energy_j, 20.0);  // stage 1's forward at 1400 MHz
  EXPECT_EQ(p->num_stages(), 2);
}

TEST(Sweep, FourRisesDoNotStopAndZeroMeansEverything) {
  FakeGpu gpu;
  gpu.energy = {{1000, 5}, {900, 6}, {800, 7}, {700, 8}, {600, 9}, {500, 4}, {400, 5}};
  SweepOptions o{1, {1000, 900, 800, 700, 600, 500, 400}, 5};
  auto p = sweep_frequencies(o, gpu.fn());
  ASSERT_TRUE(p);
  EXPECT_EQ(p->rows.size(), 14u);  // four rises, then a fall: nothing stops
  o.stop_after_rises = 2;
  gpu.calls.clear();
  p = sweep_frequencies(o, gpu.fn());
  ASSERT_TRUE(p);
  EXPECT_EQ(p->rows.size(), 6u);  // 1000, 900, 800 per instruction
}

TEST(Sweep, ErrorsNameWhere) {
  SweepOptions o{1, {1000, 900}, 5};
  auto p = sweep_frequencies(o, [](int, Instruction i, int mhz) -> Result<InstructionMeasurement> {
    if (i == Instruction::kBackward && mhz == 900) return fail(ErrorCode::kDriverError, "clock refused");
    return InstructionMeasurement{1, 1};
  });
  ASSERT_FALSE(p);
  EXPECT_EQ(p.error().code, ErrorCode::kDriverError);
  EXPECT_EQ(p.error().message, "stage 0 backward at 900 MHz: clock refused");
  EXPECT_FALSE(sweep_frequencies(SweepOptions{0, {1000}, 5}, [](int, Instruction, int) {
    return Result<InstructionMeasurement>(InstructionMeasurement{});
  }));
  EXPECT_FALSE(sweep_frequencies(SweepOptions{1, {}, 5}, [](int, Instruction, int) {
    return Result<InstructionMeasurement>(InstructionMeasurement{});
  }));
}

TEST(ProfileCsv, RoundTripsThroughTheParser) {
  Profile p;
  p.rows = {{0, Instruction::kForward, 1410, 0.0123456789012345, 3.14159265358979},
            {0, Instruction::kBackward, 1395, 0.1 / 3, 2.0 / 3},
            {1, Instruction::kForward, 210, 1e-5, 123456.789}};
  auto back = parse_profile_csv(to_profile_csv(p));
  ASSERT_TRUE(back) << back.error().message;
  ASSERT_EQ(back->rows.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(back->rows[i].stage, p.rows[i].stage);
    EXPECT_EQ(back->rows[i].instruction, p.rows[i].instruction);
    EXPECT_EQ(back->rows[i].frequency_mhz, p.rows[i].frequency_mhz);
    EXPECT_EQ(back->rows[i].time_s, p.rows[i].time_s);
    EXPECT_EQ(back->rows[i].energy_j, p.rows[i].energy_j);
  }
}

}  // namespace
}  // namespace erg::pipeline_frequency
