// EnergyMonitor and PowerMonitor against the simulated machine's true energy: the production
// NVML and RAPL paths over the simulated driver (dlopen) and powercap tree.

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <thread>

#include "erg/backends/nvml/discovery.hpp"
#include "erg/backends/rapl/discovery.hpp"
#include "erg/measure/energy_monitor.hpp"
#include "erg/measure/power_monitor.hpp"
#include "erg/sim/machine.hpp"
#include "erg/sim/spec.hpp"

namespace erg::measure {
namespace {

using std::chrono::milliseconds;

struct SimGpus {
  std::unique_ptr<sim::Machine> machine;
  std::vector<std::shared_ptr<Gpu>> gpus;
  std::vector<std::shared_ptr<Cpu>> cpus;

  explicit SimGpus(const std::string& spec, bool virtual_clock) {
    auto m = sim::Machine::create_temp(*sim::parse_spec(spec));
    EXPECT_TRUE(m) << m.error().message;
    machine = std::move(*m);
    machine->use_virtual_clock(virtual_clock);
    EXPECT_TRUE(machine->export_env());
    nvml::DiscoveryOptions opts;
    opts.cuda_visible_devices = std::optional<std::string>();
    auto found = nvml::discover(opts);
    EXPECT_TRUE(found) << found.error().message;
    gpus = found->gpus;
    rapl::DiscoveryOptions ro;
    ro.root = machine->powercap_root();
    cpus = rapl::discover(ro).cpus;
  }
  double truth(unsigned gpu) { return machine->true_energy(gpu)->value(); }
  void advance(milliseconds d) { ASSERT_TRUE(machine->advance(d)); }
  void util(unsigned gpu, double u) { ASSERT_TRUE(machine->set_utilization(gpu, u)); }
};

// --- exact windows on a virtual clock ------------------------------------------------------

TEST(SimWindows, SerialNestedOverlappingAreExactOnVirtualClock) {
  SimGpus sim("2xA100,cpus=1", /*virtual_clock=*/true);
  sim::MachineClock clock(*sim.machine);
  EnergyMonitorOptions o;
  o.clock = &clock;
  auto m = *EnergyMonitor::create(sim.gpus, sim.cpus, o);
  sim.util(0, 0.5);
  sim.util(1, 1.0);
  sim.advance(milliseconds(250));

  std::map<std::string, std::array<double, 2>> start;
  auto begin = [&](const std::string& n) {
    start[n] = {sim.truth(0), sim.truth(1)};
    ASSERT_TRUE(m->begin_window(n));
  };
  auto end_and_check = [&](const std::string& n) {
    auto r = m->end_window(n);
    ASSERT_TRUE(r) << r.error().message;
    for (unsigned g = 0; g < 2; ++g) {
      double want = sim.truth(g) - start[n][g];
      // The counter is whole mJ and power whole mW: 5 mJ covers both edges.
      EXPECT_NEAR(r->gpus[g].energy.value(), want, 0.005) << n << " gpu" << g;
      EXPECT_EQ(r->gpus[g].source, EnergySource::kCounter);
      EXPECT_FALSE(r->gpus[g].affected);
    }
  };
  begin("outer");
  sim.advance(milliseconds(330));
  sim.util(0, 0.9);                // the load changes inside the window...
  sim.advance(milliseconds(410));  // ...and is steady for more than one counter period before the next edge
  begin("inner");
  sim.advance(milliseconds(520));
  begin("overlap");
  sim.advance(milliseconds(370));
  end_and_check("inner");  // ends while "overlap" is open
  sim.util(1, 0.2);
  sim.advance(milliseconds(1230));
  end_and_check("overlap");
  end_and_check("outer");
  begin("serial");
  sim.advance(milliseconds(1000));
  end_and_check("serial");
}

TEST(SimWindows, ErrorsCancelRestartAndThreadsOnVirtualClock) {
  SimGpus sim("2xA100,cpus=1", true);
  sim::MachineClock clock(*sim.machine);
  EnergyMonitorOptions o;
  o.clock = &clock;
  auto m = *EnergyMonitor::create(sim.gpus, sim.cpus, o);
  sim.util(0, 0.7);
  sim.advance(milliseconds(300));

  ASSERT_TRUE(m->begin_window("a"));
  auto dup = m->begin_window("a");
  ASSERT_FALSE(dup);
  EXPECT_EQ(dup.error().message, "Measurement window 'a' already exists");
  auto unknown = m->end_window("b");
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error().message, "Measurement window 'b' does not exist");

  sim.advance(milliseconds(500));
  ASSERT_TRUE(m->cancel_window("a"));
  EXPECT_FALSE(m->end_window("a"));

