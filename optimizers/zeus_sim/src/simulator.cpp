#include "erg/optimizers/zeus_sim/simulator.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <map>
#include <set>

#include "erg/optimizers/batch_size/job_spec.hpp"
#include "erg/optimizers/batch_size/optimizer.hpp"
#include "erg/optimizers/batch_size/rng.hpp"

namespace erg::zeus_sim {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
/// The reference gives up on a recurrence after this many runs that did not reach the target.
constexpr int kMaxTries = 20;
/// Tells the path-sampling stream apart from the optimizer's (both come from the one seed).
constexpr std::uint64_t kPathStream = 0x5a17e5eedULL;

// run_alibaba.py's defaults (reference §8), librispeech's b0 from run_single.py.
const std::array<Workload, 6> kWorkloads = {{
    {"cifar100", "shufflenetv2", "adadelta", 0.6, 100, 1024},
    {"imagenet", "resnet50", "adadelta", 0.65, 100, 256},
    {"squad", "bert_base_uncased", "adamw", 84.0, 6, 32},
    {"librispeech", "deepspeech2", "adamw", 40.0, 16, 192},
    {"movielens-1m", "ncf", "adam", 0.41, 100, 1024},
    {"sentiment140", "bert_base_uncased", "adamw", 0.84, 10, 128},
}};

/// One power limit of one batch size.
struct Limit {
  Watts power_limit;
  Seconds time_per_epoch{0.0};
  Watts average_power;
  [[nodiscard]] Joules epoch_energy() const { return average_power * time_per_epoch; }
};

/// One batch size of the joined traces.
struct Arm {
  int batch_size = 0;
  std::vector<Limit> limits;              ///< Ascending power limit.
  std::vector<std::optional<int>> paths;  ///< target_epoch of each trace run at the target.
  Watts max_limit;                        ///< The largest of `limits`.
};

/// The train and power traces of one workload on one GPU, joined.
struct Job {
  std::vector<Arm> arms;  ///< Ascending batch size.
  std::vector<Watts> power_limits;
  Watts max_power;  ///< The GPU's maximum power limit over its whole power trace.
  [[nodiscard]] const Arm* arm(int batch_size) const {
    for (const auto& a : arms)
      if (a.batch_size == batch_size) return &a;
    return nullptr;
  }
};

bool same_target(double a, double b) { return std::abs(a - b) <= 1e-9 * std::max(1.0, std::abs(b)); }
bool of_workload(const auto& row, const Workload& w) {
  return row.dataset == w.name && row.network == w.network && row.optimizer == w.optimizer;
}

Result<Job> join(const Traces& traces, std::string_view gpu, const Workload& w) {
  const auto power = traces.power.find(gpu);
  if (power == traces.power.end())
    return fail(ErrorCode::kNotFound, "no power trace for GPU '" + std::string(gpu) + "'");
  Job job;
  std::map<int, Arm> arms;
  std::set<double> limits;
  for (const auto& row : power->second) {
    job.max_power = std::max(job.max_power, row.power_limit);
    if (!of_workload(row, w)) continue;
    Arm& a = arms[row.batch_size];
    a.batch_size = row.batch_size;
    a.limits.push_back({row.power_limit, row.time_per_epoch, row.average_power});
    limits.insert(row.power_limit.value());
  }
  // The batch sizes of the inner join: in the power trace and the train trace (any target).
  std::set<int> trained;
  for (const auto& row : traces.train)
    if (of_workload(row, w)) {
      trained.insert(row.batch_size);
      if (same_target(row.target_metric, w.target_metric)) {
        auto it = arms.find(row.batch_size);
        if (it != arms.end()) it->second.paths.push_back(row.target_epoch);
      }
    }
  for (auto& [bs, a] : arms) {
    if (!trained.contains(bs)) continue;
    std::sort(a.limits.begin(), a.limits.end(),
              [](const Limit& x, const Limit& y) { return x.power_limit < y.power_limit; });
    a.max_limit = a.limits.back().power_limit;
    // A batch size with no run logged at this target never reached it.
    if (a.paths.empty()) a.paths.push_back(std::nullopt);
    job.arms.push_back(std::move(a));
  }
  if (job.arms.empty())
    return fail(ErrorCode::kNotFound, "workload " + w.name + " is not in the " + std::string(gpu) + " traces");
  for (double l : limits) job.power_limits.emplace_back(l);
  return job;
}

/// The optimizer's own cost function, so that an agent that recomputes the cost from a run's
/// energy and time (a server answering a report) gets the very same number.
double cost_of(Joules e, Seconds t, double eta, Watts max_power) { return batch_size::zeus_cost(e, t, eta, max_power); }

class InProcessAgent final : public BatchSizeAgent {
 public:
  Result<void> start(const batch_size::JobSpec& spec, Watts max_power) override {
    auto o = batch_size::Optimizer::create(spec, max_power);
    if (!o) return fail(o.error());
    bso_.emplace(std::move(*o));
    return ok();
  }
  Result<Dispatch> next() override {
    auto t = bso_->predict();
    if (!t) return fail(ErrorCode::kInvalidArgument, t.error().message);  // the job cannot converge
    return Dispatch{t->trial_number, t->batch_size};
  }
  Result<void> finish(const RunOutcome& run) override {
    const double cost = cost_of(run.energy, run.time, bso_->spec().eta_knob, bso_->max_power());
    return bso_->observe(run.trial_number, cost, run.reached);
  }
  Result<int> best_batch_size() override { return bso_->best_batch_size(); }

