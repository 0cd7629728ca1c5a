// Thermally stable profiling of a simulated A100 (faithful model) through the production NVML
// path and an EnergyMonitor, on the machine's virtual clock: each iteration runs a fixed amount of
// work (the clock moves while it runs) and cooldowns advance the machine instead of sleeping.
// The profiler sees only the monitor's windows and the GPU's temperature: a GPU at a steady
// state gives a valid sweep; one with a thermal drift (Machine::set_thermal_drift: it heats while
// it works and, leaking more, spends more energy per unit of work) gives an invalid one.

#include <gtest/gtest.h>

#include "erg/optimizers/profile/profile.hpp"
#include "virtual_rig.hpp"

namespace erg::profile {
namespace {

using namespace std::chrono_literals;
using measure::testing::VirtualRig;

struct SimProfile {
  VirtualRig rig{"1xA100,cpus=0"};
  std::unique_ptr<measure::EnergyMonitor> monitor;
  Meter meter;
  Environment env;
  Target target;

  SimProfile() {
    measure::EnergyMonitorOptions o;
    o.settle = true;  // end edges exact to the sensor: the spread left is the GPU's own
    o.follow_counters = false;
    monitor = rig.monitor(o);
    meter = monitor_meter(*monitor, rig.gpus);
    env.clock = rig.clock.get();
    // One iteration: 20 ms of work at full clock (a little longer under the 400 W limit).
    target = [this] { EXPECT_TRUE(rig.machine->run_work(0, 0.02)); };
  }

  SweepReport sweep() {
    SweepOptions o;
    o.num_trials = 5;
    o.num_warmup_trials = 1;
    o.trial_stddev_threshold = Joules(0.05);  // about 0.6 % of the ~8.5 J of an iteration
    auto r = profile_measurement_duration(target, meter, {Seconds(2.0)}, Seconds(1.0), o, env);
    EXPECT_TRUE(r) << r.error().message;
    return *r;
  }
};

TEST(ProfileSim, ASteadyGpuGivesAValidSweep) {
  SimProfile p;
  const auto report = p.sweep();
  ASSERT_EQ(report.entries.size(), 1u);
  const auto& e = report.entries[0];
  std::cout << "simulated A100, steady: " << to_string(e) << "\n";
  EXPECT_TRUE(e.is_valid) << to_string(e);
  EXPECT_GT(e.energy_mean.value(), 4.0);
  EXPECT_LT(e.energy_mean.value(), 12.0);
  ASSERT_EQ(e.trials.size(), 5u);
  EXPECT_GE(e.trials[0].iterations, 80u);
  // No heat builds up: the temperature before each trial is the same.
  EXPECT_NEAR(e.trials.front().temperature_before, e.trials.back().temperature_before, 2.0);
}

TEST(ProfileSim, AThermalDriftIsReportedInvalid) {
  SimProfile p;
  // 2 °C per second of work, never shed, 0.5 %/°C leakage: every trial costs ~2 % more per iteration.
  ASSERT_TRUE(p.rig.machine->set_thermal_drift(0, sim::ThermalDrift{2.0, 0.005, 60.0, 0.0}));
  const auto report = p.sweep();
  ASSERT_EQ(report.entries.size(), 1u);
  const auto& e = report.entries[0];
  std::cout << "simulated A100, thermal drift: " << to_string(e) << "\n";
  EXPECT_FALSE(e.is_valid) << to_string(e);
  // What the profiler saw: energy per iteration and the temperature climbing trial after trial.
  for (std::size_t i = 1; i < e.trials.size(); ++i) {
    EXPECT_GT(e.trials[i].energy_per_iter.value(), e.trials[i - 1].energy_per_iter.value());
    EXPECT_GT(e.trials[i].temperature_before, e.trials[i - 1].temperature_before);
  }
}

TEST(ProfileSim, MeasureGivesTheWindowsEnergyOverTheMonitor) {
  SimProfile p;
  const double before = p.rig.machine->true_energy(0)->value();
  auto r = measure(p.target, p.meter, Seconds(1.0), Seconds(0.5), MeasureOptions{5, 20, std::nullopt}, p.env);
  ASSERT_TRUE(r) << r.error().message;
  const double spent = p.rig.machine->true_energy(0)->value() - before;
  // The window is part of everything spent (calibration, cooldown, warm-up): most of it, and
  // within the sensor's few-percent error of the per-iteration truth.
  EXPECT_GT(r->total_energy.value(), 0.4 * spent);
  EXPECT_LT(r->total_energy.value(), spent);
  EXPECT_GE(r->total_time.count(), 1.0);
  EXPECT_GT(r->temperature_after, 30.0);
  EXPECT_TRUE(p.monitor->open_windows().empty());
}

}  // namespace
}  // namespace erg::profile