  ASSERT_TRUE(m->begin_window("r"));
  sim.advance(milliseconds(2000));
  double t0 = sim.truth(0);
  ASSERT_TRUE(m->restart_window("r"));  // the first 2 s are dropped
  sim.advance(milliseconds(1000));
  auto r = m->end_window("r");
  ASSERT_TRUE(r);
  EXPECT_NEAR(r->time.count(), 1.0, 1e-9);
  EXPECT_NEAR(r->gpus[0].energy.value(), sim.truth(0) - t0, 0.005);

  // Eight threads begin and end their own windows while the clock moves.
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        std::string name = "t" + std::to_string(t);
        if (!m->begin_window(name)) ++failures;
        auto e = m->end_window(name);
        if (!e || e->gpus[0].energy.value() < 0 || e->gpus.size() != 2) ++failures;
      }
    });
  }
  for (int i = 0; i < 20; ++i) sim.advance(milliseconds(10));
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_TRUE(m->open_windows().empty());
}

TEST(SimWindows, CounterResetAndBackwardsMidWindow) {
  SimGpus sim("2xA100,cpus=0", true);
  sim::MachineClock clock(*sim.machine);
  EnergyMonitorOptions o;
  o.clock = &clock;
  auto m = *EnergyMonitor::create(sim.gpus, {}, o);
  sim.util(0, 1.0);
  sim.util(1, 1.0);
  sim.advance(milliseconds(5000));

  ASSERT_TRUE(m->begin_window("reset"));
  sim.advance(milliseconds(600));
  ASSERT_TRUE(sim.machine->reset_energy_counter(0));  // driver reload on GPU 0
  sim.advance(milliseconds(600));
  auto r = m->end_window("reset");
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->gpus[0].affected);
  EXPECT_GE(r->gpus[0].energy.value(), 0.0);
  EXPECT_FALSE(r->gpus[1].affected);
  EXPECT_TRUE(r->affected());

  ASSERT_TRUE(m->begin_window("backwards"));
  sim.advance(milliseconds(600));
  ASSERT_TRUE(sim.machine->energy_counter_backwards(1, MilliJoules(2'000'000.0)));
  sim.advance(milliseconds(600));
  auto b = m->end_window("backwards");
  ASSERT_TRUE(b);
  EXPECT_TRUE(b->gpus[1].affected);
  EXPECT_GE(b->gpus[1].energy.value(), 0.0);
  EXPECT_FALSE(b->gpus[0].affected);
}

// --- fidelity on the real clock under varying load ------------------------------------------

/// A training-like load: iterations of random utilization and length inside the window; the
/// last iteration runs until the window ends (the caller synchronizes before ending a window,
/// so the GPU is busy right up to the edge), and the GPU idles between windows.
void training_load(SimGpus& sim, unsigned gpu, std::mt19937& rng, double seconds) {
  std::uniform_real_distribution<double> util(0.2, 1.0);
  std::uniform_int_distribution<int> step_ms(40, 160);
  auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() + milliseconds(300) < end) {
    sim.util(gpu, util(rng));
    std::this_thread::sleep_for(milliseconds(step_ms(rng)));
  }
  sim.util(gpu, 0.85);
  std::this_thread::sleep_until(end);
}

void fidelity(const std::string& spec, double tolerance, EnergySource want_source) {
  SimGpus sim(spec, /*virtual_clock=*/false);
  EnergyMonitorOptions o;
  auto monitor = EnergyMonitor::create(sim.gpus, {}, o);
  ASSERT_TRUE(monitor) << monitor.error().message;
  auto& m = **monitor;
  std::mt19937 rng(42);
  sim.util(0, 0.0);
  std::this_thread::sleep_for(milliseconds(250));
  for (double seconds : {1.0, 1.4, 2.0}) {
    double t0 = sim.truth(0);
    ASSERT_TRUE(m.begin_window("w"));
    training_load(sim, 0, rng, seconds);
    auto r = m.end_window("w");
    double truth = sim.truth(0) - t0;
    sim.util(0, 0.0);
    ASSERT_TRUE(r) << r.error().message;
    ASSERT_GE(r->time.count(), 1.0);
    EXPECT_EQ(r->gpus[0].source, want_source);
    double err = (r->gpus[0].energy.value() - truth) / truth;
    std::cout << spec << " window " << r->time.count() << " s: measured " << r->gpus[0].energy.value() << " J, true "
              << truth << " J, error " << 100 * err << " %\n";
    EXPECT_LE(std::abs(err), tolerance) << "window of " << r->time.count() << " s";
    std::this_thread::sleep_for(milliseconds(250));
  }
  // A window shorter than two counter periods (100 ms on the A100) is flagged.
  if (want_source == EnergySource::kCounter) {
    ASSERT_TRUE(m.begin_window("short"));
    std::this_thread::sleep_for(milliseconds(120));
    auto s = m.end_window("short");
    ASSERT_TRUE(s);
    EXPECT_TRUE(s->gpus[0].short_window);
  }
}

