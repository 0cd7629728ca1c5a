// The online scheduler: profile from the ranks' results, plan, serve (online_scheduler.hpp).

#include "erg/optimizers/pipeline_frequency/server/online_scheduler.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <functional>
#include <iterator>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>

#include "erg/optimizers/pipeline_frequency/pipeline_dag.hpp"
#include "erg/optimizers/pipeline_frequency/planner.hpp"
#include "erg/optimizers/pipeline_frequency/profiler.hpp"

namespace erg::pipeline_frequency::server {
namespace {

using json = nlohmann::json;

constexpr std::array<Instruction, 2> kInstructions{Instruction::kForward, Instruction::kBackward};

/// One (stage, instruction)'s sweep.
struct Sweep {
  std::vector<int> measured_mhz;
  double previous_j = 0;
  int rises = 0;
  bool stopped = false;
};

class OnlineScheduler final : public FrequencyScheduler {
 public:
  OnlineScheduler(OnlineOptions options, JobInfo job, std::vector<RankInfo> ranks, std::vector<int> freqs,
                  PipelineDag dag)
      : options_(std::move(options)),
        job_(std::move(job)),
        ranks_(std::move(ranks)),
        freqs_(std::move(freqs)),
        dag_(std::move(dag)),
        sweeps_(static_cast<std::size_t>(job_.pp_degree) * 2) {}

  Result<std::vector<FrequencySchedule>> next_schedule() override {
    std::vector<FrequencySchedule> out;
    out.reserve(ranks_.size());
    for (const auto& r : ranks_) {
      FrequencySchedule s{r.rank, {}};
      std::size_t k = 0;
      for (const int id : dag_.stage_order(r.pp_rank)) {
        const Instruction instruction = dag_.activities()[static_cast<std::size_t>(id)].instruction;
        int mhz = 0;
        if (plan_) {
          // The planner's DAG is this one, so its per-stage lists follow the same order.
          const auto& stage = plan_->frequencies[static_cast<std::size_t>(r.pp_rank)];
          if (k >= stage.size() || stage[k].first != instruction)
            return fail(ErrorCode::kInternal, "online scheduler: the plan's stage " + std::to_string(r.pp_rank) +
                                                  " does not follow the 1F1B order");
          mhz = stage[k].second;
        } else {
          mhz = profiling_clock(r.pp_rank, instruction);
        }
        s.frequencies.emplace_back(std::string(to_string(instruction)), mhz);
        ++k;
      }
      out.push_back(std::move(s));
    }
    return out;
  }

  std::optional<Rejection> check_result(const ProfilingResult& r) const override {
    if (plan_) return std::nullopt;  // planned: results are not needed (Zeus's client posts none)
    if (r.coarse_energy_windows > 0)
      return Rejection{"coarse_energy_windows",
                       std::to_string(r.coarse_energy_windows) +
                           " of the posted instruction energies came from windows shorter than about two updates "
                           "of the GPU's energy counter: too coarse to profile from (run longer instructions, or "
                           "profile offline with erg perseus profile)"};
    const int m = dag_.micro_batches();
    for (const auto* field : {"time_breakdown", "energy_breakdown"}) {
      const auto& b = std::string_view(field) == "time_breakdown" ? r.time_breakdown : r.energy_breakdown;
      for (const auto& [name, lists] : b)
        if (!parse_instruction(name))
          return Rejection{field, "unknown instruction \"" + name + "\" (expected \"forward\" and \"backward\")"};
      for (const Instruction i : kInstructions) {
        const std::string name(to_string(i));
        const auto it = b.find(name);
        if (it == b.end() || it->second.empty())
          return Rejection{field, "no \"" + name +
                                      "\" entry: while the online scheduler profiles, post per instruction one list "
                                      "per iteration of the per-micro-batch " +
                                      (std::string_view(field) == "time_breakdown" ? "times (s)" : "energies (J)")};
        if (!r.iter_time.empty() && it->second.size() != r.iter_time.size())
          return Rejection{field, "\"" + name + "\" has " + std::to_string(it->second.size()) +
                                      " iterations but iter_time has " + std::to_string(r.iter_time.size())};
        for (std::size_t k = 0; k < it->second.size(); ++k) {
          const auto& row = it->second[k];
          if (static_cast<int>(row.size()) != m)
            return Rejection{field, "\"" + name + "\" iteration " + std::to_string(k) + " has " +
                                        std::to_string(row.size()) + " values but the pipeline has " +
                                        std::to_string(m) + " micro-batches"};
          for (const double v : row)
            if (!std::isfinite(v) || !(v > 0))
              return Rejection{field, "\"" + name + "\" iteration " + std::to_string(k) +
                                          " holds a value that is not a positive number"};
        }
      }
    }
    for (const Instruction i : kInstructions) {
      const std::string name(to_string(i));
      if (r.time_breakdown.at(name).size() != r.energy_breakdown.at(name).size())
        return Rejection{"energy_breakdown", "\"" + name + "\" has another number of iterations than time_breakdown"};
    }
    return std::nullopt;
  }

