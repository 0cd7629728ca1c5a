// TemperatureMonitor over a scripted GPU (no driver) on a virtual clock: deduplication, nearest
// lookups, bounded storage, a GPU that cannot be read; and its sampler thread on the real clock.

#include "erg/measure/temperature_monitor.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "erg/measure/periodic_sampler.hpp"

namespace erg::measure {
namespace {

using std::chrono::milliseconds;
using std::chrono::nanoseconds;
using std::chrono::seconds;

/// A GPU whose temperature reads come from a script (a value or an error per read; the last
/// entry repeats). Everything else is NotSupported.
class ScriptedGpu final : public Gpu {
 public:
  explicit ScriptedGpu(unsigned index, bool sensor = true) : index_(index), name_("Scripted GPU") {
    caps_.temperature = sensor;
  }
  void push(Result<int> r) {
    std::lock_guard lock(mu_);
    script_.push_back(std::move(r));
  }
  int reads() const { return reads_.load(); }

  unsigned index() const override { return index_; }
  unsigned physical_index() const override { return index_; }
  GpuVendor vendor() const override { return GpuVendor::kNvidia; }
  const std::string& name() const override { return name_; }
  const std::string& uuid() const override { return name_; }
  const std::string& architecture() const override { return name_; }
  const GpuCapabilities& capabilities() const override { return caps_; }
  Result<MilliJoules> total_energy() override { return no(); }
  Result<MilliWatts> power(PowerDomain) override { return no(); }
  Result<MilliWatts> power_limit() override { return no(); }
  Result<PowerLimitConstraints> power_limit_constraints() override { return no(); }
  Result<MilliWatts> default_power_limit() override { return no(); }
  Result<void> set_power_limit(MilliWatts) override { return no(); }
  Result<void> reset_power_limit() override { return no(); }
  Result<bool> persistence_mode() override { return no(); }
  Result<void> set_persistence_mode(bool) override { return no(); }
  Result<std::vector<Megahertz>> supported_memory_clocks() override { return no(); }
  Result<std::vector<Megahertz>> supported_graphics_clocks(Megahertz) override { return no(); }
  Result<void> set_gpu_locked_clocks(Megahertz, Megahertz) override { return no(); }
  Result<void> reset_gpu_locked_clocks() override { return no(); }
  Result<void> set_memory_locked_clocks(Megahertz, Megahertz) override { return no(); }
  Result<void> reset_memory_locked_clocks() override { return no(); }
  Result<int> temperature() override {
    ++reads_;
    std::lock_guard lock(mu_);
    if (script_.empty()) return fail(ErrorCode::kInternal, "empty script");
    Result<int> r = script_.front();
    if (script_.size() > 1) script_.pop_front();
    return r;
  }

 private:
  static tl::unexpected<Error> no() { return fail(ErrorCode::kNotSupported, "not scripted"); }
  unsigned index_;
  std::string name_;
  GpuCapabilities caps_;
  std::mutex mu_;
  std::deque<Result<int>> script_;
  std::atomic<int> reads_{0};
};

struct Rig {
  VirtualClock clock{seconds(10)};
  std::vector<std::shared_ptr<ScriptedGpu>> gpus;
  std::unique_ptr<TemperatureMonitor> monitor;

