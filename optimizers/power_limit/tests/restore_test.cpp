// Restoring the default limits however the optimizer's process ends: the guard's destructor, an
// exception unwinding through it, exit() with the optimizer still alive, and SIGTERM / SIGINT
// while profiling (a child process: this test binary run again as the child). SIGKILL cannot be
// handled in-process; ergd restores limits set through it (docs/power-limit-optimizer.md).

#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <stdexcept>
#include <thread>

#include "erg/optimizers/power_limit/optimizer.hpp"
#include "sim_rig.hpp"

extern char** environ;

namespace erg::power_limit {
namespace {

using testing::SimRig;

/// Windows that measure nothing (the tests here are about limits, not figures).
class NullWindows final : public ProfileWindows {
 public:
  Result<void> begin_window(const std::string&) override { return ok(); }
  Result<WindowFigures> end_window(const std::string&) override { return WindowFigures{Joules(1.0), Seconds(1.0)}; }
  Result<void> cancel_window(const std::string&) override { return ok(); }
};

/// Steps an optimizer until it profiles a limit below the maximum.
void step_into_profiling_below_max(PowerLimitOptimizer& opt) {
  for (int i = 0; i < 1000; ++i) {
    const auto* p = std::get_if<Profiling>(&opt.state());
    if (p != nullptr && p->current_power_limit < opt.power_limits().front()) return;
    ASSERT_TRUE(opt.on_step_begin());
  }
  FAIL() << "never reached profiling below the maximum";
}

OptimizerOptions quick() {
  OptimizerOptions o;
  o.warmup_steps = 2;
  o.profile_steps = 3;
  o.pl_step = Watts(100);
  return o;
}

TEST(Restore, DestructorAndExceptionPutTheDefaultBack) {
  SimRig rig("2xA100,cpus=0");
  {
    auto opt = PowerLimitOptimizer::create(rig.gpus, std::make_shared<NullWindows>(), quick());
    ASSERT_TRUE(opt);
    step_into_profiling_below_max(**opt);
    EXPECT_EQ(rig.machine->status(1)->power_limit.value(), 300'000.0);
  }
  for (unsigned g = 0; g < 2; ++g) EXPECT_EQ(rig.machine->status(g)->power_limit.value(), 400'000.0);

  try {
    auto opt = PowerLimitOptimizer::create(rig.gpus, std::make_shared<NullWindows>(), quick());
    ASSERT_TRUE(opt);
    step_into_profiling_below_max(**opt);
    throw std::runtime_error("training failed");
  } catch (const std::runtime_error&) {
  }
  for (unsigned g = 0; g < 2; ++g) EXPECT_EQ(rig.machine->status(g)->power_limit.value(), 400'000.0);

  // restore() is explicit and final: nothing is set afterwards.
  auto opt = PowerLimitOptimizer::create(rig.gpus, std::make_shared<NullWindows>(), quick());
  ASSERT_TRUE(opt);
  step_into_profiling_below_max(**opt);
  ASSERT_TRUE((*opt)->restore());
  EXPECT_EQ(rig.machine->status(0)->power_limit.value(), 400'000.0);
  rig.machine->clear_power_limit_log();
  for (int i = 0; i < 20; ++i) (void)(*opt)->on_step_begin();
  EXPECT_TRUE(rig.machine->power_limit_log().empty());
}

TEST(Restore, GuardRestoresEveryGpuAndIsIdempotent) {
  SimRig rig("2xA100,cpus=0");
  for (auto& g : rig.gpus) ASSERT_TRUE(g->set_power_limit(MilliWatts(200'000)));
  RestoreGuard guard(rig.gpus, /*on_signals=*/false);
  EXPECT_FALSE(guard.restored());
  ASSERT_TRUE(guard.restore());
  EXPECT_TRUE(guard.restored());
  for (unsigned g = 0; g < 2; ++g) EXPECT_EQ(rig.machine->status(g)->power_limit.value(), 400'000.0);
  ASSERT_TRUE(rig.gpus[0]->set_power_limit(MilliWatts(200'000)));
  ASSERT_TRUE(guard.restore());  // a second call does nothing
  EXPECT_EQ(rig.machine->status(0)->power_limit.value(), 200'000.0);
}

// --- the child side: run only when the parent below starts this binary as a child ------------

PowerLimitOptimizer* g_alive_at_exit = nullptr;  // see RestoreChild.Run

TEST(RestoreChild, Run) {
  const char* how = std::getenv("ERG_PL_CHILD");
  if (how == nullptr) GTEST_SKIP() << "only run as the child of Restore.Signals*";
  nvml::DiscoveryOptions o;
  o.cuda_visible_devices = std::optional<std::string>();
  auto found = nvml::discover(o);  // the parent's machine, through ERG_SIM_STATE
  ASSERT_TRUE(found);
  auto opt = PowerLimitOptimizer::create(found->gpus, std::make_shared<NullWindows>(), quick());
  ASSERT_TRUE(opt);
  step_into_profiling_below_max(**opt);
  const std::string mode = how;
  if (mode == "exit") {
    // Still alive at exit(): the atexit handler restores. Kept reachable from a global, so the
    // leak checker (ASan preset) does not fail the child for it.
    g_alive_at_exit = opt->release();
    std::exit(0);
  }
  ::write(STDOUT_FILENO, "ready\n", 6);
  for (;;) std::this_thread::sleep_for(std::chrono::milliseconds(10));  // until the signal
}

/// Runs this binary as the child in `mode`; sends `sig` once it is profiling (0: none); returns
/// the wait status.
int run_child(SimRig& rig, const char* mode, int sig) {
  int out[2];
  EXPECT_EQ(::pipe(out), 0);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&fa, out[0]);
  ::setenv("ERG_PL_CHILD", mode, 1);
  std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  std::string filter = "--gtest_filter=RestoreChild.Run";
  char* argv[] = {self.data(), filter.data(), nullptr};
  pid_t pid = 0;
  EXPECT_EQ(::posix_spawn(&pid, self.c_str(), &fa, nullptr, argv, environ), 0);
  ::unsetenv("ERG_PL_CHILD");
  posix_spawn_file_actions_destroy(&fa);
  ::close(out[1]);
  if (sig != 0) {
    std::string got;
    char buf[256];
    while (got.find("ready\n") == std::string::npos) {
      const ssize_t n = ::read(out[0], buf, sizeof buf);
      if (n <= 0) break;
      got.append(buf, static_cast<std::size_t>(n));
    }
    EXPECT_NE(got.find("ready\n"), std::string::npos) << got;
    // Profiling below the maximum on every GPU right now.
    for (unsigned g = 0; g < 2; ++g) EXPECT_LT(rig.machine->status(g)->power_limit.value(), 400'000.0);
    ::kill(pid, sig);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  ::close(out[0]);
  return status;
}

class RestoreSignals : public ::testing::TestWithParam<int> {};

TEST_P(RestoreSignals, LeaveEveryGpuAtItsDefaultAndDieOfTheSignal) {
  SimRig rig("2xA100,cpus=0");
  const int status = run_child(rig, "signal", GetParam());
  ASSERT_TRUE(WIFSIGNALED(status)) << "status " << status;
  EXPECT_EQ(WTERMSIG(status), GetParam()) << "the process still dies of the signal";
  for (unsigned g = 0; g < 2; ++g) EXPECT_EQ(rig.machine->status(g)->power_limit.value(), 400'000.0) << "GPU " << g;
  const auto log = rig.machine->power_limit_log();
  ASSERT_GE(log.size(), 2u);
  EXPECT_EQ(log.back().limit.value(), 400'000.0);
}

INSTANTIATE_TEST_SUITE_P(TermAndInt, RestoreSignals, ::testing::Values(SIGTERM, SIGINT));

TEST(RestoreExit, ExitWithTheOptimizerAliveRestores) {
  SimRig rig("2xA100,cpus=0");
  const int status = run_child(rig, "exit", 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  for (unsigned g = 0; g < 2; ++g) EXPECT_EQ(rig.machine->status(g)->power_limit.value(), 400'000.0) << "GPU " << g;
  EXPECT_GE(rig.machine->power_limit_log().size(), 4u) << "the child did lower the limits";
}

}  // namespace
}  // namespace erg::power_limit
