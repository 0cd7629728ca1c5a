// `erg hetero plan`: splits a global batch over GPUs of different types and picks each GPU's power
// limit from per-type profiles (erg::hetero, docs/hetero.md). The plan is a prediction from the
// profiles; nothing runs on a GPU.
//
//   erg hetero plan --profile a10.csv --profile t4.csv:3 --global-batch 256 [--eta 0.5]
//                   [--method brute|heuristic|baseline|all] [--json]
//
// One --profile per GPU; FILE:COUNT stands for COUNT GPUs of that file's type.

#include <cctype>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "app.hpp"
#include "erg/optimizers/hetero/planner.hpp"
#include "erg/optimizers/hetero/profile.hpp"

namespace erg::cli {
namespace {

using nlohmann::json;

struct PlanOpts {
  std::vector<std::string> profiles;
  int global_batch = 0;
  double eta = 0.5;
  std::string method = "heuristic";
  bool json = false;
};

/// "a.csv:2" → ("a.csv", 2); a suffix that is not a count stays part of the path.
std::pair<std::string, int> split_count(const std::string& spec) {
  const auto colon = spec.rfind(':');
  if (colon == std::string::npos || colon + 1 == spec.size()) return {spec, 1};
  const std::string tail = spec.substr(colon + 1);
  for (char c : tail)
    if (!std::isdigit(static_cast<unsigned char>(c))) return {spec, 1};
  if (tail.size() > 4 || std::stoi(tail) < 1)
    throw CliError{kExitUsage, "--profile " + spec + ": the GPU count must be 1 to 9999"};
  return {spec.substr(0, colon), std::stoi(tail)};
}

json gpu_json(std::size_t index, const hetero::GpuPlan& g) {
  return {{"index", index},
          {"gpu_type", g.gpu_type},
          {"batch_size", g.batch_size},
          {"power_limit_w", g.power_limit.value()},
          {"step_time_s", g.step_time.count()},
          {"avg_power_w", g.avg_power.value()},
          {"energy_j", g.energy.value()}};
}

json plan_json(const hetero::Plan& p) {
  json gpus = json::array();
  for (std::size_t i = 0; i < p.gpus.size(); ++i) gpus.push_back(gpu_json(i, p.gpus[i]));
  return {{"method", std::string(hetero::to_string(p.method))},
          {"step_time_s", p.step_time.count()},
          {"energy_j", p.energy.value()},
          {"cost", p.cost},
          {"max_power_sum_w", p.max_power_sum.value()},
          {"evaluations", p.evaluations},
          {"gpus", gpus}};
}

void print_plan(const hetero::Plan& p) {
  std::printf("%s: step %.4f s, energy %.2f J/step, cost %.2f\n", std::string(hetero::to_string(p.method)).c_str(),
              p.step_time.count(), p.energy.value(), p.cost);
  std::printf("  %-4s %-12s %8s %8s %10s %9s %10s\n", "gpu", "type", "batch", "limit W", "step s", "power W",
              "energy J");
  for (std::size_t i = 0; i < p.gpus.size(); ++i) {
    const auto& g = p.gpus[i];
    std::printf("  %-4zu %-12s %8d %8.0f %10.4f %9.1f %10.2f\n", i, g.gpu_type.c_str(), g.batch_size,
                g.power_limit.value(), g.step_time.count(), g.avg_power.value(), g.energy.value());
  }
}

void add_plan_command(CLI::App& hetero, Context& ctx) {
  auto* plan = hetero.add_subcommand(
      "plan",
      "Split a global batch over GPUs of different types and pick each GPU's power limit, minimizing Zeus's cost "
      "eta*energy + (1-eta)*sum(max power)*step time per step, from per-type profiles (a prediction; runs nothing)");
  auto o = std::make_shared<PlanOpts>();
  plan->add_option("--profile", o->profiles,
                   "Profile CSV of one GPU (repeat per GPU), or FILE:COUNT for COUNT GPUs of that type "
                   "(format: docs/hetero.md)")
      ->required();
  plan->add_option("--global-batch", o->global_batch, "Samples per data-parallel step, over all GPUs")
      ->required()
      ->check(CLI::PositiveNumber);
  plan->add_option("--eta", o->eta, "Weight of energy against time in the cost, 0 to 1 (default 0.5)")
      ->check(CLI::Range(0.0, 1.0));
  plan->add_option("--method", o->method,
                   "brute (exhaustive, exact), heuristic (default), baseline (even split at the highest limits), "
                   "or all (each, with the gaps)")
      ->check(CLI::IsMember({"brute", "heuristic", "baseline", "all"}));
  plan->add_flag("--json", o->json, "One JSON object");
  plan->footer(
      "Domain: per-GPU batch sizes between the type's smallest and largest profiled ones, step time and power "
      "interpolated linearly in between; profiled power limits only. A GPU that finishes early waits at the "
      "barrier at its type's idle_power_w.\n");

  plan->callback([&ctx, o] {
    // Each distinct file is read once; GPUs of one file share its profile.
    std::map<std::string, std::unique_ptr<hetero::Profile>> loaded;
    std::vector<const hetero::Profile*> gpus;
    json gpu_list = json::array();
    for (const auto& spec : o->profiles) {
      auto [path, count] = split_count(spec);
      auto& slot = loaded[path];
      if (!slot) {
        auto p = hetero::load_profile(path);
        if (!p) throw CliError{p.error().code == ErrorCode::kIo ? kExitFailure : kExitUsage, p.error().message};
        slot = std::make_unique<hetero::Profile>(std::move(*p));
      }
      for (int k = 0; k < count; ++k) {
        gpu_list.push_back({{"index", gpus.size()}, {"gpu_type", slot->gpu_type}, {"profile", path}});
        gpus.push_back(slot.get());
      }
    }
    const hetero::PlanRequest req{gpus, o->global_batch, o->eta};
    if (auto v = hetero::validate(req); !v) throw CliError{kExitUsage, v.error().message};

    std::vector<hetero::Method> methods;
    if (o->method == "all")
      methods = {hetero::Method::kBaseline, hetero::Method::kHeuristic, hetero::Method::kBrute};
    else
      methods = {*hetero::parse_method(o->method)};
    std::vector<hetero::Plan> plans;
    json skipped = json::object();
    for (auto m : methods) {
      auto p = hetero::plan(req, m);
      if (!p) {
        // With --method all a method that cannot plan (brute force too large, the even split
        // outside a domain) is reported; asked for alone, it is the command's error.
        if (methods.size() == 1) throw CliError{kExitUsage, p.error().message};
        skipped[std::string(hetero::to_string(m))] = p.error().message;
        continue;
      }
      plans.push_back(std::move(*p));
    }
    const hetero::Plan* best = nullptr;
    const hetero::Plan* base = nullptr;
    for (const auto& p : plans) {
      if (p.method == hetero::Method::kBrute) best = &p;
      if (p.method == hetero::Method::kBaseline) base = &p;
    }
    auto gap_pct = [](const hetero::Plan& p, const hetero::Plan& ref) { return 100 * (p.cost / ref.cost - 1); };

    if (o->json) {
      json j;
      j["kind"] = "hetero-plan";
      j["predicted"] = true;  // from the profiles, not a measurement
      j["eta"] = o->eta;
      j["global_batch"] = o->global_batch;
      j["gpus"] = gpu_list;
      json ps = json::object();
      for (const auto& p : plans) {
        json pj = plan_json(p);
        if (best) pj["gap_to_brute_pct"] = gap_pct(p, *best);
        if (base) {
          pj["energy_saving_vs_baseline_pct"] = 100 * (1 - p.energy / base->energy);
          pj["cost_saving_vs_baseline_pct"] = 100 * (1 - p.cost / base->cost);
        }
        ps[std::string(hetero::to_string(p.method))] = pj;
      }
      j["plans"] = ps;
      if (!skipped.empty()) j["skipped"] = skipped;
      std::cout << j.dump(2) << "\n";
    } else {
      std::printf("Heterogeneous plan (predicted from the profiles): %zu GPUs, global batch %d, eta %g\n\n",
                  gpus.size(), o->global_batch, o->eta);
      for (const auto& p : plans) {
        print_plan(p);
        if (best && &p != best) std::printf("  cost %.2f %% above brute force\n", gap_pct(p, *best));
        if (base && &p != base)
          std::printf("  vs baseline: energy %.1f %% lower, cost %.1f %% lower\n", 100 * (1 - p.energy / base->energy),
                      100 * (1 - p.cost / base->cost));
        std::printf("\n");
      }
      for (const auto& [m, why] : skipped.items()) std::printf("%s: not planned: %s\n", m.c_str(), why.get<std::string>().c_str());
    }
    ctx.exit_code = kExitOk;
  });
}

}  // namespace

void add_hetero_command(CLI::App& app, Context& ctx) {
  auto* hetero = app.add_subcommand("hetero", "Heterogeneous GPUs: plan batch shares and power limits (docs/hetero.md)");
  hetero->require_subcommand(1);
  add_plan_command(*hetero, ctx);
}

}  // namespace erg::cli