  Result<void> observe(const std::vector<ProfilingResult>& results) override {
    if (plan_) return {};
    if (results.size() != ranks_.size())
      return fail(ErrorCode::kInternal, "online scheduler: " + std::to_string(results.size()) + " results for " +
                                            std::to_string(ranks_.size()) + " ranks");
    for (const auto& r : results)
      if (auto bad = check_result(r)) return fail(ErrorCode::kInvalidArgument, bad->field + ": " + bad->message);
    const int stages = job_.pp_degree;
    for (int s = 0; s < stages; ++s)
      for (const Instruction i : kInstructions) {
        auto& sweep = sweeps_[index(s, i)];
        if (sweep.stopped) continue;
        const int mhz = freqs_[round_];
        const auto m = measure(results, s, i);
        profile_.rows.push_back(ProfileRow{s, i, mhz, m.time_s, m.energy_j});
        sweep.measured_mhz.push_back(mhz);
        // sweep_frequencies' rule (profiler.hpp): a rise is against the clock just above.
        sweep.rises = (sweep.measured_mhz.size() > 1 && m.energy_j > sweep.previous_j) ? sweep.rises + 1 : 0;
        sweep.previous_j = m.energy_j;
        if ((options_.stop_after_rises > 0 && sweep.rises >= options_.stop_after_rises) || round_ + 1 >= freqs_.size())
          sweep.stopped = true;
      }
    ++round_;
    if (!std::all_of(sweeps_.begin(), sweeps_.end(), [](const Sweep& w) { return w.stopped; })) return {};
    return make_plan();
  }

  std::string state_json() const override {
    json sweeps = json::array();
    for (int s = 0; s < job_.pp_degree; ++s)
      for (const Instruction i : kInstructions) {
        const auto& w = sweeps_[index(s, i)];
        sweeps.push_back(
            {{"stage", s}, {"instruction", to_string(i)}, {"measured_mhz", w.measured_mhz}, {"stopped", w.stopped}});
      }
    json rows = json::array();
    for (const auto& r : profile_.rows)
      rows.push_back({{"stage", r.stage},
                      {"instruction", to_string(r.instruction)},
                      {"frequency", r.frequency_mhz},
                      {"time", r.time_s},
                      {"energy", r.energy_j}});
    json j = {{"scheduler", "Online"},
              {"phase", plan_ ? "planned" : "profiling"},
              {"rounds_observed", round_},
              {"rounds_bound", freqs_.size() + 1},
              {"frequencies_mhz", freqs_},
              {"micro_batches", dag_.micro_batches()},
              {"unit_s", options_.unit_s},
              {"p2p_power_w", p2p_power_w()},
              {"sweeps", sweeps},
              {"profile", rows},
              {"plan", nullptr}};
    if (plan_) {
      json f = json::array();
      for (const auto& stage : plan_->frequencies) {
        json st = json::array();
        for (const auto& [instruction, mhz] : stage) st.push_back(json::array({to_string(instruction), mhz}));
        f.push_back(st);
      }
      j["plan"] = {{"index", plan_index_},
                   {"plans", plans_},
                   {"rule", "fastest plan of the frontier"},
                   {"time_s", plan_->time_s},
                   {"energy_j", plan_->energy_j},
                   {"cost_j", plan_->cost_j},
                   {"planned_at_round", planned_at_},
                   {"frequencies", f}};
    }
    return j.dump();
  }

