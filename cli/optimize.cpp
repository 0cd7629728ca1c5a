// `erg optimize power-limit [options] -- CMD ARGS...`: runs a training command and drives the
// power-limit optimizer (erg::power_limit, Zeus's GlobalPowerLimitOptimizer) from the steps and
// epochs the command reports (docs/power-limit-optimizer.md, "The step protocol"):
//
//   erg opens a pipe and passes its write end to CMD as the file descriptor named in
//   ERG_OPTIMIZER_FD. CMD writes one line per event: "step" at the beginning of every training
//   step, "epoch" at the end of every epoch (erg.optimizers.report_step()/report_epoch() do it).
//   Other lines are ignored with a warning. erg acts on each line as it arrives.
//
// When CMD exits (or on SIGINT/SIGTERM, forwarded to CMD), every GPU is put back at its default
// limit; the profile and the chosen limit are printed (JSON with --json).

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <optional>
#include <sstream>

#include "app.hpp"
#include "erg/exporters/report/record.hpp"
#include "erg/measure/energy_monitor.hpp"
#include "erg/optimizers/power_limit/optimizer.hpp"
#include "signals.hpp"
#include "summary.hpp"

extern char** environ;

namespace erg::cli {
namespace {

volatile sig_atomic_t g_child = 0;
volatile sig_atomic_t g_pending = 0;

/// SIGINT/SIGTERM go to the command (a terminal's SIGINT already reached it through the process
/// group); erg restores the limits once the command has exited.
void forward(int sig, siginfo_t* info, void*) {
  if (g_child <= 0) {
    g_pending = sig;
    return;
  }
  if (sig == SIGINT && info != nullptr && info->si_code == SI_KERNEL) return;
  ::kill(static_cast<pid_t>(g_child), sig);
}

struct Forwarding {
  struct sigaction old_int {};
  struct sigaction old_term {};
  Forwarding() {
    g_pending = 0;
    struct sigaction sa {};
    sa.sa_sigaction = forward;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
  }
  ~Forwarding() {
    sigaction(SIGINT, &old_int, nullptr);
    sigaction(SIGTERM, &old_term, nullptr);
    g_child = 0;
  }
};

double watts(MilliWatts mw) { return mw.value() / 1000.0; }

struct Outcome {
  std::vector<std::string> problems;  ///< optimizer errors (it stops optimizing at the first)
  std::uint64_t steps = 0, epochs = 0, ignored = 0;
};

nlohmann::json result_json(const std::vector<std::string>& command, int exit_code,
                           const power_limit::PowerLimitOptimizer& opt, const Outcome& out, unsigned profile_steps,
                           bool simulated) {
  nlohmann::json j;
  j["command"] = command;
  j["exit_code"] = exit_code;
  j["simulated"] = simulated;
  j["selector"] = opt.selector().describe();
  j["state"] = std::string(power_limit::state_name(opt.state()));
  j["steps"] = out.steps;
  j["epochs"] = out.epochs;
  nlohmann::json limits = nlohmann::json::array();
  for (auto l : opt.power_limits()) limits.push_back(watts(l));
  j["power_limits_w"] = limits;
  nlohmann::json ms = nlohmann::json::array();
  for (const auto& m : opt.measurements())
    ms.push_back({{"power_limit_w", m.power_limit.value()},
                  {"energy_j", m.energy.value()},
                  {"time_s", m.time.count()},
                  {"energy_per_step_j", m.energy.value() / profile_steps},
                  {"time_per_step_s", m.time.count() / profile_steps}});
  j["measurements"] = ms;
  const auto best = opt.optimal_power_limit();
  j["optimal_power_limit_w"] = best ? nlohmann::json(watts(*best)) : nlohmann::json(nullptr);
  // The saving per step at the chosen limit against the maximum limit, from the profile.
  nlohmann::json saving = nullptr;
  if (best && !opt.measurements().empty()) {
    const auto& top = opt.measurements().front();
    for (const auto& m : opt.measurements())
      if (m.power_limit.value() == std::floor(watts(*best))) {
        const double e0 = top.energy.value() / profile_steps, e1 = m.energy.value() / profile_steps;
        const double t0 = top.time.count() / profile_steps, t1 = m.time.count() / profile_steps;
        saving = {{"vs_power_limit_w", top.power_limit.value()},
                  {"energy_per_step_j", e0 - e1},
                  {"energy_percent", e0 > 0 ? 100.0 * (e0 - e1) / e0 : 0.0},
                  {"time_per_step_percent", t0 > 0 ? 100.0 * (t1 - t0) / t0 : 0.0}};
      }
  }
  j["saving"] = saving;
  j["errors"] = out.problems;
  return j;
}

std::string result_table(const nlohmann::json& j) {
  std::ostringstream s;
  const std::string sim = j["simulated"].get<bool>() ? " (simulated)" : "";
  s << "erg optimize power-limit: " << j["selector"].get<std::string>() << ", " << j["steps"] << " steps, "
    << j["epochs"] << " epochs, state " << j["state"].get<std::string>() << sim << "\n";
  if (!j["measurements"].empty()) s << "  limit W    energy/step J    time/step s\n";
  char line[128];
  for (const auto& m : j["measurements"]) {
    std::snprintf(line, sizeof line, "  %7.0f %16.3f %14.4f\n", m["power_limit_w"].get<double>(),
                  m["energy_per_step_j"].get<double>(), m["time_per_step_s"].get<double>());
    s << line;
  }
  if (j["optimal_power_limit_w"].is_null()) {
    s << "  no limit chosen: the command ended before every limit was profiled\n";
  } else {
    s << "  chosen limit: " << j["optimal_power_limit_w"].get<double>() << " W" << sim << "\n";
    if (!j["saving"].is_null()) {
      const auto& v = j["saving"];
      std::snprintf(line, sizeof line, "  saving vs %.0f W: %.3f J per step (%.1f %%), time per step %+.1f %%%s\n",
                    v["vs_power_limit_w"].get<double>(), v["energy_per_step_j"].get<double>(),
                    v["energy_percent"].get<double>(), v["time_per_step_percent"].get<double>(), sim.c_str());
      s << line;
    }
  }
  s << "  every GPU is back at its default power limit\n";
  for (const auto& p : j["errors"]) s << "  error: " << p.get<std::string>() << "\n";
  return s.str();
}

}  // namespace

void add_optimize_command(CLI::App& app, Context& ctx) {
  auto* optimize = app.add_subcommand("optimize", "Optimize a training command's energy");
  optimize->require_subcommand(1);
  auto* cmd = optimize->add_subcommand(
      "power-limit",
      "Run CMD and pick the GPU power limit that optimizes its energy (Zeus's GlobalPowerLimitOptimizer)");
  struct Opts {
    std::string selector = "zeus-cost";
    double eta = 0.5;
    double factor = 1.1;
    unsigned wait_steps = 1, warmup_steps = 10, profile_steps = 40;
    double pl_step = 25;
    std::string profile;
    bool json = false;
    std::vector<unsigned> gpus;
    std::vector<std::string> command;
  };
  auto opts = std::make_shared<Opts>();
  cmd->add_option("--selector", opts->selector,
                  "How to pick the limit: time, energy, zeus-cost (default), max-slowdown")
      ->check(CLI::IsMember({"time", "energy", "zeus-cost", "max-slowdown"}));
  cmd->add_option("--eta", opts->eta, "zeus-cost: weight of energy against time, 0 to 1 (default 0.5)")
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--factor", opts->factor,
                  "max-slowdown: the largest allowed time per step relative to the maximum limit (default 1.1)");
  cmd->add_option("--wait-steps", opts->wait_steps, "Steps to let pass before profiling (default 1)");
  cmd->add_option("--warmup-steps", opts->warmup_steps, "Steps per limit before its measurement (default 10)");
  cmd->add_option("--profile-steps", opts->profile_steps, "Steps measured per limit (default 40)");
  cmd->add_option("--pl-step", opts->pl_step, "Watts between profiled limits (default 25)")->check(positive_number());
  cmd->add_option("--profile", opts->profile,
                  "Profile file: if it exists, use it and skip profiling; else profile and save it there");
  cmd->add_option("--gpus", opts->gpus, "GPUs to optimize (erg indices, e.g. 0,2); default all")->delimiter(',');
  cmd->add_flag("--json", opts->json, "Print the result as one JSON object on stdout");
  cmd->add_option("command", opts->command, "The training command, after --");
  cmd->footer(
      "CMD reports its steps on the file descriptor in ERG_OPTIMIZER_FD: a line \"step\" at the beginning of "
      "each training step, \"epoch\" at the end of each epoch (Python: erg.optimizers.report_step() and "
      "report_epoch()). Exits with CMD's exit code. SIGINT and SIGTERM are forwarded to CMD; whenever CMD "
      "ends, every GPU is put back at its default power limit. See docs/power-limit-optimizer.md.");

