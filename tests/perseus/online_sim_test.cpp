// Acceptance 3 of issue 20 on the simulated machine (`4xA100`, faithful model, virtual clock): with
// no offline profile, the Perseus server's online scheduler converges to a plan within its stated
// bound (#clocks swept + 1 rounds), and that plan's energy, measured on the simulated pipeline, is
// within 2 % of the plan made from a full offline profile (sweep_frequencies with the profiler's
// steady back-to-back measurements -> planner -> the same choice, the fastest plan), with the
// iteration time within 1 % of all-maximum-frequency.
//
// Each round the four ranks (one per stage) take their schedules from the server, the pipeline
// runs one warm-up and one measured iteration at them, and each rank posts its iteration time and
// energy and per computation its duration and GPU energy (ProfilingResult's breakdowns). Once
// through the Service directly for three seeds, once over loopback HTTP with four C++ Clients.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <future>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "erg/optimizers/pipeline_frequency/planner.hpp"
#include "erg/optimizers/pipeline_frequency/profiler.hpp"
#include "erg/optimizers/pipeline_frequency/server/client.hpp"
#include "erg/optimizers/pipeline_frequency/server/http_server.hpp"
#include "erg/optimizers/pipeline_frequency/server/service.hpp"
#include "perseus_sim_pipeline.hpp"