TEST(SimFidelity, CounterWindowsOnA100WithinOnePercent) { fidelity("1xA100,cpus=0", 0.01, EnergySource::kCounter); }

TEST(SimFidelity, IntegratedWindowsOnP100WithinTwoPercent) {
  fidelity("1xP100,cpus=0", 0.02, EnergySource::kIntegrated);
}

// --- PowerMonitor ------------------------------------------------------------------------

TEST(SimPowerMonitor, InfersUpdatePeriodPerModel) {
  SimGpus sim("1xA100,1xV100,cpus=0", false);
  auto a100 = infer_update_period(*sim.gpus[0]);
  auto v100 = infer_update_period(*sim.gpus[1]);
  ASSERT_TRUE(a100 && v100);
  EXPECT_NEAR(static_cast<double>(a100->count()), 100'000.0, 2'000.0);
  EXPECT_NEAR(static_cast<double>(v100->count()), 20'000.0, 2'000.0);
  // Half the fastest model's period, as Zeus: sampling twice per update sees every change.
  auto period = infer_sampling_period(sim.gpus);
  EXPECT_NEAR(static_cast<double>(period.count()), 10'000.0, 1'000.0);
}

TEST(SimPowerMonitor, ConstantPowerEnergyIsPowerTimesTime) {
  SimGpus sim("2xA100,cpus=0", false);
  sim.util(0, 0.6);
  sim.util(1, 0.3);
  std::this_thread::sleep_for(milliseconds(250));  // let the sensors show the new power
  PowerMonitorOptions o;
  o.period = milliseconds(20);
  auto pm = *PowerMonitor::create(sim.gpus, {}, o);
  std::this_thread::sleep_for(milliseconds(300));
  auto t0 = SteadyClock::instance().now();
  std::this_thread::sleep_for(milliseconds(1000));
  auto t1 = SteadyClock::instance().now();
  for (unsigned g = 0; g < 2; ++g) {
    double p = sim.machine->status(g)->power.value();
    auto e = pm->gpu_energy(g, PowerDomain::kDeviceInstant, t0, t1);
    ASSERT_TRUE(e);
    double want = p * std::chrono::duration<double>(t1 - t0).count();
    EXPECT_NEAR(e->value(), want, 0.01 * want) << "gpu" << g;
    auto latest = pm->gpu_power(g);
    ASSERT_TRUE(latest);
    EXPECT_NEAR(latest->value(), p, 0.01 * p);
  }
}

TEST(SimPowerMonitor, LostGpuDoesNotStopTheOthers) {
  SimGpus sim("3xA100,cpus=1", false);
  PowerMonitorOptions o;
  o.period = milliseconds(10);
  auto pm = *PowerMonitor::create(sim.gpus, sim.cpus, o);
  std::this_thread::sleep_for(milliseconds(100));
  ASSERT_TRUE(sim.machine->set_lost(1, true));
  auto rounds = pm->rounds();
  std::this_thread::sleep_for(milliseconds(200));
  EXPECT_GT(pm->rounds(), rounds + 5);
  auto errors = pm->errors();
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].device, "gpu1");
  EXPECT_EQ(errors[0].error.code, ErrorCode::kGpuLost);
  sim.util(0, 1.0);
  sim.util(2, 1.0);
  std::this_thread::sleep_for(milliseconds(250));
  for (unsigned g : {0u, 2u}) EXPECT_GT(pm->gpu_power(g)->value(), 200.0) << "gpu" << g << " still sampled";
  EXPECT_TRUE(pm->cpu_power(0, CpuDomain::kPackage));
}

TEST(SimPowerMonitor, MemoryIsBoundedByMaxSamples) {
  SimGpus sim("2xV100,cpus=1", false);
  PowerMonitorOptions o;
  o.period = milliseconds(2);
  o.max_samples = 32;
  auto pm = *PowerMonitor::create(sim.gpus, sim.cpus, o);
  std::mt19937 rng(1);
  for (int i = 0; i < 40; ++i) {  // a changing load so samples are not deduplicated away
    sim.util(i % 2, std::uniform_real_distribution<double>(0, 1)(rng));
    std::this_thread::sleep_for(milliseconds(21));
  }
  // 2 GPUs × 1 domain + package + DRAM = 4 series of at most 32 samples.
  EXPECT_LE(pm->stored_samples(), 4u * 32u);
  EXPECT_GE(pm->stored_samples(), 3u * 32u);
}

}  // namespace
}  // namespace erg::measure
