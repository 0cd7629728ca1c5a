// The sensor zoo soak (issue 30): monitors run for minutes of simulated time on every sensor
// behaviour of sim/README.md's zoo, each breaking an assumption of the estimator, on three seeds:
//  - schedule: large jitter (σ 12 ms, clipped at ±36 ms), a random walk, phase jumps every 5 s,
//    skipped and doubled updates, a period that changes at 5 s;
//  - publication delay (20 ms);
//  - stamps: the update time (trusted), the start of the covered interval, floored to the
//    second, unrelated to either (never trusted);
//  - increments scaled by the nominal period instead of the actual one.
// Under a training load that changes every 0.3-2 s, windows of 0.1, 0.35, 1 and 10 s with random
// edges are measured twice at the same instants: by erg (settled) and by plain differences of
// the values read at the edges (Zeus's method). Each is compared with the GPU's physical energy
// over the window (Machine::physical_energy_at: the model's exact ∫P, not an interpolation of
// the counter). The never-worse rule (docs/measure.md): a window is never worse than the plain
// difference plus a margin of 0.5 % of its energy plus the energy of 8 ms at the GPU's maximum
// power per edge (the follower's bracket of an update: 7σ + 0.6 ms at σ 1 ms); it is checked on
// flagged windows (plain_difference) too. The process must not crash; every schedule change
// injected is relearned, and nothing else more than a stated few times; stamps end trusted only
// where they are update times; windows are flagged only where a schedule was relearned; the
// distributions are printed.
//
// Length: ERG_SOAK_SECONDS of simulated time per behaviour and seed (default 40 in CI; the
// issue's full run is 600: ERG_SOAK_SECONDS=600).

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "virtual_rig.hpp"

namespace erg::measure {
namespace {

using namespace std::chrono_literals;
using std::chrono::nanoseconds;
using testing::VirtualRig;

nanoseconds secs(double s) { return nanoseconds(static_cast<long long>(s * 1e9)); }

double soak_seconds() {
  const char* v = std::getenv("ERG_SOAK_SECONDS");
  return v != nullptr ? std::max(10.0, std::atof(v)) : 40.0;
}

struct Behaviour {
  const char* name;
  const char* fields;         // the GPU object's zoo fields
  double changes_per_second;  // schedule changes injected, each to be relearned (−1: one, at 5 s)
  int max_relearns;           // per GPU and seed, beyond the injected changes (−1: any)
  int stamps;                 // the stamps end trusted (1), not trusted (0), either (−1)
};

const Behaviour kZoo[] = {
    {"jitter_12ms", R"("jitter_ms": 12)", 0, 2, -1},
    {"random_walk", R"("schedule": "random_walk", "jitter_ms": 3)", 0, -1, -1},
    {"phase_jumps", R"("schedule": "phase_jumps", "phase_jump_s": 5)", 0.2, 2, -1},
    {"skips", R"("schedule": "skips", "skip_share": 0.05)", 0, -1, -1},
    {"period_change", R"("schedule": "period_change", "change_at_s": 5)", -1, 2, -1},
    {"publish_delay", R"("publish_delay_ms": 20)", 0, 1, -1},
    {"stamps_update", R"("stamps": "update")", 0, 1, 1},
    {"stamps_interval_start", R"("stamps": "interval_start")", 0, 1, 0},
    {"stamps_floored", R"("stamps": "floored")", 0, 1, 0},
    {"stamps_unrelated", R"("stamps": "unrelated")", 0, 1, 0},
    {"partial_nominal", R"("increment": "partial_nominal", "jitter_ms": 8)", 0, 2, -1},
};

struct Tally {
  std::vector<double> erg, plain;  // |error| against the physical energy, %
  int windows = 0, flagged = 0, worse = 0;
};

double pct(std::vector<double> v, double q) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(q * static_cast<double>(v.size())))];
}

class SensorZoo : public ::testing::TestWithParam<Behaviour> {};

