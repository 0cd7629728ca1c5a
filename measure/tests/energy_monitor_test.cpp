// EnergyMonitor logic over in-process fake devices on a virtual clock: exact figures. The fakes'
// counters are exact when read, so the edge estimate is off here (plain differences) and nothing
// follows the counters in the background; the estimate is tested in counter_history_test.cpp and
// against the simulated machine in sim_fidelity_test.cpp.

#include "erg/measure/energy_monitor.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "erg/measure/power_monitor.hpp"
#include "erg/sim/fake_devices.hpp"

namespace erg::measure {
namespace {

using sim::FakeCpu;
using sim::FakeGpu;
using std::chrono::milliseconds;
using std::chrono::seconds;

class EnergyMonitorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (unsigned i = 0; i < 2; ++i) {
      fakes_.push_back(std::make_shared<FakeGpu>(i));
      gpus_.push_back(fakes_.back());
    }
    cpu_ = std::make_shared<FakeCpu>(0);
    cpus_.push_back(cpu_);
  }
  /// Every device consumes for `d`: GPU i at (i+1)×100 W, CPU 50 W, DRAM 10 W.
  void consume(std::chrono::milliseconds d) {
    double s = std::chrono::duration<double>(d).count();
    for (unsigned i = 0; i < fakes_.size(); ++i) fakes_[i]->add_energy_mj((i + 1) * 100.0 * s * 1000.0);
    cpu_pkg_uj_ += 50.0 * s * 1e6;
    cpu_dram_uj_ += 10.0 * s * 1e6;
    cpu_->set_energy_uj(cpu_pkg_uj_, cpu_dram_uj_);
    clock_.advance(d);
  }
  std::unique_ptr<EnergyMonitor> make(EnergyMonitorOptions o = {}) {
    o.clock = &clock_;
    o.extrapolate_counters = false;
    o.follow_counters = false;
    auto m = EnergyMonitor::create(gpus_, cpus_, std::move(o));
    EXPECT_TRUE(m) << m.error().message;
    return std::move(*m);
  }

  VirtualClock clock_;
  std::vector<std::shared_ptr<FakeGpu>> fakes_;
  std::vector<std::shared_ptr<Gpu>> gpus_;
  std::shared_ptr<FakeCpu> cpu_;
  std::vector<std::shared_ptr<Cpu>> cpus_;
  double cpu_pkg_uj_ = 0;
  double cpu_dram_uj_ = 0;
};

// peek_window measures a window so far and leaves it open; each peek measures from the begin
// edge (an exporter's counter reads successive peeks), and the window ends as if never peeked.
TEST_F(EnergyMonitorTest, PeekMeasuresSoFarAndLeavesTheWindowOpen) {
  auto m = make();
  ASSERT_TRUE(m->begin_window("w"));
  consume(milliseconds(1000));
  auto p1 = m->peek_window("w");
  ASSERT_TRUE(p1) << p1.error().message;
  EXPECT_NEAR(p1->gpus[0].energy->value(), 100.0, 1e-6);
  EXPECT_NEAR(p1->cpus[0].package.value(), 50.0, 1e-6);
  EXPECT_NEAR(p1->time.count(), 1.0, 1e-9);
  EXPECT_EQ(m->open_windows(), std::vector<std::string>{"w"});
  consume(milliseconds(500));
  auto p2 = m->peek_window("w");
  ASSERT_TRUE(p2);
  EXPECT_NEAR(p2->gpus[1].energy->value(), 300.0, 1e-6);
  auto e = m->end_window("w");
  ASSERT_TRUE(e);
  EXPECT_NEAR(e->gpus[1].energy->value(), 300.0, 1e-6);
  EXPECT_EQ(m->peek_window("w").error().code, ErrorCode::kNotFound);
}

