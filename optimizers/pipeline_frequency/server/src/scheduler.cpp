// Zeus's PointSolution and its 3-D-parallel form, over a plan read as data.

#include <algorithm>
#include <nlohmann/json.hpp>

#include "erg/optimizers/pipeline_frequency/server/online_scheduler.hpp"
#include "erg/optimizers/pipeline_frequency/server/service.hpp"

namespace erg::pipeline_frequency::server {
namespace {

using json = nlohmann::json;

std::vector<std::pair<std::string, int>> named(const std::vector<std::pair<Instruction, int>>& stage) {
  std::vector<std::pair<std::string, int>> out;
  out.reserve(stage.size());
  for (const auto& [instruction, mhz] : stage) out.emplace_back(std::string(to_string(instruction)), mhz);
  return out;
}

/// The plan, one entry per rank (plain) or per stage (3-D), handed out every round: a point
/// solution never changes with what it observes.
class PointSolution final : public FrequencyScheduler {
 public:
  PointSolution(std::vector<FrequencySchedule> schedules, bool three_d, std::vector<RankInfo> ranks, int pp_degree)
      : schedules_(std::move(schedules)), three_d_(three_d), ranks_(std::move(ranks)), pp_degree_(pp_degree) {}
  Result<std::vector<FrequencySchedule>> next_schedule() override { return schedules_; }
  Result<void> observe(const std::vector<ProfilingResult>& results) override {
    // The 3-D form hands its inner scheduler one result per stage; a point solution ignores them.
    if (three_d_) (void)aggregate_by_stage(results, ranks_, pp_degree_);
    return {};
  }

 private:
  std::vector<FrequencySchedule> schedules_;
  bool three_d_;
  std::vector<RankInfo> ranks_;
  int pp_degree_;
};

}  // namespace

std::string_view scheduler_name(SchedulerKind kind) {
  switch (kind) {
    case SchedulerKind::kPointSolution: return "PointSolution";
    case SchedulerKind::kPointSolution3D: return "PointSolution3D";
    case SchedulerKind::kOnline: return "Online";
  }
  return "Unknown";
}

Result<StageFrequencies> parse_plan(std::string_view text) {
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos || text[first] != '{') return parse_zeus_plan_file(text);
  const json j = json::parse(text, nullptr, false);
  if (j.is_discarded()) return fail(ErrorCode::kInvalidArgument, "plan JSON: not valid JSON");
  if (!j.contains("frequencies") || !j["frequencies"].is_array())
    return fail(ErrorCode::kInvalidArgument, "plan JSON: no \"frequencies\" array");
  StageFrequencies plan;
  for (std::size_t s = 0; s < j["frequencies"].size(); ++s) {
    const auto& stage = j["frequencies"][s];
    const auto where = "plan JSON: frequencies[" + std::to_string(s) + "]";
    if (!stage.is_array()) return fail(ErrorCode::kInvalidArgument, where + " is not a list");
    auto& out = plan.emplace_back();
    for (const auto& item : stage) {
      if (!item.is_array() || item.size() != 2 || !item[0].is_string() || !item[1].is_number_integer())
        return fail(ErrorCode::kInvalidArgument, where + ": items must be [\"forward\"|\"backward\", MHz]");
      const auto instruction = parse_instruction(item[0].get<std::string>());
      if (!instruction)
        return fail(ErrorCode::kInvalidArgument, where + ": unknown instruction " + item[0].get<std::string>());
      if (item[1].get<long long>() <= 0 || item[1].get<long long>() > 100000)
        return fail(ErrorCode::kInvalidArgument, where + ": frequency out of range");
      out.emplace_back(*instruction, item[1].get<int>());
    }
  }
  if (plan.empty()) return fail(ErrorCode::kInvalidArgument, "plan JSON: no stages");
  return plan;
}

Result<void> check_plan(const SchedulerConfig& config, const JobInfo& job) {
  if (config.kind == SchedulerKind::kOnline) return check_online(config.online, job);
  const bool three_d = config.kind == SchedulerKind::kPointSolution3D;
  const int want = three_d ? job.pp_degree : job.world_size;
  if (static_cast<int>(config.plan.size()) != want)
    return fail(ErrorCode::kInvalidArgument,
                std::string(scheduler_name(config.kind)) + ": the plan has " + std::to_string(config.plan.size()) +
                    " entries but the job needs " + std::to_string(want) +
                    (three_d ? " (one per pipeline stage, pp_degree)" : " (one per rank, world_size)"));
  return {};
}

Result<std::unique_ptr<FrequencyScheduler>> make_scheduler(const SchedulerConfig& config, const JobInfo& job,
                                                           const std::vector<RankInfo>& ranks) {
  if (auto ok = check_plan(config, job); !ok) return fail(ok.error());
  if (config.kind == SchedulerKind::kOnline) return make_online_scheduler(config.online, job, ranks);
  const bool three_d = config.kind == SchedulerKind::kPointSolution3D;
  std::vector<FrequencySchedule> schedules;
  for (const auto& r : ranks) {
    const int entry = three_d ? r.pp_rank : r.rank;
    if (entry < 0 || entry >= static_cast<int>(config.plan.size()))
      return fail(ErrorCode::kInvalidArgument, "rank " + std::to_string(r.rank) + " has no plan entry");
    schedules.push_back({r.rank, named(config.plan[static_cast<std::size_t>(entry)])});
  }
  return std::unique_ptr<FrequencyScheduler>(new PointSolution(std::move(schedules), three_d, ranks, job.pp_degree));
}

std::vector<ProfilingResult> aggregate_by_stage(const std::vector<ProfilingResult>& results,
                                                const std::vector<RankInfo>& ranks, int pp_degree) {
  std::vector<ProfilingResult> stages(static_cast<std::size_t>(std::max(pp_degree, 0)));
  std::vector<bool> seen(stages.size(), false);
  for (std::size_t i = 0; i < results.size() && i < ranks.size(); ++i) {
    const int pp = ranks[i].pp_rank;
    if (pp < 0 || pp >= pp_degree) continue;
    auto& s = stages[static_cast<std::size_t>(pp)];
    const auto& r = results[i];
    if (!seen[static_cast<std::size_t>(pp)]) {
      s = r;
      s.rank = pp;
      seen[static_cast<std::size_t>(pp)] = true;
      continue;
    }
    // A stage is done when its slowest dp/tp rank is; its energy is every rank's.
    for (std::size_t k = 0; k < s.iter_time.size() && k < r.iter_time.size(); ++k)
      s.iter_time[k] = std::max(s.iter_time[k], r.iter_time[k]);
    for (std::size_t k = 0; k < s.iter_energy.size() && k < r.iter_energy.size(); ++k)
      s.iter_energy[k] += r.iter_energy[k];
  }
  return stages;
}

}  // namespace erg::pipeline_frequency::server
