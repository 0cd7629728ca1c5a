// `erg simulate zeus ...`: the Zeus NSDI'23 trace-driven simulation (erg::zeus_sim). It reads the
// measured traces only, so it needs no simulated machine.
//
//   erg simulate zeus --gpu v100 [--workload cifar100] [--eta 0.5] [--beta 2] [--seed 1]
//                     [--recurrences N] [--trace-dir DIR] [--json]
//   erg simulate zeus --all ...

#include "simulate_zeus.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "app.hpp"
#include "erg/optimizers/zeus_sim/simulator.hpp"
#include "erg/optimizers/zeus_sim/trace.hpp"

namespace erg::cli {
namespace {

using nlohmann::json;

struct ZeusOpts {
  std::string gpu;
  std::string workload;
  bool all = false;
  double eta = 0.5;
  double beta = 2.0;
  std::uint64_t seed = 1;
  int recurrences = 0;  // 0: the default, 2·|B|·|P|
  std::string trace_dir;
  bool json = false;
};

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

/// JSON has no infinity: an infeasible figure is null.
json finite(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

json config_json(const zeus_sim::Config& c) {
  return {{"batch_size", c.batch_size}, {"power_limit_w", c.power_limit.value()}};
}
json totals_json(const zeus_sim::Totals& t) {
  return {{"energy_j", finite(t.energy.value())}, {"time_s", finite(t.time.count())}, {"cost", finite(t.cost)}};
}

std::string fixed(double v, int digits) {
  if (!std::isfinite(v)) return "n/a";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}
std::string at(const zeus_sim::Config& c) {
  return std::to_string(c.batch_size) + "@" + fixed(c.power_limit.value(), 0) + "W";
}

void print_table(const zeus_sim::Sweep& s, const zeus_sim::Options& o) {
  std::printf("Trace-driven simulation (Zeus NSDI'23 traces; simulated recurrences, not a measurement)\n");
  std::printf("eta %g, beta %g, seed %llu; energy in MJ, time in hours, cost in MJ\n\n", o.eta, o.beta.value_or(0),
              static_cast<unsigned long long>(o.seed));
  std::printf("%-8s %-13s %5s %12s %9s %9s %7s %8s %8s %7s %9s %9s %7s %12s %12s %6s\n", "gpu", "workload", "runs",
              "baseline", "base MJ", "erg MJ", "E save", "base h", "erg h", "T save", "base cost", "erg cost", "C save",
              "converged", "optimum", "gap");
  for (const auto& p : s.pairs) {
    std::printf("%-8s %-13s %5d %12s %9s %9s %6s%% %8s %8s %6s%% %9s %9s %6s%% %12s %12s %5s%%\n", p.gpu.c_str(),
                p.workload.name.c_str(), p.recurrences, at(p.baseline_config).c_str(),
                fixed(p.baseline.energy.value() / 1e6, 2).c_str(), fixed(p.erg.energy.value() / 1e6, 2).c_str(),
                fixed(p.energy_improvement_pct(), 1).c_str(), fixed(p.baseline.time.count() / 3600, 1).c_str(),
                fixed(p.erg.time.count() / 3600, 1).c_str(), fixed(p.time_improvement_pct(), 1).c_str(),
                fixed(p.baseline.cost / 1e6, 2).c_str(), fixed(p.erg.cost / 1e6, 2).c_str(),
                fixed(p.cost_improvement_pct(), 1).c_str(), at(p.converged).c_str(), at(p.optimum).c_str(),
                fixed(p.converged_gap_pct(), 1).c_str());
  }
  for (const auto& k : s.skipped)
    std::printf("skipped %s %s: %s\n", k.gpu.c_str(), k.workload.c_str(), k.reason.c_str());
}

}  // namespace

json zeus_pair_json(const zeus_sim::PairResult& p) {
  json j;
  j["gpu"] = p.gpu;
  j["workload"] = p.workload.name;
  j["network"] = p.workload.network;
  j["optimizer"] = p.workload.optimizer;
  j["target_metric"] = p.workload.target_metric;
  j["max_epochs"] = p.workload.max_epochs;
  j["default_batch_size"] = p.workload.default_batch_size;
  j["batch_sizes"] = p.batch_sizes;
  json limits = json::array();
  for (auto l : p.power_limits) limits.push_back(l.value());
  j["power_limits_w"] = limits;
  j["max_power_w"] = p.max_power.value();
  j["recurrences"] = p.recurrences;
  json base = config_json(p.baseline_config);
  base.update(totals_json(p.baseline));
  j["baseline"] = base;
  j["erg"] = totals_json(p.erg);
  j["improvement_pct"] = {
      {"energy", p.energy_improvement_pct()}, {"time", p.time_improvement_pct()}, {"cost", p.cost_improvement_pct()}};
  json conv = config_json(p.converged);
  conv["expected_run"] = totals_json(p.converged_run);
  j["converged"] = conv;
  json opt = config_json(p.optimum);
  opt["expected_run"] = totals_json(p.optimum_run);
  j["optimum"] = opt;
  j["converged_gap_pct"] = finite(p.converged_gap_pct());
  return j;
}

zeus_sim::Traces load_zeus_traces(const std::string& trace_dir) {
  std::filesystem::path dir = trace_dir;
  if (dir.empty()) {
    auto found = zeus_sim::find_trace_dir();
    if (!found) throw CliError{kExitFailure, found.error().message};
    dir = *found;
  }
  auto traces = zeus_sim::load_traces(dir);
  if (!traces)
    throw CliError{traces.error().code == ErrorCode::kNotFound ? kExitUsage : kExitFailure, traces.error().message};
  return std::move(*traces);
}

void add_simulate_zeus_command(CLI::App& simulate, Context& ctx) {
  auto* zeus = simulate.add_subcommand(
      "zeus",
      "Replay Zeus's NSDI'23 traces: a recurring training job whose batch size and power limit erg optimizes, "
      "against the default batch size at the maximum limit (a trace-driven simulation; needs no --simulate)");
  auto o = std::make_shared<ZeusOpts>();
  std::vector<std::string> gpu_names;
  for (auto g : zeus_sim::trace_gpus()) gpu_names.emplace_back(g);
  std::vector<std::string> workload_names;
  for (const auto& w : zeus_sim::workloads()) workload_names.push_back(w.name);
  auto* gpu = zeus->add_option("--gpu", o->gpu, "GPU model of the power trace: " + joined(gpu_names));
  auto* workload =
      zeus->add_option("--workload", o->workload, "One workload (default: every one): " + joined(workload_names));
  auto* all = zeus->add_flag("--all", o->all, "Every GPU × workload pair whose default batch size the trace has");
  all->excludes(gpu)->excludes(workload);
  zeus->add_option("--eta", o->eta, "Weight of energy against time in the cost, 0 to 1 (default 0.5)")
      ->check(CLI::Range(0.0, 1.0));
  zeus->add_option("--beta", o->beta, "Early stopping: a run stops past beta × the least cost seen (default 2)")
      ->check(positive_number());
  zeus->add_option("--seed", o->seed, "Seed of the sampled training runs and the optimizer (default 1)");
  zeus->add_option("--recurrences", o->recurrences, "How often the job recurs (default 2 × batch sizes × limits)")
      ->check(CLI::PositiveNumber);
  zeus->add_option("--trace-dir", o->trace_dir,
                   "Directory of summary_train.csv and summary_power_<gpu>.csv (default: erg's own copy)");
  zeus->add_flag("--json", o->json, "One JSON object");

  zeus->callback([&ctx, o, gpu_names] {
    if (!o->all && o->gpu.empty() && o->workload.empty())
      throw CliError{kExitUsage, "erg simulate zeus needs --gpu, --workload or --all"};
    std::string gpu_key = o->gpu;
    std::transform(gpu_key.begin(), gpu_key.end(), gpu_key.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (!gpu_key.empty() && std::find(gpu_names.begin(), gpu_names.end(), gpu_key) == gpu_names.end())
      throw CliError{kExitUsage, "unknown GPU '" + o->gpu + "' (" + joined(gpu_names) + ")"};
    std::vector<zeus_sim::Workload> ws;
    if (o->workload.empty()) {
      ws.assign(zeus_sim::workloads().begin(), zeus_sim::workloads().end());
    } else if (const auto* w = zeus_sim::find_workload(o->workload)) {
      ws.push_back(*w);
    } else {
      std::vector<std::string> names;
      for (const auto& x : zeus_sim::workloads()) names.push_back(x.name);
      throw CliError{kExitUsage, "unknown workload '" + o->workload + "' (" + joined(names) + ")"};
    }
    zeus_sim::Options opts;
    opts.eta = o->eta;
    opts.beta = o->beta;
    opts.seed = o->seed;
    if (o->recurrences > 0) opts.recurrences = o->recurrences;
    if (auto v = zeus_sim::validate(opts); !v) throw CliError{kExitUsage, v.error().message};

    const zeus_sim::Traces loaded = load_zeus_traces(o->trace_dir);
    const zeus_sim::Traces* traces = &loaded;
    const std::string dir = o->trace_dir.empty() ? std::string("erg's traces") : o->trace_dir;
    std::vector<std::string> gpus;
    for (const auto& g : gpu_key.empty() ? gpu_names : std::vector<std::string>{gpu_key}) {
      if (traces->power.contains(g)) {
        gpus.push_back(g);
      } else if (!gpu_key.empty()) {
        throw CliError{kExitUsage, "no power trace for " + g + " in " + dir};
      }
    }
    auto s = zeus_sim::sweep(*traces, gpus, ws, opts);
    if (!s) throw CliError{kExitFailure, s.error().message};
    if (!gpu_key.empty() && !o->workload.empty() && s->pairs.empty())
      throw CliError{kExitFailure, "cannot simulate " + o->workload + " on " + gpu_key + ": " + s->skipped[0].reason};

    if (o->json) {
      json j;
      j["simulated"] = true;
      j["kind"] = "trace-driven";
      j["traces"] = "Zeus NSDI'23";
      j["eta"] = opts.eta;
      j["beta"] = *opts.beta;
      j["seed"] = opts.seed;
      json pairs = json::array();
      for (const auto& p : s->pairs) pairs.push_back(zeus_pair_json(p));
      j["pairs"] = pairs;
      json skipped = json::array();
      for (const auto& k : s->skipped)
        skipped.push_back({{"gpu", k.gpu}, {"workload", k.workload}, {"reason", k.reason}});
      j["skipped"] = skipped;
      std::cout << j.dump(2) << "\n";
    } else {
      print_table(*s, opts);
    }
    ctx.exit_code = kExitOk;
  });
}

}  // namespace erg::cli