TEST_P(SensorZoo, NeverCrashesRelearnsEveryChangeAndIsNeverWorseThanPlainDifferences) {
  const Behaviour& b = GetParam();
  const double seconds = soak_seconds();
  std::map<double, Tally> by_length;
  int flagged_total = 0;
  std::uint64_t relearns_total = 0;
  for (std::uint64_t seed = 1; seed <= 3; ++seed) {
    const std::string gpu = std::string("{") + R"("sku": "A100", )" + b.fields + "}";
    const std::string gpu2 = std::string("{") + R"("sku": "H100", )" + b.fields + "}";
    VirtualRig rig(R"({"gpus": [)" + gpu + ", " + gpu2 + R"(], "cpus": 0, "seed": )" + std::to_string(seed) + "}");
    if (!rig.machine) return;
    const unsigned n = rig.machine->gpu_count();
    std::vector<double> peak_w(n);
    for (unsigned g = 0; g < n; ++g) peak_w[g] = rig.machine->status(g)->power_limit.value() * 1.1;
    EnergyMonitorOptions o;
    o.settle = true;
    auto erg = rig.monitor(o);
    EnergyMonitorOptions p;
    p.extrapolate_counters = false;
    p.follow_counters = false;
    auto plain = rig.monitor(p);
    std::mt19937_64 rng(seed * 7919);
    auto uni = [&](double a, double c) { return std::uniform_real_distribution<double>(a, c)(rng); };
    const nanoseconds start = rig.now();
    for (unsigned g = 0; g < n; ++g)
      for (nanoseconds t = start; t < start + secs(seconds + 15); t += secs(uni(0.3, 2.0))) {
        const sim::Load load{uni(0.4, 1.0), secs(uni(0.12, 0.4)), uni(0.1, 0.4), uni(0.1, 0.3)};
        rig.at(t, [&rig, g, load] { ASSERT_TRUE(rig.machine->set_load(g, load)); });
      }
    rig.advance(secs(uni(0.5, 3.0)));
    const double lengths[] = {0.1, 0.35, 1.0, 10.0};
    for (int i = 0; rig.now() < start + secs(seconds); ++i) {
      const double length = lengths[i % 4];
      rig.advance(secs(uni(0.05, 0.7)));
      const nanoseconds t0 = rig.now();
      ASSERT_TRUE(erg->begin_window("w"));
      ASSERT_TRUE(plain->begin_window("w"));
      rig.advance(secs(length));
      const nanoseconds t1 = rig.now();
      auto mp = plain->end_window("w");
      auto me = erg->end_window("w");  // settles: the machine runs on to the update after t1
      ASSERT_TRUE(mp && me);
      Tally& tally = by_length[length];
      for (unsigned g = 0; g < n; ++g) {
        auto p0 = rig.machine->physical_energy_at(g, t0), p1 = rig.machine->physical_energy_at(g, t1);
        ASSERT_TRUE(p0 && p1) << p0.error().message;
        const double phys = (*p1 - *p0).value();
        ASSERT_TRUE(me->gpus[g].energy && mp->gpus[g].energy);
        const double e = me->gpus[g].energy->value(), q = mp->gpus[g].energy->value();
        ASSERT_TRUE(std::isfinite(e) && e >= 0.0);
        ++tally.windows;
        // A flagged window (an edge taken as a plain read while the schedule was relearned) is
        // held to the same rule: flagging says why it is coarse, it excuses nothing.
        if (me->gpus[g].plain_difference) ++tally.flagged, ++flagged_total;
        // No update of these honest sensors is taken for a step back hidden by an update.
        EXPECT_EQ(me->gpus[g].counter_shortfalls, 0u) << b.name << " seed " << seed << " gpu" << g;
        const double margin = 0.005 * phys + 2.0 * peak_w[g] * 0.008;
        tally.erg.push_back(100.0 * std::abs(e - phys) / phys);
        tally.plain.push_back(100.0 * std::abs(q - phys) / phys);
        if (std::abs(e - phys) > std::abs(q - phys) + margin) {
          ++tally.worse;
          ADD_FAILURE() << b.name << " seed " << seed << ", " << length << " s window at "
                        << std::chrono::duration<double>(t0 - start).count() << " s, gpu" << g << ": erg " << e
                        << " J, plain " << q << " J, physical " << phys << " J (margin " << margin << " J)";
        }
      }
    }
    // Every injected schedule change was relearned (and a steady schedule was not dropped for
    // nothing more than a handful of times).
    for (unsigned g = 0; g < n; ++g) {
      auto s = erg->counter_schedule(g);
      ASSERT_TRUE(s);
      // Locked at the end (or, where changes keep coming, relearning the latest one).
      EXPECT_TRUE(s->locked || (b.changes_per_second > 0 && s->relearning))
          << b.name << " seed " << seed << " gpu" << g << ": the schedule is locked at the end";
      // Injected changes: phase jumps every 5 s from creation (the last may fall after the last
      // window, and the first before the lock), the period change at 5 s.
      const double changes = b.changes_per_second < 0 ? 1.0 : std::floor(b.changes_per_second * (seconds + 3.0) - 1e-9);
      const double relearns = static_cast<double>(s->relearns);
      relearns_total += s->relearns;
      EXPECT_GE(relearns, b.changes_per_second < 0 ? 1.0 : changes - 1.0) << b.name << " seed " << seed << " gpu" << g;
      if (b.max_relearns >= 0) {
        EXPECT_LE(relearns, (b.changes_per_second != 0 ? changes : 0.0) + b.max_relearns)
            << b.name << " seed " << seed << " gpu" << g << ": relearned without a change";
      }
      if (b.changes_per_second < 0) {
        const double after = static_cast<double>(rig.machine->sensor_info(g)->period_after.count());
        EXPECT_NEAR(static_cast<double>(s->period.count()), after, 0.005 * after) << b.name << " gpu" << g;
      }
      if (b.stamps >= 0) {
        EXPECT_EQ(s->stamps_are_update_times.value_or(false), b.stamps == 1)
            << b.name << " seed " << seed << " gpu" << g << ": whether stamps are trusted";
      }
      std::printf(
          "%s seed %llu gpu%u: relearns %llu, outliers %llu, period %.3f ms, jitter %.3f ms, stamps %s\n", b.name,
          static_cast<unsigned long long>(seed), g, static_cast<unsigned long long>(s->relearns),
          static_cast<unsigned long long>(s->outliers), s->period.count() * 1e-6, s->jitter.count() * 1e-6,
          s->stamps_are_update_times ? (*s->stamps_are_update_times ? "update times" : "ignored") : "undecided");
    }
  }
  // Windows are flagged only while a schedule is relearned: none where nothing was, some where
  // the schedule jumps.
  if (relearns_total == 0) {
    EXPECT_EQ(flagged_total, 0) << b.name;
  }
  if (b.changes_per_second > 0) {
    EXPECT_GT(flagged_total, 0) << b.name;
  }
  for (const auto& [length, t] : by_length)
    std::printf(
        "%s %5.2f s: %d windows, %d flagged plain, %d worse than plain + margin; |error| vs physical: "
        "erg median %.2f %% p95 %.2f %% max %.2f %%, plain median %.2f %% p95 %.2f %% max %.2f %%\n",
        b.name, length, t.windows, t.flagged, t.worse, pct(t.erg, 0.5), pct(t.erg, 0.95), pct(t.erg, 1.0),
        pct(t.plain, 0.5), pct(t.plain, 0.95), pct(t.plain, 1.0));
}

INSTANTIATE_TEST_SUITE_P(Zoo, SensorZoo, ::testing::ValuesIn(kZoo),
                         [](const ::testing::TestParamInfo<Behaviour>& i) { return std::string(i.param.name); });

}  // namespace
}  // namespace erg::measure
