// Per-process attribution by hand-computed cases: the split by sampled busy time, the idle model,
// the bound's terms, the extrapolated tail, no samples, and invalid input.

#include "erg/measure/process_attribution.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <vector>

namespace erg::measure {
namespace {

using namespace std::chrono_literals;
using std::chrono::microseconds;
using std::chrono::nanoseconds;

ProcessUtilizationSample sample(std::uint32_t pid, std::chrono::milliseconds t, unsigned pct) {
  return {pid, std::chrono::duration_cast<microseconds>(t), pct, 0, 0, 0};
}

// [10 s, 11 s], 100 J ± 1 J, idle 20 W ± 1 W, samples every 250 ms: pid 1 at 50 %, pid 2 at 25 %,
// one round past the end.
struct Case {
  EnergySegment interval{10s, 11s, Joules(100.0), Joules(1.0), Watts(0.0)};
  ProcessAttributionOptions options;
  std::vector<ProcessUtilizationSample> samples;
  Case() {
    options.idle = IdleModel{Watts(20.0), Watts(1.0), Seconds(3.0)};
    options.sample_period = 250ms;
    options.edge_uncertainty = 0ns;
    options.model_error = 0.05;
    for (int k = 1; k <= 5; ++k) {
      samples.push_back(sample(1, 10s + k * 250ms, 50));
      samples.push_back(sample(2, 10s + k * 250ms, 25));
    }
    samples.push_back(sample(1, 9500ms, 100));  // before the interval: ignored
  }
};

TEST(ProcessAttribution, SplitsActiveEnergyByBusyTime) {
  Case c;
  auto r = attribute_processes(c.interval, c.samples, c.options);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_TRUE(r->attributable);
  EXPECT_DOUBLE_EQ(r->idle.value(), 20.0);
  EXPECT_DOUBLE_EQ(r->idle_bound.value(), 1.0 * 1.0 + 1.0 * 20.0 / 100.0);
  ASSERT_EQ(r->processes.size(), 2u);
  const auto& p1 = r->processes[0];
  const auto& p2 = r->processes[1];
  EXPECT_EQ(p1.pid, 1u);
  EXPECT_NEAR(p1.busy.count(), 0.5, 1e-12);
  EXPECT_NEAR(p2.busy.count(), 0.25, 1e-12);
  EXPECT_NEAR(p1.energy.value(), 80.0 * 2.0 / 3.0, 1e-9);
  EXPECT_NEAR(p2.energy.value(), 80.0 / 3.0, 1e-9);
  EXPECT_EQ(p1.samples, 4u);
  EXPECT_NEAR(r->unattributed.value(), 0.0, 1e-12);
  EXPECT_DOUBLE_EQ((r->idle + r->attributed() + r->unattributed).value(), 100.0);

  // The bound by hand: δU = 0.005·1 s + 2·β(1 − β)·P at the two ends (straddling samples).
  const double du1 = 0.005 + 2 * 0.5 * 0.5 * 0.25, du2 = 0.005 + 2 * 0.25 * 0.75 * 0.25;
  const double total = 0.75, total_err = du1 + du2;
  const double w1 = 2.0 / 3.0, w2 = 1.0 / 3.0;
  const double shared = 1.0 + 1.0 * 1.0;  // e_E + δP_idle·T
  EXPECT_NEAR(p1.bound.value(), 80.0 * (du1 + w1 * total_err) / (total - total_err) + w1 * shared + 0.05 * 80.0 * w1,
              1e-9);
  EXPECT_NEAR(p2.bound.value(), 80.0 * (du2 + w2 * total_err) / (total - total_err) + w2 * shared + 0.05 * 80.0 * w2,
              1e-9);
}

TEST(ProcessAttribution, EdgeUncertaintyWidensTheBound) {
  Case c;
  auto exact = attribute_processes(c.interval, c.samples, c.options);
  c.options.edge_uncertainty = 100ms;
  auto loose = attribute_processes(c.interval, c.samples, c.options);
  ASSERT_TRUE(exact && loose);
  EXPECT_NEAR(loose->processes[0].energy.value(), exact->processes[0].energy.value(), 1e-12);
  EXPECT_GT(loose->processes[0].bound.value(), exact->processes[0].bound.value());
}

TEST(ProcessAttribution, ExtrapolatesTheTailTheDriverHasNotSampled) {
  Case c;
  std::vector<ProcessUtilizationSample> early;
  for (const auto& s : c.samples)
    if (s.timestamp <= microseconds(10'750'000)) early.push_back(s);  // the last 250 ms unsampled
  auto r = attribute_processes(c.interval, early, c.options);
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->processes.size(), 2u);
  // 3 samples inside + the latest one's 50 % over the 250 ms tail.
  EXPECT_NEAR(r->processes[0].busy.count(), 0.5, 1e-12);
  EXPECT_NEAR(r->processes[0].energy.value(), 80.0 * 2.0 / 3.0, 1e-9);
  auto full = attribute_processes(c.interval, c.samples, c.options);
  EXPECT_GT(r->processes[0].bound.value(), full->processes[0].bound.value());
}

TEST(ProcessAttribution, NoBusyProcessLeavesTheActiveEnergyUnattributed) {
  Case c;
  auto r = attribute_processes(c.interval, std::vector<ProcessUtilizationSample>{}, c.options);
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->processes.empty());
  EXPECT_DOUBLE_EQ(r->unattributed.value(), 80.0);
  EXPECT_DOUBLE_EQ(r->unattributed_bound.value(), 1.0 + 1.0);
}

