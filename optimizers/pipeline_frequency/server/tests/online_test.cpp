// The online scheduler through the Service, with ranks that report a known model (the synthetic
// profile): what it measures, when it stops sweeping, the plan it picks (exactly the plan made
// offline from the same measurements), the round bound, its state, and the results it refuses.
// The simulated-pipeline version (acceptance 3 of issue 20) is tests/perseus/online_sim_test.cpp.

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "erg/optimizers/pipeline_frequency/pipeline_dag.hpp"
#include "erg/optimizers/pipeline_frequency/planner.hpp"
#include "erg/optimizers/pipeline_frequency/profile.hpp"
#include "erg/optimizers/pipeline_frequency/profiler.hpp"
#include "erg/optimizers/pipeline_frequency/server/online_scheduler.hpp"
#include "erg/optimizers/pipeline_frequency/server/service.hpp"
#include "erg/optimizers/pipeline_frequency/synthetic_profile.hpp"

namespace erg::pipeline_frequency::server {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

std::vector<int> clocks(int high, int low, int step) {
  std::vector<int> out;
  for (int f = high; f >= low; f -= step) out.push_back(f);
  return out;
}

/// A job of dp × pp ranks (rank r: pp_rank r % pp, dp_rank r / pp) whose computations cost what
/// the synthetic profile says; data-parallel rank d runs (1 + 0.01·d) times slower, so a stage's
/// time is its slowest rank's and its energy the sum.
class SyntheticJob {
 public:
  SyntheticJob(Service& service, int dp, int pp, int micro_batches, std::vector<int> available)
      : service_(service), dp_(dp), pp_(pp), m_(micro_batches), available_(std::move(available)) {
    for (const auto& r : synthetic_profile(pp, available_).rows)
      model_[{r.stage, r.instruction == Instruction::kForward ? 0 : 1, r.frequency_mhz}] = {r.time_s, r.energy_j};
    auto reply = service_.register_job(
        json{{"job_id", ""}, {"dp_degree", dp}, {"pp_degree", pp}, {"tp_degree", 1}, {"world_size", dp * pp}}.dump());
    EXPECT_EQ(reply.status, 200) << reply.body;
    id_ = json::parse(reply.body).get<std::string>();
    for (int r = 0; r < dp * pp; ++r) {
      auto reg = service_.register_rank(id_, json{{"rank", r},
                                                  {"dp_rank", r / pp},
                                                  {"pp_rank", r % pp},
                                                  {"tp_rank", 0},
                                                  {"available_frequencies", available_}}
                                                 .dump());
      EXPECT_EQ(reg.status, 200) << reg.body;
    }
  }
  [[nodiscard]] const std::string& id() const { return id_; }
  [[nodiscard]] int world() const { return dp_ * pp_; }

  /// One round's schedules: every rank asks at once (each GET waits for the others).
  std::vector<std::vector<std::pair<std::string, int>>> schedules() {
    std::vector<std::future<Reply>> asks;
    for (int r = 0; r < world(); ++r)
      asks.push_back(
          std::async(std::launch::async, [this, r] { return service_.get_schedule(id_, std::to_string(r)); }));
    std::vector<std::vector<std::pair<std::string, int>>> out;
    for (auto& a : asks) {
      const Reply reply = a.get();
      EXPECT_EQ(reply.status, 200) << reply.body;
      std::vector<std::pair<std::string, int>> s;
      const json body = json::parse(reply.body);
      for (const auto& item : body["frequencies"]) s.emplace_back(item[0].get<std::string>(), item[1].get<int>());
      out.push_back(std::move(s));
    }
    return out;
  }

