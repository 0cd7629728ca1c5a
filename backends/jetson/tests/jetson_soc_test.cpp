// JetsonSoc over the simulated machine's Orin, Orin Nano and Xavier trees (issue 18, point 4):
// rails found and classified for each layout, and rail energy integrated from the INA3221's
// voltage and current within 2 % of the simulator's true rail energy. Virtual clock: the SoC
// samples when the test asks (every 10 ms of sim time, its default period), so the figures are
// the same on every run; the simulator's sensor (slots, averaging, quantisation, shunt tolerance,
// noise) is not erg's model of it.

#include "erg/backends/jetson/jetson_soc.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>

#include "erg/sim/machine.hpp"
#include "erg/sim/spec.hpp"

namespace erg::jetson {
namespace {

using namespace std::chrono_literals;

struct Rig {
  std::unique_ptr<sim::Machine> machine;
  std::unique_ptr<sim::MachineClock> clock;
  std::shared_ptr<Soc> soc;

  explicit Rig(const std::string& spec) {
    auto parsed = sim::parse_spec(spec);
    EXPECT_TRUE(parsed) << parsed.error().message;
    auto m = sim::Machine::create_temp(*parsed, /*virtual_clock=*/true);
    EXPECT_TRUE(m) << m.error().message;
    machine = std::move(*m);
    clock = std::make_unique<sim::MachineClock>(*machine);
    DiscoveryOptions o;
    o.root = machine->hwmon_root();
    o.sampler_thread = false;
    o.clock = clock.get();
    auto d = discover(o);
    EXPECT_TRUE(d.unavailable.empty());
    if (!d.socs.empty()) soc = d.socs[0];
  }

  std::map<std::string, RailKind> kinds() const {
    std::map<std::string, RailKind> out;
    for (const auto& r : soc->capabilities().rails) out[r.name] = r.kind;
    return out;
  }

