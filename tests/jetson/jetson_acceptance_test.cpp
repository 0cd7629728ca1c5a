// Jetson end to end (issue 18, point 4): `--simulate jetson=orin|xavier` through erg::devices
// (the generated hwmon tree, ERG_HWMON_ROOT), the production Jetson backend with its sampler
// thread, and EnergyMonitor windows, against the simulator's true rail energy. Real clock, as in
// production; no timing assertions (the waits only give the rails something to draw).

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "erg/core/clock.hpp"
#include "erg/devices/devices.hpp"
#include "erg/exporters/prometheus/collector.hpp"
#include "erg/exporters/prometheus/metric_names.hpp"
#include "erg/measure/energy_monitor.hpp"
#include "erg/measure/power_monitor.hpp"
#include "erg/sim/machine.hpp"

namespace erg {
namespace {

using namespace std::chrono_literals;

struct Rig {
  devices::Devices devs;

  explicit Rig(const std::string& spec) {
    devices::DeviceOptions o;
    o.simulate = spec;
    o.daemon = devices::DaemonUse::kNever;
    auto d = devices::open_devices(o);
    EXPECT_TRUE(d) << d.error().message;
    if (d) devs = std::move(*d);
  }

  std::map<std::string, double> truth() {
    std::map<std::string, double> out;
    for (const auto& l : devs.machine->rail_labels()) out[l] = devs.machine->true_rail_energy(l)->value();
    return out;
  }

  /// The true energy of every rail over a window, bracketed: `lo` from just after begin_window
  /// returned to just before end_window was called, `hi` from just before the one to just after
  /// the other (on a loaded machine either call can take a while; the edges lie inside them).
  struct Truth {
    std::map<std::string, double> lo, hi;
  };