TEST_F(EnergyMonitorTest, SerialNestedAndOverlappingWindowsAreExact) {
  auto m = make();
  ASSERT_TRUE(m->begin_window("outer"));
  consume(seconds(1));
  ASSERT_TRUE(m->begin_window("inner"));
  consume(seconds(2));
  ASSERT_TRUE(m->begin_window("overlap"));
  consume(seconds(1));
  auto inner = m->end_window("inner");  // ends while "overlap" is still open
  ASSERT_TRUE(inner);
  consume(seconds(3));
  auto overlap = m->end_window("overlap");
  auto outer = m->end_window("outer");
  ASSERT_TRUE(overlap && outer);

  EXPECT_DOUBLE_EQ(inner->time.count(), 3.0);
  EXPECT_DOUBLE_EQ(inner->gpus[0].energy->value(), 300.0);
  EXPECT_DOUBLE_EQ(inner->gpus[1].energy->value(), 600.0);
  EXPECT_DOUBLE_EQ(overlap->time.count(), 4.0);
  EXPECT_DOUBLE_EQ(overlap->gpus[1].energy->value(), 800.0);
  EXPECT_DOUBLE_EQ(outer->time.count(), 7.0);
  EXPECT_DOUBLE_EQ(outer->gpus[0].energy->value(), 700.0);
  EXPECT_DOUBLE_EQ(outer->gpu_energy().value(), 2100.0);
  ASSERT_EQ(outer->cpus.size(), 1u);
  EXPECT_NEAR(outer->cpus[0].package.value(), 350.0, 1e-9);
  EXPECT_NEAR(outer->cpus[0].dram->value(), 70.0, 1e-9);
  EXPECT_NEAR(outer->total_energy().value(), 2100.0 + 350.0 + 70.0, 1e-9);
  EXPECT_EQ(outer->gpus[0].source, EnergySource::kCounter);
  EXPECT_FALSE(outer->affected());

  ASSERT_TRUE(m->begin_window("serial"));
  consume(milliseconds(500));
  auto serial = m->end_window("serial");
  ASSERT_TRUE(serial);
  EXPECT_DOUBLE_EQ(serial->gpus[0].energy->value(), 50.0);
  EXPECT_TRUE(m->open_windows().empty());
}

TEST_F(EnergyMonitorTest, DuplicateAndUnknownWindowsUseZeusMessages) {
  auto m = make();
  ASSERT_TRUE(m->begin_window("w"));
  auto dup = m->begin_window("w");
  ASSERT_FALSE(dup);
  EXPECT_EQ(dup.error().code, ErrorCode::kAlreadyExists);
  EXPECT_EQ(dup.error().message, "Measurement window 'w' already exists");
  auto unknown = m->end_window("nope");
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error().code, ErrorCode::kNotFound);
  EXPECT_EQ(unknown.error().message, "Measurement window 'nope' does not exist");
  ASSERT_TRUE(m->end_window("w"));
  EXPECT_FALSE(m->end_window("w"));  // already ended
}

TEST_F(EnergyMonitorTest, CancelAndRestart) {
  auto m = make();
  ASSERT_TRUE(m->begin_window("c"));
  consume(seconds(1));
  ASSERT_TRUE(m->cancel_window("c"));
  EXPECT_FALSE(m->end_window("c"));
  EXPECT_FALSE(m->cancel_window("c"));

  ASSERT_TRUE(m->begin_window("r"));
  consume(seconds(5));
  ASSERT_TRUE(m->restart_window("r"));  // drops the first 5 s
  consume(seconds(1));
  auto r = m->end_window("r");
  ASSERT_TRUE(r);
  EXPECT_DOUBLE_EQ(r->time.count(), 1.0);
  EXPECT_DOUBLE_EQ(r->gpus[0].energy->value(), 100.0);
  // restart works on a window that does not exist, and begin(restart=true) replaces.
  ASSERT_TRUE(m->restart_window("fresh"));
  ASSERT_TRUE(m->begin_window("fresh", true, true));
  EXPECT_EQ(m->reset_windows(), std::vector<std::string>{"fresh"});
}

TEST_F(EnergyMonitorTest, SyncHookRunsBeforeReadsWithMonitoredGpus) {
  std::vector<std::vector<unsigned>> calls;
  EnergyMonitorOptions o;
  o.gpu_indices = std::vector<unsigned>{1};
  o.sync = [&](const std::vector<unsigned>& g) { calls.push_back(g); };
  auto m = make(std::move(o));
  ASSERT_TRUE(m->begin_window("a"));
  ASSERT_TRUE(m->end_window("a", /*sync=*/false));
  ASSERT_TRUE(m->begin_window("b", /*sync=*/false));
  auto b = m->end_window("b");
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0], std::vector<unsigned>{1});
  ASSERT_EQ(b->gpus.size(), 1u);
  EXPECT_EQ(b->gpus[0].index, 1u);
}

TEST_F(EnergyMonitorTest, ConcurrentWindowsFromEightThreads) {
  auto m = make();
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        std::string name = "t" + std::to_string(t) + "-" + std::to_string(i % 3);
        if (!m->begin_window(name)) ++failures;
        fakes_[0]->add_energy_mj(1.0);
        auto r = m->end_window(name);
        if (!r || r->gpus[0].energy->value() < 0) ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_TRUE(m->open_windows().empty());
}