TEST(ProcessAttribution, IdleAboveTheMeasuredEnergyTakesItAll) {
  Case c;
  c.options.idle.power = Watts(150.0);
  auto r = attribute_processes(c.interval, c.samples, c.options);
  ASSERT_TRUE(r);
  EXPECT_DOUBLE_EQ(r->idle.value(), 100.0);
  for (const auto& p : r->processes) EXPECT_DOUBLE_EQ(p.energy.value(), 0.0);
  EXPECT_DOUBLE_EQ((r->idle + r->attributed() + r->unattributed).value(), 100.0);
}

TEST(ProcessAttribution, NotAttributableKeepsTheMeasuredEnergyAndTheReason) {
  Case c;
  auto r = not_attributable(c.interval, "MIG is enabled");
  EXPECT_FALSE(r.attributable);
  EXPECT_EQ(r.reason, "MIG is enabled");
  EXPECT_DOUBLE_EQ(r.measured.value(), 100.0);
  EXPECT_TRUE(r.processes.empty());
}

TEST(ProcessAttribution, RejectsInvalidInput) {
  Case c;
  auto bad = c.interval;
  bad.end = bad.start;
  EXPECT_EQ(attribute_processes(bad, c.samples, c.options).error().code, ErrorCode::kInvalidArgument);
  auto o = c.options;
  o.sample_period = 0ns;
  EXPECT_FALSE(attribute_processes(c.interval, c.samples, o));
  o = c.options;
  o.model_error = 1.0;
  EXPECT_FALSE(attribute_processes(c.interval, c.samples, o));
  o = c.options;
  o.idle.error = Watts(-1.0);
  EXPECT_FALSE(attribute_processes(c.interval, c.samples, o));
  auto s = c.samples;
  s.push_back(sample(3, 10500ms, 101));
  auto r = attribute_processes(c.interval, s, c.options);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("pid 3"), std::string::npos);
}

TEST(ProcessAttribution, CalibratesIdleFromIdleSegments) {
  const std::vector<EnergySegment> idle = {{0s, 1s, Joules(20.0), Joules(0.2), Watts(0.0)},
                                           {5s, 7s, Joules(42.0), Joules(0.4), Watts(0.0)}};
  auto m = calibrate_idle(idle);
  ASSERT_TRUE(m) << m.error().message;
  EXPECT_NEAR(m->power.value(), 62.0 / 3.0, 1e-12);
  EXPECT_NEAR(m->error.value(), 0.6 / 3.0 + 0.5 * (21.0 - 20.0), 1e-12);
  EXPECT_NEAR(m->calibrated_over.count(), 3.0, 1e-12);
  EXPECT_FALSE(calibrate_idle(std::vector<EnergySegment>{}));
  EXPECT_FALSE(calibrate_idle(std::vector<EnergySegment>{{1s, 1s, Joules(1.0), Joules(0.0), Watts(0.0)}}));
}

TEST(ProcessAttribution, InfersTheSamplePeriod) {
  std::vector<ProcessUtilizationSample> s;
  for (int k = 0; k < 6; ++k) s.push_back({1, microseconds(1'000'000 + k * 166'667), 30, 0, 0, 0});
  for (int k = 0; k < 3; ++k) s.push_back({2, microseconds(1'000'000 + 2 * k * 166'667), 30, 0, 0, 0});  // idle periods
  auto p = infer_sample_period(s);
  ASSERT_TRUE(p);
  EXPECT_EQ(*p, std::chrono::duration_cast<nanoseconds>(microseconds(166'667)));
  EXPECT_FALSE(infer_sample_period(std::vector<ProcessUtilizationSample>{s[0]}));
}

}  // namespace
}  // namespace erg::measure
