// `erg simulate load --share`: the load runs as a GPU process of the simulated machine — listed by
// the simulated driver under its real pid with its share, sampled, and gone when it exits (or is
// killed). Waits are bounded.

#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <fstream>
#include <map>
#include <thread>

#include "erg/backends/nvml/discovery.hpp"
#include "erg/measure/process_attribution.hpp"
#include "erg/sim/machine.hpp"
#include "erg/sim/spec.hpp"
#include "process.hpp"

namespace erg {
namespace {

using namespace std::chrono_literals;
using testing::BackgroundShell;
using testing::run_shell;
using testing::shell_quote;

std::string erg() { return shell_quote(ERG_CLI_PATH); }

struct ExportedSim {
  std::unique_ptr<sim::Machine> machine;
  explicit ExportedSim(const std::string& spec) {
    auto m = sim::Machine::create_temp(*sim::parse_spec(spec));
    EXPECT_TRUE(m) << m.error().message;
    machine = std::move(*m);
    EXPECT_TRUE(machine->export_env());
  }
  ~ExportedSim() {
    for (const char* v : {"ERG_SIMULATE", "ERG_SIM_STATE", "ERG_NVML_LIBRARY", "ERG_POWERCAP_ROOT", "ERG_HWMON_ROOT",
                          "ERG_AMDSMI_LIBRARY"})
      ::unsetenv(v);
  }
};

/// Waits up to 10 s for `pid` to be on GPU `gpu` (or, with present = false, off it).
std::optional<sim::SimProcess> wait_for(sim::Machine& m, unsigned gpu, std::uint32_t pid, bool present) {
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (std::chrono::steady_clock::now() < deadline) {
    auto procs = m.processes(gpu);
    EXPECT_TRUE(procs);
    std::optional<sim::SimProcess> found;
    for (const auto& p : *procs)
      if (p.pid == pid) found = p;
    if (found.has_value() == present) return found;
    std::this_thread::sleep_for(20ms);
  }
  ADD_FAILURE() << "pid " << pid << (present ? " never appeared" : " never left");
  return std::nullopt;
}

TEST(SimulateLoadShare, RunsAsAGpuProcessUntilItExits) {
  ExportedSim sim("2xA100");
  BackgroundShell load("exec " + erg() + " simulate load --gpus 1 --share 0.35 --memory-mib 512 --seconds 1.5");
  const auto pid = static_cast<std::uint32_t>(load.pid());
  auto p = wait_for(*sim.machine, 1, pid, true);
  ASSERT_TRUE(p);
  EXPECT_DOUBLE_EQ(p->share, 0.35);
  EXPECT_EQ(p->used_memory_bytes, 512ull << 20);
  EXPECT_TRUE(p->real);
  auto st = sim.machine->status(1);
  ASSERT_TRUE(st);
  EXPECT_NEAR(st->utilization, 0.35, 1e-12);
  EXPECT_TRUE(sim.machine->processes(0)->empty());  // only the GPU it was given
  EXPECT_EQ(load.wait(20s), std::optional<int>(0)) << load.err();
  EXPECT_FALSE(wait_for(*sim.machine, 1, pid, false));
  EXPECT_NEAR(sim.machine->status(1)->utilization, 0.0, 1e-12);
  // While it ran, the driver sampled it.
  bool sampled = false;
  const auto samples = sim.machine->utilization_samples(1);  // held: a range-for over *temporary would dangle
  ASSERT_TRUE(samples);
  for (const auto& s : *samples) sampled = sampled || (s.pid == pid && s.sm_percent == 35);
  EXPECT_TRUE(sampled);
}

TEST(SimulateLoadShare, AKilledLoadLeavesTheProcessTable) {
  ExportedSim sim("1xV100");
  BackgroundShell load("exec " + erg() + " simulate load --share 0.5 --seconds 60");
  const auto pid = static_cast<std::uint32_t>(load.pid());
  ASSERT_TRUE(wait_for(*sim.machine, 0, pid, true));
  load.signal(SIGKILL);
  ASSERT_TRUE(load.wait(10s));
  // The driver knows the process is gone (as a real driver drops a dead context).
  EXPECT_FALSE(wait_for(*sim.machine, 0, pid, false));
}

// Acceptance 1 with real processes, on the real clock: three `erg simulate load --process
// --profile` processes with different shares that change every 0.4–0.9 s share one simulated
// A100; erg reads the counter and the per-process samples through the NVML backend
// (ProcessMeter) over a window of about 4 s. With update-time stamps the window's ends are the
// counter's updates, where the simulator keeps its truth (process_truth_at). The attributed
// energies sum to the measured energy and each is within its bound of the truth.
TEST(SimulateLoadShare, RealProcessesAreAttributedWithinTheirBounds) {
  ExportedSim sim("1xA100,timestamps=update,seed=5");
  auto lib = sim::Machine::driver_library_path();
  ASSERT_TRUE(lib);
  nvml::DiscoveryOptions o;
  o.library_path = lib->string();
  o.cuda_visible_devices = std::nullopt;
  auto found = nvml::discover(o);
  ASSERT_TRUE(found) << found.error().message;
  ASSERT_EQ(found->gpus.size(), 1u);
  Gpu& gpu = *found->gpus[0];
  const SteadyClock& clock = SteadyClock::instance();

  // Idle model: about 1.5 s of the idle GPU, counter update to counter update.
  auto r0 = gpu.energy_reading();
  std::this_thread::sleep_for(1500ms);
  auto r1 = gpu.energy_reading();
  ASSERT_TRUE(r0 && r1 && r0->updated_at && r1->updated_at);
  const double idle_j = (r1->energy - r0->energy).value() / 1000.0;
  const measure::EnergySegment idle_seg{*r0->updated_at, *r1->updated_at, Joules(idle_j), Joules(0.03 * idle_j),
                                        Watts(0.0)};
  auto idle = measure::calibrate_idle(std::span<const measure::EnergySegment>(&idle_seg, 1));
  ASSERT_TRUE(idle) << idle.error().message;

  testing::TempDir dir;
  const double shares[3][6] = {
      {0.1, 0.5, 0.2, 0.6, 0.3, 0.1}, {0.4, 0.2, 0.5, 0.1, 0.5, 0.3}, {0.3, 0.0, 0.4, 0.3, 0.6, 0.2}};
  const double seconds[3] = {0.9, 0.7, 0.4};
  std::vector<std::unique_ptr<BackgroundShell>> loads;
  for (int i = 0; i < 3; ++i) {
    const std::string profile = dir.path() + "/p" + std::to_string(i) + ".json";
    std::ofstream f(profile);
    f << "{\"steps\": [";
    for (int rep = 0; rep < 3; ++rep)
      for (int k = 0; k < 6; ++k)
        f << (rep + k > 0 ? "," : "") << "{\"seconds\": " << seconds[i] << ", \"util\": " << shares[i][k] << "}";
    f << "]}";
    f.close();
    loads.push_back(std::make_unique<BackgroundShell>("exec " + erg() + " simulate load --gpus 0 --process --profile " +
                                                      shell_quote(profile)));
  }
  for (const auto& l : loads) ASSERT_TRUE(wait_for(*sim.machine, 0, static_cast<std::uint32_t>(l->pid()), true));

  measure::ProcessAttributionOptions options;
  options.idle = *idle;
  options.edge_uncertainty = 0ns;  // update-time stamps
  measure::ProcessMeter meter(gpu, clock, options);
  ASSERT_TRUE(meter.begin());
  for (int k = 0; k < 8; ++k) {
    std::this_thread::sleep_for(500ms);
    ASSERT_TRUE(meter.poll());
  }
  ASSERT_TRUE(meter.end(0.03));
  std::this_thread::sleep_for(400ms);  // the driver samples past the end
  auto a = meter.attribute();
  ASSERT_TRUE(a) << a.error().message;
  ASSERT_TRUE(a->attributable) << a->reason;

  const auto offset = sim.machine->wall_now() - sim.machine->now();  // wall = sim + offset
  auto t0 = sim.machine->process_truth_at(0, a->start - offset);
  auto t1 = sim.machine->process_truth_at(0, a->end - offset);
  ASSERT_TRUE(t0 && t1) << (t0 ? t1.error().message : t0.error().message);
  std::map<std::uint32_t, double> truth;
  for (const auto& p : t1->processes) truth[p.pid] += p.energy.value();
  for (const auto& p : t0->processes) truth[p.pid] -= p.energy.value();

  EXPECT_NEAR((a->idle + a->attributed() + a->unattributed).value(), a->measured.value(), 1e-12 * a->measured.value());
  ASSERT_EQ(a->processes.size(), 3u);
  for (const auto& p : a->processes) {
    ASSERT_TRUE(truth.count(p.pid)) << p.pid;
    EXPECT_LE(std::abs(p.energy.value() - truth[p.pid]), p.bound.value())
        << "pid " << p.pid << " est " << p.energy.value() << " truth " << truth[p.pid];
    EXPECT_GT(p.samples, 10u);
  }
}

TEST(SimulateLoadShare, BadInputExitsTwo) {
  ExportedSim sim("1xA100");
  EXPECT_EQ(run_shell(erg() + " simulate load --share 1.5 --seconds 0.1").exit_code, 2);
  EXPECT_EQ(run_shell(erg() + " simulate load --share 0.5 --batch-size 8 --samples-per-s 100").exit_code, 2);
  auto help = run_shell(erg() + " simulate load --help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("--share"), std::string::npos);
}

}  // namespace
}  // namespace erg
