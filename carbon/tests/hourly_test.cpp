// Hour splitting and the monitors on a virtual clock (reference/zeus.md §9 item 9): windows of
// 1 h and 1 day, starting and ending mid-hour, single, overlapping and nested, against sums
// computed by hand from the power the fake devices draw.

#include <gtest/gtest.h>

#include <cmath>
#include <memory>

#include "erg/carbon/monitor.hpp"
#include "erg/carbon/offline.hpp"
#include "erg/sim/fake_devices.hpp"

namespace erg::carbon {
namespace {

using namespace std::chrono;

constexpr double kJPerKwh = 3.6e6;

nanoseconds wall_ns(int y, unsigned mo, unsigned d, int h, int mi = 0) {
  return duration_cast<nanoseconds>(
      (sys_days{year{y} / month{mo} / day{d}} + hours{h} + minutes{mi}).time_since_epoch());
}
UtcHour hour_at(int y, unsigned mo, unsigned d, int h) { return sys_days{year{y} / month{mo} / day{d}} + hours{h}; }

/// Devices whose counters integrate the power the test sets, exactly, as the virtual clock moves.
struct Rig {
  VirtualClock clock{seconds(1000), wall_ns(2026, 1, 15, 10, 30)};
  std::shared_ptr<sim::FakeGpu> gpu = std::make_shared<sim::FakeGpu>(0);
  std::shared_ptr<sim::FakeCpu> cpu = std::make_shared<sim::FakeCpu>(0, true);
  double gpu_w = 300.0, cpu_w = 50.0, dram_w = 10.0;
  double gpu_mj = 0.0, pkg_uj = 0.0, dram_uj = 0.0;

  HourlyOptions options() {
    HourlyOptions o;
    o.energy.clock = &clock;
    o.energy.extrapolate_counters = false;  // exact counter differences: the sums are exact
    o.energy.follow_counters = false;
    o.boundary_thread = false;
    return o;
  }
  /// Moves the clock by `d`, stopping at every hour boundary to let `hourly` sample.
  void run(nanoseconds d, HourlyEnergyMonitor& hourly) {
    const nanoseconds end = clock.now() + d;
    while (clock.now() < end) {
      const nanoseconds next = std::min(end, hourly.next_boundary_time());
      const double s = duration<double>(next - clock.now()).count();
      gpu_mj += gpu_w * s * 1e3;
      pkg_uj += cpu_w * s * 1e6;
      dram_uj += dram_w * s * 1e6;
      gpu->set_energy_mj(gpu_mj);
      cpu->set_energy_uj(pkg_uj, dram_uj);
      clock.set(next);
      hourly.sample_due();
    }
  }
};

std::shared_ptr<IntensityProvider> series(double first, double step, UtcHour from, int count) {
  std::string csv = "datetime,carbon_intensity\n";
  for (int i = 0; i < count; ++i) csv += format_utc(from + hours(i)) + "," + std::to_string(first + step * i) + "\n";
  auto f = FileIntensity::parse(csv, "test-series");
  EXPECT_TRUE(f) << f.error().message;
  return std::shared_ptr<IntensityProvider>(std::move(*f));
}

/// Counts the requests that reach the provider behind the monitor's cache.
class CountingProvider final : public IntensityProvider {
 public:
  explicit CountingProvider(std::shared_ptr<IntensityProvider> inner) : inner_(std::move(inner)) {}
  Result<Intensity> intensity(UtcHour h) override {
    ++calls;
    return inner_->intensity(h);
  }
  std::string name() const override { return inner_->name(); }
  int calls = 0;

