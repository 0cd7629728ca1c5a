#pragma once
/// Perseus's planner: from a profile to the time–cost frontier of frequency plans of a
/// synchronous 1F1B pipeline (reference/zeus.md §6), and plans as data — erg's JSON and Zeus's
/// `freqs_pipeline_%05d.py` files, which are parsed, never evaluated.

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "erg/core/result.hpp"
#include "erg/optimizers/pipeline_frequency/cost_model.hpp"
#include "erg/optimizers/pipeline_frequency/pipeline_dag.hpp"
#include "erg/optimizers/pipeline_frequency/profile.hpp"

namespace erg::pipeline_frequency {

struct PlannerOptions {
  int stages = 0;
  int micro_batches = 0;
  double unit_s = 0.001;  ///< Time quantum of the plan (Perseus's default, 1 ms).
  /// Power a GPU draws while blocked on pipeline communication (Zeus's default is 70 W).
  double p2p_power_w = 70.0;
};

/// The model of one (stage, instruction).
struct StageModel {
  CandidateOptions options;
  CostModel model;
};

/// One frequency plan.
struct Plan {
  /// Iteration time: the longest path through the DAG at the planned durations, in units and
  /// seconds. Every activity's frequency finishes within its planned duration, so a pipeline that
  /// runs as profiled takes at most this long.
  long long time_units = 0;
  double time_s = 0;
  double cost_j = 0;                 ///< Modelled effective energy: Σ cost model(planned duration).
  double energy_j = 0;               ///< cost_j + stages × time_s × P2P-blocking power (Perseus's total).
  std::vector<int> durations_units;  ///< Per activity id (PipelineDag order).
  /// Per stage, in its execution order: (instruction, MHz), as the Perseus server hands a rank.
  std::vector<std::vector<std::pair<Instruction, int>>> frequencies;
};

struct Frontier {
  PlannerOptions options;
  PipelineDag dag;
  std::vector<StageModel> models;  ///< Index stage × 2 + (0 forward, 1 backward).
  /// Cheapest (every activity at its slowest option) first, fastest last: time strictly falls,
  /// modelled cost never falls.
  std::vector<Plan> plans;
  int iterations = 0;         ///< Phillips–Dessouky steps taken.
  int without_slow_down = 0;  ///< Steps whose lower bounds had no feasible flow (see TradeoffStep).
  int dropped_dominated = 0;  ///< Plans dropped because a faster one was cheaper.
};

/// Plans the pipeline: candidate options and a cost model per (stage, instruction), the 1F1B DAG,
/// then Phillips–Dessouky from the cheapest plan until the iteration time cannot shrink, one plan
/// per step. kInvalidArgument when the profile's stages differ from options.stages, a (stage,
/// instruction) has no rows, or an option is out of range; messages say which.
Result<Frontier> plan_pipeline(const Profile& profile, const PlannerOptions& options);

/// erg's JSON of a plan: {"index", "time_units", "time_s", "cost_j", "energy_j",
/// "frequencies": [[["forward", 1410], ...] per stage]}.
std::string plan_to_json(const Plan& plan, std::size_t index, int indent = -1);
/// The whole frontier: options, per (stage, instruction) its candidate options and fitted model,
/// and every plan (with durations) — erg's `frontier.json`.
std::string frontier_to_json(const Frontier& frontier, int indent = 2);

/// Zeus's plan file: a Python literal, one list per stage of ("forward"|"backward", MHz) tuples,
/// followed by comment lines with the plan's time and cost.
std::string to_zeus_plan_file(const Plan& plan, std::size_t index);

/// Per stage, the (instruction, MHz) list of a Zeus plan file.
using StageFrequencies = std::vector<std::vector<std::pair<Instruction, int>>>;

/// Parses a Zeus plan file as data: a list of per-stage lists whose items are (name, MHz) tuples
/// or lists; `#` comments, single or double quotes and trailing commas are accepted, nothing else
/// (no names, calls or expressions). Stages written as bare MHz lists (lowtime's own output) need
/// the 1F1B order, so `micro_batches` must then be given. kInvalidArgument names the line and
/// column of the first problem.
Result<StageFrequencies> parse_zeus_plan_file(std::string_view text, int micro_batches = 0);

}  // namespace erg::pipeline_frequency
