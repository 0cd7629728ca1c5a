// EnergyMonitor and PowerMonitor against the simulated machine's truths: the production NVML and
// RAPL paths over the simulated driver (dlopen) and powercap tree.
//  - SimWindows: window bookkeeping (nesting, overlap, restart, threads, anomalies) on the virtual
//    clock; exact arithmetic on the ideal model, anomalies on the faithful one.
//  - SimFidelity: the faithful model on the real clock, with the follower on its own thread.
//  - SimPowerMonitor: the sampler against the physical truth.
// The acceptance suite on the faithful model is fidelity_suite_test.cpp; the estimator's
// assumptions broken one by one are in estimator_assumptions_test.cpp.

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <thread>

#include "erg/measure/power_monitor.hpp"
#include "virtual_rig.hpp"

namespace erg::measure {
namespace {

using namespace std::chrono_literals;
using std::chrono::milliseconds;
using testing::VirtualRig;

// --- window bookkeeping on the virtual clock ----------------------------------------------

TEST(SimWindows, SerialNestedOverlappingAreExactOnTheIdealModel) {
  // Ideal model (exact counter, constant power): with the end edges settled, every window equals
  // the true energy to the counter's 1 mJ resolution, whatever the nesting.
  VirtualRig rig("2xA100,cpus=1,ideal");
  EnergyMonitorOptions o;
  o.settle = true;
  auto m = rig.monitor(o);
  ASSERT_TRUE(rig.machine->set_utilization(0, 0.5));
  ASSERT_TRUE(rig.machine->set_utilization(1, 1.0));
  rig.advance(milliseconds(450));

  std::map<std::string, std::array<double, 2>> start;
  auto truth = [&](unsigned g) { return rig.machine->true_energy(g)->value(); };
  auto begin = [&](const std::string& n) {
    start[n] = {truth(0), truth(1)};
    ASSERT_TRUE(m->begin_window(n));
  };
  auto end_and_check = [&](const std::string& n) {
    const double t[2] = {truth(0), truth(1)};
    auto r = m->end_window(n);
    ASSERT_TRUE(r) << r.error().message;
    for (unsigned g = 0; g < 2; ++g) {
      EXPECT_NEAR(r->gpus[g].energy->value(), t[g] - start[n][g], 0.005) << n << " gpu" << g;
      EXPECT_EQ(r->gpus[g].source, EnergySource::kCounter);
      EXPECT_FALSE(r->gpus[g].affected);
      EXPECT_EQ(r->gpus[g].extrapolated.count(), 0.0);
    }
  };
  begin("outer");
  rig.advance(milliseconds(330));
  ASSERT_TRUE(rig.machine->set_utilization(0, 0.9));  // the load changes inside the window...
  rig.advance(milliseconds(410));                     // ...and is steady for a counter period before the next edge
  begin("inner");
  rig.advance(milliseconds(520));
  begin("overlap");
  rig.advance(milliseconds(370));
  end_and_check("inner");  // ends while "overlap" is open
  ASSERT_TRUE(rig.machine->set_utilization(1, 0.2));
  rig.advance(milliseconds(1230));
  end_and_check("overlap");
  end_and_check("outer");
  begin("serial");
  rig.advance(milliseconds(1000));
  end_and_check("serial");
}

TEST(SimWindows, ErrorsCancelRestartAndThreadsOnTheVirtualClock) {
  VirtualRig rig("2xA100,cpus=1,ideal");
  EnergyMonitorOptions o;
  o.settle = true;
  auto m = rig.monitor(o);
  ASSERT_TRUE(rig.machine->set_utilization(0, 0.7));
  rig.advance(milliseconds(300));

  ASSERT_TRUE(m->begin_window("a"));
  auto dup = m->begin_window("a");
  ASSERT_FALSE(dup);
  EXPECT_EQ(dup.error().message, "Measurement window 'a' already exists");
  auto unknown = m->end_window("b");
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error().message, "Measurement window 'b' does not exist");

  rig.advance(milliseconds(500));
  ASSERT_TRUE(m->cancel_window("a"));
  EXPECT_FALSE(m->end_window("a"));