 private:
  std::shared_ptr<IntensityProvider> inner_;
};

std::unique_ptr<CarbonMonitor> carbon_monitor(Rig& rig, std::shared_ptr<IntensityProvider> p,
                                              CarbonMonitorOptions o = {}) {
  o.hourly = rig.options();
  auto m = CarbonMonitor::create(std::move(p), {rig.gpu}, {rig.cpu}, std::move(o));
  EXPECT_TRUE(m) << m.error().message;
  return std::move(*m);
}

TEST(SplitByHour, PureSplitIsProportionalBetweenSamples) {
  // Samples at 10:30 (start), 11:00 (boundary), 11:30 (end): exact per hour.
  auto shares = split_by_hour({{wall_ns(2026, 1, 15, 10, 30), {}},
                               {wall_ns(2026, 1, 15, 11, 0), {{"gpu0", 100.0}}},
                               {wall_ns(2026, 1, 15, 11, 30), {{"gpu0", 400.0}}}});
  ASSERT_EQ(shares.size(), 2u);
  EXPECT_EQ(shares[0].hour, hour_at(2026, 1, 15, 10));
  EXPECT_DOUBLE_EQ(shares[0].energy_j.at("gpu0"), 100.0);
  EXPECT_DOUBLE_EQ(shares[1].energy_j.at("gpu0"), 300.0);
  EXPECT_DOUBLE_EQ(shares[0].time.count(), 1800.0);
  // Without the boundary sample, the energy is spread by time: 2/3 and 1/3 of a 10:40-11:10... here
  // 10:40 to 11:10 spans 20 and 10 minutes.
  auto spread = split_by_hour({{wall_ns(2026, 1, 15, 10, 40), {}}, {wall_ns(2026, 1, 15, 11, 10), {{"gpu0", 300.0}}}});
  ASSERT_EQ(spread.size(), 2u);
  EXPECT_NEAR(spread[0].energy_j.at("gpu0"), 200.0, 1e-9);
  EXPECT_NEAR(spread[1].energy_j.at("gpu0"), 100.0, 1e-9);
}

TEST(CarbonMonitor, OneHourWindowStartingAndEndingMidHour) {
  Rig rig;                                                                           // wall clock at 10:30 UTC
  auto m = carbon_monitor(rig, series(400.0, -200.0, hour_at(2026, 1, 15, 10), 2));  // 10h: 400, 11h: 200
  ASSERT_TRUE(m->begin_window("w"));
  rig.run(hours(1), m->hourly());  // to 11:30
  auto r = m->end_window("w");
  ASSERT_TRUE(r) << r.error().message;
  // By hand: 1800 s in each hour. GPU 300 W -> 540 kJ per hour; CPU 50 W -> 90 kJ; DRAM 10 W -> 18 kJ.
  // Hour 10: (540000 + 90000 + 18000) / 3.6e6 × 400 = 72 g; hour 11: same energy × 200 = 36 g.
  ASSERT_EQ(r->hours.size(), 2u);
  EXPECT_NEAR(r->hours[0].total_energy_j, 648000.0, 1e-6);
  EXPECT_NEAR(r->hours[1].total_energy_j, 648000.0, 1e-6);
  EXPECT_NEAR(*r->hours[0].carbon_g, 72.0, 1e-9);
  EXPECT_NEAR(*r->hours[1].carbon_g, 36.0, 1e-9);
  ASSERT_TRUE(r->carbon_g);
  EXPECT_NEAR(*r->carbon_g, 108.0, 1e-9);
  EXPECT_NEAR(r->carbon_g_by_device.at("gpu0"), 90.0, 1e-9);  // 60 + 30
  EXPECT_NEAR(r->carbon_g_by_device.at("cpu0"), 15.0, 1e-9);  // 10 + 5
  EXPECT_NEAR(r->carbon_g_by_device.at("dram0"), 3.0, 1e-9);  // 2 + 1
  // The energy figure is the EnergyMonitor's, whole.
  EXPECT_NEAR(r->energy.total_energy().value(), 1296000.0, 1e-6);
  EXPECT_NEAR(r->energy.time.count(), 3600.0, 1e-9);
  EXPECT_EQ(r->providers, std::vector<std::string>{"file"});
  EXPECT_EQ(r->resolution, Resolution::kHourly);
  EXPECT_TRUE(r->warnings.empty());
}

TEST(CarbonMonitor, PowerChangeAtTheBoundaryIsAttributedToItsHour) {
  Rig rig;
  auto m = carbon_monitor(rig, series(100.0, 300.0, hour_at(2026, 1, 15, 10), 2));  // 100, then 400
  rig.run(minutes(20), m->hourly());                                                // 10:50
  rig.cpu_w = rig.dram_w = 0.0;
  rig.gpu_w = 100.0;
  ASSERT_TRUE(m->begin_window("w"));
  rig.run(minutes(10), m->hourly());  // 11:00, 60 kJ
  rig.gpu_w = 500.0;
  rig.run(minutes(10), m->hourly());  // 11:10, 300 kJ
  auto r = m->end_window("w");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->hours.size(), 2u);
  EXPECT_NEAR(r->hours[0].energy_j.at("gpu0"), 60000.0, 1e-6);
  EXPECT_NEAR(r->hours[1].energy_j.at("gpu0"), 300000.0, 1e-6);
  // 60000/3.6e6×100 + 300000/3.6e6×400 = 1.6667 + 33.3333 = 35 g (time-proportional would give 25 g).
  EXPECT_NEAR(*r->carbon_g, 35.0, 1e-9);
}

TEST(CarbonMonitor, OneDayWindowWithPowerChangingEveryHour) {
  Rig rig;
  auto counting = std::make_shared<CountingProvider>(series(100.0, 5.0, hour_at(2026, 1, 15, 10), 26));
  auto m = carbon_monitor(rig, counting);  // hour k: 100 + 5k g/kWh
  rig.cpu_w = rig.dram_w = 0.0;
  rig.run(minutes(20), m->hourly());  // 10:50
  ASSERT_TRUE(m->begin_window("day"));
  // Hour k of the window draws 100 + 10k W: 10:50-11:00 (600 s, k=0), 23 whole hours, 10:00-10:50 (3000 s, k=24).
  double expected_g = 0.0, expected_j = 0.0;
  for (int k = 0; k <= 24; ++k) {
    rig.gpu_w = 100.0 + 10.0 * k;
    const double s = k == 0 ? 600.0 : k == 24 ? 3000.0 : 3600.0;
    rig.run(duration_cast<nanoseconds>(duration<double>(s)), m->hourly());
    expected_j += rig.gpu_w * s;
    expected_g += rig.gpu_w * s / kJPerKwh * (100.0 + 5.0 * k);
  }
  auto r = m->end_window("day");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->hours.size(), 25u);
  EXPECT_NEAR(r->energy.time.count(), 86400.0, 1e-6);
  EXPECT_NEAR(r->energy.gpu_energy().value(), expected_j, 1e-3);
  EXPECT_NEAR(*r->carbon_g, expected_g, 1e-6);
  // Spot checks by hand: the first share is 600 s × 100 W = 60 kJ at 100 g/kWh = 1.6667 g; the
  // last 3000 s × 340 W = 1.02 MJ at 220 g/kWh = 62.333 g.
  EXPECT_NEAR(*r->hours.front().carbon_g, 60000.0 / kJPerKwh * 100.0, 1e-9);
  EXPECT_NEAR(*r->hours.back().carbon_g, 1020000.0 / kJPerKwh * 220.0, 1e-9);
  EXPECT_EQ(r->hours.back().hour, hour_at(2026, 1, 16, 10));
  // Each of the 25 hours was fetched once: 24 as they ended, the last at end_window.
  EXPECT_EQ(counting->calls, 25);
}