  explicit Rig(int n) {
    for (int i = 0; i < n; ++i) gpus.push_back(std::make_shared<ScriptedGpu>(static_cast<unsigned>(i)));
  }
  void start(std::size_t max_samples = 0) {
    TemperatureMonitorOptions o;
    o.clock = &clock;
    o.start_thread = false;
    o.max_samples = max_samples;
    auto m = TemperatureMonitor::create({gpus.begin(), gpus.end()}, o);
    ASSERT_TRUE(m) << m.error().message;
    monitor = std::move(*m);
  }
  /// One round at the current time, then one second passes.
  void round() {
    monitor->sample_once();
    clock.advance(seconds(1));
  }
};

nanoseconds at(double s) { return std::chrono::duration_cast<nanoseconds>(std::chrono::duration<double>(10.0 + s)); }

TEST(TemperatureMonitor, StoresChangesOnlyAndAnswersTheNearestReading) {
  Rig rig(1);
  for (int c : {40, 40, 41, 41, 45}) rig.gpus[0]->push(c);
  rig.start();
  for (int i = 0; i < 5; ++i) rig.round();  // readings at 0..4 s after 10 s

  EXPECT_EQ(rig.monitor->rounds(), 5u);
  EXPECT_EQ(rig.monitor->stored_samples(), 3u) << "40 at 0 s, 41 at 2 s, 45 at 4 s";
  auto all = rig.monitor->timeline(0, at(0), at(100));
  ASSERT_TRUE(all);
  ASSERT_EQ(all->size(), 3u);
  EXPECT_EQ((*all)[0].time, at(0));
  EXPECT_EQ((*all)[1].time, at(2));
  EXPECT_EQ((*all)[1].celsius, 41);
  EXPECT_EQ((*all)[2].celsius, 45);

  EXPECT_EQ(*rig.monitor->temperature(0), 45);           // latest
  EXPECT_EQ(*rig.monitor->temperature(0, at(2.9)), 41);  // 0.9 s from 41, 1.1 s from 45
  EXPECT_EQ(*rig.monitor->temperature(0, at(3.0)), 41);  // a tie goes to the earlier reading
  EXPECT_EQ(*rig.monitor->temperature(0, at(3.1)), 45);
  EXPECT_EQ(*rig.monitor->temperature(0, at(-5.0)), 40);  // before the first: the first
  EXPECT_EQ(*rig.monitor->temperature(0, at(99.0)), 45);  // after the last: the last

  auto mid = rig.monitor->timeline(0, at(1), at(4));  // inclusive bounds
  ASSERT_TRUE(mid);
  ASSERT_EQ(mid->size(), 2u);
  EXPECT_EQ((*mid)[0].time, at(2));
  EXPECT_EQ((*mid)[1].time, at(4));
  EXPECT_TRUE(rig.monitor->timeline(0, at(5), at(9))->empty());
}

TEST(TemperatureMonitor, KeepsAtMostMaxSamplesDroppingTheOldest) {
  Rig rig(1);
  for (int c : {30, 31, 32, 33, 34}) rig.gpus[0]->push(c);
  rig.start(2);
  for (int i = 0; i < 5; ++i) rig.round();
  auto tl = rig.monitor->timeline(0, at(0), at(100));
  ASSERT_TRUE(tl);
  ASSERT_EQ(tl->size(), 2u);
  EXPECT_EQ((*tl)[0].celsius, 33);
  EXPECT_EQ((*tl)[1].celsius, 34);
}

TEST(TemperatureMonitor, AGpuThatCannotBeReadStopsAndTheOthersGoOn) {
  Rig rig(2);
  rig.gpus[0]->push(50);
  rig.gpus[1]->push(60);
  rig.gpus[1]->push(fail(ErrorCode::kNotSupported, "no sensor"));
  rig.start();
  rig.round();
  rig.round();
  rig.round();
  EXPECT_TRUE(rig.monitor->sampled(0));
  EXPECT_FALSE(rig.monitor->sampled(1));
  EXPECT_EQ(rig.gpus[1]->reads(), 2) << "not polled once it failed for good";
  auto errors = rig.monitor->errors();
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].device, "gpu1");
  EXPECT_EQ(errors[0].error.code, ErrorCode::kNotSupported);

  EXPECT_EQ(*rig.monitor->temperature(0), 50);
  auto now = rig.monitor->temperature(1);
  ASSERT_FALSE(now) << "never the last reading held on";
  EXPECT_EQ(now.error().code, ErrorCode::kNotSupported);
  EXPECT_NE(now.error().message.find("GPU 1"), std::string::npos);
  EXPECT_EQ(*rig.monitor->temperature(1, at(0)), 60) << "what was stored before it stopped stays";
  EXPECT_EQ(rig.monitor->timeline(1, at(0), at(100))->size(), 1u);
}

TEST(TemperatureMonitor, TransientErrorsSkipRoundsUntilTooManyInARow) {
  Rig rig(1);
  rig.gpus[0]->push(40);
  rig.gpus[0]->push(fail(ErrorCode::kTimeout, "slow"));
  rig.gpus[0]->push(41);
  rig.gpus[0]->push(fail(ErrorCode::kTimeout, "slow"));
  rig.start();
  rig.round();  // 40
  rig.round();  // timeout: skipped
  rig.round();  // 41
  EXPECT_TRUE(rig.monitor->errors().empty());
  EXPECT_EQ(*rig.monitor->temperature(0), 41);
  for (int i = 0; i < TemperatureMonitor::kGpuRetries - 1; ++i) rig.round();
  EXPECT_TRUE(rig.monitor->sampled(0)) << "one short of the limit";
  rig.round();
  EXPECT_FALSE(rig.monitor->sampled(0));
  ASSERT_EQ(rig.monitor->errors().size(), 1u);
  EXPECT_EQ(rig.monitor->temperature(0).error().code, ErrorCode::kTimeout);
}

