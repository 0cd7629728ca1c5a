// The collector over fake devices: one counter semantics for every energy metric (from 0 at the
// first read, never decreasing, continuing after an outage), labels, withdrawn series and the
// exporter's own metrics. The simulated machine's figures are checked end to end in
// tests/prometheus/.

#include "erg/exporters/prometheus/collector.hpp"

#include <gtest/gtest.h>

#include "erg/exporters/prometheus/metric_names.hpp"
#include "erg/sim/fake_devices.hpp"

namespace erg::prom {
namespace {

/// The value of the series of `metric` whose labels start with `labels` ("index=\"0\""), if shown.
std::optional<double> value(const std::string& text, const std::string& metric, const std::string& labels) {
  const auto at = text.find("\n" + metric + "{" + labels);
  if (at == std::string::npos) return std::nullopt;
  const auto sp = text.find("} ", at);
  return std::stod(text.substr(sp + 2));
}

struct Rig {
  std::shared_ptr<sim::FakeGpu> gpu = std::make_shared<sim::FakeGpu>(0, true, "Fake H100");
  std::shared_ptr<sim::FakeCpu> cpu = std::make_shared<sim::FakeCpu>(0, true);
  std::shared_ptr<Collector> collector;
  explicit Rig(CollectorOptions o = {}) {
    gpu->set_energy_mj(9'000'000.0);  // a driver counter far from 0: the metric still starts at 0
    cpu->set_energy_uj(4e9, 1e9);
    collector = *Collector::create({gpu}, {cpu}, std::move(o));
  }
};

TEST(Collector, EveryEnergyCounterStartsAtZeroAndCountsWhatTheDeviceDrew) {
  Rig r;
  auto t = r.collector->scrape();
  EXPECT_EQ(value(t, names::kGpuEnergy, "index=\"0\""), 0.0) << t;
  EXPECT_EQ(value(t, names::kCpuEnergy, "index=\"0\""), 0.0) << t;
  EXPECT_EQ(value(t, names::kDramEnergy, "index=\"0\""), 0.0) << t;
  r.gpu->set_energy_mj(9'250'000.0);
  r.cpu->set_energy_uj(4e9 + 30e6, 1e9 + 5e6);
  t = r.collector->scrape();
  EXPECT_DOUBLE_EQ(*value(t, names::kGpuEnergy, "index=\"0\""), 250.0) << t;
  EXPECT_DOUBLE_EQ(*value(t, names::kCpuEnergy, "index=\"0\""), 30.0) << t;
  EXPECT_DOUBLE_EQ(*value(t, names::kDramEnergy, "index=\"0\""), 5.0) << t;
  EXPECT_EQ(value(t, names::kGpuUp, "index=\"0\""), 1.0);
  EXPECT_EQ(value(t, names::kCpuUp, "index=\"0\""), 1.0);
}

TEST(Collector, ACpuCounterThatGoesBackNeverTakesTheMetricBack) {
  Rig r;
  (void)r.collector->scrape();
  r.cpu->set_energy_uj(4e9 + 10e6, 1e9);
  (void)r.collector->scrape();
  r.cpu->set_energy_uj(1e6, 1e9);  // the source restarted
  auto t = r.collector->scrape();
  EXPECT_DOUBLE_EQ(*value(t, names::kCpuEnergy, "index=\"0\""), 10.0) << t;
  r.cpu->set_energy_uj(3e6, 1e9);  // followed from its new value
  t = r.collector->scrape();
  EXPECT_DOUBLE_EQ(*value(t, names::kCpuEnergy, "index=\"0\""), 12.0) << t;
}

TEST(Collector, AFailingDeviceIsDownWithdrawnCountedAndContinuesWhereItWas) {
  Rig r;
  (void)r.collector->scrape();
  r.gpu->set_energy_mj(9'100'000.0);
  (void)r.collector->scrape();
  r.gpu->set_failing(true);
  r.cpu->fail_package_reads(100);
  auto t = r.collector->scrape();
  EXPECT_EQ(value(t, names::kGpuUp, "index=\"0\""), 0.0) << t;
  EXPECT_EQ(value(t, names::kCpuUp, "index=\"0\""), 0.0) << t;
  for (const char* m : {names::kGpuEnergy, names::kGpuPower, names::kGpuPowerLimit, names::kGpuTemperature,
                        names::kCpuEnergy, names::kDramEnergy})
    EXPECT_FALSE(value(t, m, "index=\"0\"")) << m << "\n" << t;
  EXPECT_EQ(value(t, names::kReadErrors, "device=\"gpu\",index=\"0\""), 1.0) << t;
  EXPECT_GE(*value(t, names::kReadErrors, "device=\"cpu\",index=\"0\""), 1.0) << t;
  r.gpu->set_energy_mj(9'400'000.0);  // drawn while it did not answer
  r.gpu->set_failing(false);
  r.cpu->fail_package_reads(0);
  t = r.collector->scrape();
  EXPECT_EQ(value(t, names::kGpuUp, "index=\"0\""), 1.0) << t;
  EXPECT_DOUBLE_EQ(*value(t, names::kGpuEnergy, "index=\"0\""), 400.0) << t;
  EXPECT_DOUBLE_EQ(*value(t, names::kCpuEnergy, "index=\"0\""), 0.0) << t;
  EXPECT_EQ(value(t, names::kReadErrors, "device=\"gpu\",index=\"0\""), 1.0) << t;
}

TEST(Collector, SeriesCarryDeviceNodeAndUserLabelsAndPowerByDomain) {
  CollectorOptions o;
  o.node = "n7";
  o.labels = {{"cluster", "west"}, {"rack", "r2"}};
  o.exporter = "erg-exporter";
  o.simulated = true;
  Rig r(o);
  r.gpu->set_power_mw(123'000.0);
  const auto t = r.collector->scrape();
  const std::string gpu = "index=\"0\",name=\"Fake H100\",uuid=\"GPU-fake-0\",node=\"n7\",cluster=\"west\",rack=\"r2\"";
  EXPECT_EQ(value(t, names::kGpuPower, gpu + ",domain=\"device_instant\""), 123.0) << t;
  EXPECT_TRUE(value(t, names::kGpuPower, gpu + ",domain=\"device_average\"")) << t;
  EXPECT_EQ(value(t, names::kGpuPowerLimit, gpu), 300.0) << t;
  EXPECT_EQ(value(t, names::kGpuTemperature, gpu), 40.0) << t;
  EXPECT_TRUE(value(t, names::kCpuEnergy, "index=\"0\",name=\"package-0\",node=\"n7\",cluster=\"west\",rack=\"r2\""))
      << t;
  EXPECT_NE(t.find("erg_info{exporter=\"erg-exporter\",simulated=\"true\",version=\""), std::string::npos) << t;
  EXPECT_NE(t.find("# TYPE erg_gpu_energy_joules_total counter"), std::string::npos) << t;
  EXPECT_TRUE(value(t, names::kScrapeDuration, "node=\"n7\"")) << t;
}

TEST(Collector, BadLabelsAreRefusedNamingTheLabel) {
  CollectorOptions o;
  o.labels = {{"1bad", "x"}};
  auto c = Collector::create({}, {}, o);
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().message.find("'1bad'"), std::string::npos) << c.error().message;
  o.labels = {{"index", "x"}};
  c = Collector::create({}, {}, o);
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().message.find("set by erg"), std::string::npos) << c.error().message;
  EXPECT_FALSE(parse_label("novalue"));
  EXPECT_FALSE(parse_label("__x=1"));
  auto kv = parse_label("team=ml=ops");
  ASSERT_TRUE(kv);
  EXPECT_EQ(kv->first, "team");
  EXPECT_EQ(kv->second, "ml=ops");
}

}  // namespace
}  // namespace erg::prom