TEST(CarbonMonitor, OverlappingAndNestedWindowsEachGetTheirOwnSplit) {
  Rig rig;  // 10:30
  rig.cpu_w = rig.dram_w = 0.0;
  rig.gpu_w = 360.0;                                                                // 360 W: 1296 kJ/h = 0.36 kWh/h
  auto m = carbon_monitor(rig, series(100.0, 100.0, hour_at(2026, 1, 15, 10), 4));  // 100, 200, 300, 400
  ASSERT_TRUE(m->begin_window("a"));                                                // 10:30
  rig.run(minutes(15), m->hourly());
  ASSERT_TRUE(m->begin_window("b"));  // 10:45
  rig.run(minutes(30), m->hourly());
  ASSERT_TRUE(m->begin_window("inner"));  // 11:15
  rig.run(minutes(5), m->hourly());
  auto inner = m->end_window("inner");  // 11:20
  rig.run(minutes(10), m->hourly());
  auto a = m->end_window("a");  // 11:30
  rig.run(minutes(45), m->hourly());
  auto b = m->end_window("b");  // 12:15
  ASSERT_TRUE(a && b && inner);
  // a: 0.5 h at 100 + 0.5 h at 200 -> 0.18×100 + 0.18×200 = 54 g.
  EXPECT_NEAR(*a->carbon_g, 54.0, 1e-9);
  // b: 0.25 h at 100, 1 h at 200, 0.25 h at 300 -> 0.09×100 + 0.36×200 + 0.09×300 = 108 g.
  EXPECT_NEAR(*b->carbon_g, 108.0, 1e-9);
  // inner: 5 min at 200 -> 0.03 kWh × 200 = 6 g.
  EXPECT_NEAR(*inner->carbon_g, 6.0, 1e-9);
  EXPECT_EQ(inner->hours.size(), 1u);
  EXPECT_EQ(b->hours.size(), 3u);
}

