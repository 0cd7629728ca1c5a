// The estimator's assumptions, each broken on the simulator's side (sim/README.md lists them with
// the tests here and in fidelity_suite_test.cpp):
//  - the counter updates on a schedule the reader does not know: a period far from the nominal
//    100 ms, per-device phase and drift (erg learns them);
//  - the driver's timestamps may be read times (erg does not trust them until they prove to be
//    update times) — the fidelity suite runs both meanings;
//  - the update jitter is small beside the period: with large jitter erg stays correct and the
//    error grows as the documented σ·P per edge;
//  - a fresh machine's first counter value is of unknown age: the first window is as accurate as
//    any other; so is a window begun the moment a monitor is created on a busy machine, before
//    the schedule is learned (the first value's update is placed a period before the next one);
//  - the follower reads every update: starved for longer than a period (the machine runs on
//    without it), erg stays right on what it read and reports the unread spans it had to
//    interpolate across (GpuEnergy::unread), within which the error stays; a short window on a
//    fresh monitor whose follower read one value and starved is that value's power × time, not 0 J;
// and a baseline: plain differences of the values read at the edges (Zeus's method) miss the
// same windows by up to a counter period of energy at each edge.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <thread>

#include "virtual_rig.hpp"

namespace erg::measure {
namespace {

using namespace std::chrono_literals;
using std::chrono::nanoseconds;
using testing::VirtualRig;

nanoseconds secs(double s) { return nanoseconds(static_cast<long long>(s * 1e9)); }

/// Measures `count` windows of `length` at random instants under a changing training load and
/// returns each GPU's worst relative error (%) against the sensor truth.
std::vector<double> worst_errors(VirtualRig& rig, EnergyMonitor& m, double length, int count, std::uint64_t seed) {
  const unsigned n = rig.machine->gpu_count();
  std::mt19937_64 rng(seed);
  auto uni = [&](double a, double b) { return std::uniform_real_distribution<double>(a, b)(rng); };
  const nanoseconds start = rig.now();
  const double span = count * (length + 0.8) + 2.0;
  for (unsigned g = 0; g < n; ++g)
    for (nanoseconds t = start; t < start + secs(span); t += secs(uni(0.3, 2.0))) {
      // Wide swings: the power model's activity is concave (sim/README.md), so low utilizations
      // and deep ripples are what move the power by a third or more.
      const sim::Load load{uni(0.05, 1.0), secs(uni(0.12, 0.4)), uni(0.3, 0.9), uni(0.1, 0.3)};
      rig.at(t, [&rig, g, load] { ASSERT_TRUE(rig.machine->set_load(g, load)); });
    }
  rig.advance(secs(0.5));
  std::vector<double> worst(n, 0.0);
  struct Edge {
    nanoseconds t0, t1;
    Measurement m;
  };
  std::vector<Edge> edges;
  for (int i = 0; i < count; ++i) {
    rig.advance(secs(uni(0.05, 0.7)));
    Edge e;
    e.t0 = rig.now();
    EXPECT_TRUE(m.begin_window("w"));
    rig.advance(secs(length));
    e.t1 = rig.now();
    auto r = m.end_window("w");
    EXPECT_TRUE(r);
    e.m = *r;
    edges.push_back(e);
  }
  rig.advance(1s);
  for (const auto& e : edges)
    for (unsigned g = 0; g < n; ++g) {
      auto s0 = rig.machine->sensor_energy_at(g, e.t0), s1 = rig.machine->sensor_energy_at(g, e.t1);
      EXPECT_TRUE(s0 && s1);
      if (!s0 || !s1) continue;
      const double sensor = (*s1 - *s0).value();
      worst[g] = std::max(worst[g], 100.0 * std::abs(e.m.gpus[g].energy->value() / sensor - 1.0));
    }
  return worst;
}

TEST(EstimatorAssumptions, ACounterPeriodFarFromTheNominalOneIsLearned) {
  VirtualRig rig(R"({"gpus":[{"sku":"A100","energy_period_ms":37},{"sku":"V100","energy_period_ms":160}],"cpus":0})");
  EnergyMonitorOptions o;
  o.settle = true;
  auto m = rig.monitor(o);
  auto worst = worst_errors(rig, *m, 1.0, 12, 1);
  for (unsigned g = 0; g < 2; ++g) {
    EXPECT_LE(worst[g], 0.5) << "gpu" << g;
    const auto sch = m->counter_schedule(g);
    ASSERT_TRUE(sch && sch->locked);
    EXPECT_NEAR(static_cast<double>(sch->period.count()), g == 0 ? 37e6 : 160e6, 20e3) << "gpu" << g;
  }
}

TEST(EstimatorAssumptions, LargeJitterCostsSigmaTimesPowerPerEdge) {
  // σ = 8 ms (8 % of the period, eight times the faithful model's largest): the update around an
  // edge that no read pinned is known only to about σ, so each edge may be off by ~2·σ·P — a
  // 1 s window by up to ~4·σ/1 s ≈ 3 %. erg measures σ, so the bound is stated from its estimate.
  VirtualRig rig(R"({"gpus":[{"sku":"A100","jitter_ms":8},{"sku":"A40","jitter_ms":8}],"cpus":0})");
  EnergyMonitorOptions o;
  o.settle = true;
  auto m = rig.monitor(o);
  auto worst = worst_errors(rig, *m, 1.0, 12, 2);
  for (unsigned g = 0; g < 2; ++g) {
    const auto sch0 = m->counter_schedule(g);
    const double bound = 100.0 * (4.0 * sch0->jitter.count() * 1e-9 / 1.0) + 0.5;
    std::printf("jitter 8 ms, gpu%u: worst error %.3f %% (bound %.2f %%), measured jitter %.2f ms, period %.3f ms\n", g,
                worst[g], bound, sch0->jitter.count() / 1e6, sch0->period.count() / 1e6);
    EXPECT_LE(worst[g], bound) << "gpu" << g;
    const auto sch = m->counter_schedule(g);
    ASSERT_TRUE(sch && sch->locked);
    EXPECT_NEAR(static_cast<double>(sch->jitter.count()), 8e6, 3.5e6)
        << "the jitter is measured (from ~20 pinned updates)";
  }
}

TEST(EstimatorAssumptions, PlainDifferencesMissTheSameWindows) {
  // The baseline: what erg measures without its edge estimate (as Zeus does) on the same load.
  VirtualRig rig("1xA100,1xV100,cpus=0");
  EnergyMonitorOptions plain;
  plain.extrapolate_counters = false;
  auto m = rig.monitor(plain);
  auto worst = worst_errors(rig, *m, 1.0, 12, 3);
  for (unsigned g = 0; g < 2; ++g) {
    std::printf("plain differences, gpu%u: worst error %.2f %%\n", g, worst[g]);
    EXPECT_GT(worst[g], 2.0) << "stale edge reads: up to a period of energy per edge";
  }
}

class FirstWindow : public ::testing::TestWithParam<const char*> {};

TEST_P(FirstWindow, OpenedWithin10msOfTheMachinesCreationIsAsAccurateAsAnyOther) {
  // The first value a fresh machine's counters show is of unknown age; the follower learns the
  // schedule after the window began and the begin edge is resolved then.
  for (std::uint64_t seed : {1, 2, 3}) {
    VirtualRig rig(std::string("2xA100,1xV100,cpus=0,seed=") + std::to_string(seed) + ",timestamps=" + GetParam());
    EnergyMonitorOptions o;
    o.settle = true;
    auto m = rig.monitor(o);
    rig.advance(5ms);  // idle GPUs: a constant ~55 W (A100) and 25 W (V100)
    const auto t0 = rig.now();
    ASSERT_TRUE(m->begin_window("first"));
    rig.advance(300ms);
    const auto t1 = rig.now();
    auto r = m->end_window("first");
    ASSERT_TRUE(r);
    rig.advance(500ms);
    for (unsigned g = 0; g < 3; ++g) {
      const double sensor = (*rig.machine->sensor_energy_at(g, t1) - *rig.machine->sensor_energy_at(g, t0)).value();
      EXPECT_NEAR(r->gpus[g].energy->value(), sensor, 0.01 * sensor) << "seed " << seed << " gpu" << g;
      // And against the physical energy: the sensor's gain error only (a constant load).
      const double avg_w = r->gpus[g].energy->value() / r->time.count();
      const double want = rig.machine->status(g)->mean_power.value() * (1 + rig.machine->sensor_info(g)->gain);
      EXPECT_NEAR(avg_w, want, 0.01 * want) << "seed " << seed << " gpu" << g;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Stamps, FirstWindow, ::testing::Values("read", "update"));

TEST(FreshMonitor, SettledWindowsBegunBeforeTheScheduleIsKnownAreRightOnEveryGpu) {
  // A monitor created on a machine that has been busy for a while, windows of 0.1 s begun 0.2 to
  // 80 ms later and settled: they end before three updates could pin the schedule, so both edges
  // rest on the pre-lock estimates — the first value's update a period before the next pinned
  // one, and settling that polls every unsettled GPU (not the first one alone). Short windows
  // (flagged), so the bound is the edges' timing: 3 % here, against the sensor truth. With the
  // half-period guess, or with settle polling one GPU while the others wait, some GPUs are off
  // by 15-33 %.
  for (std::uint64_t seed : {1, 2, 3}) {
    VirtualRig rig("4xA100,cpus=0,seed=" + std::to_string(seed));
    for (unsigned g = 0; g < 4; ++g) {
      sim::Load l;
      l.utilization = 1.0 - 0.25 * g;
      ASSERT_TRUE(rig.machine->set_load(g, l));
    }
    rig.advance(std::chrono::milliseconds(250 + 13 * seed));
    for (double offset_ms : {0.2, 1.0, 2.0, 3.0, 5.0, 20.0, 50.0, 80.0}) {
      EnergyMonitorOptions o;
      o.settle = true;
      auto m = rig.monitor(o);
      rig.advance(secs(offset_ms * 1e-3));
      const auto t0 = rig.now();
      ASSERT_TRUE(m->begin_window("w"));
      rig.advance(100ms);
      const auto t1 = rig.now();
      auto r = m->end_window("w");
      ASSERT_TRUE(r);
      rig.forget(m.get());
      rig.advance(300ms);
      for (unsigned g = 0; g < 4; ++g) {
        const double sensor = (*rig.machine->sensor_energy_at(g, t1) - *rig.machine->sensor_energy_at(g, t0)).value();
        EXPECT_NEAR(r->gpus[g].energy->value(), sensor, 0.03 * sensor)
            << "seed " << seed << " offset " << offset_ms << " ms, gpu" << g;
        EXPECT_EQ(r->gpus[g].extrapolated.count(), 0.0);
        EXPECT_TRUE(r->gpus[g].short_window);
      }
    }
  }
}

TEST(FreshMonitor, FirstWindowsOfAGpuBusyFromCreationDoNotAssumeAlikePeriods) {
  // The load starts when the machine is created and ripples at a training step (partial sampling
  // on A100 and H100: each period's increment is the power in its last 25 ms × the period, so
  // consecutive periods carry different energy). A monitor created at once; settled 0.1 s
  // windows begun in its first second, while the schedule is still being learned. The fresh
  // monitor's first value must not be placed by assuming consecutive periods carry alike energy
  // (issue 30: some seeds were +13 % on A100, +30 % on H100). Bound: the sensor's own figure
  // (what a perfect reader of the counter gets) within 5 %, or the window flagged plain.
  std::vector<double> errors;
  for (std::uint64_t seed = 1; seed <= 8; ++seed) {
    for (double offset_ms : {0.3, 3.0, 12.0, 40.0, 95.0, 170.0, 420.0, 800.0}) {
      VirtualRig rig("1xA100,1xH100,cpus=0,seed=" + std::to_string(seed));
      for (unsigned g = 0; g < 2; ++g) ASSERT_TRUE(rig.machine->set_load(g, sim::Load::training(1.0)));
      EnergyMonitorOptions o;
      o.settle = true;
      auto m = rig.monitor(o);
      rig.advance(secs(offset_ms * 1e-3));
      const auto t0 = rig.now();
      ASSERT_TRUE(m->begin_window("w"));
      rig.advance(100ms);
      const auto t1 = rig.now();
      auto r = m->end_window("w");
      ASSERT_TRUE(r);
      rig.advance(400ms);
      for (unsigned g = 0; g < 2; ++g) {
        const double sensor = (*rig.machine->sensor_energy_at(g, t1) - *rig.machine->sensor_energy_at(g, t0)).value();
        const double err = 100.0 * (r->gpus[g].energy->value() / sensor - 1.0);
        if (r->gpus[g].plain_difference) continue;
        errors.push_back(std::abs(err));
        EXPECT_LT(std::abs(err), 5.0) << "seed " << seed << " offset " << offset_ms << " ms, gpu" << g;
      }
    }
  }
  ASSERT_GT(errors.size(), 60u) << "most windows are placed on the schedule, not flagged plain";
  std::sort(errors.begin(), errors.end());
  std::printf("busy from creation, first 0.1 s windows: %zu, |error| median %.2f %%, p90 %.2f %%, worst %.2f %%\n",
              errors.size(), errors[errors.size() / 2], errors[errors.size() * 9 / 10], errors.back());
}

TEST(EndWindowLater, ACollectedWindowIsSettledWithoutTheCallerWaitingAtItsEdge) {
  // A training step's window ended with end_window_later returns at once; collected after the
  // counters' next update was read (here 0.3 s later) it waits no more and its end edge is placed
  // on the schedule (extrapolated 0), as a settled end_window's is; collected at once, it settles.
  VirtualRig rig("2xA100,cpus=0,seed=4");
  for (unsigned g = 0; g < 2; ++g) ASSERT_TRUE(rig.machine->set_load(g, sim::Load::training(0.9)));
  auto m = rig.monitor();  // settle off: end_window would extrapolate
  rig.advance(2s);
  for (const bool at_once : {false, true}) {
    const auto t0 = rig.now();
    ASSERT_TRUE(m->begin_window("step"));
    rig.advance(600ms);
    const auto t1 = rig.now();
    ASSERT_TRUE(m->end_window_later("step"));
    EXPECT_EQ(rig.now(), t1) << "end_window_later does not wait";
    EXPECT_FALSE(m->open_windows().size()) << "the window is no longer open";
    EXPECT_EQ(m->end_window_later("step").error().code, ErrorCode::kNotFound);
    ASSERT_TRUE(m->begin_window("step")) << "a new window of the name may begin";
    EXPECT_EQ(m->end_window_later("step").error().code, ErrorCode::kAlreadyExists) << "the first is uncollected";
    if (!at_once) rig.advance(300ms);
    const auto before = rig.now();
    auto r = m->collect_window("step");
    ASSERT_TRUE(r);
    if (!at_once) {
      EXPECT_EQ(rig.now(), before) << "the updates after the edge were read: no wait";
    }
    EXPECT_EQ(m->collect_window("step").error().code, ErrorCode::kNotFound);
    EXPECT_TRUE(m->cancel_window("step"));
    rig.advance(400ms);
    EXPECT_NEAR(r->time.count(), 0.6, 1e-6);
    for (unsigned g = 0; g < 2; ++g) {
      EXPECT_EQ(r->gpus[g].extrapolated.count(), 0.0) << "gpu" << g;
      const double sensor = (*rig.machine->sensor_energy_at(g, t1) - *rig.machine->sensor_energy_at(g, t0)).value();
      EXPECT_NEAR(r->gpus[g].energy->value(), sensor, 0.005 * sensor) << "gpu" << g << (at_once ? " at once" : "");
    }
  }
}

/// A stretch in which the machine runs on but the follower does not read (its thread starved),
/// half the time: 5 to `max_ms` ms.
void maybe_stall(VirtualRig& rig, std::mt19937_64& rng, double max_ms) {
  auto uni = [&](double a, double b) { return std::uniform_real_distribution<double>(a, b)(rng); };
  if (uni(0, 1) < 0.5) {
    ASSERT_TRUE(rig.machine->advance(secs(uni(5, max_ms) * 1e-3)));
  }
}

TEST(FollowerStalls, FreshMonitorsStayRightOrSayWhatTheyCouldNotRead) {
  // Windows of 20 to 300 ms on monitors created a moment before, with the follower starved for
  // up to 150 ms around the edges: the schedule is learned late, from the settle's own polling.
  // Bound: 2 % plus 1.5 ms of edge timing per edge at the window's power, plus any unread span
  // at up to the power limit (400 W).
  int unread_windows = 0;
  for (std::uint64_t seed : {1, 2, 3, 4}) {
    VirtualRig rig("4xA100,cpus=0,seed=" + std::to_string(seed));
    for (unsigned g = 0; g < 4; ++g) {
      sim::Load l;
      l.utilization = 1.0 - 0.33 * g;
      ASSERT_TRUE(rig.machine->set_load(g, l));
    }
    rig.advance(300ms);
    std::mt19937_64 rng(seed);
    auto uni = [&](double a, double b) { return std::uniform_real_distribution<double>(a, b)(rng); };
    for (int k = 0; k < 10; ++k) {
      EnergyMonitorOptions o;
      o.settle = true;
      auto m = rig.monitor(o);
      maybe_stall(rig, rng, 150);
      rig.advance(secs(uni(0.1e-3, 5e-3)));
      maybe_stall(rig, rng, 150);
      const auto t0 = rig.now();
      ASSERT_TRUE(m->begin_window("w"));
      maybe_stall(rig, rng, 150);
      rig.advance(secs(uni(0.02, 0.1)));
      maybe_stall(rig, rng, 150);
      const auto t1 = rig.now();
      auto r = m->end_window("w");
      ASSERT_TRUE(r);
      rig.forget(m.get());
      rig.advance(300ms);
      const double len = std::chrono::duration<double>(t1 - t0).count();
      for (unsigned g = 0; g < 4; ++g) {
        const double sensor = (*rig.machine->sensor_energy_at(g, t1) - *rig.machine->sensor_energy_at(g, t0)).value();
        const auto& e = r->gpus[g];
        const double tol = 0.02 * sensor + 2 * 1.5e-3 * sensor / len + e.unread.count() * 400.0;
        EXPECT_NEAR(e.energy->value(), sensor, tol)
            << "seed " << seed << " window " << k << " gpu" << g << " unread " << e.unread.count();
        EXPECT_EQ(e.extrapolated.count(), 0.0);
        unread_windows += e.unread.count() > 0 ? 1 : 0;
      }
    }
  }
  EXPECT_GT(unread_windows, 0) << "the stalls hid some updates";
}

TEST(FollowerStalls, ALearnedScheduleKeepsWindowsRightAndFlagsTheUnreadSpans) {
  // Training load (steps, ripple, noise) on monitors that learned their schedules; the follower
  // starved for up to 350 ms around the edges, settled (odd seeds) or not. What erg read it
  // measures as exactly as ever (0.5 % at ≥ 1 s, 1 % below); what it could not read it reports
  // (GpuEnergy::unread, GpuEnergy::extrapolated), and the error beyond that stays within those
  // spans at up to the power limit. And the spans are worth reporting: some windows with one
  // are off by more than 1 %.
  int unread_windows = 0, off_windows = 0;
  for (std::uint64_t seed : {1, 2, 3, 4}) {
    VirtualRig rig("4xA100,cpus=0,seed=" + std::to_string(seed));
    // The training step with its low phase at 25 % activity: the power model's activity is
    // concave (sim/README.md), so this swings the power by a third, as Load::training() did under
    // the linear model; an unread span can hide a real change.
    const sim::Load deep{1.0, 230ms, 0.75, 0.2};
    for (unsigned g = 0; g < 4; ++g) ASSERT_TRUE(rig.machine->set_load(g, deep));
    EnergyMonitorOptions o;
    o.settle = seed % 2 == 1;
    auto m = rig.monitor(o);
    rig.advance(1500ms);
    std::mt19937_64 rng(seed);
    auto uni = [&](double a, double b) { return std::uniform_real_distribution<double>(a, b)(rng); };
    for (int k = 0; k < 25; ++k) {
      maybe_stall(rig, rng, 350);
      rig.advance(secs(uni(0.1e-3, 0.05)));
      maybe_stall(rig, rng, 350);
      const auto t0 = rig.now();
      ASSERT_TRUE(m->begin_window("w"));
      maybe_stall(rig, rng, 350);
      rig.advance(secs(uni(0.3, 1.5)));
      maybe_stall(rig, rng, 350);
      const auto t1 = rig.now();
      auto r = m->end_window("w");
      ASSERT_TRUE(r);
      rig.advance(300ms);
      const double len = std::chrono::duration<double>(t1 - t0).count();
      for (unsigned g = 0; g < 4; ++g) {
        const double sensor = (*rig.machine->sensor_energy_at(g, t1) - *rig.machine->sensor_energy_at(g, t0)).value();
        const auto& e = r->gpus[g];
        const double err = std::abs(e.energy->value() - sensor);
        const double unseen = e.unread.count() + e.extrapolated.count();
        EXPECT_LE(err, (len >= 1.0 ? 0.005 : 0.01) * sensor + unseen * 400.0)
            << "seed " << seed << " window " << k << " gpu" << g << " unread " << e.unread.count() << " extrapolated "
            << e.extrapolated.count();
        if (o.settle) {
          EXPECT_EQ(e.extrapolated.count(), 0.0);
        }
        if (e.unread.count() > 0) {
          ++unread_windows;
          off_windows += err > 0.01 * sensor ? 1 : 0;
        }
      }
    }
  }
  EXPECT_GT(unread_windows, 0);
  EXPECT_GT(off_windows, 0) << "an unread span can hide a load change: the flag matters";
}

TEST(FollowerStalls, AShortWindowOnAFreshMonitorIsNeverZeroJoules) {
  // The Python training loop's first epoch on a loaded machine: the monitor's follower read the
  // counter once, just after an update, and then starved; the window began 50-62 ms later and
  // lasted 38 ms, all before the counter's next update. Both edges rest on that one value, placed
  // half a period before its read: each was extrapolated past the one-period cap, and the window
  // came out 0 J for ~5 J. It is the power read with the value times the window (flagged: short,
  // extrapolated), within the instant power's noise (2 % here) of the truth.
  int windows = 0;
  for (std::uint64_t seed : {1, 2, 3, 4}) {
    VirtualRig rig("1xA100,cpus=0,seed=" + std::to_string(seed));
    for (double util : {0.3, 0.6, 0.9}) {
      ASSERT_TRUE(rig.machine->set_utilization(0, util));
      rig.advance(300ms);
      for (double delay_ms : {50.0, 53.0, 56.0, 59.0, 62.0}) {
        auto info = rig.machine->sensor_info(0);
        ASSERT_TRUE(info);
        ASSERT_TRUE(rig.machine->advance(info->next_update - rig.now() + 500us));
        const auto next = rig.machine->sensor_info(0)->next_update;
        if (next - rig.now() < secs((delay_ms + 40.0) * 1e-3)) continue;  // the window would see it
        ++windows;
        auto m = rig.monitor();
        m->follow();  // the follower's first read, then nothing: starved
        ASSERT_TRUE(rig.machine->advance(secs(delay_ms * 1e-3)));
        const auto t0 = rig.now();
        ASSERT_TRUE(m->begin_window("epoch0"));
        ASSERT_TRUE(rig.machine->advance(38ms));
        const auto t1 = rig.now();
        auto r = m->end_window("epoch0");
        ASSERT_TRUE(r);
        rig.forget(m.get());
        ASSERT_LT(t1, next) << "no update inside the window";
        rig.advance(300ms);  // the sensor's truth at t1 is known once it updated after it
        const double sensor = (*rig.machine->sensor_energy_at(0, t1) - *rig.machine->sensor_energy_at(0, t0)).value();
        const auto& e = r->gpus[0];
        EXPECT_NEAR(e.energy->value(), sensor, 0.05 * sensor)
            << "seed " << seed << " utilization " << util << " delay " << delay_ms << " ms";
        EXPECT_TRUE(e.short_window);
        EXPECT_NEAR(e.extrapolated.count(), 0.038, 1e-6);
      }
    }
  }
  EXPECT_GT(windows, 30);
}

TEST(FirstWindowRealClock, EnergyOfAFreshMachineLikeErgEnergyDuration03) {
  // `erg --simulate 4xA100 energy --duration 0.3` on a machine created the moment before.
  testing::RealClockRig rig("4xA100,cpus=0");
  auto& machine = *rig.machine;
  auto& clock = *rig.clock;
  auto m = rig.monitor();
  const auto t0 = clock.now();
  ASSERT_TRUE(m->begin_window("erg.energy"));
  std::this_thread::sleep_for(300ms);
  const auto t1 = clock.now();
  auto r = m->end_window("erg.energy");
  ASSERT_TRUE(r);
  std::this_thread::sleep_for(200ms);
  for (unsigned g = 0; g < 4; ++g) {
    const double sensor = (*machine.sensor_energy_at(g, t1) - *machine.sensor_energy_at(g, t0)).value();
    EXPECT_NEAR(r->gpus[g].energy->value(), sensor, 0.01 * sensor) << "gpu" << g;
    const double want = machine.status(g)->mean_power.value() * (1 + machine.sensor_info(g)->gain);
    EXPECT_NEAR(r->gpus[g].energy->value() / r->time.count(), want, 0.015 * want) << "gpu" << g << " average power";
  }
}

}  // namespace
}  // namespace erg::measure