  /// What rank r measures running `schedule` for two iterations.
  [[nodiscard]] json result(int r, const std::vector<std::pair<std::string, int>>& schedule) const {
    const int stage = r % pp_;
    const double slow = 1.0 + 0.01 * (r / pp_);
    json tb = json::object(), eb = json::object();
    for (const char* name : {"forward", "backward"}) {
      tb[name] = json::array();
      eb[name] = json::array();
    }
    double iter_time = 0, iter_energy = 0;
    for (int it = 0; it < 2; ++it) {
      std::map<std::string, std::vector<double>> t, e;
      for (const auto& [name, mhz] : schedule) {
        const auto [time, energy] = model_.at({stage, name == "forward" ? 0 : 1, mhz});
        t[name].push_back(time * slow);
        e[name].push_back(energy);
        iter_time += time * slow / 2;
        iter_energy += energy / 2;
      }
      for (const char* name : {"forward", "backward"}) {
        tb[name].push_back(t[name]);
        eb[name].push_back(e[name]);
      }
    }
    return {{"rank", r},
            {"iter_time", {iter_time, iter_time}},
            {"iter_energy", {iter_energy, iter_energy}},
            {"time_breakdown", tb},
            {"energy_breakdown", eb}};
  }

  /// The same stage measurements as the scheduler should aggregate them (max time, summed energy).
  [[nodiscard]] InstructionMeasurement stage(int s, Instruction i, int mhz) const {
    const auto [time, energy] = model_.at({s, i == Instruction::kForward ? 0 : 1, mhz});
    return {time * (1.0 + 0.01 * (dp_ - 1)), energy * dp_};
  }

  json state() {
    const Reply reply = service_.get_state(id_);
    EXPECT_EQ(reply.status, 200) << reply.body;
    return json::parse(reply.body);
  }

