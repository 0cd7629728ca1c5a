// The profiling algorithm over a scripted Meter on a virtual clock: each iteration of the target
// moves the clock by a fixed time, a trial's energy comes from a script, and cooldowns move the
// clock instead of sleeping (so the default 10 s cooldowns cost nothing).

#include "erg/optimizers/profile/profile.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

namespace erg::profile {
namespace {

using namespace std::chrono_literals;

struct Rig {
  VirtualClock clock;
  std::chrono::nanoseconds iteration = 10ms;
  std::vector<std::string> events;  // "sync", "temp", "begin", "end", "cancel", "sleep:<ms>", "iter"
  std::uint64_t iterations = 0;
  std::uint64_t window_start = 0;
  std::chrono::nanoseconds window_begin{0};
  // Energy per iteration of the k-th window (the last value repeats).
  std::vector<double> energy_per_iter = {1.0};
  std::size_t windows = 0;
  double temperature = 50.0;

  Target target() {
    return [this] {
      ++iterations;
      clock.advance(iteration);
      if (events.empty() || events.back() != "iter") events.emplace_back("iter");
    };
  }
  Meter meter() {
    Meter m;
    m.sync = [this] {
      events.emplace_back("sync");
      return ok();
    };
    m.begin_window = [this] {
      events.emplace_back("begin");
      window_start = iterations;
      window_begin = clock.now();
      return ok();
    };
    m.end_window = [this]() -> Result<WindowReading> {
      events.emplace_back("end");
      const double e = energy_per_iter[std::min(windows, energy_per_iter.size() - 1)];
      ++windows;
      return WindowReading{Seconds(clock.now() - window_begin),
                           Joules(e * static_cast<double>(iterations - window_start))};
    };
    m.cancel_window = [this] { events.emplace_back("cancel"); };
    m.temperature = [this]() -> Result<double> {
      events.emplace_back("temp");
      temperature += 1.0;
      return temperature;
    };
    return m;
  }
  Environment env() {
    Environment e;
    e.clock = &clock;
    return e;
  }
};

TEST(Profile, CalibrationTimesTheIterationsBetweenTwoSyncs) {
  Rig rig;
  auto d = calibrate_iteration_duration(rig.target(), rig.meter(), 3, 20, rig.env());
  ASSERT_TRUE(d) << d.error().message;
  EXPECT_NEAR(d->count(), 0.010, 1e-12);
  EXPECT_EQ(rig.iterations, 23u);
  EXPECT_EQ(rig.events, (std::vector<std::string>{"iter", "sync", "iter", "sync"}));
}

TEST(Profile, MeasureRunsOneTrialInZeusOrder) {
  Rig rig;
  const auto t0 = rig.clock.now();
  auto r = measure(rig.target(), rig.meter(), 1s, 5s, MeasureOptions{4, 10, std::nullopt}, rig.env());
  ASSERT_TRUE(r) << r.error().message;
  // calibration (4 warm-up + 10), then the trial: cooldown, 4 warm-up iterations, sync, temperature,
  // the window over ceil(1 s / 10 ms) = 100 iterations, temperature.
  EXPECT_EQ(rig.events, (std::vector<std::string>{"iter", "sync", "iter", "sync", "iter", "sync", "temp", "begin",
                                                  "iter", "end", "temp"}));
  EXPECT_EQ(r->iterations, 100u);
  EXPECT_EQ(rig.iterations, 4u + 10u + 4u + 100u);
  EXPECT_NEAR(r->total_time.count(), 1.0, 1e-9);
  EXPECT_NEAR(r->time_per_iter.count(), 0.010, 1e-12);
  EXPECT_NEAR(r->total_energy.value(), 100.0, 1e-9);
  EXPECT_NEAR(r->energy_per_iter.value(), 1.0, 1e-12);
  EXPECT_EQ(r->temperature_before, 51.0);
  EXPECT_EQ(r->temperature_after, 52.0);
  // The cooldown moved the virtual clock by 5 s: nothing slept.
  EXPECT_NEAR(Seconds(rig.clock.now() - t0).count(), 5.0 + 0.01 * 118, 1e-9);
}

TEST(Profile, WarmupSettleDurationReplacesTheWarmupIterations) {
  Rig rig;
  auto r = measure(rig.target(), rig.meter(), 0.5s, 0s, MeasureOptions{2, 10, Seconds(0.095)}, rig.env());
  ASSERT_TRUE(r) << r.error().message;
  // 2 + 10 for calibration; ceil(95 ms / 10 ms) = 10 warm-up iterations; 50 in the window.
  EXPECT_EQ(rig.iterations, 12u + 10u + 50u);
  EXPECT_EQ(measure(rig.target(), rig.meter(), 1s, 0s, MeasureOptions{2, 10, Seconds(-1.0)}, rig.env()).error().code,
            ErrorCode::kInvalidArgument);
}

TEST(Profile, ShortWindowsStillRunOneIteration) {
  Rig rig;
  rig.iteration = 2s;
  auto r = measure(rig.target(), rig.meter(), 0.1s, 0s, MeasureOptions{0, 1, std::nullopt}, rig.env());
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->iterations, 1u);
}

TEST(Profile, StableTrialsAreValidAndSpreadOnesAreNot) {
  Rig rig;
  SweepOptions o;
  o.num_trials = 3;
  o.num_warmup_trials = 0;
  o.iteration_duration = Seconds(0.01);
  // Two swept values of three trials each: 1.000, 1.002, 1.004 J (std 0.002 J) then 1, 2, 3 J (std 1 J).
  rig.energy_per_iter = {1.000, 1.002, 1.004, 1.0, 2.0, 3.0};
  auto r = profile_measurement_duration(rig.target(), rig.meter(), {1s, 2s}, 0s, o, rig.env());
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->entries.size(), 2u);
  EXPECT_NEAR(r->entries[0].energy_mean.value(), 1.002, 1e-12);
  EXPECT_NEAR(r->entries[0].energy_std.value(), 0.002, 1e-12);
  EXPECT_TRUE(r->entries[0].is_valid);
  EXPECT_NEAR(r->entries[1].energy_mean.value(), 2.0, 1e-12);
  EXPECT_NEAR(r->entries[1].energy_std.value(), 1.0, 1e-12);  // sample (n − 1) standard deviation
  EXPECT_FALSE(r->entries[1].is_valid);
  EXPECT_EQ(r->entries[1].trials.size(), 3u);
  EXPECT_EQ(r->entries[1].trials[0].iterations, 200u);
  EXPECT_NEAR(r->entries[1].avg_total_time.count(), 2.0, 1e-9);
  EXPECT_NEAR(r->entries[1].avg_total_energy.value(), 400.0, 1e-9);
  EXPECT_EQ(r->sweep_name, "measurement_duration");
  EXPECT_EQ(r->fixed_name, "cooldown_duration");
  EXPECT_EQ(r->sweep_values, (std::vector<Seconds>{1s, 2s}));
  EXPECT_NE(to_string(r->entries[0]).find("[VALID]"), std::string::npos);
  const auto text = to_string(*r);
  EXPECT_NE(text.find("Sweep measurement_duration (fixed cooldown_duration=0.0 s):"), std::string::npos);
  EXPECT_NE(text.find("measurement_duration=2.0 s  mean=2.0000 J  std=1.0000 J"), std::string::npos) << text;
  EXPECT_NE(text.find("[INVALID]"), std::string::npos);