  ASSERT_TRUE(m->begin_window("r"));
  rig.advance(milliseconds(2000));
  const double t0 = rig.machine->true_energy(0)->value();
  ASSERT_TRUE(m->restart_window("r"));  // the first 2 s are dropped
  rig.advance(milliseconds(1000));
  const double t1 = rig.machine->true_energy(0)->value();
  auto r = m->end_window("r");
  ASSERT_TRUE(r);
  EXPECT_NEAR(r->time.count(), 1.0, 1e-9);
  EXPECT_NEAR(r->gpus[0].energy->value(), t1 - t0, 0.005);

  // Eight threads begin and end their own windows while the clock moves (a monitor that does not
  // settle: settling sleeps would move the shared clock from eight threads).
  auto quick = rig.monitor();
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        std::string name = "t" + std::to_string(t);
        if (!quick->begin_window(name)) ++failures;
        auto e = quick->end_window(name);
        if (!e || e->gpus[0].energy->value() < 0 || e->gpus.size() != 2) ++failures;
      }
    });
  }
  for (int i = 0; i < 20; ++i) rig.advance(milliseconds(10));
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_TRUE(quick->open_windows().empty());
}

TEST(SimWindows, CounterResetAndBackwardsMidWindowAreFlagged) {
  VirtualRig rig("2xA100,cpus=0");
  auto m = rig.monitor();
  ASSERT_TRUE(rig.machine->set_utilization(0, 1.0));
  ASSERT_TRUE(rig.machine->set_utilization(1, 1.0));
  rig.advance(milliseconds(5000));

  ASSERT_TRUE(m->begin_window("reset"));
  rig.advance(milliseconds(600));
  ASSERT_TRUE(rig.machine->reset_energy_counter(0));  // driver reload on GPU 0
  rig.advance(milliseconds(600));
  auto r = m->end_window("reset");
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->gpus[0].affected);
  EXPECT_GE(r->gpus[0].energy->value(), 0.0);
  EXPECT_FALSE(r->gpus[1].affected);
  EXPECT_TRUE(r->affected());

  ASSERT_TRUE(m->begin_window("backwards"));
  rig.advance(milliseconds(600));
  ASSERT_TRUE(rig.machine->energy_counter_backwards(1, MilliJoules(2'000'000.0)));
  rig.advance(milliseconds(600));
  auto b = m->end_window("backwards");
  ASSERT_TRUE(b);
  EXPECT_TRUE(b->gpus[1].affected);
  EXPECT_GE(b->gpus[1].energy->value(), 0.0);
  EXPECT_FALSE(b->gpus[0].affected);
}

// --- the faithful model on the real clock -------------------------------------------------

/// A training-like load that changes level, step and ripple at random times, on its own thread.
#if defined(__SANITIZE_THREAD__)
constexpr double kRealClockSlack = 0.02;
#else
constexpr double kRealClockSlack = 0.01;
#endif

class LoadThread {
 public:
  LoadThread(sim::Machine& m, unsigned gpus, std::uint64_t seed)
      : thread_([this, &m, gpus, seed] {
          std::mt19937_64 rng(seed);
          auto uni = [&](double a, double b) { return std::uniform_real_distribution<double>(a, b)(rng); };
          while (!stop_.load()) {
            for (unsigned g = 0; g < gpus; ++g)
              (void)m.set_load(
                  g, sim::Load{uni(0.3, 1.0), std::chrono::nanoseconds(static_cast<long long>(uni(0.12, 0.4) * 1e9)),
                               uni(0.1, 0.4), uni(0.1, 0.3)});
            std::this_thread::sleep_for(std::chrono::duration<double>(uni(0.2, 0.9)));
          }
        }) {}
  ~LoadThread() {
    stop_ = true;
    thread_.join();
  }