  cmd->callback([&ctx, opts] {
    Forwarding forwarding;
    if (opts->command.empty())
      throw CliError{kExitUsage, "erg optimize power-limit needs a command after --, e.g. -- python3 train.py"};
    auto inventory = ctx.discover(opts->gpus, {});
    if (!inventory) throw CliError{kExitUsage, inventory.error().message};
    if (inventory->gpus.empty()) throw CliError{kExitFailure, "no GPU to optimize"};
    // No settling: end_window returns at once, so lines are read as they come (a window's edges are
    // when erg reads the line, microseconds after CMD wrote it, not ~0.1 s later).
    auto monitor = make_energy_monitor(*inventory, opts->gpus, std::vector<unsigned>{}, /*settle=*/false);
    std::vector<std::shared_ptr<Gpu>> gpus;
    for (unsigned i : monitor->gpu_indices()) gpus.push_back(inventory->gpus[i]);

    power_limit::OptimizerOptions o;
    o.wait_steps = opts->wait_steps;
    o.warmup_steps = opts->warmup_steps;
    o.profile_steps = opts->profile_steps;
    o.pl_step = Watts(opts->pl_step);
    if (!opts->profile.empty()) o.profile_path = opts->profile;
    o.restore_on_signals = false;  // erg forwards the signals and restores once CMD has exited
    if (ctx.verbosity > 0) o.log = [](const std::string& line) { std::cerr << "erg: " << line << "\n"; };
    if (opts->selector == "time") {
      o.selector = power_limit::time_selector();
    } else if (opts->selector == "energy") {
      o.selector = power_limit::energy_selector();
    } else if (opts->selector == "max-slowdown") {
      auto s = power_limit::max_slowdown_selector(opts->factor);
      if (!s) throw CliError{kExitUsage, "--factor: " + s.error().message};
      o.selector = *s;
    } else {
      auto s = power_limit::zeus_cost_selector(opts->eta, static_cast<unsigned>(gpus.size()));
      if (!s) throw CliError{kExitUsage, "--eta: " + s.error().message};
      o.selector = *s;
    }
    auto created = power_limit::PowerLimitOptimizer::create(gpus, power_limit::monitor_windows(*monitor), o);
    if (!created) {
      const auto code = created.error().code;
      throw CliError{code == ErrorCode::kInvalidArgument ? kExitUsage : kExitFailure, created.error().message};
    }
    auto& opt = **created;

    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) throw CliError{kExitFailure, std::string("pipe: ") + std::strerror(errno)};
    // The command's end goes to one digit where it can (`echo step >&$ERG_OPTIMIZER_FD` in sh needs
    // one): the lowest descriptor from 3 to 9 that the command would not inherit anyway (free in
    // erg, or close-on-exec), so no descriptor meant for the command is replaced.
    int child_fd = -1;
    for (int fd = 3; fd <= 9 && child_fd < 0; ++fd) {
      if (fd == fds[1]) continue;
      const int flags = ::fcntl(fd, F_GETFD);
      if ((flags < 0 && errno == EBADF) || (flags >= 0 && (flags & FD_CLOEXEC) != 0)) child_fd = fd;
    }
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    if (child_fd >= 0) {
      posix_spawn_file_actions_adddup2(&actions, fds[1], child_fd);
    } else if (const int low = ::fcntl(fds[1], F_DUPFD, 3); low >= 0) {  // inherited as it is
      ::close(fds[1]);
      fds[1] = low;
      child_fd = low;
    }
    ::setenv("ERG_OPTIMIZER_FD", std::to_string(child_fd).c_str(), 1);
    std::vector<char*> argv;
    for (auto& a : opts->command) argv.push_back(a.data());
    argv.push_back(nullptr);
    if (const int sig = g_pending; sig != 0) {
      ::close(fds[0]);
      ::close(fds[1]);
      posix_spawn_file_actions_destroy(&actions);
      throw CliError{128 + sig, "stopped by a signal before '" + opts->command[0] + "' started"};
    }
    pid_t pid = 0;
    const int rc = ::posix_spawnp(&pid, argv[0], &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    ::unsetenv("ERG_OPTIMIZER_FD");
    ::close(fds[1]);
    if (rc != 0) {
      ::close(fds[0]);
      throw CliError{rc == ENOENT ? 127 : 126, "cannot run '" + opts->command[0] + "': " + std::strerror(rc)};
    }
    g_child = pid;
    if (const int sig = g_pending; sig != 0) {
      g_pending = 0;
      ::kill(pid, sig);
    }

    // Under `erg run --record` (ERG_RECORD): each profiled limit becomes a window of the record, and
    // the profile and the choice become its events, so `erg report` can show what was tried.
    std::unique_ptr<report::RecordWriter> record;
    if (const char* path = std::getenv(report::kRecordEnv); path != nullptr && *path != '\0') {
      if (auto r = report::RecordWriter::open(path); r)
        record = std::move(*r);
      else
        std::cerr << "erg: warning: not recording the optimizer in " << path << ": " << r.error().message << "\n";
    }
    std::optional<double> profiling_since;  // record time the current limit's profiling window began
    double profiling_limit_w = 0;
    auto note_state = [&] {
      if (!record) return;
      const auto* p = std::get_if<power_limit::Profiling>(&opt.state());
      if (p != nullptr && !profiling_since) {
        profiling_since = record->seconds_now();
        profiling_limit_w = watts(p->current_power_limit);
      } else if (profiling_since && (p == nullptr || watts(p->current_power_limit) != profiling_limit_w)) {
        const double now = record->seconds_now();
        char name[64];
        std::snprintf(name, sizeof name, "power limit %.0f W", profiling_limit_w);
        if (auto r = record->add_window({name, *profiling_since, now, {}}); !r)
          std::cerr << "erg: warning: " << r.error().message << "\n";
        profiling_since.reset();
        if (p != nullptr) profiling_since = now, profiling_limit_w = watts(p->current_power_limit);
      }
    };

    Outcome out;
    bool active = true;  // stops at the optimizer's first error; the command runs on
    auto handle = [&](const std::string& line) {
      if (line == "step") {
        ++out.steps;
        if (active)
          if (auto r = opt.on_step_begin(); !r) out.problems.push_back(r.error().message), active = false;
      } else if (line == "epoch") {
        ++out.epochs;
        if (active)
          if (auto r = opt.on_epoch_end(); !r) out.problems.push_back(r.error().message), active = false;
      } else if (!line.empty()) {
        if (out.ignored++ == 0) std::cerr << "erg: warning: ignoring the line '" << line << "' on ERG_OPTIMIZER_FD\n";
      }
      note_state();
    };
    const int status = pump_child_lines(fds[0], pid, handle);
    g_child = 0;
    ::close(fds[0]);
    const int exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : (WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 1);
    if (auto r = opt.restore(); !r) out.problems.push_back("restoring the default limits: " + r.error().message);

    const auto j = result_json(opts->command, exit_code, opt, out, opts->profile_steps, inventory->simulated);
    if (record) {
      const double now = record->seconds_now();
      Result<void> r = ok();
      for (const auto& m : j["measurements"])
        if (r) r = record->add_event({now, "power_limit.profile", m});
      if (r && !j["optimal_power_limit_w"].is_null())
        r = record->add_event(
            {now, "power_limit.chosen", {{"power_limit_w", j["optimal_power_limit_w"]}, {"selector", j["selector"]}}});
      if (!r) std::cerr << "erg: warning: " << r.error().message << "\n";
    }
    std::cerr << result_table(j);
    if (opts->json) std::cout << j.dump(2) << "\n";
    std::cout.flush();
    ctx.exit_code = exit_code;
  });
}

}  // namespace erg::cli