  // The threshold is strict: a std equal to it is not valid.
  rig.energy_per_iter = {1.0, 1.01, 1.02};
  rig.windows = 0;
  o.trial_stddev_threshold = Joules(0.01);
  auto edge = profile_measurement_duration(rig.target(), rig.meter(), {1s}, 0s, o, rig.env());
  ASSERT_TRUE(edge);
  EXPECT_NEAR(edge->entries[0].energy_std.value(), 0.01, 1e-9);
  o.trial_stddev_threshold = Joules(0.0100001);
  rig.windows = 0;
  EXPECT_TRUE(profile_measurement_duration(rig.target(), rig.meter(), {1s}, 0s, o, rig.env())->entries[0].is_valid);
}

TEST(Profile, SweepsUseZeusDefaultsAndWarmupTrials) {
  Rig rig;
  SweepOptions o;  // 10 trials, 2 warm-up trials, 10 warm-up iterations, 100 calibration iterations
  auto r = profile_cooldown_duration(rig.target(), rig.meter(), {}, 10s, o, rig.env());
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->sweep_values, default_search_range());
  ASSERT_EQ(r->entries.size(), 10u);
  EXPECT_EQ(r->sweep_name, "cooldown_duration");
  EXPECT_EQ(r->fixed_value, 10s);
  for (std::size_t i = 0; i < 10; ++i) {
    EXPECT_EQ(r->entries[i].cooldown_duration, Seconds(static_cast<double>(i + 1)));
    EXPECT_EQ(r->entries[i].measurement_duration, 10s);
    EXPECT_EQ(r->entries[i].trials.size(), 10u);
  }
  EXPECT_EQ(rig.windows, 2u + 100u);  // 2 warm-up trials, 10 × 10 trials
  // Calibration: 10 + 100; warm-up trials: 1000 each, no warm-up iterations; trials: 10 + 1000.
  EXPECT_EQ(rig.iterations, 110u + 2u * 1000u + 100u * 1010u);
}