 private:
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

TEST(SimFidelity, WindowsEndingWhileAnotherSettlesKeepTheirOwnEdges) {
  // Window "a" ends and settles (up to ~0.1 s, without the monitor's lock); window "b" ends in
  // another thread meanwhile. Each result is its own: its duration and energy are those of its
  // own edges (an end edge kept in state shared between calls would give "a" the end of "b").
  testing::RealClockRig rig("1xA100,cpus=0");
  auto& machine = *rig.machine;
  auto& clock = *rig.clock;
  auto m = rig.monitor();
  sim::Load busy;
  busy.utilization = 0.9;
  ASSERT_TRUE(machine.set_load(0, busy));
  std::this_thread::sleep_for(400ms);
  for (int round = 0; round < 3; ++round) {
    const auto pre_a = clock.now();
    ASSERT_TRUE(m->begin_window("a"));
    const auto pre_b = clock.now();
    ASSERT_TRUE(m->begin_window("b"));
    const auto t0 = clock.now();
    Result<Measurement> ra = fail(ErrorCode::kInternal, "not run"), rb = ra;
    std::chrono::nanoseconds ta{0}, tb{0};
    std::thread other([&] {
      std::this_thread::sleep_for(330ms);  // while "a" settles
      tb = clock.now();
      rb = m->end_window("b");
    });
    std::this_thread::sleep_for(300ms);
    ta = clock.now();
    ra = m->end_window("a");
    other.join();
    ASSERT_TRUE(ra && rb);
    const double want_a = std::chrono::duration<double>(ta - t0).count();
    const double want_b = std::chrono::duration<double>(tb - t0).count();
    EXPECT_NEAR(ra->time.count(), want_a, 0.01) << "round " << round;
    EXPECT_NEAR(rb->time.count(), want_b, 0.01) << "round " << round;
    std::this_thread::sleep_for(250ms);
    // The sensor's energy over the window's own duration, its begin edge placed anywhere between
    // the clock reads around its begin_window (a preempted call can take milliseconds under
    // TSan on a loaded machine); the duration itself is checked against the test's clock above.
    auto own = [&](std::chrono::nanoseconds lo, std::chrono::nanoseconds hi, const Measurement& r) {
      const auto dur = std::chrono::duration_cast<std::chrono::nanoseconds>(r.time);
      auto e = [&](std::chrono::nanoseconds s) {
        return (*machine.sensor_energy_at(0, s + dur) - *machine.sensor_energy_at(0, s)).value();
      };
      return std::pair{std::min(e(lo), e(hi)), std::max(e(lo), e(hi))};
    };
    const auto [sa_lo, sa_hi] = own(pre_a, t0, *ra);
    const auto [sb_lo, sb_hi] = own(pre_b, t0, *rb);
    const double ea = ra->gpus[0].energy->value(), eb = rb->gpus[0].energy->value();
    // On failure, what the monitor knew of the counter's schedule and whether reads were starved
    // (a rare failure on a saturated TSan run is not yet explained: this says which path it took).
    const auto sch = m->counter_schedule(0);
    const auto info = machine.sensor_info(0);
    std::string why = "round " + std::to_string(round);
    if (sch && info)
      why += ": schedule locked " + std::to_string(sch->locked) + ", fitted " + std::to_string(sch->fitted_updates) +
             ", period " + std::to_string(sch->period.count()) + " ns (true " +
             std::to_string(info->energy_period.count()) + "), jitter " + std::to_string(sch->jitter.count()) +
             " ns; unread a " + std::to_string(ra->gpus[0].unread.count()) + " s, b " +
             std::to_string(rb->gpus[0].unread.count()) + " s; begin read over " +
             std::to_string((t0 - pre_a).count()) + " ns";
    EXPECT_GE(ea, sa_lo * 0.98) << why;
    EXPECT_LE(ea, sa_hi * 1.02) << why;
    EXPECT_GE(eb, sb_lo * 0.98) << why;
    EXPECT_LE(eb, sb_hi * 1.02) << why;
    EXPECT_EQ(ra->gpus[0].extrapolated.count(), 0.0);
    EXPECT_EQ(rb->gpus[0].extrapolated.count(), 0.0);
  }
}

TEST(SimFidelity, SettledWindowsOnTheRealClockWithTheFollowerThread) {
  testing::RealClockRig rig("1xA100,1xV100,cpus=0");
  auto& machine = *rig.machine;
  auto& clock = *rig.clock;
  auto m = rig.monitor();  // settled; the follower runs on its own thread
  LoadThread load(machine, 2, 11);
  std::this_thread::sleep_for(300ms);  // the follower locks the schedules meanwhile
  for (double seconds : {1.0, 1.3}) {
    // The begin edge lies between two clock reads around begin_window (µs apart normally; a
    // preempted thread on a loaded machine, under a sanitizer, can take ms), and the end edge
    // exactly the window's time after it: the sensor's figure is bounded by the two extremes.
    const auto t0a = clock.now();
    ASSERT_TRUE(m->begin_window("w"));
    const auto t0b = clock.now();
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
    auto r = m->end_window("w");
    ASSERT_TRUE(r) << r.error().message;
    const auto span = std::chrono::duration_cast<std::chrono::nanoseconds>(r->time);
    std::this_thread::sleep_for(250ms);
    for (unsigned g = 0; g < 2; ++g) {
      auto sensor_from = [&](std::chrono::nanoseconds t0) {
        auto s0 = machine.sensor_energy_at(g, t0), s1 = machine.sensor_energy_at(g, t0 + span);
        EXPECT_TRUE(s0 && s1);
        return s0 && s1 ? (*s1 - *s0).value() : 0.0;
      };
      const double a = sensor_from(t0a), b = sensor_from(t0b);
      const double lo = std::min(a, b), hi = std::max(a, b);
      // The estimator on a real, loaded machine: 0.5 % as on the virtual clock, plus 0.5 % for
      // wake-ups the scheduler delays; under ThreadSanitizer (every access instrumented, reads
      // several times slower) on a loaded machine, 1.5 % for them (1.2 % seen at load average 12).
      const double got = r->gpus[g].energy->value();
      EXPECT_GE(got, lo - kRealClockSlack * lo)
          << "gpu" << g << " window " << seconds << " s, begin read over " << (t0b - t0a).count() << " ns";
      EXPECT_LE(got, hi + kRealClockSlack * hi) << "gpu" << g << " window " << seconds << " s";
      EXPECT_FALSE(r->gpus[g].short_window);
      EXPECT_EQ(r->gpus[g].extrapolated.count(), 0.0);
    }
  }
  // A window shorter than two counter periods is flagged.
  ASSERT_TRUE(m->begin_window("short"));
  std::this_thread::sleep_for(120ms);
  auto s = m->end_window("short");
  ASSERT_TRUE(s);
  auto sch = m->counter_schedule(0);
  ASSERT_TRUE(sch && sch->locked);
  // A loaded machine can oversleep the 120 ms past two periods: the flag follows the window's
  // own duration against the schedule's period.
  const double two_periods = 2.0 * std::chrono::duration<double>(sch->period).count();
  EXPECT_EQ(s->gpus[0].short_window, s->time.count() < two_periods)
      << "window " << s->time.count() << " s, two periods " << two_periods << " s";
  EXPECT_NEAR(static_cast<double>(sch->period.count()),
              static_cast<double>(machine.sensor_info(0)->energy_period.count()), 200e3);
}

TEST(SimFidelity, IntegratedWindowsOnP100) {
  // No energy counter: the PowerMonitor integrates instant power (a 20 ms average with the
  // sensor's gain error, refreshed every ~20 ms). Bound: the gain plus 2 %.
  auto spec = sim::parse_spec("1xP100,cpus=0");
  ASSERT_TRUE(spec);
  auto machine = std::move(*sim::Machine::create_temp(*spec));
  ASSERT_TRUE(machine->export_env());
  nvml::DiscoveryOptions opts;
  opts.cuda_visible_devices = std::optional<std::string>();
  auto gpus = nvml::discover(opts)->gpus;
  auto m = *EnergyMonitor::create(gpus, {}, EnergyMonitorOptions{});
  ASSERT_NE(m->power_monitor(), nullptr);
  LoadThread load(*machine, 1, 5);
  std::this_thread::sleep_for(250ms);
  const double gain = std::abs(machine->sensor_info(0)->gain);
  for (double seconds : {1.0, 1.5}) {
    const double e0 = machine->true_energy(0)->value();
    ASSERT_TRUE(m->begin_window("w"));
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
    auto r = m->end_window("w");
    const double truth = machine->true_energy(0)->value() - e0;
    ASSERT_TRUE(r);
    EXPECT_EQ(r->gpus[0].source, EnergySource::kIntegrated);
    EXPECT_NEAR(r->gpus[0].energy->value(), truth, (gain + 0.02) * truth);
  }
}

// --- PowerMonitor ------------------------------------------------------------------------

TEST(SimPowerMonitor, InfersUpdatePeriodPerModel) {
  auto machine = std::move(*sim::Machine::create_temp(*sim::parse_spec("1xA100,1xV100,cpus=0")));
  ASSERT_TRUE(machine->export_env());
  nvml::DiscoveryOptions opts;
  opts.cuda_visible_devices = std::optional<std::string>();
  auto gpus = nvml::discover(opts)->gpus;
  auto a100 = infer_update_period(*gpus[0]);
  auto v100 = infer_update_period(*gpus[1]);
  ASSERT_TRUE(a100 && v100);
  // Each update lands within ±3σ of its schedule, so an interval between two is the period
  // ± 6σ; the shortest seen is in that range, plus two read brackets of at most 1.5 ms each
  // when values, not stamps, mark the updates (the V100's power has no stamps). σ is drawn per
  // device (0.1–1 % of the period), so the bound is the device's own.
  auto bounds = [&](unsigned g) {
    auto info = machine->sensor_info(g);
    const double p = static_cast<double>(info->power_period.count()) / 1e3;
    const double six_sigma = 6.0 * static_cast<double>(info->power_jitter.count()) / 1e3;
    return std::pair{p - six_sigma - 1500.0, p + six_sigma + 1500.0};
  };
  const auto [a_lo, a_hi] = bounds(0);
  const auto [v_lo, v_hi] = bounds(1);
  EXPECT_NEAR((a_lo + a_hi) / 2, 100'000.0, 100.0);  // the A100's nominal period, 100 ms
  EXPECT_NEAR((v_lo + v_hi) / 2, 20'000.0, 20.0);    // the V100's, 20 ms
  EXPECT_GE(static_cast<double>(a100->count()), a_lo);
  EXPECT_LE(static_cast<double>(a100->count()), a_hi);
  EXPECT_GE(static_cast<double>(v100->count()), v_lo);
  EXPECT_LE(static_cast<double>(v100->count()), v_hi);
  // Half the fastest model's period, as Zeus: sampling twice per update sees every change.
  auto period = infer_sampling_period(gpus);
  EXPECT_GE(static_cast<double>(period.count()), v_lo / 2);
  EXPECT_LE(static_cast<double>(period.count()), v_hi / 2);
}

TEST(SimPowerMonitor, EnergyMatchesTheTruthWithinTheSensorsError) {
  auto machine = std::move(*sim::Machine::create_temp(*sim::parse_spec("2xV100,cpus=0")));
  ASSERT_TRUE(machine->export_env());
  nvml::DiscoveryOptions opts;
  opts.cuda_visible_devices = std::optional<std::string>();
  auto gpus = nvml::discover(opts)->gpus;
  ASSERT_TRUE(machine->set_utilization(0, 0.6));
  ASSERT_TRUE(machine->set_utilization(1, 0.3));
  std::this_thread::sleep_for(250ms);  // let the sensors show the new power
  PowerMonitorOptions o;
  o.period = milliseconds(10);
  auto pm = *PowerMonitor::create(gpus, {}, o);
  std::this_thread::sleep_for(300ms);
  const auto t0 = SteadyClock::instance().now();
  const double e0[2] = {machine->true_energy(0)->value(), machine->true_energy(1)->value()};
  std::this_thread::sleep_for(1000ms);
  const auto t1 = SteadyClock::instance().now();
  const double e1[2] = {machine->true_energy(0)->value(), machine->true_energy(1)->value()};
  for (unsigned g = 0; g < 2; ++g) {
    auto e = pm->gpu_energy(g, PowerDomain::kDeviceInstant, t0, t1);
    ASSERT_TRUE(e);
    const double truth = e1[g] - e0[g];
    const double gain = machine->sensor_info(g)->gain;
    EXPECT_NEAR(e->value(), truth * (1 + gain), 0.01 * truth) << "gpu" << g;
    auto latest = pm->gpu_power(g);
    ASSERT_TRUE(latest);
    const double mean = machine->status(g)->mean_power.value();
    EXPECT_NEAR(latest->value(), mean * (1 + gain), 0.04 * mean);
  }
}

TEST(SimPowerMonitor, LostGpuDoesNotStopTheOthers) {
  auto machine = std::move(*sim::Machine::create_temp(*sim::parse_spec("3xA100,cpus=1")));
  ASSERT_TRUE(machine->export_env());
  nvml::DiscoveryOptions opts;
  opts.cuda_visible_devices = std::optional<std::string>();
  auto gpus = nvml::discover(opts)->gpus;
  rapl::DiscoveryOptions ro;
  ro.root = machine->powercap_root();
  auto cpus = rapl::discover(ro).cpus;
  PowerMonitorOptions o;
  o.period = milliseconds(10);
  auto pm = *PowerMonitor::create(gpus, cpus, o);
  std::this_thread::sleep_for(milliseconds(100));
  ASSERT_TRUE(machine->set_lost(1, true));
  auto rounds = pm->rounds();
  std::this_thread::sleep_for(milliseconds(200));
  EXPECT_GT(pm->rounds(), rounds + 5);
  auto errors = pm->errors();
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].device, "gpu1");
  EXPECT_EQ(errors[0].error.code, ErrorCode::kGpuLost);
  ASSERT_TRUE(machine->set_utilization(0, 1.0));
  ASSERT_TRUE(machine->set_utilization(2, 1.0));
  std::this_thread::sleep_for(milliseconds(250));
  for (unsigned g : {0u, 2u}) EXPECT_GT(pm->gpu_power(g)->value(), 200.0) << "gpu" << g << " still sampled";
  EXPECT_TRUE(pm->cpu_power(0, CpuDomain::kPackage));
}

}  // namespace
}  // namespace erg::measure