  std::optional<std::string> profile_csv() const override {
    if (!plan_) return std::nullopt;
    return to_profile_csv(profile_);
  }

 private:
  static std::size_t index(int stage, Instruction i) {
    return static_cast<std::size_t>(stage) * 2 + (i == Instruction::kForward ? 0 : 1);
  }
  [[nodiscard]] double p2p_power_w() const { return options_.p2p_power_w * job_.dp_degree * job_.tp_degree; }
  [[nodiscard]] int profiling_clock(int stage, Instruction i) const {
    const auto& w = sweeps_[index(stage, i)];
    return w.stopped || round_ >= freqs_.size() ? freqs_.front() : freqs_[round_];
  }

  /// The stage's mean per-micro-batch time (slowest of its ranks) and energy (sum of its ranks).
  InstructionMeasurement measure(const std::vector<ProfilingResult>& results, int stage, Instruction i) const {
    const std::string name(to_string(i));
    std::vector<std::vector<double>> time, energy;  // per iteration, per micro-batch
    for (std::size_t k = 0; k < ranks_.size(); ++k) {
      if (ranks_[k].pp_rank != stage) continue;
      const auto& t = results[k].time_breakdown.at(name);
      const auto& e = results[k].energy_breakdown.at(name);
      if (time.empty()) {
        time = t;
        energy = e;
        continue;
      }
      // Ranks of one stage may have posted different numbers of iterations: use the common ones.
      time.resize(std::min(time.size(), t.size()));
      energy.resize(time.size());
      for (std::size_t it = 0; it < time.size(); ++it)
        for (std::size_t mb = 0; mb < time[it].size(); ++mb) {
          time[it][mb] = std::max(time[it][mb], t[it][mb]);
          energy[it][mb] += e[it][mb];
        }
    }
    double t_sum = 0, e_sum = 0;
    std::size_t n = 0;
    for (std::size_t it = 0; it < time.size(); ++it)
      for (std::size_t mb = 0; mb < time[it].size(); ++mb) {
        t_sum += time[it][mb];
        e_sum += energy[it][mb];
        ++n;
      }
    return {t_sum / static_cast<double>(n), e_sum / static_cast<double>(n)};
  }

  Result<void> make_plan() {
    PlannerOptions po;
    po.stages = job_.pp_degree;
    po.micro_batches = dag_.micro_batches();
    po.unit_s = options_.unit_s;
    po.p2p_power_w = p2p_power_w();
    auto frontier = plan_pipeline(profile_, po);
    if (!frontier || frontier->plans.empty()) {
      const std::string why = frontier ? "the planner made no plan" : frontier.error().message;
      if (options_.log) options_.log("perseus online: job " + job_.job_id + ": planning failed: " + why);
      return fail(
          frontier ? ErrorCode::kInternal : frontier.error().code,
          "online scheduler: planning from the profile of " + std::to_string(round_) + " rounds failed: " + why);
    }
    plans_ = frontier->plans.size();
    plan_index_ = plans_ - 1;  // the fastest plan: cheapest at the all-maximum iteration time
    plan_ = std::move(frontier->plans.back());
    planned_at_ = round_;
    if (options_.log) {
      char buf[256];
      std::snprintf(buf, sizeof buf,
                    ": planned after %zu profiling rounds (bound %zu): plan %zu of %zu, %.4f s, %.3f J per iteration "
                    "(modelled); serving it from round %zu",
                    round_, freqs_.size() + 1, plan_index_, plans_, plan_->time_s, plan_->energy_j, round_);
      options_.log("perseus online: job " + job_.job_id + buf);
    }
    return {};
  }

