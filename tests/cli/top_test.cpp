// `erg top` (issue 23, acceptance 3): the live per-process view against a simulated machine whose
// GPU is shared by `erg simulate load --share` children. --once --json: each process
// with its pid, positive watts and joules and their bounds, each within its bound of the
// simulator's truth; a MIG GPU shown as not attributable (never 0 W); frames without cursor
// control when stdout is not a terminal. In tmux: the screen shows each process with watts and
// joules, and `q` or Ctrl-C ends it with status 0 and the terminal restored. Every wait is bounded.

#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "erg/backends/nvml/discovery.hpp"
#include "erg/measure/process_attribution.hpp"
#include "erg/sim/machine.hpp"
#include "erg/sim/spec.hpp"
#include "process.hpp"

namespace erg {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using testing::BackgroundShell;
using testing::run_shell;
using testing::shell_quote;

std::string erg() { return shell_quote(ERG_CLI_PATH); }

const char* const kSimEnv[] = {"ERG_SIMULATE",      "ERG_SIM_STATE",  "ERG_NVML_LIBRARY",
                               "ERG_POWERCAP_ROOT", "ERG_HWMON_ROOT", "ERG_AMDSMI_LIBRARY"};

struct ExportedSim {
  std::unique_ptr<sim::Machine> machine;
  explicit ExportedSim(const std::string& spec) {
    auto m = sim::Machine::create_temp(*sim::parse_spec(spec));
    EXPECT_TRUE(m) << m.error().message;
    machine = std::move(*m);
    EXPECT_TRUE(machine->export_env());
  }
  ~ExportedSim() {
    for (const char* v : kSimEnv) ::unsetenv(v);
  }
  /// `export NAME='value'; ...` for every simulation variable set now (a tmux pane's shell gets
  /// the tmux server's environment, not ours).
  [[nodiscard]] std::string exports() const {
    std::string out;
    for (const char* v : kSimEnv)
      if (const char* value = std::getenv(v)) out += std::string("export ") + v + "=" + shell_quote(value) + "; ";
    return out;
  }
};

/// Waits up to 10 s for `pid` to be on GPU `gpu`.
bool wait_listed(sim::Machine& m, unsigned gpu, std::uint32_t pid) {
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (std::chrono::steady_clock::now() < deadline) {
    if (auto procs = m.processes(gpu))
      for (const auto& p : *procs)
        if (p.pid == pid) return true;
    std::this_thread::sleep_for(20ms);
  }
  return false;
}

/// Two loads sharing GPU 0 (0.3 and 0.5) for up to a minute.
struct TwoLoads {
  std::unique_ptr<BackgroundShell> a, b;
  TwoLoads() {
    a = std::make_unique<BackgroundShell>("exec " + erg() + " simulate load --gpus 0 --share 0.3 --seconds 60");
    b = std::make_unique<BackgroundShell>("exec " + erg() + " simulate load --gpus 0 --share 0.5 --seconds 60");
  }
  [[nodiscard]] std::uint32_t pid_a() const { return static_cast<std::uint32_t>(a->pid()); }
  [[nodiscard]] std::uint32_t pid_b() const { return static_cast<std::uint32_t>(b->pid()); }
};

TEST(ErgTop, OnceJsonShowsEachProcessWithinItsBoundOfTheTruth) {
  ExportedSim sim("1xV100,timestamps=update,seed=11");
  // Idle model: 1.5 s of the idle GPU through the NVML backend, counter update to update.
  auto lib = sim::Machine::driver_library_path();
  ASSERT_TRUE(lib);
  nvml::DiscoveryOptions o;
  o.library_path = lib->string();
  o.cuda_visible_devices = std::nullopt;
  auto found = nvml::discover(o);
  ASSERT_TRUE(found) << found.error().message;
  Gpu& gpu = *found->gpus.at(0);
  auto r0 = gpu.energy_reading();
  std::this_thread::sleep_for(1500ms);
  auto r1 = gpu.energy_reading();
  ASSERT_TRUE(r0 && r1 && r0->updated_at && r1->updated_at);
  const double idle_j = (r1->energy - r0->energy).value() / 1000.0;
  const measure::EnergySegment seg{*r0->updated_at, *r1->updated_at, Joules(idle_j), Joules(0.03 * idle_j), Watts(0)};
  auto idle = measure::calibrate_idle(std::span<const measure::EnergySegment>(&seg, 1));
  ASSERT_TRUE(idle) << idle.error().message;

  TwoLoads loads;
  ASSERT_TRUE(wait_listed(*sim.machine, 0, loads.pid_a()));
  ASSERT_TRUE(wait_listed(*sim.machine, 0, loads.pid_b()));
  std::this_thread::sleep_for(400ms);  // a few samples of both before the interval starts

  char idle_args[128];
  std::snprintf(idle_args, sizeof idle_args, " --idle-power %.6f --idle-error %.6f", idle->power.value(),
                idle->error.value());
  auto r = run_shell(erg() + " top --once --json --interval 2" + idle_args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::istringstream lines(r.out);
  std::string line;
  int frames = 0;
  json frame;
  while (std::getline(lines, line))
    if (!line.empty()) frame = json::parse(line), ++frames;
  ASSERT_EQ(frames, 1) << r.out;
  EXPECT_TRUE(frame["simulated"].get<bool>());
  ASSERT_EQ(frame["gpus"].size(), 1u);
  const json& g = frame["gpus"][0];
  ASSERT_TRUE(g["attributable"].get<bool>());
  const double measured_j = g["power_w"].get<double>() *
                            (g["interval_end_unix_ns"].get<double>() - g["interval_start_unix_ns"].get<double>()) / 1e9;

  // The simulator's truth over the same interval (its ends are counter updates).
  const auto offset = sim.machine->wall_now() - sim.machine->now();  // wall = sim + offset
  auto t0 = sim.machine->process_truth_at(
      0, std::chrono::nanoseconds(g["interval_start_unix_ns"].get<std::int64_t>()) - offset);
  auto t1 = sim.machine->process_truth_at(
      0, std::chrono::nanoseconds(g["interval_end_unix_ns"].get<std::int64_t>()) - offset);
  ASSERT_TRUE(t0 && t1) << (t0 ? t1.error().message : t0.error().message);
  std::map<std::uint32_t, double> truth;
  for (const auto& p : t1->processes) truth[p.pid] += p.energy.value();
  for (const auto& p : t0->processes) truth[p.pid] -= p.energy.value();

  std::map<std::uint32_t, json> by_pid;
  double sum_j = 0.0;
  for (const auto& p : g["processes"]) by_pid[p["pid"].get<std::uint32_t>()] = p, sum_j += p["energy_j"].get<double>();
  for (std::uint32_t pid : {loads.pid_a(), loads.pid_b()}) {
    ASSERT_TRUE(by_pid.count(pid)) << "pid " << pid << " missing from " << g.dump();
    const json& p = by_pid[pid];
    EXPECT_EQ(p["comm"], "erg");
    EXPECT_GT(p["power_w"].get<double>(), 0.0);
    EXPECT_GT(p["energy_j"].get<double>(), 0.0);
    EXPECT_GT(p["power_w_bound"].get<double>(), 0.0);
    EXPECT_GT(p["energy_j_bound"].get<double>(), 0.0);
    ASSERT_TRUE(truth.count(pid));
    EXPECT_LE(std::abs(p["energy_j"].get<double>() - truth[pid]), p["energy_j_bound"].get<double>())
        << "pid " << pid << " erg top " << p["energy_j"] << " ± " << p["energy_j_bound"] << ", truth " << truth[pid];
    std::printf("erg top pid %u: %.1f ± %.1f J, truth %.1f J (simulated)\n", pid, p["energy_j"].get<double>(),
                p["energy_j_bound"].get<double>(), truth[pid]);
  }
  // The 0.5 load drew more than the 0.3 one; the parts add up to the measured energy.
  EXPECT_GT(by_pid[loads.pid_b()]["energy_j"].get<double>(), by_pid[loads.pid_a()]["energy_j"].get<double>());
  EXPECT_NEAR(sum_j + g["idle_j"].get<double>() + g["unattributed_j"].get<double>() + g["exited_j"].get<double>(),
              g["energy_j"].get<double>(), 1e-9 * g["energy_j"].get<double>());
  EXPECT_NEAR(g["energy_j"].get<double>(), measured_j, 1e-6 * measured_j);
}

TEST(ErgTop, AMigGpuIsNotAttributableNeverZero) {
  ExportedSim sim("1xA100");
  ASSERT_TRUE(sim.machine->set_mig_mode(0, true));
  sim::SimProcess p;
  p.pid = 4'000'001;  // a table entry of the simulated driver only (no such live process)
  p.share = 0.5;
  p.gpu_instance = 1;
  ASSERT_TRUE(sim.machine->set_process(0, p));
  auto r = run_shell(erg() + " top --once --json --interval 0.5");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json g = json::parse(r.out)["gpus"][0];
  EXPECT_FALSE(g["attributable"].get<bool>());
  EXPECT_NE(g["reason"].get<std::string>().find("MIG"), std::string::npos) << g.dump();
  ASSERT_EQ(g["processes"].size(), 1u);
  EXPECT_EQ(g["processes"][0]["pid"], 4'000'001);
  EXPECT_TRUE(g["processes"][0]["power_w"].is_null());
  EXPECT_TRUE(g["processes"][0]["energy_j"].is_null());
  auto text = run_shell(erg() + " top --once --interval 0.5");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("not attributable: "), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("4000001"), std::string::npos) << text.out;
}

TEST(ErgTop, WithoutATerminalFramesHaveNoCursorControl) {
  ExportedSim sim("1xA100");
  sim::SimProcess p;
  p.pid = 4'000'002;
  p.share = 0.4;
  ASSERT_TRUE(sim.machine->set_process(0, p));
  BackgroundShell top("exec " + erg() + " top --interval 0.3");
  const auto deadline = std::chrono::steady_clock::now() + 15s;
  auto frames = [&] {
    std::size_t n = 0;
    const std::string out = top.out();
    for (std::size_t at = 0; (at = out.find("erg top ", at)) != std::string::npos; ++at) ++n;
    return n;
  };
  while (frames() < 3 && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(50ms);
  ASSERT_GE(frames(), 3u) << top.out() << top.err();
  top.signal(SIGINT);
  EXPECT_EQ(top.wait(10s), std::optional<int>(0)) << top.err();
  EXPECT_EQ(top.out().find('\x1b'), std::string::npos);
  EXPECT_NE(top.out().find("(SIMULATED machine)"), std::string::npos);
  EXPECT_NE(top.out().find("4000002"), std::string::npos);
}

TEST(ErgTop, BadInputExitsTwo) {
  ExportedSim sim("1xA100");
  EXPECT_EQ(run_shell(erg() + " top --interval 0 --once").exit_code, 2);
  EXPECT_EQ(run_shell(erg() + " top --interval soon --once").exit_code, 2);
  EXPECT_EQ(run_shell(erg() + " top --gpus 7 --once").exit_code, 2);
  EXPECT_EQ(run_shell(erg() + " top --model-error 1.5 --once").exit_code, 2);
  auto help = run_shell(erg() + " top --help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("--once"), std::string::npos);
}

// ---- in a terminal: tmux ---------------------------------------------------------------------

/// A tmux server of its own (a socket in a temporary directory), killed in the destructor.
class Tmux {
 public:
  Tmux() : socket_(dir_.path() + "/tmux.sock") {}
  ~Tmux() { run_shell(cmd("kill-server") + " 2>/dev/null"); }
  [[nodiscard]] std::string cmd(const std::string& args) const {
    return "tmux -S " + shell_quote(socket_) + " " + args;
  }
  [[nodiscard]] std::string capture() const { return run_shell(cmd("capture-pane -p -t top")).out; }
  [[nodiscard]] const std::string& dir() const { return dir_.path(); }

 private:
  testing::TempDir dir_;
  std::string socket_;
};

bool tmux_installed() { return run_shell("command -v tmux >/dev/null 2>&1").exit_code == 0; }

/// A line of the screen that shows `pid` with a watts and a joules figure.
bool shows_with_figures(const std::string& screen, std::uint32_t pid) {
  std::istringstream in(screen);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string first;
    words >> first;
    if (first == std::to_string(pid) && line.find(" W") != std::string::npos && line.find(" J") != std::string::npos)
      return true;
  }
  return false;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// Starts `erg top` in a detached tmux session over two loads, waits until the screen shows each
/// with watts and joules, sends `keys`, and checks the exit status and the terminal afterwards.
void run_in_tmux(const std::string& keys) {
  ASSERT_TRUE(tmux_installed()) << "tmux is not installed: run ./dev deps (Debian package tmux)";
  ExportedSim sim("1xA100");
  TwoLoads loads;
  ASSERT_TRUE(wait_listed(*sim.machine, 0, loads.pid_a()));
  ASSERT_TRUE(wait_listed(*sim.machine, 0, loads.pid_b()));
  Tmux tmux;
  const std::string d = tmux.dir();
  // The shell keeps going after Ctrl-C (`trap :`; erg top gets the default action back at exec),
  // records the exit status and the terminal settings before and after (each file complete when
  // it appears: written aside, then renamed), and stays for capture.
  const std::string script = sim.exports() + "trap : INT; stty -g > " + d + "/before; echo MARK-BEFORE; " + erg() +
                             " top --interval 0.5; echo $? > " + d + "/status.tmp; mv " + d + "/status.tmp " + d +
                             "/status; stty -g > " + d + "/after.tmp; mv " + d + "/after.tmp " + d +
                             "/after; echo MARK-AFTER; sleep 120";
  auto started =
      run_shell(tmux.cmd("new-session -d -s top -x 160 -y 40 " + shell_quote("sh -c " + shell_quote(script))));
  ASSERT_EQ(started.exit_code, 0) << started.err;

  const auto deadline = std::chrono::steady_clock::now() + 20s;
  std::string screen;
  while (std::chrono::steady_clock::now() < deadline) {
    screen = tmux.capture();
    if (shows_with_figures(screen, loads.pid_a()) && shows_with_figures(screen, loads.pid_b())) break;
    std::this_thread::sleep_for(100ms);
  }
  ASSERT_TRUE(shows_with_figures(screen, loads.pid_a()) && shows_with_figures(screen, loads.pid_b()))
      << "the screen never showed both processes with W and J:\n"
      << screen;
  EXPECT_NE(screen.find("SIMULATED"), std::string::npos) << screen;
  auto alt = run_shell(tmux.cmd("display-message -p -t top '#{alternate_on} #{cursor_flag}'"));
  EXPECT_EQ(alt.out, "1 0\n") << "erg top draws on the alternate screen with the cursor hidden";

  ASSERT_EQ(run_shell(tmux.cmd("send-keys -t top " + keys)).exit_code, 0);
  ASSERT_TRUE(testing::wait_for_file(d + "/status", 10s)) << "erg top did not exit after " << keys << ":\n"
                                                          << tmux.capture();
  EXPECT_EQ(read_file(d + "/status"), "0\n");
  ASSERT_TRUE(testing::wait_for_file(d + "/after", 5s));
  EXPECT_EQ(read_file(d + "/before"), read_file(d + "/after")) << "the terminal settings were not restored";
  // Back on the main screen, the cursor shown, the shell's own lines there and no frame left.
  std::string after;
  for (int i = 0; i < 50 && after.find("MARK-AFTER") == std::string::npos; ++i) {
    after = tmux.capture();
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_NE(after.find("MARK-BEFORE"), std::string::npos) << after;
  EXPECT_NE(after.find("MARK-AFTER"), std::string::npos) << after;
  EXPECT_EQ(after.find("erg top "), std::string::npos) << after;
  alt = run_shell(tmux.cmd("display-message -p -t top '#{alternate_on} #{cursor_flag}'"));
  EXPECT_EQ(alt.out, "0 1\n");
}

TEST(ErgTopTmux, QuitsOnQAndRestoresTheTerminal) { run_in_tmux("q"); }

TEST(ErgTopTmux, QuitsOnCtrlCAndRestoresTheTerminal) { run_in_tmux("C-c"); }

}  // namespace
}  // namespace erg
