#include "erg/optimizers/zeus_sim/simulator.hpp"

#include <gtest/gtest.h>

#include <cmath>

namespace erg::zeus_sim {
namespace {

const std::filesystem::path kData = std::filesystem::path(ERG_SOURCE_DIR) / "optimizers/zeus_sim/data";

/// A toy job small enough to follow by hand: batch sizes 4, 8, 16 (b0), limits 100 and 200 W.
Traces toy() {
  Traces t;
  const auto train = [&](int bs, int run, std::optional<int> epoch) {
    t.train.push_back({"toy", "net", "sgd", bs, "0.1", run, 0.5, epoch});
    t.train.push_back({"toy", "net", "sgd", bs, "0.1", run, 0.9, std::nullopt});  // another target: ignored
  };
  train(4, 1, 9);
  train(8, 1, 4);
  train(8, 2, 4);
  train(16, 1, 3);
  train(16, 2, 3);
  auto& p = t.power["gpu"];
  const auto power = [&](int bs, double limit, double tpe, double avg) {
    p.push_back({"toy", "net", "sgd", bs, Watts(limit), Seconds(tpe), Watts(avg)});
  };
  power(4, 100, 20, 60);
  power(4, 200, 12, 100);
  power(8, 100, 10, 80);
  power(8, 200, 6, 150);
  power(16, 100, 6, 90);
  power(16, 200, 4, 180);
  power(32, 200, 1, 100);  // no train rows: not a candidate
  return t;
}

const Workload kToy{"toy", "net", "sgd", 0.5, 10, 16};

TEST(Simulator, ToyJobFollowsTheMethodologyByHand) {
  const Traces t = toy();
  Options o;
  o.eta = 0.5;
  o.beta = 2.0;
  o.recurrences = 6;
  auto r = simulate(t, "gpu", kToy, o);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->batch_sizes, (std::vector<int>{4, 8, 16}));
  ASSERT_EQ(r->power_limits.size(), 2u);
  EXPECT_EQ(r->max_power, Watts(200));

  // Expected recurrence at (16, 200 W): 3 epochs of 4 s at 180 W: E 2160 J, T 12 s,
  // cost 0.5·2160 + 0.5·200·12 = 2280. It is both the baseline and the optimum.
  EXPECT_EQ(r->baseline_config.batch_size, 16);
  EXPECT_EQ(r->baseline_config.power_limit, Watts(200));
  EXPECT_DOUBLE_EQ(r->baseline_run.energy.value(), 2160);
  EXPECT_DOUBLE_EQ(r->baseline_run.time.count(), 12);
  EXPECT_DOUBLE_EQ(r->baseline_run.cost, 2280);
  EXPECT_DOUBLE_EQ(r->baseline.cost, 6 * 2280.0);
  EXPECT_EQ(r->optimum.batch_size, 16);
  EXPECT_EQ(r->optimum.power_limit, Watts(200));

