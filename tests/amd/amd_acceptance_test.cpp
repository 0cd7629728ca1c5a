// AMD GPUs end to end: the simulated libamd_smi.so, the production AMD SMI backend (dlopen,
// discovery, the start check of the energy counter) and EnergyMonitor windows, against the
// simulator's sensor truth (issue 18, acceptance 1-3). Real clock: the machine's updaters and the
// monitors' followers run as threads, as in production. No timing assertions: the waits only give
// the sensors something to count.

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "erg/backends/amdsmi/discovery.hpp"
#include "erg/backends/discovery.hpp"
#include "erg/measure/energy_monitor.hpp"
#include "erg/measure/power_monitor.hpp"
#include "erg/sim/machine.hpp"
#include "erg/sim/spec.hpp"

namespace erg {
namespace {

using namespace std::chrono_literals;

struct Rig {
  std::unique_ptr<sim::Machine> machine;
  std::unique_ptr<sim::MachineClock> clock;
  Inventory inventory;

  explicit Rig(const std::string& spec, std::chrono::milliseconds counter_check = 500ms) {
    auto parsed = sim::parse_spec(spec);
    EXPECT_TRUE(parsed) << parsed.error().message;
    auto m = sim::Machine::create_temp(*parsed);
    EXPECT_TRUE(m) << m.error().message;
    machine = std::move(*m);
    machine->set_privilege(sim::Privilege::kEveryone);
    clock = std::make_unique<sim::MachineClock>(*machine);
    EXPECT_TRUE(machine->export_env());
    backends::DiscoveryOptions o;
    o.nvml.cuda_visible_devices = std::optional<std::string>();
    o.amdsmi.visible_devices = std::optional<std::string>();
    o.amdsmi.counter_check = counter_check;
    auto inv = backends::discover(o);
    EXPECT_TRUE(inv) << inv.error().message;
    inventory = std::move(*inv);
  }

  std::unique_ptr<measure::EnergyMonitor> monitor() {
    measure::EnergyMonitorOptions o;
    o.clock = clock.get();
    o.settle = true;  // the end edge waits for the counter's next update
    auto m = measure::EnergyMonitor::create(inventory.gpus, {}, o);
    EXPECT_TRUE(m) << m.error().message;
    return std::move(*m);
  }

