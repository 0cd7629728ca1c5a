#include "erg/optimizers/batch_size/optimizer.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace erg::batch_size {
namespace {

constexpr Watts kMaxPower(300.0);

JobSpec spec(int default_bs, std::optional<double> beta = std::nullopt) {
  JobSpec s;
  s.batch_sizes = {256, 8, 16, 32, 64, 128};  // any order: the optimizer sorts them
  s.default_batch_size = default_bs;
  s.beta_knob = beta;
  s.target_metric = 0.5;
  s.mab_seed = 1234;
  return s;
}

/// A report whose Zeus cost (η = 0.5, 300 W) is `cost`: energy 1 J, time (2·cost − 1) / 300 s.
TrainingResult result_with_cost(int trial, double cost, bool converged, int epoch = 100) {
  TrainingResult r;
  r.trial_number = trial;
  r.energy = Joules(1.0);
  r.time = Seconds((2.0 * cost - 1.0) / kMaxPower.value());
  r.metric = converged ? 0.55 : 0.4;
  r.current_epoch = epoch;
  return r;
}

TEST(Optimizer, PruningThroughReportsEndsInTheExpectedArms) {
  // The Zeus acceptance example: batch sizes 8..256, default 128 -> arms {32, 64, 128}.
  auto o = Optimizer::create(spec(128), kMaxPower);
  ASSERT_TRUE(o) << o.error().message;
  const std::vector<std::tuple<int, double, bool>> steps = {
      {128, 10, true}, {64, 9, true},   {32, 8, true}, {16, 12, true},  {8, 21, false},  {256, 15, true},
      {32, 8, true},   {16, 12, false}, {64, 9, true}, {128, 10, true}, {256, 17, false}};
  int n = 0;
  for (const auto& [bs, cost, conv] : steps) {
    auto t = o->predict();
    ASSERT_TRUE(t) << t.error().message;
    EXPECT_EQ(t->trial_number, ++n);
    EXPECT_EQ(t->type, TrialType::kExploration);
    EXPECT_EQ(t->batch_size, bs) << "trial " << n;
    auto r = o->report(result_with_cost(t->trial_number, cost, conv));
    ASSERT_TRUE(r);
    EXPECT_TRUE(r->stop_train);
    EXPECT_EQ(r->converged, conv);
    EXPECT_NEAR(*o->trials().back().cost, cost, 1e-9);
  }
  EXPECT_EQ(o->stage(), Stage::kPruning);
  EXPECT_EQ(*o->min_cost(), 8.0);
  EXPECT_EQ(o->min_cost_batch_size(), 32);
  auto t = o->predict();  // builds the bandit
  ASSERT_TRUE(t);
  EXPECT_EQ(t->type, TrialType::kMab);
  ASSERT_EQ(o->stage(), Stage::kMab);
  EXPECT_EQ(o->mab()->arms(), (std::vector<int>{32, 64, 128}));
  // Each arm was fitted on its two results: 32 saw 8 and 8, so it is exactly −8.
  EXPECT_EQ(o->mab()->states().at(32).param_mean, -8.0);
  EXPECT_EQ(o->mab()->states().at(32).num_observations, 2);
  EXPECT_EQ(o->best_batch_size(), 32);
}

TEST(Optimizer, BanditRefitsOnTheWindow) {
  JobSpec s = spec(64);
  s.batch_sizes = {64};
  s.window_size = 2;
  s.num_pruning_rounds = 1;
  s.mab_num_explorations = 1;
  auto o = Optimizer::create(s, kMaxPower);
  ASSERT_TRUE(o);
  for (double cost : {10.0, 12.0, 20.0}) {
    auto t = o->predict();
    ASSERT_TRUE(t);
    ASSERT_TRUE(o->observe(t->trial_number, cost, true));
  }
  // Window of 2: rewards −12, −20: variance 16, reward precision 1/16, precision 2/16, mean −16.
  const ArmState& a = o->mab()->states().at(64);
  EXPECT_DOUBLE_EQ(a.reward_precision, 1.0 / 16.0);
  EXPECT_DOUBLE_EQ(a.param_precision, 2.0 / 16.0);
  EXPECT_DOUBLE_EQ(a.param_mean, -16.0);
  EXPECT_EQ(a.num_observations, 2);
}

TEST(Optimizer, EarlyStopsAboveBetaTimesMinCost) {
  auto o = Optimizer::create(spec(128, 2.0), kMaxPower);
  ASSERT_TRUE(o);
  EXPECT_TRUE(std::isinf(o->cost_upper_bound()));
  auto t1 = o->predict();
  // No bound yet: a not-converged report below max_epochs goes on.
  auto r = o->report(result_with_cost(t1->trial_number, 1000, false, 1));
  ASSERT_TRUE(r);
  EXPECT_FALSE(r->stop_train);
  EXPECT_EQ(r->message, "Continue");
  r = o->report(result_with_cost(t1->trial_number, 100, true, 2));
  EXPECT_TRUE(r->stop_train);
  EXPECT_TRUE(r->converged);
  EXPECT_EQ(r->message, "Train succeeded");
  EXPECT_DOUBLE_EQ(o->cost_upper_bound(), 200.0);

  auto t2 = o->predict();
  ASSERT_EQ(t2->batch_size, 64);
  r = o->report(result_with_cost(t2->trial_number, 199, false, 3));
  EXPECT_FALSE(r->stop_train);
  r = o->report(result_with_cost(t2->trial_number, 201, false, 4));
  EXPECT_TRUE(r->stop_train);
  EXPECT_FALSE(r->converged);
  EXPECT_NE(r->message.find("exceeded the cost upper bound"), std::string::npos) << r->message;
  // Reached the target in the same report that crossed the bound: still not converged.
  auto t3 = o->predict();
  ASSERT_EQ(t3->batch_size, 256);  // 64 failed: down ends, up begins
  r = o->report(result_with_cost(t3->trial_number, 250, true, 3));
  EXPECT_TRUE(r->stop_train);
  EXPECT_FALSE(r->converged);
  // Re-reporting a finished trial answers its stored outcome.
  r = o->report(result_with_cost(t1->trial_number, 1, false, 1));
  EXPECT_TRUE(r->stop_train);
  EXPECT_TRUE(r->converged);
  // An early-stopped trial does not lower the bound.
  EXPECT_DOUBLE_EQ(o->cost_upper_bound(), 200.0);
}

TEST(Optimizer, MaxEpochsAndLowerIsBetterMetrics) {
  JobSpec s = spec(128);
  s.max_epochs = 5;
  s.higher_is_better_metric = false;
  s.target_metric = 40.0;  // e.g. a word error rate
  auto o = Optimizer::create(s, kMaxPower);
  ASSERT_TRUE(o);
  auto t = o->predict();
  TrainingResult res{t->trial_number, Joules(10), Seconds(1), 45.0, 4};
  EXPECT_FALSE(o->report(res)->stop_train);
  res.current_epoch = 5;
  auto r = o->report(res);
  EXPECT_TRUE(r->stop_train);
  EXPECT_FALSE(r->converged);
  EXPECT_NE(r->message.find("max_epochs (5)"), std::string::npos) << r->message;
  t = o->predict();
  res = {t->trial_number, Joules(10), Seconds(1), 39.0, 2};
  EXPECT_TRUE(o->report(res)->converged);
}

TEST(Optimizer, ConcurrentSubmissionsGetTheCheapestBatchSize) {
  auto o = Optimizer::create(spec(128), kMaxPower);
  ASSERT_TRUE(o);
  auto t1 = o->predict();
  auto c1 = o->predict();
  EXPECT_EQ(c1->type, TrialType::kConcurrent);
  EXPECT_EQ(c1->batch_size, 128);  // nothing converged yet: the default
  ASSERT_TRUE(o->observe(t1->trial_number, 10, true));
  auto t2 = o->predict();
  EXPECT_EQ(t2->batch_size, 64);
  ASSERT_TRUE(o->observe(c1->trial_number, 9, true));  // a concurrent result does not move pruning
  EXPECT_EQ(o->min_cost_batch_size(), 128);
  auto c2 = o->predict();
  EXPECT_EQ(c2->type, TrialType::kConcurrent);
  // A dead exploration is explored again; ending a finished trial changes nothing.
  ASSERT_TRUE(o->end_trial(t2->trial_number));
  EXPECT_EQ(o->trials()[1].status, TrialStatus::kSucceeded);
  EXPECT_EQ(o->trials()[2].status, TrialStatus::kFailed);
  ASSERT_TRUE(o->end_trial(t1->trial_number));
  EXPECT_EQ(o->trials()[0].status, TrialStatus::kSucceeded);
  EXPECT_EQ(o->predict()->batch_size, 64);
  EXPECT_FALSE(o->observe(t2->trial_number, 1, true));
  EXPECT_EQ(o->observe(99, 1, true).error().code, ErrorCode::kNotFound);
  EXPECT_EQ(o->end_trial(99).error().code, ErrorCode::kNotFound);
}

TEST(Optimizer, NoConvergedBatchSizeIsAnError) {
  auto o = Optimizer::create(spec(128), kMaxPower);
  ASSERT_TRUE(o);
  ASSERT_TRUE(o->observe(o->predict()->trial_number, 10, false));
  ASSERT_TRUE(o->observe(o->predict()->trial_number, 10, false));
  auto t = o->predict();
  ASSERT_FALSE(t);
  EXPECT_EQ(t.error().code, ErrorCode::kNotFound);
}

TEST(Optimizer, RejectsBadSpecAndPower) {
  EXPECT_FALSE(Optimizer::create(spec(100), kMaxPower));
  EXPECT_FALSE(Optimizer::create(spec(128), Watts(0)));
}

/// Runs `o` for `n` trials with costs that depend on the batch size and the trial, so the
/// bandit has something to learn; returns the batch sizes it chose.
std::vector<int> run(Optimizer& o, int n) {
  std::vector<int> chosen;
  for (int i = 0; i < n; ++i) {
    auto t = o.predict();
    EXPECT_TRUE(t) << t.error().message;
    chosen.push_back(t->batch_size);
    const double cost = 100.0 + std::abs(t->batch_size - 48) / 8.0 + (t->trial_number * 7919 % 13);
    EXPECT_TRUE(o.observe(t->trial_number, cost, t->batch_size >= 16));
  }
  return chosen;
}

TEST(Optimizer, SameSeedSameSequence) {
  auto a = Optimizer::create(spec(128), kMaxPower);
  auto b = Optimizer::create(spec(128), kMaxPower);
  ASSERT_TRUE(a && b);
  const auto sa = run(*a, 60);
  EXPECT_EQ(sa, run(*b, 60));
  EXPECT_EQ(a->stage(), Stage::kMab);
  JobSpec other = spec(128);
  other.mab_seed = 99;
  auto c = Optimizer::create(other, kMaxPower);
  EXPECT_NE(sa, run(*c, 60));
}

TEST(Optimizer, SavedStateContinuesTheSameSequence) {
  auto a = Optimizer::create(spec(128, 2.0), kMaxPower);
  ASSERT_TRUE(a);
  run(*a, 25);  // into the bandit stage
  ASSERT_EQ(a->stage(), Stage::kMab);
  (void)a->predict();  // one trial left dispatched
  const std::string saved = a->save_state();
  const auto j = nlohmann::json::parse(saved);
  EXPECT_EQ(j.at("stage"), "mab");
  EXPECT_TRUE(j.at("rng").get<std::string>().starts_with("xoshiro256ss:"));
  auto b = Optimizer::restore(saved);
  ASSERT_TRUE(b) << b.error().message;
  EXPECT_TRUE(*b == *a);
  EXPECT_EQ(b->save_state(), saved);
  ASSERT_TRUE(a->observe(static_cast<int>(a->trials().size()), 120, true));
  ASSERT_TRUE(b->observe(static_cast<int>(b->trials().size()), 120, true));
  EXPECT_EQ(run(*a, 40), run(*b, 40));
  EXPECT_TRUE(*b == *a);
}

TEST(Optimizer, SavedStateMidPruningAndInfinitePrecisions) {
  auto a = Optimizer::create(spec(128), kMaxPower);
  ASSERT_TRUE(a);
  run(*a, 4);
  auto b = Optimizer::restore(a->save_state());
  ASSERT_TRUE(b) << b.error().message;
  EXPECT_TRUE(*a == *b);
  EXPECT_EQ(run(*a, 30), run(*b, 30));
  // Arms that saw one cost each have infinite precision; they survive the round trip.
  JobSpec s = spec(64);
  s.batch_sizes = {64};
  s.num_pruning_rounds = 1;
  auto c = Optimizer::create(s, kMaxPower);
  run(*c, 1);
  ASSERT_TRUE(c->predict());  // builds the bandit from the one cost
  ASSERT_TRUE(std::isinf(c->mab()->states().at(64).param_precision));
  auto d = Optimizer::restore(c->save_state());
  ASSERT_TRUE(d) << d.error().message;
  EXPECT_TRUE(*c == *d);
}

TEST(Optimizer, RestoreRejectsOtherText) {
  for (const char* text : {"", "{}", "[1,2]", R"({"version": 99})"}) {
    auto r = Optimizer::restore(text);
    ASSERT_FALSE(r) << text;
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  }
  auto o = Optimizer::create(spec(128), kMaxPower);
  auto j = nlohmann::json::parse(o->save_state());
  j["rng"] = "garbage";
  EXPECT_FALSE(Optimizer::restore(j.dump()));
}

}  // namespace
}  // namespace erg::batch_size
