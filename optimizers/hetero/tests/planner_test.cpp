// The planner: brute force against an enumeration written here (its own interpolation and cost),
// the heuristic and the baseline on the same grids, and the errors of bad requests.

#include "erg/optimizers/hetero/planner.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <random>

namespace erg::hetero {
namespace {

// ---- an independent model of the plan (the header's formulas, written again) ------------------

struct Cell {
  bool ok = false;
  double t = 0, p = 0;
};

// Step time and power of `prof` at batch b and limit index l by the test's own linear
// interpolation; nullopt outside the profiled range or when a bracketing cell cannot run.
std::optional<Cell> lookup(const Profile& prof, int b, std::size_t l) {
  const auto& bs = prof.batch_sizes;
  for (std::size_t k = 0; k < bs.size(); ++k) {
    if (bs[k] == b) {
      const auto& c = prof.cells[k * prof.power_limits.size() + l];
      if (!c) return std::nullopt;
      return Cell{true, c->step_time.count(), c->avg_power.value()};
    }
    if (k + 1 < bs.size() && bs[k] < b && b < bs[k + 1]) {
      const auto& x = prof.cells[k * prof.power_limits.size() + l];
      const auto& y = prof.cells[(k + 1) * prof.power_limits.size() + l];
      if (!x || !y) return std::nullopt;
      const double f = double(b - bs[k]) / double(bs[k + 1] - bs[k]);
      return Cell{true, (1 - f) * x->step_time.count() + f * y->step_time.count(),
                  (1 - f) * x->avg_power.value() + f * y->avg_power.value()};
    }
  }
  return std::nullopt;
}

struct Cost {
  double cost = std::numeric_limits<double>::infinity();
  double energy = 0, time = 0;
};

Cost cost_of(const std::vector<const Profile*>& gpus, const std::vector<int>& b, const std::vector<std::size_t>& l,
             double eta) {
  std::vector<Cell> cells;
  double t = 0, max_power = 0;
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    auto c = lookup(*gpus[i], b[i], l[i]);
    if (!c) return {};
    cells.push_back(*c);
    t = std::max(t, c->t);
    max_power += gpus[i]->max_power_limit.value();
  }
  double e = 0;
  for (std::size_t i = 0; i < gpus.size(); ++i)
    e += cells[i].p * cells[i].t + gpus[i]->idle_power.value() * (t - cells[i].t);
  return {eta * e + (1 - eta) * max_power * t, e, t};
}

// Every tuple of shares 1..N (no pruning) × every tuple of limits.
Cost enumerate_all(const std::vector<const Profile*>& gpus, int n, double eta) {
  Cost best;
  const std::size_t g = gpus.size();
  std::vector<int> b(g, 1);
  for (;;) {
    int sum = 0;
    for (int v : b) sum += v;
    if (sum == n) {
      std::vector<std::size_t> l(g, 0);
      for (;;) {
        auto c = cost_of(gpus, b, l, eta);
        if (c.cost < best.cost) best = c;
        std::size_t k = 0;
        while (k < g && ++l[k] == gpus[k]->power_limits.size()) l[k++] = 0;
        if (k == g) break;
      }
    }
    std::size_t k = 0;
    while (k < g && ++b[k] > n) b[k++] = 1;
    if (k == g) break;
  }
  return best;
}

// A random grid: step time affine in the batch, slower at lower limits, with noise; power rising
// with the limit and the batch. `oom` cells (the largest batches at random) cannot run.
Profile random_profile(std::mt19937& rng, const std::string& type, std::vector<int> batch_sizes,
                       std::vector<double> limits, double oom_rate) {
  std::uniform_real_distribution<double> u(0, 1);
  Profile p;
  p.gpu_type = type;
  p.batch_sizes = std::move(batch_sizes);
  for (double l : limits) p.power_limits.emplace_back(l);
  p.max_power_limit = Watts(limits.back());
  p.idle_power = Watts(10 + 20 * u(rng));
  const double speed = 0.5 + 2 * u(rng), fixed = 0.01 + 0.05 * u(rng);
  for (int b : p.batch_sizes)
    for (double l : limits) {
      if (u(rng) < oom_rate) {
        p.cells.emplace_back(std::nullopt);
        continue;
      }
      const double slow = 1 + 0.8 * (limits.back() - l) / limits.back() * u(rng);
      const double t = (fixed + b / (100 * speed)) * slow * (0.9 + 0.2 * u(rng));
      const double pw = std::min(l, l * (0.6 + 0.4 * u(rng)));
      p.cells.emplace_back(Measurement{Seconds(t), Watts(pw)});
    }
  return p;
}

void expect_consistent(const Plan& plan, const std::vector<const Profile*>& gpus, int n, double eta) {
  std::vector<int> b;
  std::vector<std::size_t> l;
  int sum = 0;
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    b.push_back(plan.gpus[i].batch_size);
    sum += plan.gpus[i].batch_size;
    const auto& ls = gpus[i]->power_limits;
    auto it = std::find(ls.begin(), ls.end(), plan.gpus[i].power_limit);
    ASSERT_NE(it, ls.end());
    l.push_back(static_cast<std::size_t>(it - ls.begin()));
  }
  EXPECT_EQ(sum, n);
  auto c = cost_of(gpus, b, l, eta);
  EXPECT_NEAR(plan.cost, c.cost, 1e-9 * c.cost);
  EXPECT_NEAR(plan.energy.value(), c.energy, 1e-9 * c.energy);
  EXPECT_NEAR(plan.step_time.count(), c.time, 1e-12);
  double e = 0;
  for (const auto& g : plan.gpus) e += g.energy.value();
  EXPECT_NEAR(e, plan.energy.value(), 1e-9 * e);
}

