// `erg simulate ...`: drives the simulated machine (the one named by --simulate or inherited
// through ERG_SIM_STATE), so measured figures are real model figures, not idle ones.
//
//   erg simulate load --gpus 0,1 --util 0.8 --seconds 3
//   erg simulate load --profile steps.json   {"steps": [{"seconds": 1, "util": 0.5, "gpus": [0]}, ...]}

#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "app.hpp"
#include "erg/sim/machine.hpp"

namespace erg::cli {
namespace {

struct LoadStep {
  double seconds = 0;
  double util = 0;
  std::vector<unsigned> gpus;  // empty = all
};

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
  auto* sim = app.add_subcommand("simulate", "Drive the simulated machine (needs --simulate or ERG_SIMULATE)");
  sim->require_subcommand(1);
  auto* load = sim->add_subcommand("load", "Run a load on simulated GPUs for a while, then return them to idle");
  struct Opts {
    std::vector<unsigned> gpus;
    double util = 1.0;
    double seconds = 1.0;
    std::string profile;
  };
  auto opts = std::make_shared<Opts>();
  load->add_option("--gpus", opts->gpus, "GPUs to load (physical simulated indices, e.g. 0,1); default all")
      ->delimiter(',');
  load->add_option("--util", opts->util, "Utilization, 0 to 1")->check(CLI::Range(0.0, 1.0));
  load->add_option("--seconds", opts->seconds, "How long")->check(CLI::PositiveNumber);
  load->add_option("--profile", opts->profile, "A JSON load profile: {\"steps\": [{\"seconds\", \"util\", \"gpus\"}]}");

  load->callback([&ctx, opts] {
    if (auto r = ctx.setup_simulation(); !r) throw CliError{kExitUsage, r.error().message};
    if (!ctx.machine)
      throw CliError{kExitUsage, "erg simulate needs a simulated machine: use --simulate SPEC or set ERG_SIMULATE"};
    auto& m = *ctx.machine;
    std::vector<LoadStep> steps;
    if (!opts->profile.empty()) {
      steps = read_profile(opts->profile);
    } else {
      steps.push_back({opts->seconds, opts->util, opts->gpus});
    }
    for (const auto& s : steps) {
      if (s.util < 0 || s.util > 1 || s.seconds <= 0)
        throw CliError{kExitUsage, "load step needs 0 <= util <= 1 and seconds > 0"};
      for (unsigned g : s.gpus)
        if (g >= m.gpu_count())
          throw CliError{kExitUsage, "GPU index " + std::to_string(g) + " is out of range (" +
                                         std::to_string(m.gpu_count()) + " simulated GPUs)"};
    }
    std::vector<unsigned> touched;
    for (const auto& s : steps) {
      std::vector<unsigned> gpus = s.gpus;
      if (gpus.empty())
        for (unsigned i = 0; i < m.gpu_count(); ++i) gpus.push_back(i);
      for (unsigned g : gpus) {
        if (auto r = m.set_utilization(g, s.util); !r) throw CliError{kExitFailure, r.error().message};
        touched.push_back(g);
      }
      std::this_thread::sleep_for(std::chrono::duration<double>(s.seconds));
    }
    for (unsigned g : touched) (void)m.set_utilization(g, 0.0);
    ctx.exit_code = kExitOk;
  });
}

}  // namespace erg::cli
