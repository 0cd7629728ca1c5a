// Live check on the simulated machine: a simulated training job (each step is a fixed amount of
// work whose duration and power depend on the limit, through the simulator's calibrated device
// model) driven by the optimizer with a real EnergyMonitor on the virtual clock settles on the
// limit its selector picks from the simulator's *true* energy and time per limit — on SKUs whose
// curves differ. All figures are simulated.

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>

#include "erg/measure/energy_monitor.hpp"
#include "erg/optimizers/power_limit/optimizer.hpp"
#include "sim_rig.hpp"

namespace erg::power_limit {
namespace {

using testing::SimRig;

constexpr double kWorkPerStep = 0.2;    // work units per step: ~0.2 s at full clock
constexpr unsigned kWarmupSteps = 10;   // Zeus's default; ≥ 0.5 s: the clock settles ~0.45 s after a limit change
constexpr unsigned kProfileSteps = 40;  // Zeus's default

Result<void> step(sim::Machine& m) {
  auto t = m.run_work(0, kWorkPerStep, sim::Load::training());
  if (!t) return fail(t.error());
  return ok();
}

/// The simulator's true profile: per limit, warmup steps, then the physical energy and time of
/// profile steps (the same steps the optimizer's window spans).
std::vector<PowerLimitMeasurement> true_profile(const std::string& spec, Watts pl_step) {
  SimRig rig(spec);
  const auto c = *rig.gpus[0]->power_limit_constraints();
  std::vector<PowerLimitMeasurement> out;
  for (double mw = c.max.value(); mw >= c.min.value(); mw -= MilliWatts(pl_step).value()) {
    EXPECT_TRUE(rig.gpus[0]->set_power_limit(MilliWatts(mw)));
    for (unsigned i = 0; i < kWarmupSteps; ++i) EXPECT_TRUE(step(*rig.machine));
    const auto t0 = rig.machine->now();
    const auto e0 = *rig.machine->true_energy(0);
    for (unsigned i = 0; i < kProfileSteps; ++i) EXPECT_TRUE(step(*rig.machine));
    out.push_back({Watts(mw / 1000.0), *rig.machine->true_energy(0) - e0, Seconds(rig.machine->now() - t0)});
  }
  return out;
}

/// Trains with the optimizer until Done; returns its pick and its measured profile.
std::pair<Watts, std::vector<PowerLimitMeasurement>> optimize(const std::string& spec, Watts pl_step,
                                                              std::shared_ptr<OptimumSelector> selector) {
  SimRig rig(spec);
  sim::MachineClock clock(*rig.machine);
  measure::EnergyMonitorOptions mo;
  mo.clock = &clock;
  mo.follower_thread = false;  // nothing reads in the background on the virtual clock
  mo.settle = true;            // end edges wait for the counter's next update: exact to the sensor
  mo.cpu_indices = std::vector<unsigned>{};
  auto monitor = measure::EnergyMonitor::create(rig.gpus, {}, mo);
  EXPECT_TRUE(monitor) << monitor.error().message;
  OptimizerOptions o;
  o.wait_steps = 1;
  o.warmup_steps = kWarmupSteps;
  o.profile_steps = kProfileSteps;
  o.pl_step = pl_step;
  o.selector = std::move(selector);
  auto opt = PowerLimitOptimizer::create(rig.gpus, monitor_windows(**monitor), o);
  EXPECT_TRUE(opt) << opt.error().message;
  for (int i = 0; i < 10000 && !(*opt)->optimal_power_limit(); ++i) {
    auto r = (*opt)->on_step_begin();
    EXPECT_TRUE(r) << r.error().message;
    EXPECT_TRUE(step(*rig.machine));
  }
  EXPECT_TRUE((*opt)->optimal_power_limit());
  // Settled: the GPU runs at the pick from here on.
  EXPECT_EQ(rig.machine->status(0)->power_limit, *(*opt)->optimal_power_limit());
  return {Watts(*(*opt)->optimal_power_limit()), (*opt)->measurements()};
}

struct LiveCase {
  std::string spec;
  std::string selector;
  /// false: the sensor cannot resolve the true pick (see the A100 case below); the pick must
  /// then cost at most 1.5 % more true energy than the true optimum. An energy case whose true
  /// runner-up is within 1.5 % of the optimum is checked the same way.
  bool exact = true;
};

std::shared_ptr<OptimumSelector> make_selector(const std::string& name) {
  if (name == "energy") return energy_selector();
  if (name == "zeus-cost-0.5") return *zeus_cost_selector(0.5, 1);
  if (name == "zeus-cost-0.9") return *zeus_cost_selector(0.9, 1);
  if (name == "max-slowdown-1.1") return *max_slowdown_selector(1.1);
  return nullptr;
}

class Live : public ::testing::TestWithParam<LiveCase> {};

TEST_P(Live, SettlesOnTheSelectorsPickFromTheTrueProfile) {
  const std::string& spec = GetParam().spec;
  const std::string& name = GetParam().selector;
  const Watts pl_step(25);
  const auto truth = true_profile(spec, pl_step);
  const auto selector = make_selector(name);
  ASSERT_TRUE(selector);
  const Watts want = *selector->select(truth);
  const auto [got, measured] = optimize(spec, pl_step, selector);
  for (std::size_t i = 0; i < truth.size() && i < measured.size(); ++i)
    std::printf("  %s %4.0f W: true %8.2f J %6.3f s | measured %8.2f J %6.3f s (simulated)\n", spec.c_str(),
                truth[i].power_limit.value(), truth[i].energy.value(), truth[i].time.count(),
                measured[i].energy.value(), measured[i].time.count());
  std::printf("  %s %s: true pick %.0f W, optimizer %.0f W (simulated)\n", spec.c_str(), name.c_str(), want.value(),
              got.value());
  // Energy selector: when another limit's true energy is within the sensor's resolution of the
  // best (V100: 1304.0 J at 125 W against 1305.9 J at 100 W, 0.14 % apart, while an 8-13 s
  // window of this load reads 0.6-1.3 % high depending on the limit), the pick is a coin toss
  // between them and only the bound below is meaningful.
  double best = 1e300, at_pick = 0;  // true energies: the least, and the optimizer's pick's
  for (const auto& m : truth) {
    best = std::min(best, m.energy.value());
    if (m.power_limit == got) at_pick = m.energy.value();
  }
  bool near_tie = false;
  if (name == "energy")
    for (const auto& m : truth) near_tie |= m.power_limit != want && m.energy.value() <= 1.015 * best;
  if (GetParam().exact && !near_tie) {
    EXPECT_EQ(got.value(), want.value()) << spec << " " << name;
  } else {
    EXPECT_LE(at_pick, 1.015 * best) << spec << " " << name << ": picked " << got.value() << " W";
  }
}

// On the virtual clock a run is a function of the machine's seed: the optimizer's measured
// profile is the same to the last bit in every run, whenever the machine is created. (With the
// virtual clock starting at CLOCK_MONOTONIC, times computed in floating point from absolute
// nanoseconds rounded differently in each run, and the V100's measured profile took one of two
// values, about half of the runs each.)
TEST(LiveRepeat, ARunIsAFunctionOfTheSeed) {
  std::vector<std::vector<PowerLimitMeasurement>> runs;
  for (int i = 0; i < 6; ++i) {
    runs.push_back(optimize("1xV100,cpus=0", Watts(25), energy_selector()).second);
    std::this_thread::sleep_for(std::chrono::microseconds(997 * (i + 1)));  // another origin
  }
  for (std::size_t r = 1; r < runs.size(); ++r) {
    ASSERT_EQ(runs[r].size(), runs[0].size());
    for (std::size_t i = 0; i < runs[0].size(); ++i) {
      EXPECT_EQ(runs[r][i].energy.value(), runs[0][i].energy.value()) << "run " << r << ", limit " << i;
      EXPECT_EQ(runs[r][i].time.count(), runs[0][i].time.count()) << "run " << r << ", limit " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    TwoSkus, Live,
    // A100's sensor samples only part of each update period (sim/README.md),
    // which biases a window of this rippling load by up to ~5 % at some
    // limits, while its true energy curve is flat to 1 % between 225 and
    // 275 W: no measurement of this length resolves the Energy pick there.
    ::testing::Values(LiveCase{"1xA100,cpus=0", "energy", false}, LiveCase{"1xA100,cpus=0", "zeus-cost-0.5"},
                      LiveCase{"1xA100,cpus=0", "zeus-cost-0.9"}, LiveCase{"1xA100,cpus=0", "max-slowdown-1.1"},
                      LiveCase{"1xV100,cpus=0", "energy"}, LiveCase{"1xV100,cpus=0", "zeus-cost-0.5"},
                      LiveCase{"1xV100,cpus=0", "zeus-cost-0.9"}, LiveCase{"1xV100,cpus=0", "max-slowdown-1.1"},
                      LiveCase{"1xA40,cpus=0", "energy"}, LiveCase{"1xA40,cpus=0", "zeus-cost-0.5"}));

}  // namespace
}  // namespace erg::power_limit