  /// Runs `length` of sim time sampling every `period`; returns measured and true energy per rail (J).
  std::map<std::string, std::pair<double, double>> run(std::chrono::milliseconds length,
                                                       std::chrono::milliseconds period = 10ms) {
    const auto& rails = soc->capabilities().rails;
    std::map<std::string, double> truth0;
    for (const auto& r : rails) truth0[r.name] = machine->true_rail_energy(r.name)->value();
    auto e0 = soc->rail_energy();
    EXPECT_TRUE(e0);
    for (auto t = 0ms; t < length; t += period) {
      EXPECT_TRUE(machine->advance(period));
      EXPECT_TRUE(soc->rail_energy());
    }
    auto e1 = soc->rail_energy();
    EXPECT_TRUE(e1);
    std::map<std::string, std::pair<double, double>> out;
    for (std::size_t i = 0; i < rails.size(); ++i) {
      const double measured = Joules((*e1)[i] - (*e0)[i]).value();
      const double truth = machine->true_rail_energy(rails[i].name)->value() - truth0[rails[i].name];
      out[rails[i].name] = {measured, truth};
      std::printf("  %-16s measured %8.3f J  true %8.3f J  error %+.3f %%\n", rails[i].name.c_str(), measured, truth,
                  100.0 * (measured / truth - 1.0));
    }
    return out;
  }
};

void expect_within(const std::map<std::string, std::pair<double, double>>& figures, double tolerance) {
  for (const auto& [name, f] : figures) {
    EXPECT_GT(f.second, 0.0) << name;
    EXPECT_NEAR(f.first / f.second, 1.0, tolerance) << name << ": measured " << f.first << " J, true " << f.second;
  }
}

TEST(JetsonSoc, OrinRailsAreFoundAndClassified) {
  Rig rig("jetson=orin");
  ASSERT_TRUE(rig.soc);
  EXPECT_EQ(rig.machine->cpu_count(), 0u) << "a Jetson spec has no RAPL packages";
  const std::map<std::string, RailKind> want = {{"VDD_GPU_SOC", RailKind::kGpu},
                                                {"VDD_CPU_CV", RailKind::kCpu},
                                                {"VIN_SYS_5V0", RailKind::kOther},
                                                {"VDDQ_VDD2_1V8AO", RailKind::kOther}};
  EXPECT_EQ(rig.kinds(), want);
  EXPECT_FALSE(rig.soc->capabilities().has_total_rail);
  ASSERT_TRUE(rig.soc->capabilities().update_period);
  EXPECT_EQ(rig.soc->capabilities().update_period->count(), 7000) << "3 channels × 2 × 1.1 ms, as the driver rounds";
  EXPECT_EQ(rig.soc->capabilities().sample_period, kDefaultSamplePeriod);
}

TEST(JetsonSoc, XavierRailsAreFoundAndClassified) {
  Rig rig("jetson=xavier");
  ASSERT_TRUE(rig.soc);
  const std::map<std::string, RailKind> want = {{"GPU", RailKind::kGpu},     {"CPU", RailKind::kCpu},
                                                {"SOC", RailKind::kOther},   {"CV", RailKind::kOther},
                                                {"VDDRQ", RailKind::kOther}, {"SYS5V", RailKind::kOther}};
  EXPECT_EQ(rig.kinds(), want);
  // hwmon order: chip 0x40 (GPU, CPU, SOC), then 0x41.
  ASSERT_EQ(rig.soc->capabilities().rails.size(), 6u);
  EXPECT_EQ(rig.soc->capabilities().rails[0].name, "GPU");
  EXPECT_EQ(rig.soc->capabilities().rails[5].name, "SYS5V");
}

TEST(JetsonSoc, OrinNanoHasATotalRail) {
  Rig rig("jetson=orin-nano");
  ASSERT_TRUE(rig.soc);
  const std::map<std::string, RailKind> want = {
      {"VDD_IN", RailKind::kTotal}, {"VDD_CPU_GPU_CV", RailKind::kCpuGpu}, {"VDD_SOC", RailKind::kOther}};
  EXPECT_EQ(rig.kinds(), want);
  EXPECT_TRUE(rig.soc->capabilities().has_total_rail);
}

TEST(JetsonSoc, RailPowerIsVoltageTimesCurrent) {
  Rig rig("jetson=orin");
  ASSERT_TRUE(rig.soc);
  ASSERT_TRUE(rig.machine->set_rail_power("VDD_GPU_SOC", Watts(15.0)));
  ASSERT_TRUE(rig.machine->advance(50ms));
  auto p = rig.soc->rail_power();
  ASSERT_TRUE(p) << p.error().message;
  // One reading: a slot of the noisy load (5 % per ms), quantised, through a shunt within 1 %.
  EXPECT_NEAR((*p)[0].value() / 15000.0, 1.0, 0.25);
  for (const auto& mw : *p) EXPECT_GT(mw.value(), 0.0);
}

// Acceptance (issue 18 point 4): window energy within 2 % of the simulated rails, both layouts.
TEST(JetsonSoc, OrinRailEnergyWithinTwoPercentOfTheSimulatedRails) {
  Rig rig("jetson=orin");
  ASSERT_TRUE(rig.soc);
  ASSERT_TRUE(rig.machine->set_rail_power("VDD_GPU_SOC", Watts(22.0)));
  ASSERT_TRUE(rig.machine->set_rail_power("VDD_CPU_CV", Watts(7.5)));
  expect_within(rig.run(2000ms), 0.02);
  // A load change mid-way is followed (the sensor's readings lag by at most one update).
  ASSERT_TRUE(rig.machine->set_rail_power("VDD_GPU_SOC", Watts(6.0)));
  expect_within(rig.run(1500ms), 0.02);
}

TEST(JetsonSoc, XavierRailEnergyWithinTwoPercentOfTheSimulatedRails) {
  Rig rig("jetson=xavier,seed=7");
  ASSERT_TRUE(rig.soc);
  ASSERT_TRUE(rig.machine->set_rail_power("GPU", Watts(18.0)));
  ASSERT_TRUE(rig.machine->set_rail_power("CPU", Watts(6.0)));
  ASSERT_TRUE(rig.machine->set_rail_power("SOC", Watts(4.0)));
  ASSERT_TRUE(rig.machine->set_rail_power("CV", Watts(3.0)));
  ASSERT_TRUE(rig.machine->set_rail_power("VDDRQ", Watts(2.0)));
  ASSERT_TRUE(rig.machine->set_rail_power("SYS5V", Watts(4.0)));
  expect_within(rig.run(3000ms), 0.02);
}

TEST(JetsonSoc, EnergyIsMonotonicAndStartsAtZero) {
  Rig rig("jetson=orin-nano");
  ASSERT_TRUE(rig.soc);
  auto e0 = rig.soc->rail_energy();
  ASSERT_TRUE(e0);
  for (const auto& e : *e0) EXPECT_EQ(e.value(), 0.0);
  auto prev = *e0;
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(rig.machine->advance(10ms));
    auto e = rig.soc->rail_energy();
    ASSERT_TRUE(e);
    for (std::size_t r = 0; r < e->size(); ++r) EXPECT_GE((*e)[r].value(), prev[r].value());
    prev = *e;
  }
  // VDD_IN carries the other rails: its energy exceeds theirs together.
  EXPECT_GT(prev[0].value(), prev[1].value() + prev[2].value());
}

TEST(JetsonSoc, NoSocWithoutAJetson) {
  Rig rig("1xA100");
  EXPECT_FALSE(rig.soc);
  EXPECT_TRUE(rig.machine->rail_labels().empty());
  EXPECT_FALSE(rig.machine->set_rail_power("VDD_IN", Watts(1.0)));
}

TEST(JetsonSpec, ParsesLayouts) {
  EXPECT_EQ(sim::parse_spec("jetson=orin")->jetson, sim::JetsonLayout::kOrin);
  EXPECT_EQ(sim::parse_spec("jetson=Xavier")->jetson, sim::JetsonLayout::kXavier);
  EXPECT_EQ(sim::parse_spec("jetson=orin-nano")->jetson, sim::JetsonLayout::kOrinNano);
  EXPECT_EQ(sim::parse_spec(R"({"jetson": "xavier"})")->jetson, sim::JetsonLayout::kXavier);
  EXPECT_TRUE(sim::parse_spec("jetson=orin")->cpus.empty());
  EXPECT_EQ(sim::parse_spec("jetson=orin,cpus=1")->cpus.size(), 1u);
  EXPECT_FALSE(sim::parse_spec("1xA100")->jetson);
  auto bad = sim::parse_spec("jetson=tx2");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("jetson="), std::string::npos);
}

}  // namespace
}  // namespace erg::jetson
