// The optimizer's state machine on the simulated driver (reference/zeus.md §4 and §9 item 7):
// the exact ordered sequence of limits set — read from the simulator's log of
// nvmlDeviceSetPowerManagementLimit calls — for η ∈ {0, .25, .5, .75, 1} × interruptions {none,
// one during warmup, one during profiling, every limit}; the pick is the argmin of Zeus's cost
// over the measured profile with max_power = maxPL × #GPUs; every selector on a saved profile;
// a reloaded profile skips profiling. Windows replay a fixed per-limit profile (as Zeus's tests
// replay a ZeusMonitor log) so the picks are known exactly; the live test measures for real.

#include "erg/optimizers/power_limit/optimizer.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>

#include "sim_rig.hpp"

namespace erg::power_limit {
namespace {

using testing::SimRig;

/// Per-GPU time and energy of a step window at limit W: time grows steeply below ~300 W, power
/// falls with the limit, so energy has an interior minimum and η moves the pick.
WindowFigures figures_at(double w, unsigned gpus) {
  const double x = (400.0 - w) / 300.0;
  const double t = 20.0 * (1.0 + 3.0 * x * x * x);
  return WindowFigures{Joules(gpus * (70.0 + 0.85 * w) * t), Seconds(t)};
}

/// Windows that replay figures_at and record what happened at which step.
class ReplayWindows final : public ProfileWindows {
 public:
  explicit ReplayWindows(unsigned gpus) : gpus_(gpus) {}
  Result<void> begin_window(const std::string& name) override {
    if (open_.count(name)) return fail(ErrorCode::kAlreadyExists, name);
    open_[name] = step;
    return ok();
  }
  Result<WindowFigures> end_window(const std::string& name) override {
    auto it = open_.find(name);
    if (it == open_.end()) return fail(ErrorCode::kNotFound, name);
    spans.emplace_back(name, step - it->second);
    open_.erase(it);
    const double w = std::stod(name.substr(name.rfind('_') + 1));
    return figures_at(w, gpus_);
  }
  Result<void> cancel_window(const std::string& name) override {
    if (!open_.erase(name)) return fail(ErrorCode::kNotFound, name);
    cancelled.push_back(name);
    return ok();
  }
  long step = 0;                                    ///< set by the training loop
  std::vector<std::pair<std::string, long>> spans;  ///< ended windows and their length in steps
  std::vector<std::string> cancelled;