 private:
  std::optional<batch_size::Optimizer> bso_;
};

/// The epoch cost JIT profiling ranks limits by: (η·avg_power + (1 − η)·max_limit)·time_per_epoch.
double epoch_cost(const Arm& a, const Limit& l, double eta) {
  return (eta * l.average_power.value() + (1.0 - eta) * a.max_limit.value()) * l.time_per_epoch.count();
}

/// The limit JIT profiling picks: least epoch cost; among equals the highest limit (profiling
/// goes from the highest limit down and keeps the first minimum).
const Limit& jit_limit(const Arm& a, double eta) {
  const Limit* best = &a.limits.back();
  for (auto it = a.limits.rbegin(); it != a.limits.rend(); ++it)
    if (epoch_cost(a, *it, eta) < epoch_cost(a, *best, eta)) best = &*it;
  return *best;
}

const Limit* find_limit(const Arm& a, Watts limit) {
  for (const auto& l : a.limits)
    if (l.power_limit == limit) return &l;
  return nullptr;
}

std::optional<Totals> expected(const Job& job, const Arm& a, const Limit& l, int max_epochs, double eta) {
  double epochs = 0;
  for (const auto& p : a.paths) {
    if (!p || *p > max_epochs) return std::nullopt;
    epochs += *p;
  }
  epochs /= static_cast<double>(a.paths.size());
  Totals t{l.epoch_energy() * epochs, l.time_per_epoch * epochs, 0};
  t.cost = cost_of(t.energy, t.time, eta, job.max_power);
  return t;
}

double pct_saved(double erg, double base) { return base == 0 ? 0 : 100.0 * (1.0 - erg / base); }

}  // namespace

std::span<const Workload> workloads() { return kWorkloads; }

const Workload* find_workload(std::string_view name) {
  for (const auto& w : kWorkloads)
    if (w.name == name) return &w;
  return nullptr;
}

Result<void> validate(const Options& o) {
  if (!(o.eta >= 0.0 && o.eta <= 1.0))
    return fail(ErrorCode::kInvalidArgument, "eta must be in [0, 1] (got " + std::to_string(o.eta) + ")");
  if (o.beta && !(*o.beta > 0.0 && std::isfinite(*o.beta)))
    return fail(ErrorCode::kInvalidArgument, "beta must be greater than 0 (got " + std::to_string(*o.beta) + ")");
  if (o.recurrences && *o.recurrences < 1) return fail(ErrorCode::kInvalidArgument, "recurrences must be at least 1");
  return ok();
}

double PairResult::energy_improvement_pct() const { return pct_saved(erg.energy.value(), baseline.energy.value()); }
double PairResult::time_improvement_pct() const { return pct_saved(erg.time.count(), baseline.time.count()); }
double PairResult::cost_improvement_pct() const { return pct_saved(erg.cost, baseline.cost); }
double PairResult::converged_gap_pct() const { return 100.0 * (converged_run.cost / optimum_run.cost - 1.0); }

Result<std::optional<Totals>> expected_run(const Traces& traces, std::string_view gpu, const Workload& workload,
                                           Config config, double eta) {
  auto job = join(traces, gpu, workload);
  if (!job) return fail(job.error());
  const Arm* a = job->arm(config.batch_size);
  const Limit* l = a ? find_limit(*a, config.power_limit) : nullptr;
  if (!l) return fail(ErrorCode::kNotFound, "no such configuration in the traces");
  return expected(*job, *a, *l, workload.max_epochs, eta);
}