  ASSERT_EQ(r->history.size(), 6u);
  // 1: b0 with JIT profiling: epoch costs (η·avg + (1−η)·200)·tpe are 870 (100 W) and 760
  // (200 W), so 200 W. The first epoch is split over both limits (E mean(540, 720) = 630 J,
  // T mean(6, 4) = 5 s), then 2 epochs at 200 W: E 2070, T 13, cost 1035 + 1300 = 2335.
  EXPECT_EQ(r->history[0].config.batch_size, 16);
  EXPECT_EQ(r->history[0].config.power_limit, Watts(200));
  EXPECT_EQ(r->history[0].tries, 1);
  EXPECT_DOUBLE_EQ(r->history[0].totals.energy.value(), 2070);
  EXPECT_DOUBLE_EQ(r->history[0].totals.time.count(), 13);
  EXPECT_DOUBLE_EQ(r->history[0].totals.cost, 2335);
  // 2: pruning walks down to 8 (200 W: epoch cost 1050 < 1400). Bound 2·2335 = 4670 allows
  // floor(4670 / 1050) = 4 epochs; the run needs 4. E 850 + 3·900 = 3550, T 8 + 18 = 26.
  EXPECT_EQ(r->history[1].config.batch_size, 8);
  EXPECT_DOUBLE_EQ(r->history[1].totals.energy.value(), 3550);
  EXPECT_DOUBLE_EQ(r->history[1].totals.cost, 1775 + 2600);
  // 3: down to 4 (200 W: 1800 < 2600): the bound allows floor(4670 / 1800) = 2 of the 9
  // epochs it needs, so it is stopped (E 1200 + 1200, T 16 + 12, cost 4000), and the retry
  // starts round 2 at its b0, 16, already profiled: 2280. Two tries.
  EXPECT_EQ(r->history[2].tries, 2);
  EXPECT_EQ(r->history[2].config.batch_size, 16);
  EXPECT_DOUBLE_EQ(r->history[2].totals.energy.value(), 2400 + 2160);
  EXPECT_DOUBLE_EQ(r->history[2].totals.time.count(), 28 + 12);
  EXPECT_DOUBLE_EQ(r->history[2].totals.cost, 4000 + 2280);
  // 4: round 2 goes on down to 8 (4 epochs of 6 s at 150 W): 3600 J, 24 s, cost 4200.
  EXPECT_EQ(r->history[3].config.batch_size, 8);
  EXPECT_DOUBLE_EQ(r->history[3].totals.cost, 4200);
  // 5, 6: the bandit over {8, 16} (two results each) picks 16.
  EXPECT_EQ(r->history[4].config.batch_size, 16);
  EXPECT_EQ(r->history[5].config.batch_size, 16);
  double energy = 0;
  for (const auto& h : r->history) energy += h.totals.energy.value();
  EXPECT_DOUBLE_EQ(r->erg.energy.value(), energy);
  EXPECT_EQ(r->converged.batch_size, 16);
  EXPECT_EQ(r->converged.power_limit, Watts(200));
  EXPECT_DOUBLE_EQ(r->converged_gap_pct(), 0.0);
  // Exploration costs more than the baseline here: the improvement is honestly negative.
  EXPECT_LT(r->energy_improvement_pct(), 0.0);
}

TEST(Simulator, DefaultRecurrencesAreTwiceBatchSizesTimesLimits) {
  auto r = simulate(toy(), "gpu", kToy, Options{});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->recurrences, 2 * 3 * 2);
  EXPECT_EQ(r->history.size(), 12u);
}

TEST(Simulator, ErrorsAreClear) {
  const Traces t = toy();
  Workload w = kToy;
  w.default_batch_size = 64;
  auto r = simulate(t, "gpu", w, Options{});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kNotFound);
  EXPECT_FALSE(simulate(t, "h100", kToy, Options{}));
  Options bad;
  bad.eta = 1.5;
  EXPECT_EQ(simulate(t, "gpu", kToy, bad).error().code, ErrorCode::kInvalidArgument);
  bad = Options{};
  bad.beta = 0.0;
  EXPECT_EQ(simulate(t, "gpu", kToy, bad).error().code, ErrorCode::kInvalidArgument);
  // A default batch size that misses the target in a trace run has no baseline.
  w = kToy;
  w.default_batch_size = 4;
  w.max_epochs = 8;
  r = simulate(t, "gpu", w, Options{});
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("no baseline"), std::string::npos) << r.error().message;
}

TEST(Simulator, NoEarlyStoppingWithoutBeta) {
  Options o;
  o.beta.reset();
  o.recurrences = 3;
  auto r = simulate(toy(), "gpu", kToy, o);
  ASSERT_TRUE(r) << r.error().message;
  // Recurrence 3 explores 4, which now runs all 9 epochs and reaches the target.
  EXPECT_EQ(r->history[2].tries, 1);
  EXPECT_EQ(r->history[2].config.batch_size, 4);
}