 private:
  unsigned gpus_;
  std::map<std::string, long> open_;
};

enum class Interrupt { kNone, kWarmupOnce, kProfilingOnce, kEveryLimit };

std::string interrupt_name(Interrupt i) {
  static constexpr const char* kNames[] = {"none", "warmup_once", "profiling_once", "every_limit"};
  return kNames[static_cast<int>(i)];
}

struct Run {
  std::unique_ptr<PowerLimitOptimizer> opt;
  std::shared_ptr<ReplayWindows> windows;
  long steps = 0;  ///< step beginnings until Done
};

/// Trains until Done, ending an epoch where `interrupt` says (at most once per limit).
Run train(SimRig& rig, OptimizerOptions o, Interrupt interrupt) {
  Run run;
  run.windows = std::make_shared<ReplayWindows>(static_cast<unsigned>(rig.gpus.size()));
  auto opt = PowerLimitOptimizer::create(rig.gpus, run.windows, std::move(o));
  EXPECT_TRUE(opt) << opt.error().message;
  if (!opt) return run;
  run.opt = std::move(*opt);
  const auto& limits = run.opt->power_limits();
  std::set<double> interrupted;
  for (long step = 1; step < 100000 && !run.opt->optimal_power_limit(); ++step) {
    run.windows->step = step;
    const State& s = run.opt->state();
    bool end_epoch = false;
    if (const auto* w = std::get_if<Warmup>(&s)) {
      end_epoch = interrupt == Interrupt::kWarmupOnce && w->current_power_limit == limits[2] && w->steps == 5 &&
                  interrupted.insert(w->current_power_limit.value()).second;
    } else if (const auto* p = std::get_if<Profiling>(&s)) {
      end_epoch = ((interrupt == Interrupt::kProfilingOnce && p->current_power_limit == limits[4]) ||
                   interrupt == Interrupt::kEveryLimit) &&
                  p->steps == 20 && interrupted.insert(p->current_power_limit.value()).second;
    }
    if (end_epoch) {
      EXPECT_TRUE(run.opt->on_epoch_end());
    }
    EXPECT_TRUE(run.opt->on_step_begin());
    run.steps = step;
  }
  return run;
}

std::string case_name(const ::testing::TestParamInfo<std::tuple<double, Interrupt>>& p) {
  return "eta" + std::to_string(static_cast<int>(std::get<0>(p.param) * 100)) + "_" +
         interrupt_name(std::get<1>(p.param));
}

class StateMachine : public ::testing::TestWithParam<std::tuple<double, Interrupt>> {};

TEST_P(StateMachine, ExactLimitSequenceAndZeusCostPick) {
  const auto [eta, interrupt] = GetParam();
  SimRig rig("2xA100,cpus=0");
  // Start away from the maximum so that the optimizer's first call reaches the driver too.
  for (auto& g : rig.gpus) ASSERT_TRUE(g->set_power_limit(MilliWatts(150'000)));
  rig.machine->clear_power_limit_log();

  OptimizerOptions o;  // Zeus's defaults: wait 1, warmup 10, profile 40, 25 W
  o.selector = *zeus_cost_selector(eta, 2);
  auto run = train(rig, o, interrupt);
  ASSERT_TRUE(run.opt);
  const auto& limits = run.opt->power_limits();
  ASSERT_EQ(limits.size(), 13u);  // A100: 400 W down to 100 W
  EXPECT_EQ(limits.front().value(), 400'000.0);
  EXPECT_EQ(limits.back().value(), 100'000.0);

  // The pick: argmin of η·E + (1 − η)·(400 W × 2 GPUs)·T over the measured profile.
  const auto& m = run.opt->measurements();
  ASSERT_EQ(m.size(), limits.size());
  double best = 0, best_cost = 1e300;
  for (std::size_t i = 0; i < m.size(); ++i) {
    EXPECT_EQ(m[i].power_limit.value(), limits[i].value() / 1000.0) << "measured in descending order";
    const auto f = figures_at(m[i].power_limit.value(), 2);
    EXPECT_DOUBLE_EQ(m[i].energy.value(), f.energy.value());
    EXPECT_DOUBLE_EQ(m[i].time.count(), f.time.count());
    const double cost = eta * m[i].energy.value() + (1 - eta) * 400.0 * 2 * m[i].time.count();
    if (cost < best_cost) best_cost = cost, best = m[i].power_limit.value();
  }
  ASSERT_TRUE(run.opt->optimal_power_limit());
  EXPECT_EQ(run.opt->optimal_power_limit()->value(), best * 1000.0);

  // The expected sequence of limits, by Zeus's rules: the maximum first; each limit in turn; an
  // interrupted limit is followed by the maximum and then itself again; the optimum last.
  std::vector<double> want = {400};
  std::set<double> interrupted;
  for (std::size_t i = 0; i < limits.size(); ++i) {
    const double w = limits[i].value() / 1000.0;
    if (w != want.back()) want.push_back(w);
    const bool hit = (interrupt == Interrupt::kWarmupOnce && i == 2) ||
                     (interrupt == Interrupt::kProfilingOnce && i == 4) || interrupt == Interrupt::kEveryLimit;
    if (hit && w != 400) want.insert(want.end(), {400, w});
  }
  if (best != want.back()) want.push_back(best);

  std::vector<double> by_optimizer;
  for (auto l : run.opt->limits_set()) by_optimizer.push_back(l.value() / 1000.0);
  EXPECT_EQ(by_optimizer, want);
  std::vector<std::pair<unsigned, double>> want_log;
  for (double w : want) want_log.insert(want_log.end(), {{0u, w}, {1u, w}});
  EXPECT_EQ(rig.limits_set(), want_log) << "the simulator's call log";

  // Windows: one per limit spanning exactly profile_steps steps; the interrupted ones cancelled.
  ASSERT_EQ(run.windows->spans.size(), limits.size());
  for (const auto& [name, len] : run.windows->spans) EXPECT_EQ(len, 40) << name;
  const std::size_t cancelled = interrupt == Interrupt::kProfilingOnce ? 1
                                : interrupt == Interrupt::kEveryLimit  ? limits.size()
                                                                       : 0;
  EXPECT_EQ(run.windows->cancelled.size(), cancelled);
  if (interrupt == Interrupt::kNone) {
    // (wait_steps + 1) + 13 × (warmup + profile) step beginnings, the last one entering Done.
    EXPECT_EQ(run.steps, 2 + 13 * 50);
  }
  const auto done = run.opt->state();
  EXPECT_EQ(state_name(done), "Done");

  // Ending the optimizer puts the default limit (400 W) back on every GPU.
  run.opt.reset();
  for (unsigned g = 0; g < 2; ++g) EXPECT_EQ(rig.machine->status(g)->power_limit.value(), 400'000.0);
}

INSTANTIATE_TEST_SUITE_P(EtaByInterrupt, StateMachine,
                         ::testing::Combine(::testing::Values(0.0, 0.25, 0.5, 0.75, 1.0),
                                            ::testing::Values(Interrupt::kNone, Interrupt::kWarmupOnce,
                                                              Interrupt::kProfilingOnce, Interrupt::kEveryLimit)),
                         case_name);

TEST(StateMachinePicks, EtaMovesThePick) {
  // The profile is not degenerate: the five η values give at least three different limits.
  std::set<double> picks;
  for (double eta : {0.0, 0.25, 0.5, 0.75, 1.0}) {
    SimRig rig("2xA100,cpus=0");
    OptimizerOptions o;
    o.selector = *zeus_cost_selector(eta, 2);
    o.warmup_steps = 1;
    o.profile_steps = 1;
    auto run = train(rig, o, Interrupt::kNone);
    ASSERT_TRUE(run.opt && run.opt->optimal_power_limit());
    picks.insert(run.opt->optimal_power_limit()->value());
  }
  EXPECT_GE(picks.size(), 3u);
}

TEST(SavedProfile, EverySelectorPicksFromItAndReloadingSkipsProfiling) {
  const auto path = std::filesystem::path(::testing::TempDir()) / "erg_pl_state_machine_profile.json";
  std::filesystem::remove(path);
  std::vector<PowerLimitMeasurement> profile;
  {
    SimRig rig("2xA100,cpus=0");
    OptimizerOptions o;
    o.warmup_steps = 2;
    o.profile_steps = 3;
    o.profile_path = path;
    auto run = train(rig, o, Interrupt::kNone);
    ASSERT_TRUE(run.opt);
    ASSERT_TRUE(std::filesystem::exists(path)) << "saved when profiling ended";
    profile = run.opt->measurements();
    auto loaded = load_profile(path);
    ASSERT_TRUE(loaded);
    EXPECT_EQ(*loaded, profile);
  }
  auto brute = [&](auto key) {
    double best = 0, best_key = 1e300;
    for (const auto& m : profile)
      if (key(m) < best_key) best_key = key(m), best = m.power_limit.value();
    return best;
  };
  const double t400 = profile.front().time.count();
  auto slowest_within = [&](double f) {
    double lowest = 1e300;
    for (const auto& m : profile)
      if (m.time.count() <= f * t400) lowest = std::min(lowest, m.power_limit.value());
    return lowest;
  };
  struct Case {
    std::shared_ptr<OptimumSelector> selector;
    double want;
  };
  std::vector<Case> cases = {
      {energy_selector(), brute([](const PowerLimitMeasurement& m) { return m.energy.value(); })},
      {time_selector(), brute([](const PowerLimitMeasurement& m) { return m.time.count(); })},
  };
  for (double f : {1.0, 1.1, 1.5, 2.0, 3.0, 100.0}) cases.push_back({*max_slowdown_selector(f), slowest_within(f)});
  std::set<double> distinct;
  for (const auto& c : cases) {
    SimRig rig("2xA100,cpus=0");
    rig.machine->clear_power_limit_log();
    OptimizerOptions o;
    o.profile_path = path;
    o.selector = c.selector;
    auto windows = std::make_shared<ReplayWindows>(2);
    auto opt = PowerLimitOptimizer::create(rig.gpus, windows, o);
    ASSERT_TRUE(opt) << opt.error().message;
    EXPECT_EQ(state_name((*opt)->state()), "Done") << c.selector->describe();
    ASSERT_TRUE((*opt)->optimal_power_limit());
    EXPECT_EQ((*opt)->optimal_power_limit()->value(), c.want * 1000.0) << c.selector->describe();
    distinct.insert(c.want);
    // No profiling: stepping never opens a window and never sets another limit.
    for (int i = 0; i < 100; ++i) ASSERT_TRUE((*opt)->on_step_begin());
    ASSERT_TRUE((*opt)->on_epoch_end());
    EXPECT_TRUE(windows->spans.empty());
    std::vector<std::pair<unsigned, double>> want_log;
    if (c.want != 400) want_log = {{0u, c.want}, {1u, c.want}};
    EXPECT_EQ(rig.limits_set(), want_log) << c.selector->describe();
  }
  EXPECT_GE(distinct.size(), 4u) << "the selectors disagree on this profile";
  std::filesystem::remove(path);
}

TEST(Setup, ChecksOptionsGpusAndPrivilege) {
  SimRig rig("1xA100,1xV100,cpus=0");
  auto windows = std::make_shared<ReplayWindows>(1);
  auto bad = [&](OptimizerOptions o) { return PowerLimitOptimizer::create({rig.gpus[0]}, windows, o).error(); };
  OptimizerOptions o;
  o.warmup_steps = 0;
  EXPECT_EQ(bad(o).message, "warmup_steps must be positive.");
  o = {};
  o.profile_steps = 0;
  EXPECT_EQ(bad(o).message, "profile_steps must be positive.");
  o = {};
  o.pl_step = Watts(0);
  EXPECT_EQ(bad(o).message, "pl_step must be positive.");

  auto mixed = PowerLimitOptimizer::create(rig.gpus, windows, {});
  ASSERT_FALSE(mixed);
  EXPECT_EQ(mixed.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(mixed.error().message, "Power limits ranges are not uniform across GPUs.");
  EXPECT_TRUE(rig.machine->power_limit_log().empty()) << "nothing set on a refused setup";

  rig.machine->set_privilege(sim::Privilege::kNobody);
  auto denied = PowerLimitOptimizer::create({rig.gpus[0]}, windows, {});
  ASSERT_FALSE(denied);
  EXPECT_EQ(denied.error().code, ErrorCode::kNoPermission);
  EXPECT_NE(denied.error().message.find("SYS_ADMIN"), std::string::npos) << denied.error().message;

  rig.machine->set_privilege(sim::Privilege::kEveryone);
  auto fine = PowerLimitOptimizer::create({rig.gpus[0]}, windows, {});
  ASSERT_TRUE(fine) << fine.error().message;
  EXPECT_TRUE(rig.machine->status(0)->persistence) << "persistence mode enabled";
  // Limits run from the SKU's maximum down in 25 W strides, never below its minimum.
  const auto c = *rig.gpus[0]->power_limit_constraints();
  EXPECT_EQ((*fine)->power_limits().front(), c.max);
  EXPECT_GE((*fine)->power_limits().back(), c.min);
  EXPECT_LT((*fine)->power_limits().back().value() - 25'000, c.min.value());
}

TEST(Setup, LowerBoundStaysInRangeWhenTheStepDoesNotDivideIt) {
  SimRig rig("1xA100,cpus=0");
  OptimizerOptions o;
  o.pl_step = Watts(70);
  auto opt = PowerLimitOptimizer::create(rig.gpus, std::make_shared<ReplayWindows>(1), o);
  ASSERT_TRUE(opt);
  std::vector<double> w;
  for (auto l : (*opt)->power_limits()) w.push_back(l.value() / 1000.0);
  EXPECT_EQ(w, (std::vector<double>{400, 330, 260, 190, 120}));  // never below 100 W (Zeus #143)
}

}  // namespace
}  // namespace erg::power_limit
