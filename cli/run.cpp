// `erg run -- CMD ARGS...`: runs a command and measures GPUs, CPU packages and DRAM over its
// lifetime, like `time` or `perf stat` for energy.

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <optional>

#include "app.hpp"
#include "carbon_cli.hpp"
#include "erg/carbon/hourly.hpp"
#include "erg/core/file.hpp"
#include "erg/measure/energy_monitor.hpp"
#include "erg/measure/power_monitor.hpp"
#include "run_log.hpp"
#include "run_record.hpp"
#include "summary.hpp"

extern char** environ;

namespace erg::cli {
namespace {

volatile sig_atomic_t g_child = 0;
volatile sig_atomic_t g_pending = 0;  // a signal that came while there was no child to forward it to

/// Forwards SIGINT/SIGTERM to the child. A SIGINT typed at the terminal (si_code SI_KERNEL)
/// already reached the child through the process group, so it is not sent twice. Before the child
/// exists the signal is kept: erg then does not start the command (or forwards it at once if the
/// child was just being started).
void forward_signal(int sig, siginfo_t* info, void*) {
  if (g_child <= 0) {
    g_pending = sig;
    return;
  }
  if (sig == SIGINT && info != nullptr && info->si_code == SI_KERNEL) return;
  ::kill(static_cast<pid_t>(g_child), sig);
}

struct SignalForwarding {
  struct sigaction old_int {};
  struct sigaction old_term {};
  SignalForwarding() {
    g_pending = 0;
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

/// The JSON document of `erg run`: the command, its exit code (null while it runs) and whether
/// the document is final ("complete") around the measurement's fields.
nlohmann::json run_document(const std::vector<std::string>& command, const measure::Measurement& m,
                            const Inventory& inventory, const std::string& status, std::optional<int> exit_code,
                            const std::string& error = "", const CarbonCli* carbon = nullptr) {
  nlohmann::json out;
  out["command"] = command;
  out["exit_code"] = exit_code ? nlohmann::json(*exit_code) : nlohmann::json(nullptr);
  out["status"] = status;
  out["complete"] = status == "complete";
  const nlohmann::json fields = measurement_json(m, inventory);
  for (const auto& [k, v] : fields.items()) out[k] = v;
  if (!error.empty()) out["error"] = error;
  if (carbon != nullptr) carbon->add_json(out);
  return out;
}

/// Indented JSON and a newline; bytes that are not UTF-8 (a command's arguments may hold any) are
/// replaced rather than thrown on.
std::string json_text(const nlohmann::json& j) {
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

/// The measurement of a run that has just begun: every measured device at 0 J.
measure::Measurement nothing_yet(const measure::EnergyMonitor& monitor, const Inventory& inventory) {
  measure::Measurement m;
  for (unsigned g : monitor.gpu_indices()) {
    measure::GpuEnergy e;
    e.index = g;
    const bool counter = g < inventory.gpus.size() && inventory.gpus[g]->capabilities().energy_counter;
    e.source = counter ? measure::EnergySource::kCounter : measure::EnergySource::kIntegrated;
    e.short_window = true;
    m.gpus.push_back(e);
  }
  for (unsigned c : monitor.cpu_indices()) {
    measure::CpuEnergy e;
    e.index = c;
    for (const auto& cpu : inventory.cpus)
      if (cpu->index() == c && cpu->capabilities().dram) e.dram = Joules(0.0);
    m.cpus.push_back(e);
  }
  return m;
}

bool same_file(const std::string& a, const std::string& b) {
  std::error_code ea, eb;
  const auto ca = std::filesystem::weakly_canonical(a, ea), cb = std::filesystem::weakly_canonical(b, eb);
  return !ea && !eb && ca == cb;
}

std::string signal_name(int sig) { return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : std::to_string(sig); }

}  // namespace

void add_run_command(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand("run", "Run a command and measure the energy of GPUs, CPU packages and DRAM over it");
  struct Opts {
    bool json = false;
    std::string output;
    std::string timeline;
    std::string record;
    std::vector<unsigned> gpus;
    std::vector<unsigned> cpus;
    std::vector<std::string> command;
    bool no_settle = false;
    CarbonCli carbon;
  };
  auto opts = std::make_shared<Opts>();
  cmd->add_flag("--json", opts->json, "Print one JSON object to stdout (or --output)");
  cmd->add_option("--output", opts->output,
                  "Write the JSON result to FILE instead of stdout. While the command runs, FILE is replaced "
                  "(atomically) every second with the energy so far (\"complete\": false, \"status\": "
                  "\"running\"); at the end with the result (\"complete\": true)");
  cmd->add_option("--timeline", opts->timeline,
                  "Write the sampled power timeline to FILE.csv (time_s,device,domain,power_w), appended every "
                  "second while the command runs");
  cmd->add_option("--record", opts->record,
                  "Record the run in FILE.ergrec for `erg report` (SQLite, docs/report.md): power timelines, "
                  "windows, optimizer events, carbon and cost, committed every second. The command finds the path "
                  "in ERG_RECORD (erg optimize power-limit adds its profile there)");
  cmd->add_option("--gpus", opts->gpus, "GPUs to measure (erg indices, e.g. 0,2); default all")->delimiter(',');
  cmd->add_option("--cpus", opts->cpus, "CPU packages to measure (e.g. 0); default all available")->delimiter(',');
  cmd->add_flag("--no-settle", opts->no_settle,
                "Return when the command exits instead of waiting (at most one counter period, ~0.1 s) for the "
                "GPU counters' next update; the last part is then extrapolated (extrapolated_s says how much)");
  opts->carbon.add_options(*cmd);
  cmd->add_option("command", opts->command, "The command to run, after --");
  cmd->footer(
      "Exits with the command's exit code (128 + signal if it was killed). The summary goes to stderr. "
      "SIGINT and SIGTERM are forwarded to the command; erg writes its results when it exits. If erg itself "
      "is killed (SIGKILL, a crash), --output and --timeline keep what was written up to the last second: a "
      "well-formed JSON document with \"complete\": false and the energy so far, and the timeline's rows.");

  cmd->callback([&ctx, opts] {
    // First: a SIGINT or SIGTERM from here on ends erg cleanly (before the command starts: without
    // starting it), so a simulated machine it made is removed and no file is left half-written.
    SignalForwarding forwarding;
    if (opts->command.empty())
      throw CliError{kExitUsage, "erg run needs a command after --, e.g. erg run -- python3 train.py"};
    if (!opts->output.empty())
      if (auto r = check_writable(opts->output); !r) throw CliError{kExitUsage, r.error().message};
    if (!opts->timeline.empty())
      if (auto r = check_writable(opts->timeline); !r) throw CliError{kExitUsage, r.error().message};
    if (!opts->record.empty())
      if (auto r = check_writable(opts->record); !r) throw CliError{kExitUsage, r.error().message};
    for (const auto* other : {&opts->output, &opts->timeline})
      if (!opts->record.empty() && !other->empty() && same_file(opts->record, *other))
        throw CliError{kExitUsage, "--record and another output name the same file (" + opts->record + ")"};
    if (!opts->output.empty() && !opts->timeline.empty() && same_file(opts->output, opts->timeline))
      throw CliError{kExitUsage, "--output and --timeline name the same file (" + opts->output + ")"};
    opts->carbon.setup();

    auto inventory = ctx.discover(opts->gpus, opts->cpus);
    if (!inventory) throw CliError{kExitUsage, inventory.error().message};
    auto monitor = make_energy_monitor(*inventory, opts->gpus, opts->cpus, !opts->no_settle);
    const Clock& clock = SteadyClock::instance();
    // With --carbon/--price the run's energy is also split at UTC hours (carbon/hourly.hpp).
    std::unique_ptr<carbon::HourlyEnergyMonitor> hourly;
    if (opts->carbon.active()) {
      carbon::HourlyOptions ho;
      ho.on_hour_end = [c = &opts->carbon](carbon::UtcHour h) { c->on_hour_end(h); };
      hourly = carbon::HourlyEnergyMonitor::wrap(*monitor, clock, std::move(ho));
    }

    std::unique_ptr<measure::PowerMonitor> sampler;
    std::vector<unsigned> timeline_cpus;
    std::vector<std::shared_ptr<Cpu>> sampled_cpus;
    if (!opts->timeline.empty() || !opts->record.empty()) {
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
      sampled_cpus = cpus;
    }

    std::vector<char*> argv;
    for (auto& a : opts->command) argv.push_back(a.data());
    argv.push_back(nullptr);

    const std::string window = "erg.run";
    auto t0 = clock.now();
    if (auto r = hourly ? hourly->begin_window(window, false) : monitor->begin_window(window, false); !r)
      throw CliError{kExitFailure, r.error().message};
    // The files are set up before the command starts (a path that cannot be written is an error
    // now, not after the run) and appear once it runs.
    std::unique_ptr<TimelineLog> timeline;
    std::unique_ptr<RunRecord> record;
    if (!opts->record.empty()) {
      auto r =
          RunRecord::create(opts->record, *sampler, inventory->gpus, sampled_cpus, inventory->simulated, t0, clock);
      if (!r) throw CliError{kExitFailure, r.error().message};
      record = std::move(*r);
      (void)record->writer().set_meta(
          "command", nlohmann::json(opts->command).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
      (void)record->writer().set_meta("status", "running");
      // For the command (it may add windows and events), absolute: it may change directory.
      ::setenv(report::kRecordEnv, std::filesystem::absolute(opts->record).c_str(), 1);
    }
    if (sampler && !opts->timeline.empty()) {
      auto t = TimelineLog::create(opts->timeline, *sampler, timeline_cpus, t0, clock);
      if (!t) throw CliError{kExitFailure, t.error().message};
      timeline = std::move(*t);
    }
    std::unique_ptr<ProgressWindows> progress;
    if (!opts->output.empty()) {
      progress = std::make_unique<ProgressWindows>(*monitor, window + ".progress.");
      if (auto r = progress->start(); !r) throw CliError{kExitFailure, r.error().message};
    }
    // Snapshots while running are not synced to disk (they survive erg's death, not the machine's;
    // the window in which a kill leaves a temporary file beside FILE stays microseconds); the
    // final document is.
    auto write_output = [&](const measure::Measurement& m, const std::string& status, std::optional<int> code,
                            const std::string& error = "", const CarbonCli* carbon = nullptr) {
      const std::string text = json_text(run_document(opts->command, m, *inventory, status, code, error, carbon));
      return status == "running" ? write_file_atomic(opts->output, text, 0644, /*sync=*/false)
                                 : write_file_atomically(opts->output, text);
    };

    if (const int sig = g_pending; sig != 0)
      throw CliError{128 + sig, "stopped by " + signal_name(sig) + " before '" + opts->command[0] + "' started"};
    pid_t pid = 0;
    int rc = ::posix_spawnp(&pid, argv[0], nullptr, nullptr, argv.data(), environ);
    if (rc != 0) {
      (void)(hourly ? hourly->cancel_window(window) : monitor->cancel_window(window));
      throw CliError{rc == ENOENT ? 127 : 126, "cannot run '" + opts->command[0] + "': " + std::strerror(rc)};
    }
    g_child = pid;
    if (const int sig = g_pending; sig != 0) {  // came while the command was being started
      g_pending = 0;
      ::kill(pid, sig);
    }

    // While the command runs: the files as of the last period survive whatever happens to erg.
    if (timeline)
      if (auto r = timeline->publish(); !r) std::cerr << "erg: warning: " << r.error().message << "\n";
    if (progress)
      if (auto r = write_output(nothing_yet(*monitor, *inventory), "running", std::nullopt); !r)
        std::cerr << "erg: warning: " << r.error().message << "\n";
    PeriodicWriter writer(kRunLogPeriod, [&] {
      std::vector<std::string> problems;
      if (record)
        if (auto r = record->flush(clock.now()); !r) problems.push_back(r.error().message);
      if (timeline)
        if (auto r = timeline->flush(clock.now()); !r) problems.push_back(r.error().message);
      if (progress) {
        if (auto m = progress->step(); !m)
          problems.push_back("the energy so far for " + opts->output + ": " + m.error().message);
        else if (auto r = write_output(*m, "running", std::nullopt); !r)
          problems.push_back(r.error().message);
      }
      return problems;
    });

    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    g_child = 0;
    auto t1 = timeline ? timeline->mark_end() : clock.now();
    std::optional<carbon::HourlyMeasurement> by_hour;
    Result<measure::Measurement> measurement = fail(ErrorCode::kInternal, "no measurement");
    if (hourly) {
      auto hm = hourly->end_window(window, false);
      if (hm) {
        measurement = hm->energy;
        by_hour = std::move(*hm);
      } else {
        measurement = fail(hm.error());
      }
    } else {
      measurement = monitor->end_window(window, false);
    }
    writer.stop();
    if (progress) progress->stop();
    if (sampler) sampler->stop();

    int exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : (WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 1);
    std::string timeline_error;
    if (record) {
      ::unsetenv(report::kRecordEnv);
      auto& w = record->writer();
      Result<void> r = record->flush(t1, /*final_rows=*/true);
      if (r && measurement) r = record->add_window(window, t0, t1, *measurement);
      if (r) r = w.set_meta("exit_code", std::to_string(exit_code));
      if (r) r = w.set_meta("status", measurement ? "complete" : "failed");
      if (!r) timeline_error = r.error().message;
    }
    if (timeline)
      if (auto r = timeline->finish(t1); !r) timeline_error = r.error().message;
    if (!measurement) {
      if (progress) {
        const auto& so_far = progress->total();
        (void)write_output(so_far.gpus.empty() && so_far.cpus.empty() ? nothing_yet(*monitor, *inventory) : so_far,
                           "failed", exit_code, measurement.error().message);
      }
      throw CliError{kExitFailure, measurement.error().message};
    }
    if (by_hour) opts->carbon.attribute(*by_hour);  // provider problems become warnings, never errors
    if (record && opts->carbon.active()) {
      nlohmann::json c;
      opts->carbon.add_json(c);
      if (auto r = record->writer().add_event({record->writer().seconds_now(), "carbon", c}); !r)
        timeline_error = r.error().message;
    }
    std::cerr << measurement_table(*measurement, *inventory) << opts->carbon.table();

    if (opts->json || !opts->output.empty()) {
      if (!opts->output.empty()) {
        if (auto r = write_output(*measurement, "complete", exit_code, "", &opts->carbon); !r)
          throw CliError{kExitFailure, r.error().message};
      } else {
        std::cout << json_text(
            run_document(opts->command, *measurement, *inventory, "complete", exit_code, "", &opts->carbon));
      }
    }
    if (!timeline_error.empty()) throw CliError{kExitFailure, timeline_error};
    std::cout.flush();
    ctx.exit_code = exit_code;
  });
}

}  // namespace erg::cli