namespace erg::pipeline_frequency {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;
using simulated::PipelineConfig;
using simulated::SimulatedPipeline;
using simulated::StageWork;

constexpr int kStages = 4, kMicroBatches = 8, kStep = 4;  // every fourth clock: 1410, 1350, ... 210 MHz
constexpr double kUnit = 0.00025;

PipelineConfig imbalanced(int seed) {
  PipelineConfig c;
  c.spec = "4xA100,cpus=0,seed=" + std::to_string(seed);
  for (const double f : {0.0303, 0.0361, 0.0262, 0.0318}) c.stages.push_back(StageWork{f, 2 * f});
  c.micro_batches = kMicroBatches;
  return c;
}

/// How a rank talks to the server: through the Service in-process, or over HTTP.
struct Endpoint {
  std::function<Result<server::FrequencySchedule>(int rank)> get_schedule;
  std::function<Result<void>(const server::ProfilingResult&)> post_result;
  std::function<json()> state;
};

server::ProfilingResult rank_result(const SimulatedPipeline& pipe, int stage,
                                    const simulated::IterationMeasurement& m) {
  server::ProfilingResult r;
  r.rank = stage;
  for (std::size_t it = 0; it < m.iteration_time_s.size(); ++it) {
    r.iter_time.push_back(m.iteration_time_s[it]);
    r.iter_energy.push_back(m.iteration_stage_energy_j[it][static_cast<std::size_t>(stage)]);
    for (const Instruction i : {Instruction::kForward, Instruction::kBackward}) {
      const std::string name(to_string(i));
      auto& t = r.time_breakdown[name].emplace_back();
      auto& e = r.energy_breakdown[name].emplace_back();
      for (int mb = 0; mb < kMicroBatches; ++mb) {
        const auto id = static_cast<std::size_t>(pipe.dag().id(stage, i, mb));
        t.push_back(m.activity_time_s[it][id]);
        e.push_back(m.activity_energy_j[it][id]);
      }
    }
  }
  return r;
}

struct Outcome {
  int rounds_to_plan = 0;  // rounds before the first round that served the plan
  std::size_t bound = 0;
  StageFrequencies plan;
  json state;
};

/// Drives the job round by round until the scheduler has planned (at most bound + 1 rounds), then
/// takes one more round's schedules: the served plan.
Outcome drive(SimulatedPipeline& pipe, Endpoint& server) {
  Outcome out;
  for (int round = 0; round < 200; ++round) {
    std::vector<std::future<Result<server::FrequencySchedule>>> asks;
    for (int r = 0; r < kStages; ++r) asks.push_back(std::async(std::launch::async, server.get_schedule, r));
    StageFrequencies schedules(kStages);
    for (int r = 0; r < kStages; ++r) {
      auto s = asks[static_cast<std::size_t>(r)].get();
      EXPECT_TRUE(s) << s.error().message;
      if (!s) return out;
      for (const auto& [name, mhz] : s->frequencies)
        schedules[static_cast<std::size_t>(r)].emplace_back(*parse_instruction(name), mhz);
    }
    const json state = server.state()["scheduler"];
    if (state["phase"] == "planned") {
      out.rounds_to_plan = round;
      out.plan = schedules;
      out.state = state;
      return out;
    }
    out.bound = state["rounds_bound"].get<std::size_t>();
    EXPECT_LT(static_cast<std::size_t>(round), out.bound) << "no plan within the stated bound";
    if (static_cast<std::size_t>(round) >= out.bound) return out;
    auto m = pipe.run(schedules, 1, 1);
    EXPECT_TRUE(m) << m.error().message;
    if (!m) return out;
    for (int r = 0; r < kStages; ++r) {
      auto posted = server.post_result(rank_result(pipe, r, *m));
      EXPECT_TRUE(posted) << posted.error().message;
      if (!posted) return out;
    }
  }
  return out;
}

struct Offline {
  Profile profile;
  StageFrequencies plan;
  double p2p_w = 0;
};

Offline offline(SimulatedPipeline& pipe) {
  Offline o;
  SweepOptions sweep;
  sweep.stages = kStages;
  for (std::size_t i = 0; i < pipe.frequencies().size(); i += kStep)
    sweep.frequencies_mhz.push_back(pipe.frequencies()[i]);
  auto profile =
      sweep_frequencies(sweep, [&](int s, Instruction i, int mhz) { return pipe.measure_instruction(s, i, mhz); });
  EXPECT_TRUE(profile) << profile.error().message;
  if (!profile) return o;
  o.profile = *profile;
  for (int s = 0; s < kStages; ++s) {
    auto w = pipe.measure_blocking_power(s);
    EXPECT_TRUE(w) << w.error().message;
    o.p2p_w += (w ? *w : 0) / kStages;
  }
  PlannerOptions po{kStages, kMicroBatches, kUnit, o.p2p_w};
  auto frontier = plan_pipeline(o.profile, po);
  EXPECT_TRUE(frontier) << frontier.error().message;
  if (frontier) o.plan = frontier->plans.back().frequencies;  // the fastest plan, as the online scheduler
  return o;
}

server::ServiceOptions online_options(double p2p_w) {
  server::ServiceOptions so;
  so.scheduler.kind = server::SchedulerKind::kOnline;
  so.scheduler.online.micro_batches = kMicroBatches;
  so.scheduler.online.unit_s = kUnit;
  so.scheduler.online.p2p_power_w = p2p_w;
  so.scheduler.online.frequency_step = kStep;
  so.rank_timeout = 60s;
  return so;
}

std::string job_body() {
  return json{{"job_id", ""}, {"dp_degree", 1}, {"pp_degree", kStages}, {"tp_degree", 1}, {"world_size", kStages}}
      .dump();
}
server::RankInfo rank_info(const SimulatedPipeline& pipe, int r) { return {r, 0, r, 0, pipe.frequencies()}; }

/// The checks of acceptance 3 on one outcome; prints the figures.
void judge(SimulatedPipeline& pipe, const Offline& off, const Outcome& on, const std::string& label) {
  ASSERT_FALSE(on.plan.empty()) << label << ": the scheduler never planned";
  const std::size_t clocks = (pipe.frequencies().size() + kStep - 1) / kStep;
  EXPECT_EQ(on.bound, clocks + 1) << label;
  EXPECT_LE(static_cast<std::size_t>(on.rounds_to_plan) + 1, on.bound) << label;
  EXPECT_EQ(on.state["plan"]["planned_at_round"], on.rounds_to_plan);

  // It profiled from the posted results: every sweep covers the clocks from the highest down, ends
  // on five rises (before running out of clocks), and its times are the device model's for the
  // computation at that clock — only the ranks' posts carry them.
  const auto& freqs = on.state["frequencies_mhz"];
  ASSERT_EQ(freqs.size(), clocks);
  for (const auto& sweep : on.state["sweeps"]) {
    const auto& measured = sweep["measured_mhz"];
    ASSERT_GE(measured.size(), 6u) << sweep;
    EXPECT_LT(measured.size(), clocks) << sweep;
    for (std::size_t k = 0; k < measured.size(); ++k) EXPECT_EQ(measured[k], freqs[k]);
  }
  // ... and each stopped by the rule: its last five clocks each cost more energy than the one above.
  for (int s = 0; s < kStages; ++s)
    for (const Instruction i : {Instruction::kForward, Instruction::kBackward}) {
      std::vector<double> energy;
      for (const auto& row : on.state["profile"])
        if (row["stage"] == s && row["instruction"] == to_string(i)) energy.push_back(row["energy"]);
      ASSERT_GE(energy.size(), 6u);
      for (std::size_t k = energy.size() - 5; k < energy.size(); ++k)
        EXPECT_GT(energy[k], energy[k - 1]) << label << ": stage " << s << " " << to_string(i) << " row " << k;
    }
  std::size_t compared = 0;
  double worst_energy_gap = 0;
  for (const auto& row : on.state["profile"]) {
    const int s = row["stage"], mhz = row["frequency"];
    const Instruction i = *parse_instruction(row["instruction"].get<std::string>());
    const double t = row["time"], e = row["energy"];
    EXPECT_NEAR(t, pipe.model_time_s(s, i, mhz), 1e-6 * t) << label << " stage " << s << " " << mhz << " MHz";
    for (const auto& o : off.profile.rows)
      if (o.stage == s && o.instruction == i && o.frequency_mhz == mhz) {
        worst_energy_gap = std::max(worst_energy_gap, std::abs(e / o.energy_j - 1));
        ++compared;
      }
  }
  EXPECT_GT(compared, 100u);
  // The same computations' energies, two ways: in the pipeline (physical, with the load-change
  // transient of a GPU that was blocked) and offline (steady, from the NVML counter with its ±2 %
  // per-device gain). They agree within 8 % (worst seen 5.6 % over four seeds).
  EXPECT_LT(worst_energy_gap, 0.08) << label;

  auto all_max = pipe.run(pipe.uniform(pipe.frequencies().front()), 3);
  auto served = pipe.run(on.plan, 3);
  auto reference = pipe.run(off.plan, 3);
  ASSERT_TRUE(all_max && served && reference);
  std::printf(
      "%s: planned after %d rounds (bound %zu); profile %zu rows (offline %zu); P2P %.1f W\n"
      "  all-max %.4f s %.1f J | online plan %.4f s %.1f J (%+.2f %% energy) | offline plan %.4f s %.1f J (%+.2f %%)\n"
      "  online vs offline energy %+.2f %%; worst profiled-energy gap %.2f %%\n",
      label.c_str(), on.rounds_to_plan, on.bound, on.state["profile"].size(), off.profile.rows.size(), off.p2p_w,
      all_max->time_s, all_max->energy_j, served->time_s, served->energy_j,
      100 * (served->energy_j / all_max->energy_j - 1), reference->time_s, reference->energy_j,
      100 * (reference->energy_j / all_max->energy_j - 1), 100 * (served->energy_j / reference->energy_j - 1),
      100 * worst_energy_gap);
  EXPECT_NEAR(served->energy_j, reference->energy_j, 0.02 * reference->energy_j) << label;
  EXPECT_LE(served->time_s, 1.01 * all_max->time_s) << label;
  EXPECT_LT(served->energy_j, all_max->energy_j) << label;
}

TEST(PerseusOnlineSim, ConvergesToAPlanAsGoodAsTheOfflineOneThroughTheService) {
  for (const int seed : {1, 2, 3}) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    auto made = SimulatedPipeline::create(imbalanced(seed));
    ASSERT_TRUE(made) << made.error().message;
    SimulatedPipeline& pipe = **made;
    const Offline off = offline(pipe);
    ASSERT_FALSE(off.plan.empty());

    server::Service service(online_options(off.p2p_w));
    const auto reg = service.register_job(job_body());
    ASSERT_EQ(reg.status, 200) << reg.body;
    const auto id = json::parse(reg.body).get<std::string>();
    for (int r = 0; r < kStages; ++r)
      ASSERT_EQ(service.register_rank(id, server::to_json(rank_info(pipe, r))).status, 200);
    Endpoint ep;
    ep.get_schedule = [&](int r) -> Result<server::FrequencySchedule> {
      const auto reply = service.get_schedule(id, std::to_string(r));
      if (reply.status != 200) return fail(ErrorCode::kIo, reply.body);
      const json j = json::parse(reply.body);
      server::FrequencySchedule s{j["rank"], {}};
      for (const auto& item : j["frequencies"]) s.frequencies.emplace_back(item[0], item[1]);
      return s;
    };
    ep.post_result = [&](const server::ProfilingResult& r) -> Result<void> {
      const auto reply = service.post_result(id, server::to_json(r));
      if (reply.status != 200) return fail(ErrorCode::kIo, reply.body);
      return {};
    };
    ep.state = [&] { return json::parse(service.get_state(id).body); };
    const Outcome on = drive(pipe, ep);
    judge(pipe, off, on, "seed " + std::to_string(seed) + " (Service)");
  }
}

