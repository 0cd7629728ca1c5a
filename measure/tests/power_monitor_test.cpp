// PowerMonitor over fake devices (no driver): what happens to a CPU whose reads fail.

#include "erg/measure/power_monitor.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <memory>
#include <thread>
#include <vector>

#include "erg/sim/fake_devices.hpp"

namespace erg::measure {
namespace {

using std::chrono::milliseconds;

TEST(PowerMonitorCpu, AnIoGlitchIsSkippedAndARepeatedOneStopsTheCpu) {
  VirtualClock clock;
  auto cpu = std::make_shared<sim::FakeCpu>(0);
  PowerMonitorOptions o;
  o.clock = &clock;
  o.start_thread = false;
  o.period = milliseconds(10);
  auto pm = PowerMonitor::create({}, {cpu}, o);
  ASSERT_TRUE(pm) << pm.error().message;
  double uj = 0;
  auto round = [&] {
    clock.advance(milliseconds(10));
    uj += 50.0 * 0.01 * 1e6;  // 50 W
    cpu->set_energy_uj(uj, uj / 5);
    (*pm)->sample_once();
  };
  round();
  // One corrupt reading (RaplCpu reports it as an Io error and counts on): skipped, not fatal.
  cpu->fail_package_reads(1);
  round();
  round();
  round();
  EXPECT_TRUE((*pm)->errors().empty());
  auto w = (*pm)->cpu_power(0, CpuDomain::kPackage);
  ASSERT_TRUE(w) << w.error().message;
  EXPECT_NEAR(w->value(), 50.0, 0.5);
  // Failing reads in a row: the CPU is reported and no longer sampled.
  cpu->fail_package_reads(3);
  round();
  round();
  EXPECT_TRUE((*pm)->errors().empty()) << "two in a row are still retried";
  round();
  auto errors = (*pm)->errors();
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].device, "cpu0");
  EXPECT_EQ(errors[0].error.code, ErrorCode::kIo);
}

TEST(InferUpdatePeriod, ALatePollDoesNotShortenThePeriod) {
  // The power changes every 20 ms. Every 40th read stalls 9 ms after taking its value, as a
  // preempted poller does: its change is seen late, and the next change, seen promptly, looks
  // 11 ms after it. Only changes bracketed by two prompt reads may give the period.
  auto gpu = std::make_shared<sim::FakeGpu>(0, false);
  const auto t0 = std::chrono::steady_clock::now();
  int reads = 0;
  gpu->set_power_source([&] {
    const auto since = std::chrono::steady_clock::now() - t0;
    const double mw = 50000.0 + 1000.0 * std::floor(std::chrono::duration<double>(since).count() / 0.020);
    if (++reads % 40 == 0) std::this_thread::sleep_for(milliseconds(9));
    return mw;
  });
  auto p = infer_update_period(*gpu, milliseconds(1000));
  ASSERT_TRUE(p);
  // Two brackets of at most 1.5 ms each give the period ± 1.5 ms on a quiet machine; a loaded one
  // preempts the poller beyond the injected stalls (17.5 ms seen in CI). A late poll taken for
  // the period would give ~11 ms: ± 4 ms still tells the two apart.
  EXPECT_GE(p->count(), 16'000);
  EXPECT_LE(p->count(), 24'000);
}

}  // namespace
}  // namespace erg::measure