TEST_F(EnergyMonitorTest, ACpuReadFailingDuringAWindowMarksItAffected) {
  // RaplCpu reports a counter reset or a corrupt reading as a failed read (the energy around it
  // is not counted): a window with one inside is a lower bound and says so; the others not.
  auto m = make();
  ASSERT_TRUE(m->begin_window("outer"));
  consume(milliseconds(100));
  ASSERT_TRUE(m->begin_window("before"));
  consume(milliseconds(100));
  auto before = m->end_window("before");
  ASSERT_TRUE(before);
  EXPECT_FALSE(before->cpus[0].affected);
  cpu_->fail_package_reads(1);
  ASSERT_TRUE(m->begin_window("probe"));  // this read fails
  consume(milliseconds(100));
  ASSERT_TRUE(m->cancel_window("probe"));
  ASSERT_TRUE(m->begin_window("after"));
  consume(milliseconds(100));
  auto after = m->end_window("after");
  auto outer = m->end_window("outer");
  ASSERT_TRUE(after && outer);
  EXPECT_FALSE(after->cpus[0].affected) << "began after the failure";
  EXPECT_TRUE(outer->cpus[0].affected);
  EXPECT_TRUE(outer->affected());
  EXPECT_FALSE(outer->cpus[0].error) << "the last read succeeded";
  EXPECT_FALSE(outer->gpus[0].affected);
}

TEST_F(EnergyMonitorTest, CounterResetAndBackwardsAreFlaggedAndNonNegative) {
  auto m = make();
  fakes_[0]->set_energy_mj(5'000'000.0);
  ASSERT_TRUE(m->begin_window("reset"));
  consume(seconds(1));          // gpu0 +100 J
  fakes_[0]->set_energy_mj(0);  // driver reload
  consume(seconds(1));          // +100 J after the reload
  auto r = m->end_window("reset");
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->gpus[0].affected);
  EXPECT_TRUE(r->affected());
  EXPECT_FALSE(r->gpus[1].affected);
  EXPECT_GE(r->gpus[0].energy->value(), 0.0);
  // Only the energy after the reset is observable without a read in between: a lower bound.
  EXPECT_DOUBLE_EQ(r->gpus[0].energy->value(), 100.0);

  // With a read between (any other window's begin), the energy before the reset is kept too.
  ASSERT_TRUE(m->begin_window("reset2"));
  consume(seconds(1));
  ASSERT_TRUE(m->begin_window("probe"));
  fakes_[0]->set_energy_mj(0);
  consume(seconds(1));
  auto r2 = m->end_window("reset2");
  EXPECT_TRUE(r2->gpus[0].affected);
  EXPECT_DOUBLE_EQ(r2->gpus[0].energy->value(), 200.0);
  ASSERT_TRUE(m->cancel_window("probe"));

  fakes_[0]->set_energy_mj(9'000'000.0);
  ASSERT_TRUE(m->begin_window("back"));
  fakes_[0]->add_energy_mj(-500'000.0);  // counter goes backwards by 500 J
  consume(seconds(1));
  auto b = m->end_window("back");
  ASSERT_TRUE(b);
  EXPECT_TRUE(b->gpus[0].affected);
  EXPECT_GE(b->gpus[0].energy->value(), 0.0);
  EXPECT_DOUBLE_EQ(b->gpus[0].energy->value(), 0.0);  // nothing trustworthy was added
}

TEST_F(EnergyMonitorTest, FailingGpuIsReportedForThatGpuOnly) {
  auto m = make();
  ASSERT_TRUE(m->begin_window("w"));
  consume(seconds(1));
  fakes_[1]->set_failing(true);
  auto r = m->end_window("w");
  ASSERT_TRUE(r);
  EXPECT_FALSE(r->gpus[0].error);
  EXPECT_DOUBLE_EQ(r->gpus[0].energy->value(), 100.0);
  ASSERT_TRUE(r->gpus[1].error);
  EXPECT_EQ(r->gpus[1].error->code, ErrorCode::kGpuLost);
}

TEST_F(EnergyMonitorTest, ShortWindowsAreFlagged) {
  auto m = make();
  ASSERT_TRUE(m->begin_window("short"));
  consume(milliseconds(150));
  auto s = m->end_window("short");
  EXPECT_TRUE(s->gpus[0].short_window);  // < 2 × 100 ms counter period
  ASSERT_TRUE(m->begin_window("long"));
  consume(milliseconds(250));
  EXPECT_FALSE(m->end_window("long")->gpus[0].short_window);
}

