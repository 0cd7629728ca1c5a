// `erg simulate load --share`: the load runs as a GPU process of the simulated machine — listed by
// the simulated driver under its real pid with its share, sampled, and gone when it exits (or is
// killed). Waits are bounded.

#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <thread>

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
  for (const auto& s : *sim.machine->utilization_samples(1)) sampled = sampled || (s.pid == pid && s.sm_percent == 35);
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
