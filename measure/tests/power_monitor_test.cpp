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

// A fake GPU whose power steps every 20 ms of real time, and whose every `stall_every`th read
// stalls 9 ms after taking its value, as a preempted poller does: that change is seen late, and
// the next one, seen promptly, looks 11 ms after it.
std::shared_ptr<sim::FakeGpu> stalling_gpu(int stall_every, std::chrono::milliseconds stall) {
  auto gpu = std::make_shared<sim::FakeGpu>(0, false);
  const auto t0 = std::chrono::steady_clock::now();
  auto reads = std::make_shared<int>(0);
  gpu->set_power_source([t0, reads, stall_every, stall] {
    const auto since = std::chrono::steady_clock::now() - t0;
    const double mw = 50000.0 + 1000.0 * std::floor(std::chrono::duration<double>(since).count() / 0.020);
    if (++*reads % stall_every == 0) std::this_thread::sleep_for(stall);
    return mw;
  });
  return gpu;
}

TEST(InferUpdatePeriod, ALatePollDoesNotShortenThePeriod) {
  auto gpu = stalling_gpu(40, milliseconds(9));
  auto p = infer_update_period(*gpu, milliseconds(1000));
  ASSERT_TRUE(p);
  // Each change lies in its read bracket, so the period lies between the largest lower bound and
  // the smallest upper bound of the intervals (a stall only widens a bracket). On a quiet machine
  // brackets are a few hundred µs; a loaded one preempts the poller beyond the injected stalls.
  // A late poll taken for the period would give ~11 ms: ± 4 ms still tells the two apart.
  EXPECT_GE(p->count(), 16'000);
  EXPECT_LE(p->count(), 24'000);
}

TEST(InferUpdatePeriod, EveryOtherChangeSeenLateStillGivesThePeriod) {
  // The power steps every 20 ms; the read that first sees every other step stalls 15 ms after
  // taking its value. No two changes in a row are then bracketed by prompt reads, and the
  // middles of the brackets alternate 12.5 and 27.5 ms apart: the shortest interval between
  // changes (the estimator before brackets were intersected) was ~12.5 ms. Intersected, the
  // prompt side of each pair bounds the period on one side and the late side does not move it.
  auto gpu = std::make_shared<sim::FakeGpu>(0, false);
  const auto t0 = std::chrono::steady_clock::now();
  auto seen = std::make_shared<long>(-1);
  gpu->set_power_source([t0, seen] {
    const auto since = std::chrono::steady_clock::now() - t0;
    const long step = static_cast<long>(std::floor(std::chrono::duration<double>(since).count() / 0.020));
    if (step != *seen) {
      *seen = step;
      if (step % 2 == 0) std::this_thread::sleep_for(milliseconds(15));
    }
    return 50000.0 + 1000.0 * static_cast<double>(step);
  });
  auto p = infer_update_period(*gpu, milliseconds(1000));
  ASSERT_TRUE(p);
  EXPECT_GE(p->count(), 16'000);
  EXPECT_LE(p->count(), 24'000);
}

}  // namespace
}  // namespace erg::measure