TEST_F(EnergyMonitorTest, ApproxInstantEnergyFillsZeroWindows) {
  EnergyMonitorOptions o;
  o.approx_instant_energy = true;
  auto m = make(std::move(o));
  fakes_[0]->set_power_mw(80'000.0);
  ASSERT_TRUE(m->begin_window("w"));
  clock_.advance(milliseconds(50));  // counter does not move
  auto r = m->end_window("w");
  EXPECT_EQ(r->gpus[0].source, EnergySource::kInstantApprox);
  EXPECT_NEAR(r->gpus[0].energy->value(), 4.0, 1e-9);
}

TEST_F(EnergyMonitorTest, BadIndicesAreErrors) {
  EnergyMonitorOptions o;
  o.gpu_indices = std::vector<unsigned>{5};
  o.clock = &clock_;
  auto bad_gpu = EnergyMonitor::create(gpus_, cpus_, o);
  ASSERT_FALSE(bad_gpu);
  EXPECT_EQ(bad_gpu.error().code, ErrorCode::kInvalidArgument);
  EnergyMonitorOptions c;
  c.cpu_indices = std::vector<unsigned>{3};
  auto bad_cpu = EnergyMonitor::create(gpus_, cpus_, c);
  ASSERT_FALSE(bad_cpu);
  EXPECT_EQ(bad_cpu.error().code, ErrorCode::kNotFound);
  // Unrequested unavailable CPUs are simply absent.
  auto none = EnergyMonitor::create(gpus_, {}, EnergyMonitorOptions{});
  ASSERT_TRUE(none);
  EXPECT_TRUE((*none)->cpu_indices().empty());
}

std::string slurp(const std::string& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

TEST_F(EnergyMonitorTest, CsvLogStartsWithZeusHeaderOneRowPerEndedWindow) {
  char dir[] = "/tmp/erg-log-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  std::string path = std::string(dir) + "/sub/log.csv";
  EnergyMonitorOptions o;
  o.log_file = path;
  {
    auto m = make(std::move(o));
    ASSERT_TRUE(m->begin_window("a"));
    ASSERT_TRUE(m->begin_window("b,c"));
    consume(seconds(1));
    ASSERT_TRUE(m->end_window("b,c"));
    ASSERT_TRUE(m->cancel_window("a"));  // no row
    ASSERT_TRUE(m->begin_window("d"));
    consume(seconds(2));
    ASSERT_TRUE(m->end_window("d"));
  }
  std::string log = slurp(path);
  std::istringstream lines(log);
  std::string header, row1, row2, extra;
  std::getline(lines, header);
  std::getline(lines, row1);
  std::getline(lines, row2);
  EXPECT_FALSE(std::getline(lines, extra));
  EXPECT_EQ(header, "start_time,window_name,elapsed_time,gpu0_energy,gpu1_energy,cpu0_energy,dram0_energy");
  EXPECT_NE(row1.find(",\"b,c\",1.000000,100.000000,200.000000,50.000000,10.000000"), std::string::npos) << row1;
  EXPECT_NE(row2.find(",d,2.000000,200.000000,400.000000,100.000000,20.000000"), std::string::npos) << row2;
  std::filesystem::remove_all(dir);
}

TEST_F(EnergyMonitorTest, JsonLinesLog) {
  char dir[] = "/tmp/erg-log-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  std::string path = std::string(dir) + "/log.jsonl";
  EnergyMonitorOptions o;
  o.log_file = path;
  o.log_format = LogFormat::kJsonLines;
  {
    auto m = make(std::move(o));
    ASSERT_TRUE(m->begin_window("x"));
    consume(seconds(1));
    ASSERT_TRUE(m->end_window("x"));
  }
  auto j = nlohmann::json::parse(slurp(path));
  EXPECT_EQ(j["window_name"], "x");
  EXPECT_DOUBLE_EQ(j["gpu1_energy"].get<double>(), 200.0);
  std::filesystem::remove_all(dir);
}

TEST_F(EnergyMonitorTest, UnwritableLogIsAnIoError) {
  EnergyMonitorOptions o;
  o.log_file = "/proc/erg-cannot-write/log.csv";
  auto m = EnergyMonitor::create(gpus_, cpus_, o);
  ASSERT_FALSE(m);
  EXPECT_EQ(m.error().code, ErrorCode::kIo);
}

TEST_F(EnergyMonitorTest, GpuWithoutCounterIsIntegrated) {
  fakes_.push_back(std::make_shared<FakeGpu>(2, /*energy_counter=*/false, "Old GPU"));
  gpus_.push_back(fakes_.back());
  fakes_.back()->set_power_mw(120'000.0);
  EnergyMonitorOptions o;
  o.power_sample_period = milliseconds(5);
  auto m = make(std::move(o));
  ASSERT_NE(m->power_monitor(), nullptr);
  m->power_monitor()->sample_once();
  ASSERT_TRUE(m->begin_window("w"));
  consume(seconds(2));
  auto r = m->end_window("w");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->gpus[2].source, EnergySource::kIntegrated);
  // Constant power over the window: hold the last sample to the window edges.
  EXPECT_NEAR(r->gpus[2].energy->value(), 240.0, 1e-6);
  EXPECT_EQ(r->gpus[0].source, EnergySource::kCounter);
}

}  // namespace
}  // namespace erg::measure
