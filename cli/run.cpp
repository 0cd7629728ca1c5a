// `erg run -- CMD ARGS...`: runs a command and measures GPUs, CPU packages and DRAM over its
// lifetime, like `time` or `perf stat` for energy.

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>
#include <sstream>

#include "app.hpp"
#include "erg/measure/energy_monitor.hpp"
#include "erg/measure/power_monitor.hpp"
#include "summary.hpp"

extern char** environ;

namespace erg::cli {
namespace {

volatile sig_atomic_t g_child = 0;

/// Forwards SIGINT/SIGTERM to the child. A SIGINT typed at the terminal (si_code SI_KERNEL)
/// already reached the child through the process group, so it is not sent twice.
void forward_signal(int sig, siginfo_t* info, void*) {
  if (g_child <= 0) return;
  if (sig == SIGINT && info != nullptr && info->si_code == SI_KERNEL) return;
  ::kill(static_cast<pid_t>(g_child), sig);
}

struct SignalForwarding {
  struct sigaction old_int {};
  struct sigaction old_term {};
  SignalForwarding() {
    struct sigaction sa {};
    sa.sa_sigaction = forward_signal;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
  }
  ~SignalForwarding() {
    sigaction(SIGINT, &old_int, nullptr);
    sigaction(SIGTERM, &old_term, nullptr);
    g_child = 0;
  }
};

/// The sampled power of every device from t0 to t1, sample-and-hold: a row at t0 with the power
/// held then, every stored sample after it, and a row at t1 — so integrating each device's rows
/// (each power held until the next row) gives its energy over the run, and a device whose power
/// never changed still has its two rows.
std::string timeline_csv(const measure::PowerMonitor& pm, const std::vector<unsigned>& cpus,
                         std::chrono::nanoseconds t0, std::chrono::nanoseconds t1) {
  std::ostringstream out;
  out << "time_s,device,domain,power_w\n";
  char buf[160];
  auto emit = [&](const std::string& device, const std::string& domain, const Result<Watts>& at_start,
                  const Result<std::vector<measure::PowerPoint>>& points, const Result<Watts>& at_end) {
    auto row = [&](std::chrono::nanoseconds t, double w) {
      std::snprintf(buf, sizeof buf, "%.6f,%s,%s,%.3f\n", std::chrono::duration<double>(t - t0).count(), device.c_str(),
                    domain.c_str(), w);
      out << buf;
    };
    if (at_start) row(t0, at_start->value());
    if (points)
      for (const auto& p : *points) row(p.time, p.watts);
    if (at_end) row(t1, at_end->value());
  };
  for (unsigned g : pm.gpu_indices())
    for (auto d : pm.domains()) {
      if (!pm.sampled(g, d)) continue;
      emit("gpu" + std::to_string(g), std::string(to_string(d)), pm.gpu_power_at(g, d, t0),
           pm.gpu_timeline(g, d, t0 + std::chrono::nanoseconds(1), t1 - std::chrono::nanoseconds(1)),
           pm.gpu_power_at(g, d, t1));
    }
  for (unsigned c : cpus)
    for (auto [domain, label] :
         {std::pair{measure::CpuDomain::kPackage, "package"}, std::pair{measure::CpuDomain::kDram, "dram"}}) {
      if (!pm.cpu_power(c, domain) && pm.cpu_power(c, domain).error().code == ErrorCode::kNotFound) continue;
      emit("cpu" + std::to_string(c), label, pm.cpu_power_at(c, domain, t0),
           pm.cpu_timeline(c, domain, t0 + std::chrono::nanoseconds(1), t1 - std::chrono::nanoseconds(1)),
           pm.cpu_power_at(c, domain, t1));
    }
  return out.str();
}

}  // namespace

void add_run_command(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand("run", "Run a command and measure the energy of GPUs, CPU packages and DRAM over it");
  struct Opts {
    bool json = false;
    std::string output;
    std::string timeline;
    std::vector<unsigned> gpus;
    std::vector<unsigned> cpus;
    std::vector<std::string> command;
    bool no_settle = false;
  };
  auto opts = std::make_shared<Opts>();
  cmd->add_flag("--json", opts->json, "Print one JSON object to stdout (or --output)");
  cmd->add_option("--output", opts->output, "Write the JSON result to FILE instead of stdout");
  cmd->add_option("--timeline", opts->timeline, "Write the sampled power timeline to FILE.csv");
  cmd->add_option("--gpus", opts->gpus, "GPUs to measure (erg indices, e.g. 0,2); default all")->delimiter(',');
  cmd->add_option("--cpus", opts->cpus, "CPU packages to measure (e.g. 0); default all available")->delimiter(',');
  cmd->add_flag("--no-settle", opts->no_settle,
                "Return when the command exits instead of waiting (at most one counter period, ~0.1 s) for the "
                "GPU counters' next update; the last part is then extrapolated (extrapolated_s says how much)");
  cmd->add_option("command", opts->command, "The command to run, after --");
  cmd->footer("Exits with the command's exit code (128 + signal if it was killed). The summary goes to stderr.");

  cmd->callback([&ctx, opts] {
    if (opts->command.empty())
      throw CliError{kExitUsage, "erg run needs a command after --, e.g. erg run -- python3 train.py"};
    if (!opts->output.empty())
      if (auto r = check_writable(opts->output); !r) throw CliError{kExitUsage, r.error().message};
    if (!opts->timeline.empty())
      if (auto r = check_writable(opts->timeline); !r) throw CliError{kExitUsage, r.error().message};

    auto inventory = ctx.discover(opts->gpus, opts->cpus);
    if (!inventory) throw CliError{kExitUsage, inventory.error().message};
    auto monitor = make_energy_monitor(*inventory, opts->gpus, opts->cpus, !opts->no_settle);

    std::unique_ptr<measure::PowerMonitor> sampler;
    std::vector<unsigned> timeline_cpus;
    if (!opts->timeline.empty()) {
      measure::PowerMonitorOptions po;
      po.gpu_indices = monitor->gpu_indices();
      // A fixed period, not the inferred one: inference would delay the command's start.
      po.period = std::chrono::milliseconds(50);
      std::vector<std::shared_ptr<Cpu>> cpus;
      for (auto& c : inventory->cpus)
        for (unsigned want : monitor->cpu_indices())
          if (c->index() == want) cpus.push_back(c);
      auto pm = measure::PowerMonitor::create(inventory->gpus, cpus, po);
      if (!pm) throw CliError{kExitFailure, pm.error().message};
      sampler = std::move(*pm);
      for (const auto& c : cpus) timeline_cpus.push_back(c->index());
    }

    std::vector<char*> argv;
    for (auto& a : opts->command) argv.push_back(a.data());
    argv.push_back(nullptr);

    const std::string window = "erg.run";
    auto t0 = SteadyClock::instance().now();
    if (auto r = monitor->begin_window(window, false); !r) throw CliError{kExitFailure, r.error().message};
    SignalForwarding forwarding;
    pid_t pid = 0;
    int rc = ::posix_spawnp(&pid, argv[0], nullptr, nullptr, argv.data(), environ);
    if (rc != 0) {
      (void)monitor->cancel_window(window);
      throw CliError{rc == ENOENT ? 127 : 126, "cannot run '" + opts->command[0] + "': " + std::strerror(rc)};
    }
    g_child = pid;
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    g_child = 0;
    auto t1 = SteadyClock::instance().now();
    auto measurement = monitor->end_window(window, false);
    if (sampler) sampler->stop();
    if (!measurement) throw CliError{kExitFailure, measurement.error().message};

    int exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : (WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 1);
    std::cerr << measurement_table(*measurement, *inventory);

    if (opts->json || !opts->output.empty()) {
      auto j = measurement_json(*measurement, *inventory);
      nlohmann::json out;
      out["command"] = opts->command;
      out["exit_code"] = exit_code;
      for (auto& [k, v] : j.items()) out[k] = v;
      std::string text = out.dump(2) + "\n";
      if (!opts->output.empty()) {
        if (auto r = write_file_atomically(opts->output, text); !r) throw CliError{kExitFailure, r.error().message};
      } else {
        std::cout << text;
      }
    }
    if (sampler) {
      if (auto r = write_file_atomically(opts->timeline, timeline_csv(*sampler, timeline_cpus, t0, t1)); !r)
        throw CliError{kExitFailure, r.error().message};
    }
    std::cout.flush();
    ctx.exit_code = exit_code;
  });
}

}  // namespace erg::cli
