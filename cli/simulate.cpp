// `erg simulate ...`: drives the simulated machine (the one named by --simulate or inherited
// through ERG_SIM_STATE), so measured figures are real model figures, not idle ones.
//
//   erg simulate load --gpus 0,1 --util 0.8 --seconds 3 [--step-ms 230 --ripple 0.35 --duty 0.2]
//   erg simulate load --gpus 0 --share 0.3 --seconds 10   (as a GPU process with a 30 % share)
//   erg simulate load --profile steps.json
//     {"steps": [{"seconds": 1, "util": 0.5, "gpus": [0], "step_ms": 230, "ripple": 0.35, "duty": 0.2}, ...]}
//   erg simulate load --gpus 0 --batch-size 64 --samples-per-s 1200 [--overhead-s 0.005] --steps 30
//     [--max-batch-size B]   (a training job whose step time depends on the batch: see below)
//   erg simulate fault backwards|reset|error|errors3|timeout|lost|clear --gpus 0 [--joules 200]
//   erg simulate zeus ... (simulate_zeus.cpp: replays Zeus's traces, needs no simulated machine)

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "app.hpp"
#include "erg/sim/faults.hpp"
#include "erg/sim/machine.hpp"
#include "signals.hpp"

namespace erg::cli {
namespace {

struct LoadStep {
  double seconds = 0;
  double util = 0;
  std::vector<unsigned> gpus;  // empty = all
  double step_ms = 0;          // the workload's step period (ripple); 0 = steady
  double ripple = 0;           // activity lost in the low part of each step
  double duty = 0.2;           // share of each step in the low part
};

double number_field(const nlohmann::json& s, const char* key, double fallback, const std::string& path) {
  if (!s.contains(key)) return fallback;
  if (!s[key].is_number())
    throw CliError{kExitUsage, "invalid load profile " + path + ": " + key + " must be a number"};
  return s[key].get<double>();
}

std::vector<LoadStep> read_profile(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw CliError{kExitUsage, "cannot read load profile " + path};
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(f);
  } catch (const std::exception& e) {
    throw CliError{kExitUsage, "invalid load profile " + path + ": not JSON"};
  }
  if (!j.is_object() || !j.contains("steps") || !j["steps"].is_array() || j["steps"].empty())
    throw CliError{kExitUsage, "invalid load profile " + path + ": expected {\"steps\": [...]}"};
  std::vector<LoadStep> steps;
  for (const auto& s : j["steps"]) {
    LoadStep step;
    if (!s.is_object() || !s.contains("seconds") || !s["seconds"].is_number() || !s.contains("util") ||
        !s["util"].is_number())
      throw CliError{kExitUsage, "invalid load profile " + path + ": each step needs numeric seconds and util"};
    step.seconds = s["seconds"].get<double>();
    step.util = s["util"].get<double>();
    step.step_ms = number_field(s, "step_ms", 0.0, path);
    step.ripple = number_field(s, "ripple", 0.0, path);
    step.duty = number_field(s, "duty", 0.2, path);
    for (const auto& [k, v] : s.items())
      if (k != "seconds" && k != "util" && k != "gpus" && k != "step_ms" && k != "ripple" && k != "duty")
        throw CliError{kExitUsage, "invalid load profile " + path + ": unknown step field '" + k +
                                       "' (seconds, util, gpus, step_ms, ripple, duty)"};
    if (s.contains("gpus")) {
      if (!s["gpus"].is_array()) throw CliError{kExitUsage, "invalid load profile " + path + ": gpus must be a list"};
      for (const auto& g : s["gpus"]) step.gpus.push_back(g.get<unsigned>());
    }
    steps.push_back(step);
  }
  return steps;
}

}  // namespace