TEST(HeteroPlanner, BruteForceIsExactOnSmallGrids) {
  std::mt19937 rng(21);
  int cases = 0;
  for (int trial = 0; trial < 40; ++trial) {
    const bool three = trial % 4 == 3;
    const double oom = trial % 3 == 0 ? 0.15 : 0.0;
    Profile a = random_profile(rng, "A", {2, 5, 9}, {100, 150, 200}, oom);
    Profile b = random_profile(rng, "B", {1, 4, 8}, {60, 70}, oom);
    Profile c = random_profile(rng, "C", {3, 6}, {150, 250, 300}, oom);
    std::vector<const Profile*> gpus =
        three ? std::vector<const Profile*>{&a, &b, &c} : std::vector<const Profile*>{&a, &b};
    const int n = 4 + static_cast<int>(rng() % 12);
    for (double eta : {0.0, 0.3, 1.0}) {
      const auto want = enumerate_all(gpus, n, eta);
      auto got = plan(PlanRequest{gpus, n, eta}, Method::kBrute);
      if (!std::isfinite(want.cost)) {
        EXPECT_FALSE(got) << "brute found a plan the enumeration did not";
        continue;
      }
      ASSERT_TRUE(got) << got.error().message;
      ++cases;
      EXPECT_NEAR(got->cost, want.cost, 1e-9 * want.cost) << "trial " << trial << " n " << n << " eta " << eta;
      expect_consistent(*got, gpus, n, eta);
      auto h = plan(PlanRequest{gpus, n, eta}, Method::kHeuristic);
      ASSERT_TRUE(h) << h.error().message;
      EXPECT_GE(h->cost, want.cost * (1 - 1e-12));  // brute force is the optimum
      expect_consistent(*h, gpus, n, eta);
    }
  }
  EXPECT_GT(cases, 60);
}

TEST(HeteroPlanner, BaselineIsTheEvenSplitAtTheHighestLimit) {
  std::mt19937 rng(7);
  Profile a = random_profile(rng, "A", {4, 8, 16}, {100, 150, 200}, 0);
  Profile b = random_profile(rng, "B", {4, 8, 16}, {60, 70}, 0);
  std::vector<const Profile*> gpus{&a, &b, &b};
  auto p = plan(PlanRequest{gpus, 26, 0.5}, Method::kBaseline);
  ASSERT_TRUE(p) << p.error().message;
  // 26 = 8 + 8 + 8 + 2: the remainder goes to the strongest GPUs first.
  std::vector<std::pair<double, std::size_t>> strength;
  for (std::size_t i = 0; i < gpus.size(); ++i) strength.emplace_back(16 / gpus[i]->cells.back()->step_time.count(), i);
  std::stable_sort(strength.begin(), strength.end(), [](auto x, auto y) { return x.first > y.first; });
  std::vector<int> want(3, 8);
  ++want[strength[0].second];
  ++want[strength[1].second];
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(p->gpus[i].batch_size, want[i]);
    EXPECT_EQ(p->gpus[i].power_limit, gpus[i]->power_limits.back());
  }
  expect_consistent(*p, gpus, 26, 0.5);
}

TEST(HeteroPlanner, HeuristicFavoursTheStrongerGpu) {
  // B is exactly twice as fast as A at every limit, same power: the equal-time split is 1:2.
  Profile a, b;
  for (Profile* p : {&a, &b}) {
    p->gpu_type = p == &a ? "slow" : "fast";
    p->batch_sizes = {10, 100};
    p->power_limits = {Watts(200)};
    p->max_power_limit = Watts(200);
    p->idle_power = Watts(20);
    const double k = p == &a ? 2.0 : 1.0;
    p->cells = {Measurement{Seconds(0.01 * k), Watts(150)}, Measurement{Seconds(0.1 * k), Watts(180)}};
  }
  std::vector<const Profile*> gpus{&a, &b};
  auto h = plan(PlanRequest{gpus, 90, 0.5}, Method::kHeuristic);
  auto x = plan(PlanRequest{gpus, 90, 0.5}, Method::kBrute);
  ASSERT_TRUE(h && x);
  EXPECT_EQ(h->gpus[0].batch_size, 30);
  EXPECT_EQ(h->gpus[1].batch_size, 60);
  EXPECT_NEAR(h->gpus[0].step_time.count(), h->gpus[1].step_time.count(), 1e-12);
  EXPECT_DOUBLE_EQ(h->cost, x->cost);
  auto base = plan(PlanRequest{gpus, 90, 0.5}, Method::kBaseline);
  ASSERT_TRUE(base);
  EXPECT_GT(base->cost, h->cost);
}