namespace erg::measure {
namespace {

TEST(SimPowerMonitorStamps, StampsAreUsedOnlyOnceTheyAgreeWithTheReadsAndNeverMoreThanAPeriodBack) {
  // Three A100s whose power fields are stamped with the update time, with the start of the
  // interval the value covers, and with the update time of a value readable only 20 ms after it.
  // Sampled every 10 ms on the virtual clock (a read takes no time there, so each sample's read
  // time is known exactly). Only the first GPU's stamps agree with the reads (a new value's stamp
  // lies between the read before it and its own read): its samples are backdated to the update,
  // by less than the update period; the others are stamped with their read times. No timeline
  // runs backwards.
  testing::VirtualRig rig(
      R"({"gpus": [{"sku": "A100", "stamps": "update"}, {"sku": "A100", "stamps": "interval_start"},)"
      R"( {"sku": "A100", "stamps": "update", "publish_delay_ms": 20}], "cpus": 0, "seed": 3})");
  for (unsigned g = 0; g < 3; ++g) ASSERT_TRUE(rig.machine->set_load(g, sim::Load::training(0.9)));
  PowerMonitorOptions o;
  o.clock = rig.clock.get();
  o.start_thread = false;
  o.period = std::chrono::milliseconds(10);
  o.cpus = false;
  auto pm = PowerMonitor::create(rig.gpus, {}, o);
  ASSERT_TRUE(pm) << pm.error().message;
  std::vector<std::chrono::nanoseconds> reads;
  const auto t0 = rig.now();
  for (int i = 0; i < 300; ++i) {
    rig.advance(std::chrono::milliseconds(10));
    reads.push_back(rig.now());
    (*pm)->sample_once();
  }
  const auto period = std::chrono::nanoseconds(*rig.gpus[0]->capabilities().power_update_period);
  for (unsigned g = 0; g < 3; ++g) {
    auto points = (*pm)->gpu_timeline(g, PowerDomain::kDeviceInstant, t0, rig.now());
    ASSERT_TRUE(points) << points.error().message;
    ASSERT_GT(points->size(), 20u) << "gpu" << g;
    int backdated = 0;
    for (std::size_t i = 0; i < points->size(); ++i) {
      const auto t = (*points)[i].time;
      if (i > 0) {
        EXPECT_GE(t, (*points)[i - 1].time) << "gpu" << g << ": the timeline runs backwards";
      }
      // The read that gave the sample: the first read at or after its time.
      const auto read = *std::lower_bound(reads.begin(), reads.end(), t);
      EXPECT_LE(read - t, period) << "gpu" << g << ": backdated by more than the update period";
      if (read != t) ++backdated;
    }
    if (g == 0) {
      EXPECT_GT(backdated, static_cast<int>(points->size()) / 2) << "update-time stamps are used";
    } else {
      EXPECT_EQ(backdated, 0) << "gpu" << g << ": stamps that disagree with the reads are not used";
    }
  }
}

}  // namespace
}  // namespace erg::measure
