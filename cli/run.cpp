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

std::string timeline_csv(const measure::PowerMonitor& pm, std::chrono::nanoseconds t0, std::chrono::nanoseconds t1) {
  std::ostringstream out;
  out << "time_s,device,domain,power_w\n";
  char buf[160];
  for (unsigned g : pm.gpu_indices()) {
    for (auto d : pm.domains()) {
      auto points = pm.gpu_timeline(g, d, t0, t1);
      if (!points) continue;
      for (const auto& p : *points) {
        std::snprintf(buf, sizeof buf, "%.6f,gpu%u,%s,%.3f\n", std::chrono::duration<double>(p.time - t0).count(), g,
                      std::string(to_string(d)).c_str(), p.watts);
        out << buf;
      }
    }
  }
  for (unsigned c = 0; c < 64; ++c) {
    for (auto [domain, label] :
         {std::pair{measure::CpuDomain::kPackage, "package"}, std::pair{measure::CpuDomain::kDram, "dram"}}) {
      auto points = pm.cpu_timeline(c, domain, t0, t1);
      if (!points) continue;
      for (const auto& p : *points) {
        std::snprintf(buf, sizeof buf, "%.6f,cpu%u,%s,%.3f\n", std::chrono::duration<double>(p.time - t0).count(), c,
                      label, p.watts);
        out << buf;
      }
    }
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
  };
  auto opts = std::make_shared<Opts>();
  cmd->add_flag("--json", opts->json, "Print one JSON object to stdout (or --output)");
  cmd->add_option("--output", opts->output, "Write the JSON result to FILE instead of stdout");
  cmd->add_option("--timeline", opts->timeline, "Write the sampled power timeline to FILE.csv");
  cmd->add_option("--gpus", opts->gpus, "GPUs to measure (erg indices, e.g. 0,2); default all")->delimiter(',');
  cmd->add_option("--cpus", opts->cpus, "CPU packages to measure (e.g. 0); default all available")->delimiter(',');
  cmd->add_option("command", opts->command, "The command to run, after --")->required();
  cmd->footer("Exits with the command's exit code (128 + signal if it was killed). The summary goes to stderr.");

  cmd->callback([&ctx, opts] {
    if (!opts->output.empty())
      if (auto r = check_writable(opts->output); !r) throw CliError{kExitUsage, r.error().message};
    if (!opts->timeline.empty())
      if (auto r = check_writable(opts->timeline); !r) throw CliError{kExitUsage, r.error().message};

    auto inventory = ctx.discover();
    if (!inventory) throw CliError{kExitUsage, inventory.error().message};
    auto monitor = make_energy_monitor(*inventory, opts->gpus, opts->cpus);

    std::unique_ptr<measure::PowerMonitor> sampler;
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
    auto measurement = monitor->end_window(window, false);
    auto t1 = SteadyClock::instance().now();
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
      if (auto r = write_file_atomically(opts->timeline, timeline_csv(*sampler, t0, t1)); !r)
        throw CliError{kExitFailure, r.error().message};
    }
    std::cout.flush();
    ctx.exit_code = exit_code;
  });
}

}  // namespace erg::cli