TEST(Profile, ProfileParametersFixesEachSweepAtTheOthersMaximum) {
  Rig rig;
  SweepOptions o;
  o.num_trials = 2;
  o.num_warmup_trials = 1;
  o.num_warmup_iterations = 0;
  o.num_calibration_iterations = 5;
  auto r = profile_parameters(rig.target(), rig.meter(), {0.5s, 1s}, {0s, 2s, 1s}, o, rig.env());
  ASSERT_TRUE(r) << r.error().message;
  auto& [m, c] = *r;
  EXPECT_EQ(m.sweep_name, "measurement_duration");
  EXPECT_EQ(m.fixed_value, 2s);  // the largest cooldown
  EXPECT_EQ(c.sweep_name, "cooldown_duration");
  EXPECT_EQ(c.fixed_value, 1s);  // the largest window
  EXPECT_EQ(c.sweep_values, (std::vector<Seconds>{0s, 2s, 1s}));
  // One warm-up trial (before the first sweep only), 2 × 2 + 3 × 2 trials.
  EXPECT_EQ(rig.windows, 1u + 4u + 6u);
}

TEST(Profile, DistributedTrialsReduceEnergyTimeAndTemperature) {
  Rig rig;
  Environment env = rig.env();
  // A second rank that used 3 J per iteration, took 1.5× as long and ran 10 °C hotter.
  std::vector<std::pair<double, ReduceOp>> calls;
  env.all_reduce = [&](double v, ReduceOp op) -> Result<double> {
    calls.emplace_back(v, op);
    if (calls.size() == 1) return std::max(v, v * 1.5);  // calibration: the slowest rank
    switch ((calls.size() - 2) % 5) {
      case 0: return v + 3.0 * v;           // energy: summed
      case 1: return std::max(v, v * 1.5);  // time: the slowest rank
      case 2:
      case 3: return v + (v + 10.0);  // temperatures: summed, then divided by the world size
      default: return v + v;          // world size
    }
  };
  auto r = measure(rig.target(), rig.meter(), 1s, 0s, MeasureOptions{0, 10, std::nullopt}, env);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(calls[0].second, ReduceOp::kMax);
  // The calibrated iteration is the slower rank's 15 ms: ceil(1 s / 15 ms) = 67 iterations.
  EXPECT_EQ(r->iterations, 67u);
  EXPECT_NEAR(r->energy_per_iter.value(), 4.0, 1e-9);
  EXPECT_NEAR(r->total_time.count(), 0.67 * 1.5, 1e-9);
  EXPECT_NEAR(r->temperature_before, 56.0, 1e-9);  // (51 + 61) / 2
  EXPECT_NEAR(r->temperature_after, 57.0, 1e-9);
  EXPECT_EQ(calls[1].second, ReduceOp::kSum);
  EXPECT_EQ(calls[2].second, ReduceOp::kMax);
}

TEST(Profile, ATargetThatThrowsLeavesNoWindowOpen) {
  Rig rig;
  int n = 0;
  Target t = [&] {
    rig.clock.advance(10ms);
    if (++n == 30) throw std::runtime_error("boom");
  };
  EXPECT_THROW((void)measure(t, rig.meter(), 1s, 0s, MeasureOptions{0, 10, std::nullopt}, rig.env()),
               std::runtime_error);
  EXPECT_EQ(rig.events.back(), "cancel");
}

TEST(Profile, BadArgumentsAreErrors) {
  Rig rig;
  SweepOptions o;
  o.iteration_duration = Seconds(0.01);
  auto code = [&](const Result<SweepReport>& r) { return r ? ErrorCode::kInternal : r.error().code; };
  o.num_trials = 0;
  EXPECT_EQ(code(profile_measurement_duration(rig.target(), rig.meter(), {1s}, 0s, o, rig.env())),
            ErrorCode::kInvalidArgument);
  o.num_trials = 1;
  EXPECT_EQ(code(profile_measurement_duration(rig.target(), rig.meter(), {0s}, 0s, o, rig.env())),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(code(profile_cooldown_duration(rig.target(), rig.meter(), {Seconds(-1.0)}, 1s, o, rig.env())),
            ErrorCode::kInvalidArgument);
  o.iteration_duration = Seconds(0.0);
  EXPECT_EQ(code(profile_cooldown_duration(rig.target(), rig.meter(), {1s}, 1s, o, rig.env())),
            ErrorCode::kInvalidArgument);
  Meter empty;
  EXPECT_EQ(calibrate_iteration_duration(rig.target(), empty, 1, 1, rig.env()).error().code,
            ErrorCode::kInvalidArgument);
  // A target that takes no time on the clock cannot be calibrated.
  EXPECT_EQ(calibrate_iteration_duration([] {}, rig.meter(), 0, 5, rig.env()).error().code, ErrorCode::kUnavailable);
  // Meter errors come through as they are.
  Meter failing = rig.meter();
  failing.temperature = []() -> Result<double> { return fail(ErrorCode::kNotSupported, "no sensor"); };
  EXPECT_EQ(measure(rig.target(), failing, 1s, 0s, MeasureOptions{0, 1, std::nullopt}, rig.env()).error().code,
            ErrorCode::kNotSupported);
}

}  // namespace
}  // namespace erg::profile