TEST(Simulator, ExpectedRunOfAConfiguration) {
  auto e = expected_run(toy(), "gpu", kToy, {8, Watts(100)}, 0.5);
  ASSERT_TRUE(e);
  ASSERT_TRUE(e->has_value());
  EXPECT_DOUBLE_EQ((*e)->energy.value(), 3200);
  EXPECT_DOUBLE_EQ((*e)->cost, 1600 + 4000);
  Workload w = kToy;
  w.max_epochs = 8;
  e = expected_run(toy(), "gpu", w, {4, Watts(200)}, 0.5);
  ASSERT_TRUE(e);
  EXPECT_FALSE(e->has_value());  // 9 epochs > 8: not feasible
  EXPECT_FALSE(expected_run(toy(), "gpu", kToy, {8, Watts(150)}, 0.5));
}

std::vector<std::string> all_gpus() {
  std::vector<std::string> g;
  for (auto n : trace_gpus()) g.emplace_back(n);
  return g;
}

// The acceptance criterion over the whole sweep of the real traces, pair by pair: the
// configuration erg converges to is within 5 % in expected cost of the exhaustive optimum, and
// erg's total energy over the recurrences beats the baseline's (b0 at the maximum limit).
TEST(Sweep, EveryPairConvergesNearTheOptimumAndSavesEnergy) {
  auto traces = load_traces(kData);
  ASSERT_TRUE(traces) << traces.error().message;
  const Options o;  // η 0.5, β 2, seed 1
  auto s = sweep(*traces, all_gpus(), workloads(), o);
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(s->pairs.size(), 19u);
  // The pairs whose default batch size the GPU's power trace lacks.
  std::vector<std::string> skipped;
  for (const auto& k : s->skipped) {
    skipped.push_back(k.gpu + " " + k.workload);
    EXPECT_NE(k.reason.find("default batch size"), std::string::npos) << k.reason;
  }
  EXPECT_EQ(skipped, (std::vector<std::string>{"p100 imagenet", "p100 squad", "p100 librispeech", "p100 sentiment140",
                                               "rtx6000 librispeech"}));
  for (const auto& p : s->pairs) {
    SCOPED_TRACE(p.gpu + " " + p.workload.name);
    EXPECT_LE(p.converged_gap_pct(), 5.0)
        << "converged to " << p.converged.batch_size << " at " << p.converged.power_limit.value() << " W; optimum "
        << p.optimum.batch_size << " at " << p.optimum.power_limit.value() << " W";
    EXPECT_GT(p.energy_improvement_pct(), 0.0);
    EXPECT_EQ(static_cast<int>(p.history.size()), p.recurrences);
  }
}

TEST(Sweep, SameSeedSameResultOtherSeedOtherPaths) {
  auto traces = load_traces(kData);
  ASSERT_TRUE(traces);
  const std::vector<std::string> gpu = {"v100"};
  Options o;
  auto a = sweep(*traces, gpu, workloads(), o);
  auto b = sweep(*traces, gpu, workloads(), o);
  o.seed = 2;
  auto c = sweep(*traces, gpu, workloads(), o);
  ASSERT_TRUE(a && b && c);
  ASSERT_EQ(a->pairs.size(), b->pairs.size());
  bool differs = false;
  for (std::size_t i = 0; i < a->pairs.size(); ++i) {
    EXPECT_EQ(a->pairs[i].erg.energy, b->pairs[i].erg.energy);
    EXPECT_EQ(a->pairs[i].erg.cost, b->pairs[i].erg.cost);
    EXPECT_EQ(a->pairs[i].converged.batch_size, b->pairs[i].converged.batch_size);
    differs |= a->pairs[i].erg.energy != c->pairs[i].erg.energy;
  }
  EXPECT_TRUE(differs);
}

}  // namespace
}  // namespace erg::zeus_sim