std::unique_ptr<BatchSizeAgent> in_process_agent() { return std::make_unique<InProcessAgent>(); }

Result<PairResult> simulate(const Traces& traces, std::string_view gpu, const Workload& w, const Options& o) {
  return simulate(traces, gpu, w, o, *in_process_agent());
}

Result<PairResult> simulate(const Traces& traces, std::string_view gpu, const Workload& w, const Options& o,
                            BatchSizeAgent& agent) {
  if (auto v = validate(o); !v) return fail(v.error());
  auto joined = join(traces, gpu, w);
  if (!joined) return fail(joined.error());
  const Job& job = *joined;
  const Arm* b0 = job.arm(w.default_batch_size);
  if (!b0)
    return fail(ErrorCode::kNotFound, "default batch size " + std::to_string(w.default_batch_size) + " of " + w.name +
                                          " is not in the " + std::string(gpu) + " traces");

  PairResult r;
  r.gpu = std::string(gpu);
  r.workload = w;
  for (const auto& a : job.arms) r.batch_sizes.push_back(a.batch_size);
  r.power_limits = job.power_limits;
  r.max_power = job.max_power;
  r.recurrences = o.recurrences.value_or(2 * static_cast<int>(r.batch_sizes.size() * r.power_limits.size()));

  // Baseline: b0 at its maximum limit, every recurrence.
  r.baseline_config = {b0->batch_size, b0->max_limit};
  const auto base = expected(job, *b0, b0->limits.back(), w.max_epochs, o.eta);
  if (!base)
    return fail(ErrorCode::kInvalidArgument, "default batch size " + std::to_string(w.default_batch_size) +
                                                 " does not reach the target in every trace run within " +
                                                 std::to_string(w.max_epochs) + " epochs: no baseline");
  r.baseline_run = *base;
  r.baseline = {base->energy * r.recurrences, base->time * r.recurrences, base->cost * r.recurrences};

  // Exhaustive optimum over every feasible (batch size, limit).
  bool found = false;
  for (const auto& a : job.arms)
    for (const auto& l : a.limits)
      if (const auto t = expected(job, a, l, w.max_epochs, o.eta); t && (!found || t->cost < r.optimum_run.cost)) {
        found = true;
        r.optimum = {a.batch_size, l.power_limit};
        r.optimum_run = *t;
      }

  batch_size::JobSpec spec;
  spec.batch_sizes = r.batch_sizes;
  spec.default_batch_size = w.default_batch_size;
  spec.eta_knob = o.eta;
  spec.beta_knob = o.beta;
  spec.target_metric = w.target_metric;
  spec.max_epochs = w.max_epochs;
  spec.mab_seed = o.seed;
  if (auto started = agent.start(spec, job.max_power); !started) return fail(started.error());
  batch_size::Rng paths(o.seed ^ kPathStream);

  std::map<int, const Limit*> profiled;  // JIT power profiling's answer per batch size
  double min_cost = kInf;                // least cost of a recurrence that reached the target
  for (int i = 0; i < r.recurrences; ++i) {
    Recurrence rec;
    bool reached = false;
    while (!reached) {
      if (rec.tries == kMaxTries)
        return fail(ErrorCode::kInvalidArgument, w.name + " on " + r.gpu + ": recurrence " + std::to_string(i + 1) +
                                                     " did not reach the target in " + std::to_string(kMaxTries) +
                                                     " runs");
      ++rec.tries;
      auto trial = agent.next();
      if (!trial) return fail(trial.error().code, w.name + " on " + r.gpu + ": " + trial.error().message);
      const Arm* dispatched = job.arm(trial->batch_size);
      if (!dispatched)
        return fail(ErrorCode::kInvalidArgument, w.name + " on " + r.gpu + ": the optimizer chose batch size " +
                                                     std::to_string(trial->batch_size) + ", which is not in the job");
      const Arm& a = *dispatched;
      rec.batch_sizes.push_back(a.batch_size);
      // The first run of a batch size profiles every limit during its first epoch.
      const bool profile = !profiled.contains(a.batch_size);
      if (profile) profiled[a.batch_size] = &jit_limit(a, o.eta);
      const Limit& l = *profiled[a.batch_size];
      const auto& path = a.paths[paths.below(a.paths.size())];

      // Early stopping: no epoch that would take the run past β × min_cost.
      int max_epochs = w.max_epochs;
      if (o.beta && std::isfinite(min_cost))
        max_epochs =
            static_cast<int>(std::min<double>(w.max_epochs, std::floor(*o.beta * min_cost / epoch_cost(a, l, o.eta))));
      if (max_epochs == 0) {
        // Not even one epoch fits: the run never starts; the optimizer learns it is too dear. It
        // is told so as energy and time (epochs at the chosen limit costing 100·β·min_cost), the
        // figures a server's report carries.
        const double scale =
            100.0 * *o.beta * min_cost / cost_of(l.epoch_energy(), l.time_per_epoch, o.eta, job.max_power);
        const RunOutcome never{trial->trial_number,      a.batch_size, l.epoch_energy() * scale,
                               l.time_per_epoch * scale, false,        0};
        if (auto ok = agent.finish(never); !ok) return fail(ok.error());
        continue;
      }
      reached = path && *path <= max_epochs;
      const int epochs = reached ? *path : max_epochs;
      Totals run;
      if (profile) {
        // The profiling epoch is split evenly over the limits.
        Joules e;
        Seconds t{0.0};
        for (const auto& x : a.limits) {
          e += x.epoch_energy();
          t += x.time_per_epoch;
        }
        const double n = static_cast<double>(a.limits.size());
        run.energy = e / n + l.epoch_energy() * (epochs - 1);
        run.time = t / n + l.time_per_epoch * (epochs - 1);
      } else {
        run.energy = l.epoch_energy() * epochs;
        run.time = l.time_per_epoch * epochs;
      }
      run.cost = cost_of(run.energy, run.time, o.eta, job.max_power);
      if (auto ok = agent.finish({trial->trial_number, a.batch_size, run.energy, run.time, reached, epochs}); !ok)
        return fail(ok.error());
      rec.config = {a.batch_size, l.power_limit};
      rec.totals.energy += run.energy;
      rec.totals.time += run.time;
      rec.totals.cost += run.cost;
      if (!reached && i == 0)
        return fail(ErrorCode::kInvalidArgument, "default batch size " + std::to_string(w.default_batch_size) + " of " +
                                                     w.name + " did not reach the target on " + r.gpu);
    }
    min_cost = std::min(min_cost, rec.totals.cost);
    r.erg.energy += rec.totals.energy;
    r.erg.time += rec.totals.time;
    r.erg.cost += rec.totals.cost;
    r.history.push_back(rec);
  }

  const auto best_size = agent.best_batch_size();
  if (!best_size) return fail(best_size.error());
  const Arm* best_arm = job.arm(*best_size);
  if (!best_arm)
    return fail(ErrorCode::kInvalidArgument,
                "the optimizer's best batch size " + std::to_string(*best_size) + " is not in the job");
  const Arm& best = *best_arm;
  const Limit& best_limit = profiled.contains(best.batch_size) ? *profiled[best.batch_size] : jit_limit(best, o.eta);
  r.converged = {best.batch_size, best_limit.power_limit};
  const auto conv = expected(job, best, best_limit, w.max_epochs, o.eta);
  // Not feasible: some trace run misses the target; its cost counts as infinite.
  r.converged_run = conv ? *conv : Totals{Joules(kInf), Seconds(kInf), kInf};
  return r;
}

Result<Sweep> sweep(const Traces& traces, std::span<const std::string> gpus, std::span<const Workload> ws,
                    const Options& o) {
  Sweep s;
  for (const auto& gpu : gpus) {
    const auto power = traces.power.find(gpu);
    if (power == traces.power.end()) return fail(ErrorCode::kNotFound, "no power trace for GPU '" + gpu + "'");
    for (const auto& w : ws) {
      std::set<int> sizes;
      for (const auto& row : power->second)
        if (of_workload(row, w)) sizes.insert(row.batch_size);
      if (sizes.empty()) {
        s.skipped.push_back({gpu, w.name, "workload is not in the " + gpu + " power trace"});
        continue;
      }
      if (!sizes.contains(w.default_batch_size)) {
        std::string have;
        for (int b : sizes) have += (have.empty() ? "" : ",") + std::to_string(b);
        s.skipped.push_back({gpu, w.name,
                             "default batch size " + std::to_string(w.default_batch_size) + " is not in the " + gpu +
                                 " power trace (it has " + have + ")"});
        continue;
      }
      auto r = simulate(traces, gpu, w, o);
      if (!r) return fail(r.error());
      s.pairs.push_back(std::move(*r));
    }
  }
  return s;
}

}  // namespace erg::zeus_sim