TEST(TemperatureMonitor, AGpuWithoutASensorIsNeverPolled) {
  VirtualClock clock;
  auto with = std::make_shared<ScriptedGpu>(0);
  auto without = std::make_shared<ScriptedGpu>(1, false);
  with->push(35);
  TemperatureMonitorOptions o;
  o.clock = &clock;
  o.start_thread = false;
  auto m = TemperatureMonitor::create({with, without}, o);
  ASSERT_TRUE(m) << m.error().message;
  (*m)->sample_once();
  EXPECT_EQ(without->reads(), 0);
  EXPECT_EQ((*m)->temperature(1).error().code, ErrorCode::kNotSupported);
  EXPECT_EQ(*(*m)->temperature(0), 35);
}

TEST(TemperatureMonitor, RejectsBadArguments) {
  auto g = std::make_shared<ScriptedGpu>(0);
  g->push(40);
  TemperatureMonitorOptions o;
  o.start_thread = false;
  o.gpu_indices = std::vector<unsigned>{1};
  auto out_of_range = TemperatureMonitor::create({g}, o);
  ASSERT_FALSE(out_of_range);
  EXPECT_EQ(out_of_range.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(out_of_range.error().message, "GPU index 1 is out of range (1 GPUs)");
  o.gpu_indices = std::vector<unsigned>{0, 0};
  EXPECT_EQ(TemperatureMonitor::create({g}, o).error().code, ErrorCode::kInvalidArgument);
  o.gpu_indices.reset();
  EXPECT_EQ(TemperatureMonitor::create({}, o).error().code, ErrorCode::kInvalidArgument);
  o.period = std::chrono::microseconds(0);
  EXPECT_EQ(TemperatureMonitor::create({g}, o).error().code, ErrorCode::kInvalidArgument);
  o.period = std::chrono::microseconds(1000);
  auto m = TemperatureMonitor::create({g}, o);
  ASSERT_TRUE(m);
  EXPECT_EQ((*m)->temperature(7).error().code, ErrorCode::kNotFound);
  EXPECT_EQ((*m)->temperature(0).error().code, ErrorCode::kUnavailable) << "no reading yet";
}

TEST(TemperatureMonitor, ItsThreadSamplesFromCreationUntilStopped) {
  auto g = std::make_shared<ScriptedGpu>(0);
  g->push(40);
  TemperatureMonitorOptions o;
  o.period = std::chrono::microseconds(5000);
  auto m = TemperatureMonitor::create({g}, o);
  ASSERT_TRUE(m) << m.error().message;
  EXPECT_GE((*m)->rounds(), 1u) << "the first round is taken in create()";
  EXPECT_EQ(*(*m)->temperature(0), 40);
  for (int i = 0; i < 200 && (*m)->rounds() < 4; ++i) std::this_thread::sleep_for(milliseconds(5));
  EXPECT_GE((*m)->rounds(), 4u);
  (*m)->stop();
  (*m)->stop();  // idempotent
  const auto after_stop = (*m)->rounds();
  std::this_thread::sleep_for(milliseconds(30));
  EXPECT_EQ((*m)->rounds(), after_stop);
}

TEST(TemperatureMonitor, StoppingDoesNotWaitOutTheSamplerPeriod) {
  std::atomic<int> rounds{0};
  const auto t0 = std::chrono::steady_clock::now();
  {
    PeriodicSampler sampler(std::chrono::microseconds(60'000'000), [&] { ++rounds; });
    std::this_thread::sleep_for(milliseconds(10));
  }  // the destructor stops and joins
  EXPECT_LT(std::chrono::steady_clock::now() - t0, seconds(5));
  EXPECT_EQ(rounds.load(), 0) << "the first round is one period after start";
}

}  // namespace
}  // namespace erg::measure
