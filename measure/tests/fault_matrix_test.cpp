// The fault matrix, C++ EnergyMonitor face (docs/fault-matrix.md): every fault the simulator can
// inject into a GPU, in the middle of a window and at its edges, on the virtual clock (the
// follower runs its production schedule deterministically). Each outcome is an energy within 1 %
// of the sensor's own figure with the fault flagged, or no energy with an error naming the GPU;
// never an unflagged wrong number. GPU 1 is never faulted and must stay exact and unflagged.

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "erg/sim/faults.hpp"
#include "virtual_rig.hpp"

namespace erg::measure {
namespace {

using std::chrono::milliseconds;
using testing::VirtualRig;

enum class When { kMiddle, kBeforeBegin, kBeforeEnd };

struct Case {
  sim::Fault fault;
  When when;
};

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  static constexpr const char* kWhen[] = {"middle", "at_begin", "at_end"};
  return std::string(sim::fault_name(info.param.fault)) + "_" + kWhen[static_cast<int>(info.param.when)];
}

class FaultMatrix : public ::testing::TestWithParam<Case> {};

TEST_P(FaultMatrix, EnergyMonitorFlagsOrRefuses) {
  const auto [fault, when] = GetParam();
  for (std::uint64_t seed : {1, 2}) {
    VirtualRig rig("2xA100,cpus=0,seed=" + std::to_string(seed));
    ASSERT_TRUE(rig.machine->set_load(0, sim::Load::training(0.8)));
    ASSERT_TRUE(rig.machine->set_load(1, sim::Load::training(0.8)));
    auto m = rig.monitor();
    rig.advance(milliseconds(1000));  // the follower locks onto the schedule
    auto inject = [&] { ASSERT_TRUE(sim::inject_fault(*rig.machine, 0, fault)); };
    if (when == When::kBeforeBegin) inject();
    const auto t0 = rig.now();
    ASSERT_TRUE(m->begin_window("w"));
    rig.advance(milliseconds(1000));
    if (when == When::kMiddle) inject();
    rig.advance(milliseconds(1500));
    if (when == When::kBeforeEnd) inject();
    const auto t1 = rig.now();
    auto r = m->end_window("w");
    ASSERT_TRUE(r) << r.error().message;
    rig.advance(milliseconds(500));  // the sensor's figure for t1 needs the update after it

    // The healthy GPU: exact and unflagged whatever happened to the other one.
    const double healthy = (*rig.machine->sensor_energy_at(1, t1) - *rig.machine->sensor_energy_at(1, t0)).value();
    ASSERT_TRUE(r->gpus[1].energy);
    EXPECT_NEAR(r->gpus[1].energy->value(), healthy, 0.01 * healthy);
    EXPECT_FALSE(r->gpus[1].affected);
    EXPECT_FALSE(r->gpus[1].error);

    const auto& g = r->gpus[0];
    const std::string where = "seed " + std::to_string(seed);
    const bool counter_fault = fault == sim::Fault::kCounterBackwards || fault == sim::Fault::kCounterReset;
    // A counter step before the begin read happened before the window: the figure is exact and
    // has nothing to flag. Every other case is flagged.
    if (!(counter_fault && when == When::kBeforeBegin)) {
      EXPECT_TRUE(g.affected) << where;
    }
    const bool permanent = fault == sim::Fault::kTimeout || fault == sim::Fault::kLost;
    if (permanent) {
      // The GPU cannot be read at the end: no figure, an error naming it.
      EXPECT_FALSE(g.energy) << where << ": " << g.energy->value() << " J";
      ASSERT_TRUE(g.error) << where;
      EXPECT_EQ(g.error->code, fault == sim::Fault::kLost ? ErrorCode::kGpuLost : ErrorCode::kTimeout) << where;
      EXPECT_NE(g.error->message.find("GPU 0"), std::string::npos) << g.error->message;
      EXPECT_EQ(r->missing_devices(), std::vector<std::string>{"gpu0"});
      EXPECT_NEAR(r->gpu_energy().value(), r->gpus[1].energy->value(), 1e-9) << "the total covers GPU 1 only";
      continue;
    }
    const double truth = (*rig.machine->sensor_energy_at(0, t1) - *rig.machine->sensor_energy_at(0, t0)).value();
    ASSERT_TRUE(g.energy) << where << ": " << (g.error ? g.error->message : "");
    EXPECT_NEAR(g.energy->value(), truth, 0.01 * truth)
        << where << " restarts " << g.counter_restarts << " backwards " << g.counter_backwards << " bridged "
        << g.bridged.count() << " s, bound " << g.error_bound.value() << " J, read errors " << g.read_errors;
    EXPECT_TRUE(r->missing_devices().empty());
    switch (fault) {
      case sim::Fault::kCounterBackwards:
      case sim::Fault::kCounterReset:
        if (when == When::kMiddle) {
          EXPECT_EQ(fault == sim::Fault::kCounterReset ? g.counter_restarts : g.counter_backwards, 1u) << where;
          EXPECT_GT(g.bridged.count(), 0.0) << where;
          // The bound holds and is stated.
          EXPECT_GT(g.error_bound.value(), 0.0) << where;
          EXPECT_LE(std::abs(g.energy->value() - truth), g.error_bound.value()) << where;
        } else {
          // At an edge the anomaly falls between a read outside the window and one inside it:
          // before the begin read it is outside the window (nothing to flag, but it must not
          // count); right before the end read it is inside.
          if (when == When::kBeforeEnd) {
            EXPECT_EQ(g.counter_restarts + g.counter_backwards, 1u) << where;
          }
        }
        break;
      case sim::Fault::kOneError: EXPECT_GE(g.read_errors, 1u) << where; break;
      case sim::Fault::kThreeErrors: EXPECT_GE(g.read_errors, 3u) << where; break;
      default: break;
    }
  }
}

std::vector<Case> all_cases() {
  std::vector<Case> out;
  for (sim::Fault f : sim::kAllFaults)
    for (When w : {When::kMiddle, When::kBeforeBegin, When::kBeforeEnd}) out.push_back({f, w});
  return out;
}

INSTANTIATE_TEST_SUITE_P(EveryFault, FaultMatrix, ::testing::ValuesIn(all_cases()), case_name);

}  // namespace
}  // namespace erg::measure
