// Acceptance 2 of issue 20 on the simulated machine (`4xA100`, faithful model, virtual clock): a
// 4-stage, 8-micro-batch synchronous 1F1B pipeline with imbalanced stages is profiled (per stage,
// instruction and frequency, highest first, stopping after five rises in energy; P2P-blocking
// power), the profile goes through the CSV to the planner, and the plan Perseus would pick runs on
// the pipeline. Judged by measurement: the simulator's clock and physical energy.
//
// The chosen plan: the frontier's fastest plan. Its iteration time is the planner's all-maximum-
// frequency time (every activity at its fastest option), so it is the cheapest plan that does not
// slow the iteration down — Perseus's choice when no stage straggles.

#include <gtest/gtest.h>

#include <cstdio>
#include <vector>

#include "erg/optimizers/pipeline_frequency/planner.hpp"
#include "erg/optimizers/pipeline_frequency/profiler.hpp"
#include "perseus_sim_pipeline.hpp"

namespace erg::pipeline_frequency::simulated {
namespace {

// Forward work per micro-batch (simulator units: 1 = 1 s fully busy at 1410 MHz); backward is
// twice the forward. Stage 1 is the heaviest, stage 2 the lightest.
PipelineConfig imbalanced() {
  PipelineConfig c;
  c.spec = "4xA100,cpus=0";
  for (const double f : {0.0303, 0.0361, 0.0262, 0.0318}) c.stages.push_back(StageWork{f, 2 * f});
  c.micro_batches = 8;
  return c;
}

TEST(SimulatedPipeline, RunsTheScheduleAsTheDagSays) {
  // With every computation at one clock, the measured iteration is the DAG's longest path at the
  // device model's durations: the pipeline waits exactly on its dependencies and nothing else.
  auto p = SimulatedPipeline::create(imbalanced());
  ASSERT_TRUE(p) << p.error().message;
  for (const int mhz : {1410, 900}) {
    std::vector<double> d;
    for (const auto& a : (*p)->dag().activities()) d.push_back((*p)->model_time_s(a.stage, a.instruction, mhz));
    const double expected = *longest_path(d, (*p)->dag().edges());
    auto run = (*p)->run((*p)->uniform(mhz), 2);
    ASSERT_TRUE(run) << run.error().message;
    EXPECT_NEAR(run->time_s, expected, 1e-6 * expected) << mhz << " MHz";
    // The lightest stage waits longest on its neighbours; the heaviest is blocked least.
    EXPECT_GT(run->stage_blocked_s[2], run->stage_blocked_s[1]);
    EXPECT_GT(run->energy_j, 0.0);
  }
  // A plan of the wrong shape is refused.
  auto bad = (*p)->uniform(1410);
  bad[1].pop_back();
  EXPECT_FALSE((*p)->run(bad, 1));
  bad = (*p)->uniform(1411);
  EXPECT_FALSE((*p)->run(bad, 1));
}

TEST(SimulatedPipeline, ProfilePlanRunSavesEnergyAtTheSameIterationTime) {
  auto made = SimulatedPipeline::create(imbalanced());
  ASSERT_TRUE(made) << made.error().message;
  SimulatedPipeline& pipe = **made;
  const int f_max = pipe.frequencies().front();
  ASSERT_EQ(f_max, 1410);

  // 1. Profile: every fourth supported clock (60 MHz apart) to keep the sweep short.
  SweepOptions sweep;
  sweep.stages = pipe.stages();
  for (std::size_t i = 0; i < pipe.frequencies().size(); i += 4) sweep.frequencies_mhz.push_back(pipe.frequencies()[i]);
  auto profile =
      sweep_frequencies(sweep, [&](int s, Instruction i, int mhz) { return pipe.measure_instruction(s, i, mhz); });
  ASSERT_TRUE(profile) << profile.error().message;
  double p2p_w = 0;
  for (int s = 0; s < pipe.stages(); ++s) {
    auto w = pipe.measure_blocking_power(s);
    ASSERT_TRUE(w) << w.error().message;
    p2p_w += *w / pipe.stages();
  }
  // The measurements follow the device model (within the energy counter's errors for energy;
  // time from the clock), and each sweep stopped after five rises in a row, above 210 MHz.
  for (int s = 0; s < pipe.stages(); ++s)
    for (const Instruction i : {Instruction::kForward, Instruction::kBackward}) {
      std::vector<ProfileRow> rows;
      for (const auto& r : profile->rows)
        if (r.stage == s && r.instruction == i) rows.push_back(r);
      ASSERT_GE(rows.size(), 6u);
      EXPECT_LT(rows.size(), sweep.frequencies_mhz.size()) << "the sweep should stop before 210 MHz";
      for (std::size_t k = rows.size() - 5; k < rows.size(); ++k) EXPECT_GT(rows[k].energy_j, rows[k - 1].energy_j);
      for (const auto& r : rows)
        EXPECT_NEAR(r.time_s, pipe.model_time_s(s, i, r.frequency_mhz), 0.003 * r.time_s) << r.frequency_mhz;
    }
  EXPECT_GT(p2p_w, 40.0);  // blocked A100s draw their idle power, about 55 W
  EXPECT_LT(p2p_w, 70.0);

  // 2. Plan, from the profile as the CSV the planner reads.
  auto parsed = parse_profile_csv(to_profile_csv(*profile));
  ASSERT_TRUE(parsed) << parsed.error().message;
  PlannerOptions po;
  po.stages = pipe.stages();
  po.micro_batches = pipe.config().micro_batches;
  po.unit_s = 0.00025;  // rounding each computation up costs at most 2 units per micro-batch of the critical path
  po.p2p_power_w = p2p_w;
  auto frontier = plan_pipeline(*parsed, po);
  ASSERT_TRUE(frontier) << frontier.error().message;
  ASSERT_GE(frontier->plans.size(), 2u);
  const Plan& chosen = frontier->plans.back();
  int slowed = 0;
  for (const auto& stage : chosen.frequencies)
    for (const auto& [instruction, mhz] : stage) slowed += mhz < f_max ? 1 : 0;
  EXPECT_GT(slowed, 0) << "the fastest plan should slow the computations off the critical path";

  // 3. Run all-maximum and the chosen plan.
  auto all_max = pipe.run(pipe.uniform(f_max), 3);
  ASSERT_TRUE(all_max) << all_max.error().message;
  auto planned = pipe.run(chosen.frequencies, 3);
  ASSERT_TRUE(planned) << planned.error().message;
  auto cheapest = pipe.run(frontier->plans.front().frequencies, 1);
  ASSERT_TRUE(cheapest) << cheapest.error().message;

  const double saving = 1.0 - planned->energy_j / all_max->energy_j;
  std::printf(
      "simulated 4xA100 (faithful model, virtual clock), 4 stages x 8 micro-batches, forward work "
      "30.3/36.1/26.2/31.8 ms at 1410 MHz, backward 2x\n"
      "  profile: %zu rows (%zu clocks offered per computation), P2P-blocking power %.1f W\n"
      "  frontier: %zu plans (unit %.2f ms); chosen = fastest plan, %d of 64 computations below %d MHz\n"
      "  all %d MHz: %.4f s, %.1f J per iteration (measured)\n"
      "  chosen plan: %.4f s (planned %.4f s), %.1f J per iteration (measured)\n"
      "  time %+.3f %%, energy saving %.2f %%\n"
      "  cheapest plan: %.4f s, %.1f J (planned %.4f s)\n",
      profile->rows.size(), sweep.frequencies_mhz.size(), p2p_w, frontier->plans.size(), po.unit_s * 1e3, slowed, f_max,
      f_max, all_max->time_s, all_max->energy_j, planned->time_s, chosen.time_s, planned->energy_j,
      100 * (planned->time_s / all_max->time_s - 1), 100 * saving, cheapest->time_s, cheapest->energy_j,
      frontier->plans.front().time_s);

  EXPECT_LE(planned->time_s, 1.01 * all_max->time_s) << "the chosen plan must keep the iteration time within 1 %";
  EXPECT_LT(planned->energy_j, all_max->energy_j) << "the chosen plan must spend less energy";
  // The plan's stated time bounds the run (computations finish within their planned durations).
  EXPECT_LE(planned->time_s, chosen.time_s * 1.001);
  // The frontier's other end really is slower when run.
  EXPECT_GT(cheapest->time_s, 1.2 * all_max->time_s);
}

}  // namespace
}  // namespace erg::pipeline_frequency::simulated