Profile tiny(const std::string& type, std::vector<std::optional<Measurement>> cells) {
  Profile p;
  p.gpu_type = type;
  p.batch_sizes = {4, 8, 16};
  p.power_limits = {Watts(100)};
  p.max_power_limit = Watts(100);
  p.idle_power = Watts(10);
  p.cells = std::move(cells);
  return p;
}

void expect_plan_error(const PlanRequest& r, const std::vector<std::string>& fragments) {
  for (auto m : {Method::kBrute, Method::kHeuristic, Method::kBaseline}) {
    auto p = plan(r, m);
    ASSERT_FALSE(p) << to_string(m) << " planned";
    EXPECT_EQ(p.error().code, ErrorCode::kInvalidArgument);
    for (const auto& f : fragments) EXPECT_NE(p.error().message.find(f), std::string::npos) << p.error().message;
  }
}

TEST(HeteroPlanner, ErrorsNameTheirCause) {
  const Measurement m{Seconds(0.1), Watts(80)};
  Profile good = tiny("A10", {m, m, m});
  Profile dead = tiny("T4", {std::nullopt, std::nullopt, std::nullopt});
  expect_plan_error(PlanRequest{{&good, &dead}, 16, 0.5}, {"GPU 1 (T4)", "no feasible configuration"});
  expect_plan_error(PlanRequest{{&good, &good}, 40, 0.5}, {"global batch 40", "no split reaches it", "8 and 32"});
  expect_plan_error(PlanRequest{{&good, &good}, 7, 0.5}, {"global batch 7", "no split reaches it"});
  expect_plan_error(PlanRequest{{&good}, 8, 1.5}, {"eta"});
  expect_plan_error(PlanRequest{{}, 8, 0.5}, {"no GPUs"});
  expect_plan_error(PlanRequest{{&good}, 0, 0.5}, {"global batch must be greater than 0"});
}

TEST(HeteroPlanner, HolesInTheDomainAreRespected) {
  const Measurement m4{Seconds(0.04), Watts(60)}, m16{Seconds(0.16), Watts(90)};
  // 8 cannot run at the only limit: the feasible shares are 4 and 16, nothing between.
  Profile holey = tiny("X", {m4, std::nullopt, m16});
  std::vector<const Profile*> gpus{&holey, &holey};
  for (auto m : {Method::kBrute, Method::kHeuristic}) {
    auto p = plan(PlanRequest{gpus, 20, 0.5}, m);
    ASSERT_TRUE(p) << p.error().message;
    std::vector<int> got{p->gpus[0].batch_size, p->gpus[1].batch_size};
    std::sort(got.begin(), got.end());
    EXPECT_EQ(got, (std::vector<int>{4, 16}));
  }
  expect_plan_error(PlanRequest{gpus, 24, 0.5}, {"global batch 24", "every share feasible"});
  // The baseline's even split (10 + 10) falls in the hole.
  auto b = plan(PlanRequest{gpus, 20, 0.5}, Method::kBaseline);
  ASSERT_FALSE(b);
  EXPECT_NE(b.error().message.find("even share 10"), std::string::npos) << b.error().message;
}

TEST(HeteroPlanner, InterpolatesBetweenProfiledBatchSizes) {
  Profile p = tiny("A", {Measurement{Seconds(0.1), Watts(50)}, Measurement{Seconds(0.2), Watts(70)},
                         Measurement{Seconds(0.6), Watts(90)}});
  auto at12 = interpolate(p, 12, 0);
  ASSERT_TRUE(at12);
  EXPECT_DOUBLE_EQ(at12->step_time.count(), 0.4);
  EXPECT_DOUBLE_EQ(at12->avg_power.value(), 80);
  EXPECT_FALSE(interpolate(p, 3, 0));
  EXPECT_FALSE(interpolate(p, 17, 0));
  EXPECT_TRUE(interpolate(p, 8, 0));
}

TEST(HeteroPlanner, EvaluateRecomputesAGivenAssignment) {
  std::mt19937 rng(3);
  Profile a = random_profile(rng, "A", {4, 8, 16}, {100, 150, 200}, 0);
  Profile b = random_profile(rng, "B", {4, 8, 16}, {60, 70}, 0);
  std::vector<const Profile*> gpus{&a, &b};
  auto p = evaluate(PlanRequest{gpus, 20, 0.5}, {12, 8}, {Watts(150), Watts(60)}, Method::kBaseline);
  ASSERT_TRUE(p) << p.error().message;
  expect_consistent(*p, gpus, 20, 0.5);
  auto bad = evaluate(PlanRequest{gpus, 20, 0.5}, {12, 8}, {Watts(120), Watts(60)}, Method::kBaseline);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("120 W was not profiled"), std::string::npos);
}

}  // namespace
}  // namespace erg::hetero