  OnlineOptions options_;
  JobInfo job_;
  std::vector<RankInfo> ranks_;
  std::vector<int> freqs_;
  PipelineDag dag_;
  std::vector<Sweep> sweeps_;  // index(stage, instruction)
  Profile profile_;
  std::size_t round_ = 0;  // profiling rounds observed
  std::optional<Plan> plan_;
  std::size_t plan_index_ = 0, plans_ = 0, planned_at_ = 0;
};

}  // namespace

Result<void> check_online(const OnlineOptions& o, const JobInfo& job) {
  (void)job;
  if (o.micro_batches < 1)
    return fail(ErrorCode::kInvalidArgument, "online scheduler: micro_batches must be at least 1");
  if (!(o.unit_s > 0) || !std::isfinite(o.unit_s))
    return fail(ErrorCode::kInvalidArgument, "online scheduler: the time unit must be positive");
  if (!(o.p2p_power_w >= 0) || !std::isfinite(o.p2p_power_w))
    return fail(ErrorCode::kInvalidArgument, "online scheduler: the P2P-blocking power must not be negative");
  if (o.frequency_step < 1)
    return fail(ErrorCode::kInvalidArgument, "online scheduler: the frequency step must be at least 1");
  if (o.stop_after_rises < 0)
    return fail(ErrorCode::kInvalidArgument, "online scheduler: stop_after_rises must not be negative");
  for (const int f : o.frequencies_mhz)
    if (f <= 0) return fail(ErrorCode::kInvalidArgument, "online scheduler: clocks must be positive MHz");
  return {};
}

Result<std::vector<int>> online_frequencies(const OnlineOptions& o, const std::vector<RankInfo>& ranks) {
  if (ranks.empty()) return fail(ErrorCode::kInvalidArgument, "online scheduler: no ranks");
  std::set<int> common(ranks.front().available_frequencies.begin(), ranks.front().available_frequencies.end());
  for (const auto& r : ranks) {
    const std::set<int> mine(r.available_frequencies.begin(), r.available_frequencies.end());
    std::set<int> both;
    std::set_intersection(common.begin(), common.end(), mine.begin(), mine.end(), std::inserter(both, both.end()));
    common = std::move(both);
  }
  common.erase(0);
  if (common.empty())
    return fail(ErrorCode::kInvalidArgument, "online scheduler: the ranks registered no clock they all support");
  std::vector<int> out;
  if (!o.frequencies_mhz.empty()) {
    for (const int f : o.frequencies_mhz)
      if (!common.contains(f))
        return fail(ErrorCode::kInvalidArgument,
                    "online scheduler: " + std::to_string(f) + " MHz is not available on every rank");
    out = o.frequencies_mhz;
    std::sort(out.begin(), out.end(), std::greater<>());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
  }
  const std::vector<int> all(common.rbegin(), common.rend());
  for (std::size_t k = 0; k < all.size(); k += static_cast<std::size_t>(std::max(o.frequency_step, 1)))
    out.push_back(all[k]);
  return out;
}

Result<std::unique_ptr<FrequencyScheduler>> make_online_scheduler(const OnlineOptions& options, const JobInfo& job,
                                                                  const std::vector<RankInfo>& ranks) {
  if (auto ok = check_online(options, job); !ok) return fail(ok.error());
  auto freqs = online_frequencies(options, ranks);
  if (!freqs) return fail(freqs.error());
  auto dag = PipelineDag::synchronous_1f1b(job.pp_degree, options.micro_batches);
  if (!dag) return fail(dag.error());
  for (const auto& r : ranks)
    if (r.pp_rank < 0 || r.pp_rank >= job.pp_degree)
      return fail(ErrorCode::kInvalidArgument, "online scheduler: rank " + std::to_string(r.rank) + " has no stage");
  return std::unique_ptr<FrequencyScheduler>(
      new OnlineScheduler(options, job, ranks, std::move(*freqs), std::move(*dag)));
}

}  // namespace erg::pipeline_frequency::server