class FailingProvider final : public IntensityProvider {
 public:
  explicit FailingProvider(std::string zone) : zone_(std::move(zone)) {}
  Result<Intensity> intensity(UtcHour) override {
    ++calls;
    return fail(ErrorCode::kTimeout, "no answer within 5000 ms");
  }
  std::string name() const override { return "electricitymaps"; }
  std::string zone() const override { return zone_; }
  int calls = 0;

 private:
  std::string zone_;
};

TEST(CarbonMonitor, ProviderFailureFallsBackToTheOfflineAverageWithAWarning) {
  Rig rig;
  auto failing = std::make_shared<FailingProvider>("DE");
  auto m = carbon_monitor(rig, failing);
  ASSERT_TRUE(m->begin_window("w"));
  rig.run(hours(1), m->hourly());
  auto r = m->end_window("w");
  ASSERT_TRUE(r) << r.error().message;  // the provider's failure never fails the window
  EXPECT_NEAR(r->energy.total_energy().value(), 1296000.0, 1e-6);
  ASSERT_TRUE(r->carbon_g);
  EXPECT_NEAR(*r->carbon_g, 1296000.0 / kJPerKwh * 341.0, 1e-9);  // DE's 2024 yearly average
  EXPECT_EQ(r->providers, std::vector<std::string>{"offline"});
  EXPECT_EQ(r->resolution, Resolution::kYearly);
  ASSERT_FALSE(r->warnings.empty());
  EXPECT_NE(r->warnings[0].find("no answer within 5000 ms"), std::string::npos) << r->warnings[0];
  EXPECT_NE(r->warnings[0].find("offline"), std::string::npos) << r->warnings[0];
  ASSERT_FALSE(r->sources.empty());
  EXPECT_NE(r->sources[0].find("2024"), std::string::npos);
  // Hour 10 was asked as it ended (11:00) and, the failure being 30 min old, again at end_window;
  // hour 11 once. A failure younger than five minutes is not retried:
  EXPECT_EQ(failing->calls, 3);
  ASSERT_TRUE(m->begin_window("again"));
  rig.run(minutes(1), m->hourly());
  ASSERT_TRUE(m->end_window("again"));
  EXPECT_EQ(failing->calls, 3);
}

TEST(CarbonMonitor, NoProviderAndNoFallbackKeepsTheEnergyAndSaysWhy) {
  Rig rig;
  auto m = carbon_monitor(rig, std::make_shared<FailingProvider>(""));  // coordinates, zone unknown
  ASSERT_TRUE(m->begin_window("w"));
  rig.run(minutes(10), m->hourly());
  auto r = m->end_window("w");
  ASSERT_TRUE(r);
  EXPECT_FALSE(r->carbon_g);
  EXPECT_NEAR(r->energy.total_energy().value(), 216000.0, 1e-6);  // 360 W × 600 s
  ASSERT_EQ(r->warnings.size(), 1u);
  EXPECT_NE(r->warnings[0].find("no fallback"), std::string::npos);
}

TEST(CarbonMonitor, WindowErrorsAreZeusLike) {
  Rig rig;
  auto m = carbon_monitor(rig, std::make_shared<FixedIntensity>(100.0));
  ASSERT_TRUE(m->begin_window("w"));
  auto again = m->begin_window("w");
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().code, ErrorCode::kAlreadyExists);
  auto unknown = m->end_window("nope");
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error().code, ErrorCode::kNotFound);
  EXPECT_NE(unknown.error().message.find("does not exist"), std::string::npos);
  EXPECT_FALSE(CarbonMonitor::create(nullptr, {}, {}));
}

TEST(CostMonitor, FlatPriceOverHours) {
  Rig rig;  // 10:30
  auto o = CostMonitorOptions{};
  o.hourly = rig.options();
  auto m = CostMonitor::create(std::make_shared<FixedPrice>(0.25, "EUR"), {rig.gpu}, {rig.cpu}, o);
  ASSERT_TRUE(m);
  ASSERT_TRUE((*m)->begin_window("w"));
  rig.run(hours(2), (*m)->hourly());
  auto r = (*m)->end_window("w");
  ASSERT_TRUE(r);
  // 360 W × 7200 s = 2.592 MJ = 0.72 kWh × 0.25 = 0.18 EUR.
  ASSERT_TRUE(r->cost);
  EXPECT_NEAR(*r->cost, 0.18, 1e-12);
  EXPECT_EQ(r->currency, "EUR");
  EXPECT_EQ(r->hours.size(), 3u);
  EXPECT_NEAR(r->cost_by_device.at("gpu0"), 0.15, 1e-12);
}

}  // namespace
}  // namespace erg::carbon