  /// One window of `length`: the SoC's figure and the true energy of every rail over it.
  std::pair<measure::SocEnergy, Truth> window(measure::EnergyMonitor& m, std::chrono::milliseconds length) {
    const auto t0a = truth();
    EXPECT_TRUE(m.begin_window("w"));
    const auto t0b = truth();
    std::this_thread::sleep_for(length);
    const auto t1a = truth();
    auto r = m.end_window("w");
    const auto t1b = truth();
    EXPECT_TRUE(r) << r.error().message;
    Truth d;
    for (const auto& [k, v] : t1a) d.lo[k] = v - t0b.at(k);
    for (const auto& [k, v] : t1b) d.hi[k] = v - t0a.at(k);
    if (!r || r->socs.empty()) return {measure::SocEnergy{}, d};
    return {r->socs[0], d};
  }
};

void check(const measure::SocEnergy& soc, const Rig::Truth& truth, double tolerance) {
  ASSERT_FALSE(soc.error) << soc.error->message;
  ASSERT_EQ(soc.rails.size(), truth.lo.size());
  double lo_all = 0.0, hi_all = 0.0;
  for (const auto& r : soc.rails) {
    const double lo = truth.lo.at(r.name), hi = truth.hi.at(r.name);
    std::printf("  %-16s measured %8.3f J  true %8.3f to %8.3f J\n", r.name.c_str(), r.energy.value(), lo, hi);
    EXPECT_GE(r.energy.value(), lo * (1.0 - tolerance)) << r.name;
    EXPECT_LE(r.energy.value(), hi * (1.0 + tolerance)) << r.name;
    lo_all += lo, hi_all += hi;
  }
  // The total is the sum of the rails (no input rail).
  EXPECT_GE(soc.total.value(), lo_all * (1.0 - tolerance));
  EXPECT_LE(soc.total.value(), hi_all * (1.0 + tolerance));
}

TEST(Jetson, OrinIsListedAndMeasuredWithinTwoPercent) {
  Rig rig("jetson=orin");
  ASSERT_TRUE(rig.devs.machine);
  ASSERT_EQ(rig.devs.inventory.socs.size(), 1u);
  EXPECT_TRUE(rig.devs.inventory.gpus.empty());
  EXPECT_TRUE(rig.devs.inventory.cpus.empty());
  const auto& rails = rig.devs.inventory.socs[0]->capabilities().rails;
  ASSERT_EQ(rails.size(), 4u);
  EXPECT_EQ(rails[0].name, "VDD_GPU_SOC");
  EXPECT_EQ(rails[0].kind, RailKind::kGpu);
  EXPECT_EQ(rails[1].kind, RailKind::kCpu);
  ASSERT_TRUE(rig.devs.machine->set_rail_power("VDD_GPU_SOC", Watts(20.0)));
  ASSERT_TRUE(rig.devs.machine->set_rail_power("VDD_CPU_CV", Watts(8.0)));
  measure::EnergyMonitorOptions o;
  o.socs = rig.devs.inventory.socs;
  auto m = measure::EnergyMonitor::create({}, {}, o);
  ASSERT_TRUE(m) << m.error().message;
  for (int round = 0; round < 2; ++round) {
    auto [soc, truth] = rig.window(**m, 1500ms);
    check(soc, truth, 0.02);
    ASSERT_TRUE(soc.gpu && soc.cpu);
    EXPECT_GE(soc.gpu->value(), truth.lo.at("VDD_GPU_SOC") * 0.98);
    EXPECT_LE(soc.gpu->value(), truth.hi.at("VDD_GPU_SOC") * 1.02);
    EXPECT_GE(soc.cpu->value(), truth.lo.at("VDD_CPU_CV") * 0.98);
    EXPECT_LE(soc.cpu->value(), truth.hi.at("VDD_CPU_CV") * 1.02);
    ASSERT_TRUE(rig.devs.machine->set_rail_power("VDD_GPU_SOC", Watts(9.0)));
  }
}

TEST(Jetson, XavierIsListedAndMeasuredWithinTwoPercent) {
  Rig rig("jetson=xavier");
  ASSERT_EQ(rig.devs.inventory.socs.size(), 1u);
  ASSERT_EQ(rig.devs.inventory.socs[0]->capabilities().rails.size(), 6u);
  ASSERT_TRUE(rig.devs.machine->set_rail_power("GPU", Watts(16.0)));
  ASSERT_TRUE(rig.devs.machine->set_rail_power("CPU", Watts(6.0)));
  ASSERT_TRUE(rig.devs.machine->set_rail_power("SOC", Watts(4.0)));
  ASSERT_TRUE(rig.devs.machine->set_rail_power("CV", Watts(3.0)));
  ASSERT_TRUE(rig.devs.machine->set_rail_power("VDDRQ", Watts(2.0)));
  measure::EnergyMonitorOptions o;
  o.socs = rig.devs.inventory.socs;
  auto m = measure::EnergyMonitor::create({}, {}, o);
  ASSERT_TRUE(m) << m.error().message;
  auto [soc, truth] = rig.window(**m, 2000ms);
  check(soc, truth, 0.02);
}

// PowerMonitor samples every rail into a timeline: each rail's energy over an interval with a
// power step comes within 3 % of the simulator's true rail energy, and its samples sit near the
// power set (the model adds noise; the INA3221 quantises and has 1 % shunt errors).
TEST(Jetson, PowerMonitorGivesRailTimelinesWithinThreePercent) {
  Rig rig("jetson=orin");
  ASSERT_EQ(rig.devs.inventory.socs.size(), 1u);
  const auto& soc = rig.devs.inventory.socs[0];
  const auto& rails = soc->capabilities().rails;
  ASSERT_TRUE(rig.devs.machine->set_rail_power("VDD_GPU_SOC", Watts(18.0)));
  ASSERT_TRUE(rig.devs.machine->set_rail_power("VDD_CPU_CV", Watts(7.0)));
  measure::PowerMonitorOptions o;
  o.socs = rig.devs.inventory.socs;
  auto pm = measure::PowerMonitor::create({}, {}, o);
  ASSERT_TRUE(pm) << pm.error().message;
  auto& monitor = **pm;
  EXPECT_LE(monitor.period(), std::chrono::microseconds(100'000));
  std::this_thread::sleep_for(200ms);
  const auto a = SteadyClock::instance().now();  // the monitor's clock
  const auto t0 = rig.truth();
  std::this_thread::sleep_for(1000ms);
  ASSERT_TRUE(rig.devs.machine->set_rail_power("VDD_GPU_SOC", Watts(6.0)));
  std::this_thread::sleep_for(1000ms);
  const auto b = SteadyClock::instance().now();
  const auto t1 = rig.truth();
  std::this_thread::sleep_for(50ms);
  for (unsigned r = 0; r < rails.size(); ++r) {
    auto e = monitor.soc_energy(soc->index(), r, a, b);
    ASSERT_TRUE(e) << e.error().message;
    const double truth = t1.at(rails[r].name) - t0.at(rails[r].name);
    std::printf("  %-16s timeline %8.3f J  true %8.3f J  error %+.3f %%\n", rails[r].name.c_str(), e->value(), truth,
                100.0 * (e->value() / truth - 1.0));
    EXPECT_NEAR(e->value() / truth, 1.0, 0.03) << rails[r].name;
  }
  // The GPU rail's timeline shows the step from 18 W to 6 W.
  auto line = monitor.soc_timeline(soc->index(), 0, a, b);
  ASSERT_TRUE(line) << line.error().message;
  ASSERT_GE(line->size(), 20u);
  // Each sample carries the sensor's conversion noise (one sample was 6.4 % off under ASan on a
  // loaded machine): the mean of the first and of the last five samples.
  auto mean_of = [](auto first, auto last) {
    double sum = 0;
    int n = 0;
    for (auto it = first; it != last; ++it, ++n) sum += it->watts;
    return sum / n;
  };
  EXPECT_NEAR(mean_of(line->begin(), line->begin() + 5), 18.0, 18.0 * 0.05);
  EXPECT_NEAR(mean_of(line->end() - 5, line->end()), 6.0, 6.0 * 0.05);
  auto now = monitor.soc_power(soc->index(), 1);
  ASSERT_TRUE(now) << now.error().message;
  EXPECT_NEAR(now->value(), 7.0, 7.0 * 0.05) << rails[1].name;
  EXPECT_FALSE(monitor.soc_power(soc->index(), static_cast<unsigned>(rails.size())));
  EXPECT_FALSE(monitor.soc_power(soc->index() + 1, 0));
}

/// The value of `family`'s series whose `rail` label is `rail` (nullopt if absent).
std::optional<double> rail_value(const std::vector<::prometheus::MetricFamily>& families, const std::string& family,
                                 const std::string& rail) {
  for (const auto& f : families) {
    if (f.name != family) continue;
    for (const auto& m : f.metric)
      for (const auto& l : m.label)
        if (l.name == "rail" && l.value == rail)
          return f.type == ::prometheus::MetricType::Counter ? m.counter.value : m.gauge.value;
  }
  return std::nullopt;
}

// The Prometheus collector exports every rail: erg_soc_energy_joules_total grows by the rail's
// true energy between two scrapes (within 3 %), erg_soc_power_watts is the rail's power (5 %:
// one noisy reading), with rail and kind labels.
TEST(Jetson, CollectorExportsRailEnergyAndPower) {
  Rig rig("jetson=orin");
  ASSERT_EQ(rig.devs.inventory.socs.size(), 1u);
  const auto& rails = rig.devs.inventory.socs[0]->capabilities().rails;
  ASSERT_TRUE(rig.devs.machine->set_rail_power("VDD_GPU_SOC", Watts(15.0)));
  ASSERT_TRUE(rig.devs.machine->set_rail_power("VDD_CPU_CV", Watts(5.0)));
  prom::CollectorOptions o;
  o.socs = rig.devs.inventory.socs;
  auto collector = prom::Collector::create({}, {}, o);
  ASSERT_TRUE(collector) << collector.error().message;
  // The truth read on both sides of each scrape: on a loaded machine a scrape takes a while, and
  // its energy edge lies somewhere inside it.
  const auto t0a = rig.truth();
  const auto first = (*collector)->Collect();
  const auto t0b = rig.truth();
  std::this_thread::sleep_for(1500ms);
  const auto t1a = rig.truth();
  const auto second = (*collector)->Collect();
  const auto t1b = rig.truth();
  for (const auto& r : rails) {
    auto e0 = rail_value(first, prom::names::kSocEnergy, r.name);
    auto e1 = rail_value(second, prom::names::kSocEnergy, r.name);
    ASSERT_TRUE(e0 && e1) << r.name;
    EXPECT_EQ(*e0, 0.0) << "every energy series starts at 0";
    const double lo = t1a.at(r.name) - t0b.at(r.name), hi = t1b.at(r.name) - t0a.at(r.name);
    std::printf("  %-16s exported %8.3f J  true %8.3f to %8.3f J\n", r.name.c_str(), *e1 - *e0, lo, hi);
    EXPECT_GE(*e1 - *e0, lo * 0.97) << r.name;
    EXPECT_LE(*e1 - *e0, hi * 1.03) << r.name;
  }
  auto gpu_w = rail_value(second, prom::names::kSocPower, "VDD_GPU_SOC");
  auto cpu_w = rail_value(second, prom::names::kSocPower, "VDD_CPU_CV");
  ASSERT_TRUE(gpu_w && cpu_w);
  EXPECT_NEAR(*gpu_w, 15.0, 15.0 * 0.05);
  EXPECT_NEAR(*cpu_w, 5.0, 5.0 * 0.05);
  const std::string text = (*collector)->scrape();
  EXPECT_NE(text.find("erg_soc_energy_joules_total{index=\"0\",name=\""), std::string::npos) << text;
  EXPECT_NE(text.find("rail=\"VDD_GPU_SOC\",kind=\"gpu\""), std::string::npos) << text;
  EXPECT_NE(text.find("erg_soc_up{"), std::string::npos) << text;
  EXPECT_FALSE(prom::check_user_labels({{"rail", "x"}})) << "rail is set by erg";
}

TEST(Jetson, NoSocOnAMachineWithoutOne) {
  Rig rig("1xA100");
  EXPECT_TRUE(rig.devs.inventory.socs.empty()) << "ERG_HWMON_ROOT points at the machine's empty hwmon class";
}

}  // namespace
}  // namespace erg