TEST(PerseusOnlineSim, ConvergesOverLoopbackHttpWithFourClients) {
  auto made = SimulatedPipeline::create(imbalanced(7));
  ASSERT_TRUE(made) << made.error().message;
  SimulatedPipeline& pipe = **made;
  const Offline off = offline(pipe);
  ASSERT_FALSE(off.plan.empty());

  server::Service service(online_options(off.p2p_w));
  auto bound = server::HttpServer::bind(service, server::HttpOptions{});
  ASSERT_TRUE(bound) << bound.error().message;
  auto& http = **bound;
  std::thread serving([&] { http.run(); });
  http.wait_until_ready();
  std::vector<std::unique_ptr<server::Client>> clients;
  for (int r = 0; r < kStages; ++r) clients.push_back(std::make_unique<server::Client>("127.0.0.1", http.port(), 120s));
  auto id = clients[0]->register_job(server::JobInfo{"", kStages, 1, 1, kStages, std::nullopt});
  ASSERT_TRUE(id) << id.error().message;
  for (int r = 0; r < kStages; ++r) {
    auto ok = clients[static_cast<std::size_t>(r)]->register_rank(*id, rank_info(pipe, r));
    ASSERT_TRUE(ok) << ok.error().message;
  }
  Endpoint ep;
  // Each rank's client is used by one thread at a time: its GET on its own thread, its POST after.
  ep.get_schedule = [&](int r) { return clients[static_cast<std::size_t>(r)]->get_schedule(*id, r); };
  ep.post_result = [&](const server::ProfilingResult& r) {
    return clients[static_cast<std::size_t>(r.rank)]->post_result(*id, r);
  };
  ep.state = [&] { return json::parse(service.get_state(*id).body); };
  const Outcome on = drive(pipe, ep);
  http.stop();
  serving.join();
  judge(pipe, off, on, "seed 7 (HTTP, 4 clients)");
}

}  // namespace
}  // namespace erg::pipeline_frequency
