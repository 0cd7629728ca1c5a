// PowerMonitor over fake devices (no driver): what happens to a CPU whose reads fail.

#include "erg/measure/power_monitor.hpp"

#include <gtest/gtest.h>

#include <memory>
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

}  // namespace
}  // namespace erg::measure