void add_simulate_command(CLI::App& app, Context& ctx) {
  auto* sim = app.add_subcommand(
      "simulate",
      "Drive the simulated machine (load, fault: need --simulate or ERG_SIMULATE) or replay Zeus's traces (zeus)");
  sim->require_subcommand(1);
  add_simulate_zeus_command(*sim, ctx);
  auto* load = sim->add_subcommand("load", "Run a load on simulated GPUs for a while, then return them to idle");
  struct Opts {
    std::vector<unsigned> gpus;
    double util = 1.0;
    double seconds = 1.0;
    std::string profile;
    double step_ms = 0;
    double ripple = 0;
    double duty = 0.2;
    int batch_size = 0;  // > 0: step mode
    double samples_per_s = 0, overhead_s = 0.005;
    unsigned steps = 10;
    int max_batch_size = 0;       // > 0: larger batches "run out of memory"
    std::optional<double> share;  // process mode with this share
    bool process = false;         // process mode: util is this process's share
    double memory_mib = 1024;
  };
  auto opts = std::make_shared<Opts>();
  load->add_option("--gpus", opts->gpus, "GPUs to load (physical simulated indices, e.g. 0,1); default all")
      ->delimiter(',');
  load->add_option("--util", opts->util, "Utilization, 0 to 1")->check(CLI::Range(0.0, 1.0));
  load->add_option("--seconds", opts->seconds, "How long")->check(positive_number());
  load->add_option("--step-ms", opts->step_ms,
                   "The workload's step period, ms: power ripples at it (0: a steady load, the default)")
      ->check(non_negative_number());
  load->add_option("--ripple", opts->ripple, "Share of the utilization lost in the low part of each step (0 to 1)")
      ->check(CLI::Range(0.0, 1.0));
  load->add_option("--duty", opts->duty, "Share of each step in its low part (0 to 1; default 0.2)")
      ->check(CLI::Range(0.0, 1.0));
  load->add_option("--profile", opts->profile,
                   "A JSON load profile: {\"steps\": [{\"seconds\", \"util\", \"gpus\", \"step_ms\", \"ripple\", "
                   "\"duty\"}]}");

  load->add_option("--share", opts->share,
                   "Run as a GPU process with this share of each GPU (0 to 1): the simulated driver lists this "
                   "process (its real pid) among the GPU's running processes and samples its utilization; several "
                   "such loads share a GPU (time-sliced when their shares add up to more than 1). Removed when it "
                   "exits. Implies --process with --util SHARE")
      ->check(CLI::Range(0.0, 1.0));
  load->add_flag("--process", opts->process,
                 "Run as a GPU process (see --share): --util or the profile's util is this process's share");
  load->add_option("--memory-mib", opts->memory_mib, "Process mode: GPU memory the process reports using, MiB")
      ->check(non_negative_number());
  load->add_option("--batch-size", opts->batch_size,
                   "Step mode: run --steps training steps of this many samples on one GPU; a step is "
                   "overhead-s + batch-size / samples-per-s work units (1 unit = 1 s of the GPU fully busy at its "
                   "highest clock), so its time depends on the batch, the SKU and the "
                   "power limit (a steady fully busy load). Writes \"step\"/\"end\" lines to ERG_HETERO_FD when set "
                   "(erg hetero profile)")
      ->check(CLI::PositiveNumber);
  load->add_option("--samples-per-s", opts->samples_per_s, "Step mode: the GPU's samples per work unit")
      ->check(positive_number());
  load->add_option("--overhead-s", opts->overhead_s,
                   "Step mode: work units per step besides the samples (default 0.005)")
      ->check(non_negative_number());
  load->add_option("--steps", opts->steps, "Step mode: how many steps (default 10)")->check(CLI::PositiveNumber);
  load->add_option("--max-batch-size", opts->max_batch_size,
                   "Step mode: a larger batch does not fit: write \"oom\" and exit 0 without running")
      ->check(CLI::PositiveNumber);

  load->callback([&ctx, opts] {
    // Before the machine's threads start (they inherit the blocked signals): SIGINT or SIGTERM
    // ends the load early, returns the GPUs to idle and exits 128 + the signal, as if killed,
    // after removing a machine this process made.
    StopSignals signals;
    if (auto r = ctx.setup_simulation(); !r) throw CliError{kExitUsage, r.error().message};
    if (!ctx.machine)
      throw CliError{kExitUsage, "erg simulate needs a simulated machine: use --simulate SPEC or set ERG_SIMULATE"};
    auto& m = *ctx.machine;
    if (opts->share) {
      opts->process = true;
      opts->util = *opts->share;
    }
    if (opts->process && opts->batch_size > 0)
      throw CliError{kExitUsage, "--share/--process and --batch-size do not mix"};
    if (opts->batch_size > 0) {
      if (opts->samples_per_s <= 0) throw CliError{kExitUsage, "--batch-size needs --samples-per-s"};
      if (opts->gpus.size() > 1) throw CliError{kExitUsage, "--batch-size runs steps on one GPU (--gpus N)"};
      const unsigned g = opts->gpus.empty() ? 0 : opts->gpus[0];
      if (g >= m.gpu_count())
        throw CliError{kExitUsage, "GPU index " + std::to_string(g) + " is out of range (" +
                                       std::to_string(m.gpu_count()) + " simulated GPUs)"};
      int fd = -1;
      if (const char* e = std::getenv("ERG_HETERO_FD"); e != nullptr && *e != '\0') fd = std::atoi(e);
      auto say = [fd](const char* line) {
        if (fd >= 0) (void)!::write(fd, line, std::strlen(line));
      };
      if (opts->max_batch_size > 0 && opts->batch_size > opts->max_batch_size) {
        say("oom\n");
        ctx.exit_code = kExitOk;
        return;
      }
      const double work = opts->overhead_s + opts->batch_size / opts->samples_per_s;
      // A steady, fully busy step: the training load's 230 ms ripple would restart with every
      // (shorter) step and never reach its low part, so the GPU would run hotter than the power
      // limit's controller (which plans for the ripple's mean activity) allows for.
      const sim::Load busy{1.0};
      std::optional<int> stopped_by;
      for (unsigned s = 0; s < opts->steps && !stopped_by; ++s) {
        say("step\n");
        if (auto r = m.run_work(g, work, busy); !r) throw CliError{kExitFailure, r.error().message};
        stopped_by = signals.wait(std::chrono::nanoseconds(0));
      }
      say("end\n");
      ctx.exit_code = stopped_by ? 128 + *stopped_by : kExitOk;
      return;
    }
    std::vector<LoadStep> steps;
    if (!opts->profile.empty()) {
      steps = read_profile(opts->profile);
    } else {
      steps.push_back({opts->seconds, opts->util, opts->gpus, opts->step_ms, opts->ripple, opts->duty});
    }
    for (const auto& s : steps) {
      if (s.util < 0 || s.util > 1 || s.seconds <= 0 || s.step_ms < 0 || s.ripple < 0 || s.ripple > 1 || s.duty < 0 ||
          s.duty > 1)
        throw CliError{kExitUsage, "load step needs 0 <= util, ripple, duty <= 1, seconds > 0 and step_ms >= 0"};
      for (unsigned g : s.gpus)
        if (g >= m.gpu_count())
          throw CliError{kExitUsage, "GPU index " + std::to_string(g) + " is out of range (" +
                                         std::to_string(m.gpu_count()) + " simulated GPUs)"};
    }
    std::vector<unsigned> touched;
    std::optional<int> stopped_by;
    const auto pid = static_cast<std::uint32_t>(::getpid());
    auto leave = [&] {  // process mode: off the GPUs' process tables
      for (unsigned g : touched) (void)m.remove_process(g, pid);
    };
    for (const auto& s : steps) {
      std::vector<unsigned> gpus = s.gpus;
      if (gpus.empty())
        for (unsigned i = 0; i < m.gpu_count(); ++i) gpus.push_back(i);
      if (opts->process) {
        for (unsigned g : gpus) {
          const sim::SimProcess proc{pid, s.util, static_cast<std::uint64_t>(opts->memory_mib * 1048576.0), true,
                                     std::nullopt};
          if (auto r = m.set_process(g, proc); !r) {
            leave();
            throw CliError{kExitFailure, r.error().message};
          }
          if (std::find(touched.begin(), touched.end(), g) == touched.end()) touched.push_back(g);
        }
        stopped_by = signals.wait(
            std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::duration<double>(s.seconds)));
        if (stopped_by) break;
        continue;
      }
      for (unsigned g : gpus) {
        const sim::Load work{s.util, std::chrono::nanoseconds(static_cast<long long>(s.step_ms * 1e6)), s.ripple,
                             s.duty};
        if (auto r = m.set_load(g, work); !r) throw CliError{kExitFailure, r.error().message};
        touched.push_back(g);
      }
      stopped_by =
          signals.wait(std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::duration<double>(s.seconds)));
      if (stopped_by) break;
    }
    if (opts->process) {
      leave();
    } else {
      for (unsigned g : touched) (void)m.set_utilization(g, 0.0);
    }
    ctx.exit_code = stopped_by ? 128 + *stopped_by : kExitOk;
  });

  auto* fault = sim->add_subcommand(
      "fault", "Give simulated GPUs a fault, as real ones have them (to see what every erg face makes of it)");
  struct FaultOpts {
    std::string kind;
    std::vector<unsigned> gpus;
    double joules = sim::kDefaultBackwardsJ;
  };
  auto fo = std::make_shared<FaultOpts>();
  fault
      ->add_option("KIND", fo->kind,
                   "backwards (the energy counter steps back, as seen on AMD), reset (it restarts from 0: a driver "
                   "reload), error (the next call fails), errors3 (the next three), timeout (every call times out), "
                   "lost (the GPU fell off the bus), clear (end errors, timeouts and loss)")
      ->required();
  fault->add_option("--gpus", fo->gpus, "GPUs (physical simulated indices, e.g. 0,1); default 0")->delimiter(',');
  fault->add_option("--joules", fo->joules, "How far `backwards` steps the counter back (J)")
      ->check(non_negative_number());
  fault->callback([&ctx, fo] {
    if (auto r = ctx.setup_simulation(); !r) throw CliError{kExitUsage, r.error().message};
    if (!ctx.machine)
      throw CliError{kExitUsage, "erg simulate needs a simulated machine: use --simulate SPEC or set ERG_SIMULATE"};
    auto& m = *ctx.machine;
    const auto kind = sim::parse_fault(fo->kind);
    if (!kind && fo->kind != "clear")
      throw CliError{kExitUsage, "unknown fault '" + fo->kind + "' (" + std::string(sim::fault_names()) + ", clear)"};
    std::vector<unsigned> gpus = fo->gpus.empty() ? std::vector<unsigned>{0} : fo->gpus;
    for (unsigned g : gpus)
      if (g >= m.gpu_count())
        throw CliError{kExitUsage, "GPU index " + std::to_string(g) + " is out of range (" +
                                       std::to_string(m.gpu_count()) + " simulated GPUs)"};
    for (unsigned g : gpus) {
      auto r = kind ? sim::inject_fault(m, g, *kind, Joules(fo->joules)) : sim::clear_faults(m, g);
      if (!r) throw CliError{kExitFailure, r.error().message};
    }
    ctx.exit_code = kExitOk;
  });
}

}  // namespace erg::cli