 private:
  Service& service_;
  int dp_, pp_, m_;
  std::vector<int> available_;
  std::map<std::tuple<int, int, int>, std::pair<double, double>> model_;
  std::string id_;
};

ServiceOptions online(int micro_batches, double unit_s = 0.001) {
  ServiceOptions o;
  o.scheduler.kind = SchedulerKind::kOnline;
  o.scheduler.online.micro_batches = micro_batches;
  o.scheduler.online.unit_s = unit_s;
  o.scheduler.online.p2p_power_w = 70;
  o.rank_timeout = 30s;
  return o;
}

StageFrequencies to_plan(const json& frequencies) {
  StageFrequencies plan;
  for (const auto& stage : frequencies) {
    auto& out = plan.emplace_back();
    for (const auto& item : stage) out.emplace_back(*parse_instruction(item[0].get<std::string>()), item[1].get<int>());
  }
  return plan;
}

TEST(PerseusOnline, ProfilesFromTheRanksResultsPlansAndServesThePlanWithinTheBound) {
  const int dp = 2, pp = 4, m = 8;
  const auto available = clocks(1410, 210, 60);  // 21 clocks
  std::vector<std::string> logged;
  auto options = online(m);
  options.scheduler.online.log = [&](const std::string& line) { logged.push_back(line); };
  const auto dump = std::filesystem::temp_directory_path() / ("erg_online_dump_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dump);
  options.dump_data = true;
  options.dump_dir = dump;
  Service service(options);
  SyntheticJob job(service, dp, pp, m, available);
  EXPECT_NE(job.id().find("+dp2+pp4+tp1+Online"), std::string::npos) << job.id();
  auto state = job.state();
  EXPECT_EQ(state["scheduler"]["phase"], "profiling");
  EXPECT_EQ(state["scheduler"]["rounds_bound"], available.size() + 1);

  // What the scheduler should end with: the sweep (same clocks, same stopping rule) over the
  // stage-aggregated measurements, planned with the stage's P2P power (two GPUs), fastest plan.
  SweepOptions sweep;
  sweep.stages = pp;
  sweep.frequencies_mhz = available;
  auto offline = sweep_frequencies(
      sweep, [&](int s, Instruction i, int f) -> Result<InstructionMeasurement> { return job.stage(s, i, f); });
  ASSERT_TRUE(offline);
  std::size_t longest_sweep = 0;
  for (int s = 0; s < pp; ++s)
    for (const Instruction i : {Instruction::kForward, Instruction::kBackward})
      longest_sweep = std::max<std::size_t>(
          longest_sweep, std::count_if(offline->rows.begin(), offline->rows.end(),
                                       [&](const ProfileRow& r) { return r.stage == s && r.instruction == i; }));
  ASSERT_LT(longest_sweep, available.size()) << "the model should stop every sweep on five rises";
  PlannerOptions po{pp, m, 0.001, 70.0 * dp};
  auto frontier = plan_pipeline(*offline, po);
  ASSERT_TRUE(frontier) << frontier.error().message;
  const auto& expected = frontier->plans.back();
  auto dag = PipelineDag::synchronous_1f1b(pp, m);
  ASSERT_TRUE(dag);

  std::size_t planned_at = 0;
  bool planned = false;
  for (std::size_t round = 0; round <= available.size() + 1; ++round) {
    const auto schedules = job.schedules();
    ASSERT_EQ(schedules.size(), static_cast<std::size_t>(dp * pp));
    for (int r = 0; r < dp * pp; ++r) {
      const int s = r % pp;
      // Every rank runs its stage's 1F1B order; the dp ranks of a stage get the same schedule.
      ASSERT_EQ(schedules[r].size(), dag->stage_order(s).size());
      for (std::size_t k = 0; k < schedules[r].size(); ++k)
        EXPECT_EQ(schedules[r][k].first,
                  to_string(dag->activities()[static_cast<std::size_t>(dag->stage_order(s)[k])].instruction));
      EXPECT_EQ(schedules[r], schedules[s]);
      if (!planned) {
        // A profiling round: one clock per (stage, instruction), the sweep's k-th clock while it
        // sweeps, the highest once it has stopped.
        for (const auto& [name, mhz] : schedules[r]) {
          const auto& first =
              *std::find_if(schedules[r].begin(), schedules[r].end(), [&](const auto& e) { return e.first == name; });
          EXPECT_EQ(mhz, first.second);
          EXPECT_TRUE(mhz == available[round] || mhz == available.front()) << mhz << " in round " << round;
        }
      } else {
        const auto plan = to_plan(state["scheduler"]["plan"]["frequencies"]);
        std::vector<std::pair<std::string, int>> want;
        for (const auto& [i, mhz] : plan[s]) want.emplace_back(std::string(to_string(i)), mhz);
        EXPECT_EQ(schedules[r], want) << "rank " << r << " is not served the plan in round " << round;
      }
    }
    for (int r = 0; r < dp * pp; ++r) {
      // Once planned, results need no breakdowns (Zeus's client posts none).
      const json body =
          planned ? json{{"rank", r}, {"iter_time", {1.0}}, {"iter_energy", {1.0}}} : job.result(r, schedules[r]);
      const Reply reply = service.post_result(job.id(), body.dump());
      ASSERT_EQ(reply.status, 200) << reply.body;
    }
    state = job.state();
    EXPECT_EQ(state["round"], round);
    if (!planned && state["scheduler"]["phase"] == "planned") {
      planned = true;
      planned_at = round + 1;  // the first round served the plan
    }
  }
  ASSERT_TRUE(planned);
  // The bound: #clocks + 1 rounds; here the longest sweep decides.
  EXPECT_EQ(planned_at, longest_sweep);
  EXPECT_LE(planned_at + 1, available.size() + 1);
  EXPECT_EQ(state["scheduler"]["plan"]["planned_at_round"], planned_at);

  // It measured what the ranks posted, aggregated per stage, at every clock the sweep reached.
  const auto& rows = state["scheduler"]["profile"];
  ASSERT_EQ(rows.size(), offline->rows.size());
  for (const auto& r : offline->rows) {
    const auto it = std::find_if(rows.begin(), rows.end(), [&](const json& j) {
      return j["stage"] == r.stage && j["instruction"] == to_string(r.instruction) && j["frequency"] == r.frequency_mhz;
    });
    ASSERT_NE(it, rows.end()) << r.stage << " " << to_string(r.instruction) << " " << r.frequency_mhz;
    EXPECT_NEAR((*it)["time"].get<double>(), r.time_s, 1e-12 * r.time_s);
    EXPECT_NEAR((*it)["energy"].get<double>(), r.energy_j, 1e-12 * r.energy_j);
  }
  // And it serves exactly the plan made offline from the same measurements.
  EXPECT_EQ(to_plan(state["scheduler"]["plan"]["frequencies"]), expected.frequencies);
  EXPECT_EQ(state["scheduler"]["plan"]["plans"], frontier->plans.size());
  EXPECT_NEAR(state["scheduler"]["plan"]["time_s"].get<double>(), expected.time_s, 1e-12);
  // The dump holds the same state.
  std::ifstream dumped(dump / job.id() / "scheduler.json");
  ASSERT_TRUE(dumped) << "no scheduler.json";
  const json from_dump = json::parse(dumped);
  EXPECT_EQ(from_dump["phase"], "planned");
  EXPECT_EQ(from_dump["plan"], state["scheduler"]["plan"]);
  // And the profile it built, as the planner's CSV: it parses and plans to the served plan.
  std::ifstream csv_file(dump / job.id() / "profile.csv");
  ASSERT_TRUE(csv_file) << "no profile.csv";
  const std::string csv((std::istreambuf_iterator<char>(csv_file)), std::istreambuf_iterator<char>());
  auto reread = parse_profile_csv(csv);
  ASSERT_TRUE(reread) << reread.error().message;
  EXPECT_EQ(reread->rows.size(), rows.size());
  auto replanned = plan_pipeline(*reread, po);
  ASSERT_TRUE(replanned) << replanned.error().message;
  EXPECT_EQ(replanned->plans.back().frequencies, to_plan(state["scheduler"]["plan"]["frequencies"]));
  EXPECT_EQ(replanned->plans.size(), state["scheduler"]["plan"]["plans"].get<std::size_t>());
  std::filesystem::remove_all(dump);
  ASSERT_EQ(logged.size(), 1u);
  EXPECT_NE(logged[0].find("planned after " + std::to_string(planned_at) + " profiling rounds"), std::string::npos)
      << logged[0];
}

TEST(PerseusOnline, RefusesResultsItCannotProfileFrom) {
  Service service(online(2));
  SyntheticJob job(service, 1, 2, 2, {1410, 1200});
  const auto schedules = job.schedules();
  const json good = job.result(0, schedules[0]);
  auto refused = [&](json body, const std::string& field, const std::string& says) {
    const Reply reply = service.post_result(job.id(), body.dump());
    EXPECT_EQ(reply.status, 422) << reply.body;
    const auto j = json::parse(reply.body);
    EXPECT_EQ(j["detail"][0]["loc"], json::array({"body", field})) << reply.body;
    EXPECT_NE(j["message"].get<std::string>().find(says), std::string::npos) << reply.body;
  };
  json bad = good;
  bad.erase("time_breakdown");
  refused(bad, "time_breakdown", "no \"forward\" entry");
  bad = good;
  bad["energy_breakdown"].erase("backward");
  refused(bad, "energy_breakdown", "no \"backward\" entry");
  bad = good;
  bad["time_breakdown"]["forward"][0].push_back(0.01);
  refused(bad, "time_breakdown", "has 3 values but the pipeline has 2 micro-batches");
  bad = good;
  bad["energy_breakdown"]["forward"][1][0] = -1.0;
  refused(bad, "energy_breakdown", "not a positive number");
  bad = good;
  bad["time_breakdown"]["optimizer_step"] = json::array({json::array({0.1, 0.1})});
  refused(bad, "time_breakdown", "unknown instruction \"optimizer_step\"");
  bad = good;
  bad["iter_time"].push_back(1.0);
  refused(bad, "time_breakdown", "iterations but iter_time has 3");
  // A rank that says some energies came from windows too short for the GPU's counter.
  bad = good;
  bad["coarse_energy_windows"] = 3;
  refused(bad, "coarse_energy_windows", "3 of the posted instruction energies came from windows shorter");
  bad["coarse_energy_windows"] = -1;
  refused(bad, "coarse_energy_windows", "must not be negative");
  bad["coarse_energy_windows"] = 0;  // none: as if absent
  // Extrapolated instruction ends are recorded, not refused; a negative count is refused.
  bad["extrapolated_energy_windows"] = -2;
  refused(bad, "extrapolated_energy_windows", "must not be negative");
  bad["extrapolated_energy_windows"] = 2;
  // Refused results were not taken: the good one is accepted, then a second one is out of turn.
  EXPECT_EQ(service.post_result(job.id(), bad.dump()).status, 200);
  EXPECT_EQ(service.post_result(job.id(), good.dump()).status, 409);
  EXPECT_EQ(service.post_result(job.id(), job.result(1, schedules[1]).dump()).status, 200);
  EXPECT_EQ(job.state()["scheduler"]["rounds_observed"], 1);
}

TEST(PerseusOnline, ClocksToSweepAndSettings) {
  OnlineOptions o;
  o.micro_batches = 4;
  std::vector<RankInfo> ranks{{0, 0, 0, 0, {1410, 1395, 1380, 1365, 1350, 1335}},
                              {1, 0, 1, 0, {1335, 1410, 1380, 1350}}};
  // The clocks both ranks have, highest first.
  EXPECT_EQ(*online_frequencies(o, ranks), (std::vector<int>{1410, 1380, 1350, 1335}));
  o.frequency_step = 2;
  EXPECT_EQ(*online_frequencies(o, ranks), (std::vector<int>{1410, 1350}));
  o.frequencies_mhz = {1350, 1410};
  EXPECT_EQ(*online_frequencies(o, ranks), (std::vector<int>{1410, 1350}));
  o.frequencies_mhz = {1395};
  auto missing = online_frequencies(o, ranks);
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message.find("1395 MHz is not available on every rank"), std::string::npos);
  ranks[1].available_frequencies = {900};
  o.frequencies_mhz.clear();
  EXPECT_FALSE(online_frequencies(o, ranks));

  const JobInfo job{"", 2, 1, 1, 2, std::nullopt};
  OnlineOptions bad;
  EXPECT_FALSE(check_online(bad, job));  // no micro-batches
  bad.micro_batches = 2;
  EXPECT_TRUE(check_online(bad, job));
  bad.unit_s = 0;
  EXPECT_FALSE(check_online(bad, job));
  bad.unit_s = 0.001;
  bad.frequency_step = 0;
  EXPECT_FALSE(check_online(bad, job));

  // Before every rank registered there is no scheduler state; unknown jobs are 404.
  Service service(online(2));
  const Reply reg = service.register_job(R"({"dp_degree": 1, "pp_degree": 2, "tp_degree": 1, "world_size": 2})");
  ASSERT_EQ(reg.status, 200);
  const auto id = json::parse(reg.body).get<std::string>();
  const Reply st = service.get_state(id);
  ASSERT_EQ(st.status, 200);
  EXPECT_TRUE(json::parse(st.body)["scheduler"].is_null());
  EXPECT_EQ(json::parse(st.body)["round"], -1);
  EXPECT_EQ(service.get_state("nope").status, 404);
}

TEST(PerseusOnline, OneClockPlansAfterOneRound) {
  // With a single clock there is nothing to sweep: one profiling round, then the plan (every
  // computation at that clock).
  Service service(online(2));
  SyntheticJob job(service, 1, 2, 2, {1410});
  auto schedules = job.schedules();
  for (int r = 0; r < 2; ++r) {
    const Reply reply = service.post_result(job.id(), job.result(r, schedules[r]).dump());
    ASSERT_EQ(reply.status, 200) << reply.body;
  }
  const auto state = job.state();
  EXPECT_EQ(state["scheduler"]["phase"], "planned");
  EXPECT_EQ(state["scheduler"]["plan"]["planned_at_round"], 1);
  schedules = job.schedules();
  for (const auto& s : schedules)
    for (const auto& [name, mhz] : s) EXPECT_EQ(mhz, 1410);
}

}  // namespace
}  // namespace erg::pipeline_frequency::server