  /// One window of `length`; returns it and the sensor-integrated energy of each GPU over it.
  std::pair<measure::Measurement, std::vector<double>> window(measure::EnergyMonitor& m,
                                                              std::chrono::milliseconds length) {
    const auto t0 = machine->now();
    EXPECT_TRUE(m.begin_window("w"));
    std::this_thread::sleep_for(length);
    const auto t1 = machine->now();  // the end edge (settling then waits past it)
    auto r = m.end_window("w");
    EXPECT_TRUE(r) << r.error().message;
    std::this_thread::sleep_for(100ms);  // the sensors' updates after t1 exist now
    std::vector<double> truth;
    for (unsigned g = 0; g < machine->gpu_count(); ++g) {
      auto a = machine->sensor_energy_at(g, t0), b = machine->sensor_energy_at(g, t1);
      EXPECT_TRUE(a && b) << "gpu " << g;
      truth.push_back(a && b ? (*b - *a).value() : -1.0);
    }
    return {r ? *r : measure::Measurement{}, truth};
  }
};

/// Prints a figure beside its truth (the test log shows the errors behind the tolerances).
void report(const char* what, double measured, double truth) {
  std::printf("  %-34s measured %10.2f J  sensor truth %10.2f J  error %+.3f %%\n", what, measured, truth,
              truth != 0.0 ? 100.0 * (measured / truth - 1.0) : 0.0);
}

std::string unavailable_text(const Inventory& inv) {
  std::string s;
  for (const auto& u : inv.unavailable) s += u.source + ": " + u.reason + "\n";
  return s;
}

// Acceptance 1: two AMD GPUs with power-limit ranges; windows within 1 % of the sensor truth.
TEST(AmdGpus, TwoMI300XAreListedAndMeasuredWithinOnePercent) {
  Rig rig("2xMI300X");
  ASSERT_EQ(rig.inventory.gpus.size(), 2u) << unavailable_text(rig.inventory);
  EXPECT_TRUE(rig.inventory.unavailable.empty()) << unavailable_text(rig.inventory);
  for (unsigned i = 0; i < 2; ++i) {
    auto& gpu = *rig.inventory.gpus[i];
    EXPECT_EQ(gpu.index(), i);
    EXPECT_EQ(gpu.vendor(), GpuVendor::kAmd);
    EXPECT_EQ(gpu.name(), "AMD Instinct MI300X");
    EXPECT_EQ(gpu.architecture(), "cdna3");
    EXPECT_TRUE(gpu.capabilities().energy_counter) << "a good counter passes the start check";
    auto range = gpu.power_limit_constraints();
    ASSERT_TRUE(range) << range.error().message;
    EXPECT_EQ(range->min.value(), 200000.0);
    EXPECT_EQ(range->max.value(), 750000.0);
  }
  ASSERT_TRUE(rig.machine->set_load(0, sim::Load::training(0.95)));
  ASSERT_TRUE(rig.machine->set_load(1, sim::Load::training(0.4)));
  auto monitor = rig.monitor();
  for (int round = 0; round < 2; ++round) {
    auto [m, truth] = rig.window(*monitor, 1500ms);
    ASSERT_EQ(m.gpus.size(), 2u);
    for (unsigned g = 0; g < 2; ++g) {
      ASSERT_TRUE(m.gpus[g].energy) << "gpu " << g;
      EXPECT_EQ(m.gpus[g].source, measure::EnergySource::kCounter);
      EXPECT_GT(truth[g], 100.0);
      // 15.3 µJ reported vs 2^-16 J counted: +0.27 % by AMD's own resolution, inside the 1 %.
      report(g == 0 ? "2xMI300X gpu0" : "2xMI300X gpu1", m.gpus[g].energy->value(), truth[g]);
      EXPECT_NEAR(m.gpus[g].energy->value(), truth[g], 0.01 * truth[g]) << "gpu " << g << " round " << round;
    }
  }
}

// Acceptance 1: NVIDIA and AMD in one machine and one monitor.
TEST(AmdGpus, MixedA100AndMI300XInOneMonitor) {
  Rig rig("1xA100,1xMI300X");
  ASSERT_EQ(rig.inventory.gpus.size(), 2u) << unavailable_text(rig.inventory);
  EXPECT_EQ(rig.inventory.gpus[0]->vendor(), GpuVendor::kNvidia);
  EXPECT_EQ(rig.inventory.gpus[1]->vendor(), GpuVendor::kAmd);
  EXPECT_EQ(rig.inventory.gpus[0]->index(), 0u);
  EXPECT_EQ(rig.inventory.gpus[1]->index(), 1u);
  EXPECT_EQ(rig.inventory.gpus[1]->physical_index(), 0u) << "the first GPU AMD SMI lists";
  ASSERT_TRUE(rig.machine->set_load(0, sim::Load::training(0.8)));
  ASSERT_TRUE(rig.machine->set_load(1, sim::Load::training(0.8)));
  auto monitor = rig.monitor();
  std::this_thread::sleep_for(300ms);  // the follower learns the A100's 100 ms schedule
  auto [m, truth] = rig.window(*monitor, 2000ms);
  ASSERT_EQ(m.gpus.size(), 2u);
  for (unsigned g = 0; g < 2; ++g) {
    ASSERT_TRUE(m.gpus[g].energy) << "gpu " << g;
    report(g == 0 ? "mixed A100" : "mixed MI300X", m.gpus[g].energy->value(), truth[g]);
    EXPECT_NEAR(m.gpus[g].energy->value(), truth[g], 0.01 * truth[g]) << "gpu " << g;
  }
}

// Acceptance 2: a frozen counter (MI100, amdsmi #38) fails the start check; energy is integrated.
TEST(AmdGpus, FrozenCounterIsDetectedAtStartAndEnergyIsIntegrated) {
  Rig rig("1xMI300X:frozen,1xMI300X");
  ASSERT_EQ(rig.inventory.gpus.size(), 2u);
  EXPECT_FALSE(rig.inventory.gpus[0]->capabilities().energy_counter);
  EXPECT_TRUE(rig.inventory.gpus[1]->capabilities().energy_counter) << "the good one is kept";
  ASSERT_EQ(rig.inventory.unavailable.size(), 1u) << unavailable_text(rig.inventory);
  EXPECT_NE(rig.inventory.unavailable[0].reason.find("energy counter disabled"), std::string::npos);
  EXPECT_NE(rig.inventory.unavailable[0].reason.find("GPU 0"), std::string::npos);
  auto e = rig.inventory.gpus[0]->total_energy();
  ASSERT_FALSE(e);
  EXPECT_EQ(e.error().code, ErrorCode::kNotSupported);

  ASSERT_TRUE(rig.machine->set_load(0, sim::Load::training(0.9)));
  ASSERT_TRUE(rig.machine->set_load(1, sim::Load::training(0.9)));
  auto monitor = rig.monitor();
  auto [m, truth] = rig.window(*monitor, 1500ms);
  ASSERT_TRUE(m.gpus[0].energy);
  EXPECT_EQ(m.gpus[0].source, measure::EnergySource::kIntegrated) << "the measurement says so";
  EXPECT_EQ(m.gpus[1].source, measure::EnergySource::kCounter);
  // Integrated instant power (10 ms sensor, sampled by the power monitor): a few percent.
  report("frozen counter, integrated", m.gpus[0].energy->value(), truth[0]);
  EXPECT_NEAR(m.gpus[0].energy->value(), truth[0], 0.03 * truth[0]);
  EXPECT_NEAR(m.gpus[1].energy->value(), truth[1], 0.01 * truth[1]);
}

// Acceptance 2: a counter that steps back (amdsmi #115) never gives negative or lost energy.
TEST(AmdGpus, BackwardsStepsAreBridgedNeverNegativeNorLost) {
  Rig rig("1xMI300X:backwards");
  ASSERT_EQ(rig.inventory.gpus.size(), 1u) << unavailable_text(rig.inventory);
  ASSERT_TRUE(rig.inventory.gpus[0]->capabilities().energy_counter);
  ASSERT_TRUE(rig.machine->set_load(0, sim::Load::training(0.9)));
  auto monitor = rig.monitor();
  // The mode steps back every 2 s of sim time: a 4.5 s window holds at least two steps.
  auto [m, truth] = rig.window(*monitor, 4500ms);
  ASSERT_TRUE(m.gpus[0].energy);
  EXPECT_GE(m.gpus[0].counter_backwards, 2u);
  EXPECT_GT(m.gpus[0].energy->value(), 0.0);
  report("backwards mode, 4.5 s", m.gpus[0].energy->value(), truth[0]);
  EXPECT_NEAR(m.gpus[0].energy->value(), truth[0], 0.02 * truth[0]);

  // And a large step injected mid-window (200 J, as the fault vocabulary's "backwards").
  const auto t0 = rig.machine->now();
  ASSERT_TRUE(monitor->begin_window("big"));
  std::this_thread::sleep_for(700ms);
  ASSERT_TRUE(rig.machine->energy_counter_backwards(0, MilliJoules(200000.0)));
  std::this_thread::sleep_for(700ms);
  const auto t1 = rig.machine->now();
  auto r = monitor->end_window("big");
  ASSERT_TRUE(r) << r.error().message;
  std::this_thread::sleep_for(100ms);
  const double sensor = (*rig.machine->sensor_energy_at(0, t1) - *rig.machine->sensor_energy_at(0, t0)).value();
  ASSERT_TRUE(r->gpus[0].energy);
  EXPECT_GE(r->gpus[0].counter_backwards, 1u);
  report("200 J backwards step", r->gpus[0].energy->value(), sensor);
  EXPECT_NEAR(r->gpus[0].energy->value(), sensor, 0.02 * sensor) << "the 200 J step is neither subtracted nor lost";
}

// Acceptance 3: MI250's odd die reports no power of its own; the card's total is right.
TEST(AmdGpus, MI250SecondDieHasNoPowerOfItsOwnAndTheCardTotalIsRight) {
  Rig rig("1xMI250");
  ASSERT_EQ(rig.inventory.gpus.size(), 2u) << "one GPU per die";
  auto& die0 = *rig.inventory.gpus[0];
  auto& die1 = *rig.inventory.gpus[1];
  EXPECT_TRUE(die0.capabilities().energy_counter);
  EXPECT_FALSE(die1.capabilities().energy_counter);
  ASSERT_TRUE(rig.machine->set_load(0, sim::Load::training(0.3)));
  ASSERT_TRUE(rig.machine->set_load(1, sim::Load::training(1.0)));
  std::this_thread::sleep_for(300ms);
  auto p1 = die1.power(PowerDomain::kDeviceInstant);
  ASSERT_TRUE(p1) << p1.error().message;
  EXPECT_EQ(p1->value(), 0.0);
  auto p0 = die0.power(PowerDomain::kDeviceAverage);
  ASSERT_TRUE(p0) << p0.error().message;
  EXPECT_GT(p0->value(), 90000.0 * 1.5) << "the card's power, busy from the second die's load too";
  EXPECT_EQ(die0.power_limit()->value(), die1.power_limit()->value()) << "one cap per card";

  auto monitor = rig.monitor();
  auto [m, truth] = rig.window(*monitor, 1500ms);
  ASSERT_TRUE(m.gpus[0].energy && m.gpus[1].energy);
  EXPECT_EQ(m.gpus[1].energy->value(), 0.0);
  EXPECT_EQ(truth[1], 0.0) << "the second die's own sensor counts nothing";
  auto card_true = rig.machine->true_energy(0);
  ASSERT_TRUE(card_true);
  EXPECT_EQ(rig.machine->true_energy(1)->value(), 0.0);
  report("MI250 card (both dies)", m.gpu_energy().value(), truth[0]);
  EXPECT_NEAR(m.gpu_energy().value(), truth[0], 0.01 * truth[0]) << "the card's total";
}

// MI210 reports only a 1 s average of socket power. With its counter failing the start check,
// windows integrate that average, shifted by its 0.5 s lag; settling waits for the shift.
// A step of the load in the middle of the window (well away from the edges) lands in the
// right window: without the shift the high power would run on 0.5 s into the idle half, about
// 30 % too much here.
TEST(AmdGpus, MI210WithoutCounterIntegratesTheOneSecondAverageWithinThreePercent) {
  Rig rig("1xMI210:frozen");
  ASSERT_EQ(rig.inventory.gpus.size(), 1u) << unavailable_text(rig.inventory);
  auto& gpu = *rig.inventory.gpus[0];
  EXPECT_FALSE(gpu.capabilities().energy_counter);
  EXPECT_EQ(gpu.capabilities().power_domains, std::vector<PowerDomain>{PowerDomain::kDeviceAverage});
  ASSERT_TRUE(rig.machine->set_load(0, sim::Load::training(1.0)));
  auto monitor = rig.monitor();
  ASSERT_NE(monitor->power_monitor(), nullptr);
  EXPECT_TRUE(monitor->power_monitor()->sampled(0, PowerDomain::kDeviceAverage));
  std::this_thread::sleep_for(1200ms);  // the average has a full second of the load behind it

  // Steady load.
  auto [m, truth] = rig.window(*monitor, 2000ms);
  ASSERT_TRUE(m.gpus[0].energy) << (m.gpus[0].error ? m.gpus[0].error->message : "");
  EXPECT_EQ(m.gpus[0].source, measure::EnergySource::kIntegrated);
  EXPECT_EQ(m.gpus[0].extrapolated.count(), 0.0) << "settled: the shifted end was lived";
  EXPECT_FALSE(m.gpus[0].short_window);
  report("MI210 1 s average, steady", m.gpus[0].energy->value(), truth[0]);
  EXPECT_NEAR(m.gpus[0].energy->value(), truth[0], 0.03 * truth[0]);

  // A step down in the middle of the window.
  const auto t0 = rig.machine->now();
  ASSERT_TRUE(monitor->begin_window("step"));
  std::this_thread::sleep_for(1200ms);
  ASSERT_TRUE(rig.machine->set_load(0, sim::Load{0.0}));
  std::this_thread::sleep_for(1800ms);
  const auto t1 = rig.machine->now();
  auto r = monitor->end_window("step");
  ASSERT_TRUE(r) << r.error().message;
  std::this_thread::sleep_for(100ms);
  const double sensor = (*rig.machine->sensor_energy_at(0, t1) - *rig.machine->sensor_energy_at(0, t0)).value();
  ASSERT_TRUE(r->gpus[0].energy);
  report("MI210 1 s average, load step", r->gpus[0].energy->value(), sensor);
  EXPECT_NEAR(r->gpus[0].energy->value(), sensor, 0.03 * sensor);
}

// The shift assumes the driver's average is a 1 s boxcar (mean lag 0.5 s). An exponentially
// weighted average (time constant τ = 1 s: the sensor zoo's "average": "exponential") lags by τ
// on average: the figure holds on a steady load, and a step of ΔP inside the window moves it by
// up to ΔP·(τ − 0.5 s), less the tail still past the shifted end (docs/measure.md): here
// ΔP·(0.5 − e^(−2.3)) s for the step 1.8 s before the end.
TEST(AmdGpus, MI210WithAnExponentialAverageStaysWithinTheStatedBound) {
  Rig rig(R"({"gpus": [{"sku": "MI210", "counter": "frozen", "average": "exponential"}], "cpus": 0})");
  ASSERT_EQ(rig.inventory.gpus.size(), 1u) << unavailable_text(rig.inventory);
  ASSERT_EQ(rig.machine->sensor_info(0)->average, sim::AverageMode::kExponential);
  ASSERT_TRUE(rig.machine->set_load(0, sim::Load::training(1.0)));
  auto monitor = rig.monitor();
  std::this_thread::sleep_for(4000ms);  // the average has settled on the load (4 τ)
  auto [m, truth] = rig.window(*monitor, 2000ms);
  ASSERT_TRUE(m.gpus[0].energy);
  report("MI210 exponential average, steady", m.gpus[0].energy->value(), truth[0]);
  EXPECT_NEAR(m.gpus[0].energy->value(), truth[0], 0.03 * truth[0]);

  const double high_w = rig.machine->status(0)->mean_power.value();
  const auto t0 = rig.machine->now();
  ASSERT_TRUE(monitor->begin_window("step"));
  std::this_thread::sleep_for(1200ms);
  ASSERT_TRUE(rig.machine->set_load(0, sim::Load{0.0}));
  const auto step = rig.machine->now();
  std::this_thread::sleep_for(1800ms);
  const auto t1 = rig.machine->now();
  auto r = monitor->end_window("step");
  ASSERT_TRUE(r) << r.error().message;
  std::this_thread::sleep_for(100ms);
  const double sensor = (*rig.machine->sensor_energy_at(0, t1) - *rig.machine->sensor_energy_at(0, t0)).value();
  const double low_w = rig.machine->status(0)->mean_power.value();
  ASSERT_TRUE(r->gpus[0].energy);
  report("MI210 exponential average, load step", r->gpus[0].energy->value(), sensor);
  const double d = std::chrono::duration<double>(t1 - step).count();
  const double lag = (high_w - low_w) * (1.0 - 0.5);  // ΔP·(τ − 0.5 s)
  const double tail = (high_w - low_w) * 1.0 * std::exp(-(d + 0.5) / 1.0);
  EXPECT_NEAR(r->gpus[0].energy->value(), sensor, 0.03 * sensor + lag) << "lag bound " << lag << " J";
  // And it is that lag, not chance: the figure is high by about ΔP·(τ − 0.5 s) minus the tail.
  EXPECT_NEAR(r->gpus[0].energy->value() - sensor, lag - tail, 0.03 * sensor) << "tail " << tail << " J";
}

// Without settling the shifted end edge is extrapolated at the latest average, and says so.
TEST(AmdGpus, MI210AverageEdgeIsExtrapolatedWithoutSettle) {
  Rig rig("1xMI210:frozen");
  ASSERT_EQ(rig.inventory.gpus.size(), 1u) << unavailable_text(rig.inventory);
  ASSERT_TRUE(rig.machine->set_load(0, sim::Load::training(0.8)));
  measure::EnergyMonitorOptions o;
  o.clock = rig.clock.get();
  auto monitor = measure::EnergyMonitor::create(rig.inventory.gpus, {}, o);
  ASSERT_TRUE(monitor) << monitor.error().message;
  std::this_thread::sleep_for(1200ms);
  const auto t0 = rig.machine->now();
  ASSERT_TRUE((*monitor)->begin_window("w"));
  std::this_thread::sleep_for(2000ms);
  const auto t1 = rig.machine->now();
  auto r = (*monitor)->end_window("w");
  ASSERT_TRUE(r) << r.error().message;
  std::this_thread::sleep_for(100ms);
  const double sensor = (*rig.machine->sensor_energy_at(0, t1) - *rig.machine->sensor_energy_at(0, t0)).value();
  ASSERT_TRUE(r->gpus[0].energy);
  EXPECT_GT(r->gpus[0].extrapolated.count(), 0.4);
  EXPECT_LE(r->gpus[0].extrapolated.count(), 0.5);
  report("MI210 1 s average, unsettled", r->gpus[0].energy->value(), sensor);
  EXPECT_NEAR(r->gpus[0].energy->value(), sensor, 0.03 * sensor) << "steady load: the extrapolation holds";
}

// MI250 with its counter off: the first die integrates its 1 s average (the card's power), the
// second die its 0 W; the card's total against the sensor truth.
TEST(AmdGpus, MI250WithoutCounterIntegratesTheCardsAverageWithinThreePercent) {
  Rig rig("1xMI250:frozen");
  ASSERT_EQ(rig.inventory.gpus.size(), 2u) << unavailable_text(rig.inventory);
  EXPECT_FALSE(rig.inventory.gpus[0]->capabilities().energy_counter);
  EXPECT_FALSE(rig.inventory.gpus[1]->capabilities().energy_counter);
  ASSERT_TRUE(rig.machine->set_load(0, sim::Load::training(0.6)));
  ASSERT_TRUE(rig.machine->set_load(1, sim::Load::training(0.9)));
  auto monitor = rig.monitor();
  std::this_thread::sleep_for(1200ms);
  auto [m, truth] = rig.window(*monitor, 2000ms);
  ASSERT_EQ(m.gpus.size(), 2u);
  for (unsigned g = 0; g < 2; ++g) {
    ASSERT_TRUE(m.gpus[g].energy) << "gpu " << g << ": " << (m.gpus[g].error ? m.gpus[g].error->message : "");
    EXPECT_EQ(m.gpus[g].source, measure::EnergySource::kIntegrated) << "gpu " << g;
  }
  EXPECT_EQ(m.gpus[1].energy->value(), 0.0);
  EXPECT_GT(truth[0], 300.0);
  report("MI250 card, 1 s average", m.gpu_energy().value(), truth[0]);
  EXPECT_NEAR(m.gpu_energy().value(), truth[0], 0.03 * truth[0]);
}

// PowerMonitor timelines over NVIDIA and AMD GPUs at once: both are sampled, and each
// timeline's energy comes within 3 % of the sensor truth (hold-last integration of the 10 ms
// MI300X sensor and the A100's partially sampled 100 ms instant power).
TEST(AmdGpus, PowerMonitorGivesTimelinesForA100AndMI300X) {
  Rig rig("1xA100,1xMI300X", 0ms);
  ASSERT_EQ(rig.inventory.gpus.size(), 2u) << unavailable_text(rig.inventory);
  ASSERT_TRUE(rig.machine->set_load(0, sim::Load::training(0.7)));
  ASSERT_TRUE(rig.machine->set_load(1, sim::Load::training(0.9)));
  measure::PowerMonitorOptions o;
  o.clock = rig.clock.get();
  o.cpus = false;
  auto pm = measure::PowerMonitor::create(rig.inventory.gpus, {}, o);
  ASSERT_TRUE(pm) << pm.error().message;
  auto& monitor = **pm;
  for (unsigned g = 0; g < 2; ++g) EXPECT_TRUE(monitor.sampled(g, PowerDomain::kDeviceInstant)) << "gpu " << g;
  std::this_thread::sleep_for(300ms);
  const auto t0 = rig.machine->now();
  std::this_thread::sleep_for(1000ms);
  ASSERT_TRUE(rig.machine->set_load(1, sim::Load::training(0.05)));  // near idle: the power activity is concave
  std::this_thread::sleep_for(1000ms);
  const auto t1 = rig.machine->now();
  std::this_thread::sleep_for(150ms);  // the sensors' updates after t1 exist now
  for (unsigned g = 0; g < 2; ++g) {
    auto line = monitor.gpu_timeline(g, PowerDomain::kDeviceInstant, t0, t1);
    ASSERT_TRUE(line) << line.error().message;
    EXPECT_GE(line->size(), 10u) << "gpu " << g;
    auto e = monitor.gpu_energy(g, PowerDomain::kDeviceInstant, t0, t1);
    ASSERT_TRUE(e) << e.error().message;
    const double truth = (*rig.machine->sensor_energy_at(g, t1) - *rig.machine->sensor_energy_at(g, t0)).value();
    report(g == 0 ? "PowerMonitor A100" : "PowerMonitor MI300X", e->value(), truth);
    EXPECT_NEAR(e->value(), truth, 0.03 * truth) << "gpu " << g;
  }
  // The MI300X's step down shows in its timeline: its last second draws less than its first.
  const auto mid = t0 + (t1 - t0) / 2;
  auto first = monitor.gpu_energy(1, PowerDomain::kDeviceInstant, t0, mid);
  auto second = monitor.gpu_energy(1, PowerDomain::kDeviceInstant, mid, t1);
  ASSERT_TRUE(first && second);
  EXPECT_LT(second->value(), 0.8 * first->value());
}

// The three layouts of amdsmi_power_info_t (ABI 24, 25, 26) read the same powers.
TEST(AmdGpus, EveryAbiLayoutReadsTheSocketPower) {
  for (const char* abi : {"24", "25", "26"}) {
    Rig rig(std::string("1xMI210,1xMI300X,amdsmi=") + abi, 0ms);
    ASSERT_EQ(rig.inventory.gpus.size(), 2u) << abi << "\n" << unavailable_text(rig.inventory);
    auto& mi210 = *rig.inventory.gpus[0];
    auto& mi300 = *rig.inventory.gpus[1];
    EXPECT_EQ(mi210.capabilities().power_domains, std::vector<PowerDomain>{PowerDomain::kDeviceAverage}) << abi;
    EXPECT_EQ(mi300.capabilities().power_domains, std::vector<PowerDomain>{PowerDomain::kDeviceInstant}) << abi;
    auto a = mi210.power(PowerDomain::kDeviceAverage);
    auto b = mi300.power(PowerDomain::kDeviceInstant);
    ASSERT_TRUE(a && b) << abi;
    EXPECT_NEAR(a->value(), 40000.0, 4000.0) << abi << ": MI210 idles near 40 W";
    EXPECT_NEAR(b->value(), 140000.0, 10000.0) << abi << ": MI300X idles near 140 W";
    EXPECT_EQ(mi300.power_limit()->value(), 750000.0) << abi;
  }
}

TEST(AmdGpus, HipVisibleDevicesOrdersAndFilters) {
  Rig rig("3xMI300X", 0ms);
  amdsmi::DiscoveryOptions o;
  o.counter_check = 0ms;
  o.visible_devices = std::optional<std::string>("2,0");
  auto found = amdsmi::discover(o);
  ASSERT_TRUE(found) << found.error().message;
  ASSERT_EQ(found->gpus.size(), 2u);
  EXPECT_EQ(found->gpus[0]->physical_index(), 2u);
  EXPECT_EQ(found->gpus[0]->index(), 0u);
  EXPECT_EQ(found->gpus[1]->physical_index(), 0u);
  EXPECT_EQ(found->gpus[0]->pci_address(), "0000:38:00.0");
  o.visible_devices = std::optional<std::string>("5");
  auto missing = amdsmi::discover(o);
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
  o.visible_devices = std::optional<std::string>("GPU-1");
  auto bad = amdsmi::discover(o);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, ErrorCode::kInvalidArgument);
}

TEST(AmdGpus, PowerCapIsSetInMicrowattsAndCheckedByTheDriver) {
  Rig rig("1xMI300X", 0ms);
  auto& gpu = *rig.inventory.gpus[0];
  ASSERT_TRUE(gpu.set_power_limit(MilliWatts(450000.0)));
  EXPECT_EQ(gpu.power_limit()->value(), 450000.0);
  auto log = rig.machine->power_limit_log();
  ASSERT_EQ(log.size(), 1u);
  EXPECT_EQ(log[0].limit.value(), 450000.0);
  auto low = gpu.set_power_limit(MilliWatts(100000.0));
  ASSERT_FALSE(low);
  EXPECT_EQ(low.error().code, ErrorCode::kInvalidArgument);
  rig.machine->set_privilege(sim::Privilege::kNobody);
  auto denied = gpu.set_power_limit(MilliWatts(500000.0));
  ASSERT_FALSE(denied);
  EXPECT_EQ(denied.error().code, ErrorCode::kNoPermission);
  EXPECT_EQ(gpu.power_limit()->value(), 450000.0);
}

}  // namespace
}  // namespace erg
