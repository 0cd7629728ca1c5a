#include "erg/optimizers/batch_size/optimizer.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>

namespace erg::batch_size {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr int kStateVersion = 1;

}  // namespace

Optimizer::Optimizer(JobSpec spec, Watts max_power, PruningExplorer explorer, Rng rng)
    : spec_(std::move(spec)),
      max_power_(max_power),
      explorer_(std::move(explorer)),
      rng_(rng),
      min_cost_batch_size_(spec_.default_batch_size) {}

Result<Optimizer> Optimizer::create(JobSpec spec, Watts max_power) {
  if (auto v = validate(spec); !v) return fail(v.error());
  if (!(max_power.value() > 0.0) || !std::isfinite(max_power.value()))
    return fail(ErrorCode::kInvalidArgument, "job spec: max_power must be greater than 0 W");
  std::sort(spec.batch_sizes.begin(), spec.batch_sizes.end());
  auto explorer = PruningExplorer::create(spec.batch_sizes, spec.default_batch_size, spec.num_pruning_rounds);
  if (!explorer) return fail(explorer.error());
  const Rng rng = spec.mab_seed ? Rng(*spec.mab_seed) : Rng::from_entropy();
  return Optimizer(std::move(spec), max_power, std::move(*explorer), rng);
}

Result<Trial*> Optimizer::find_trial(int trial_number) {
  if (trial_number < 1 || trial_number > static_cast<int>(trials_.size()))
    return fail(ErrorCode::kNotFound, "no trial " + std::to_string(trial_number));
  return &trials_[static_cast<std::size_t>(trial_number - 1)];
}

std::vector<double> Optimizer::window(int batch_size) const {
  std::vector<double> rewards;
  for (auto it = trials_.rbegin(); it != trials_.rend(); ++it) {
    if (it->batch_size != batch_size || it->status != TrialStatus::kSucceeded || !it->cost) continue;
    rewards.push_back(-*it->cost);
    if (spec_.window_size > 0 && static_cast<int>(rewards.size()) == spec_.window_size) break;
  }
  std::reverse(rewards.begin(), rewards.end());
  return rewards;
}

Result<void> Optimizer::start_bandit() {
  auto ts = GaussianTs::create(explorer_.batch_sizes(), spec_.mab_prior_mean, spec_.mab_prior_precision,
                               spec_.mab_num_explorations);
  if (!ts) return fail(ts.error());
  for (int b : explorer_.batch_sizes()) {
    const auto rewards = window(b);
    if (auto r = ts->fit_arm(b, rewards); !r) return r;
  }
  mab_ = std::move(*ts);
  return ok();
}

Result<Trial> Optimizer::predict() {
  Trial t;
  t.trial_number = static_cast<int>(trials_.size()) + 1;
  if (!mab_) {
    auto next = explorer_.next();
    if (!next) return fail(next.error());
    if (next->action == PruningExplorer::Action::kExplore) {
      t.batch_size = next->batch_size;
      t.type = TrialType::kExploration;
    } else if (next->action == PruningExplorer::Action::kConcurrent) {
      t.batch_size = min_cost_batch_size_;
      t.type = TrialType::kConcurrent;
    } else if (auto r = start_bandit(); !r) {
      return fail(r.error());
    }
  }
  if (mab_) {
    t.batch_size = mab_->predict(rng_);
    t.type = TrialType::kMab;
  }
  trials_.push_back(t);
  return t;
}

void Optimizer::finish(Trial& trial, double cost, bool converged) {
  trial.status = TrialStatus::kSucceeded;
  trial.cost = cost;
  trial.converged = converged;
  if (converged && (!min_cost_ || cost < *min_cost_)) {
    min_cost_ = cost;
    min_cost_batch_size_ = trial.batch_size;
  }
  if (!mab_) {
    // Only the outstanding exploration moves pruning on; other results are history for the bandit.
    if (trial.type == TrialType::kExploration && explorer_.dispatched(trial.batch_size))
      (void)explorer_.report(trial.batch_size, cost, converged);
    return;
  }
  if (std::binary_search(mab_->arms().begin(), mab_->arms().end(), trial.batch_size)) {
    const auto rewards = window(trial.batch_size);
    (void)mab_->fit_arm(trial.batch_size, rewards);
  }
}

Result<void> Optimizer::observe(int trial_number, double cost, bool converged) {
  auto t = find_trial(trial_number);
  if (!t) return fail(t.error());
  if ((*t)->status != TrialStatus::kDispatched)
    return fail(ErrorCode::kInvalidArgument, "trial " + std::to_string(trial_number) + " is not running");
  if (!std::isfinite(cost)) return fail(ErrorCode::kInvalidArgument, "trial cost must be finite");
  finish(**t, cost, converged);
  return ok();
}

Result<ReportResponse> Optimizer::report(const TrainingResult& result) {
  auto found = find_trial(result.trial_number);
  if (!found) return fail(found.error());
  Trial& t = **found;
  if (t.status == TrialStatus::kFailed)
    return fail(ErrorCode::kInvalidArgument, "trial " + std::to_string(t.trial_number) + " has failed");
  if (t.status == TrialStatus::kSucceeded)
    return ReportResponse{true, t.converged.value_or(false), "Trial already finished"};
  t.energy_j = result.energy.value();
  t.time_s = result.time.count();
  const double cost = zeus_cost(result.energy, result.time, spec_.eta_knob, max_power_);
  const bool reached =
      spec_.higher_is_better_metric ? result.metric >= spec_.target_metric : result.metric <= spec_.target_metric;
  const double bound = cost_upper_bound();
  const bool within = cost <= bound;
  if (within && result.current_epoch < spec_.max_epochs && !reached) return ReportResponse{false, false, "Continue"};
  const bool converged = reached && within;
  std::string message;
  if (converged) {
    message = "Train succeeded";
  } else if (!within) {
    message =
        "Train stopped: the cost " + std::to_string(cost) + " exceeded the cost upper bound " + std::to_string(bound);
  } else {
    message = "Train failed to converge within max_epochs (" + std::to_string(spec_.max_epochs) + ")";
  }
  finish(t, cost, converged);
  return ReportResponse{true, converged, std::move(message)};
}

Result<void> Optimizer::end_trial(int trial_number) {
  auto t = find_trial(trial_number);
  if (!t) return fail(t.error());
  if ((*t)->status != TrialStatus::kDispatched) return ok();
  (*t)->status = TrialStatus::kFailed;
  if (!mab_ && (*t)->type == TrialType::kExploration && explorer_.dispatched((*t)->batch_size))
    (void)explorer_.cancel((*t)->batch_size);
  return ok();
}

double Optimizer::cost_upper_bound() const {
  if (!spec_.beta_knob || !min_cost_) return kInf;
  return *spec_.beta_knob * *min_cost_;
}

int Optimizer::best_batch_size() const { return mab_ ? mab_->best_arm() : min_cost_batch_size_; }

// ---- state as JSON ----------------------------------------------------------------------
// Doubles that may be infinite (precisions) are written as the string "inf": JSON has no
// infinity. nlohmann writes finite doubles with enough digits to read back the same value.

namespace {

using nlohmann::json;

json number(double v) { return std::isinf(v) ? json(v > 0 ? "inf" : "-inf") : json(v); }
double number(const json& j) {
  if (j.is_string()) {
    const auto s = j.get<std::string>();
    if (s == "inf") return kInf;
    if (s == "-inf") return -kInf;
    throw json::type_error::create(302, "expected a number or \"inf\"", &j);
  }
  return j.get<double>();
}

template <class E>
struct Names;
template <>
struct Names<Stage> {
  static constexpr const char* k[] = {"pruning", "mab"};
};
template <>
struct Names<TrialType> {
  static constexpr const char* k[] = {"exploration", "concurrent", "mab"};
};
template <>
struct Names<TrialStatus> {
  static constexpr const char* k[] = {"dispatched", "succeeded", "failed"};
};
template <>
struct Names<PruningExplorer::Status> {
  static constexpr const char* k[] = {"unexplored", "dispatched", "converged", "failed"};
};

template <class E>
json name(E e) {
  return Names<E>::k[static_cast<int>(e)];
}
template <class E>
E parse(const json& j) {
  const auto s = j.get<std::string>();
  int i = 0;
  for (const char* n : Names<E>::k) {
    if (s == n) return static_cast<E>(i);
    ++i;
  }
  throw json::type_error::create(302, "unknown name '" + s + "'", &j);
}

template <class T>
json optional_json(const std::optional<T>& v) {
  return v ? json(*v) : json(nullptr);
}
template <class T>
std::optional<T> optional_from(const json& j) {
  if (j.is_null()) return std::nullopt;
  return j.get<T>();
}

}  // namespace

std::string Optimizer::save_state() const {
  json j;
  j["version"] = kStateVersion;
  json s;
  s["batch_sizes"] = spec_.batch_sizes;
  s["default_batch_size"] = spec_.default_batch_size;
  s["eta_knob"] = spec_.eta_knob;
  s["beta_knob"] = optional_json(spec_.beta_knob);
  s["target_metric"] = spec_.target_metric;
  s["higher_is_better_metric"] = spec_.higher_is_better_metric;
  s["max_epochs"] = spec_.max_epochs;
  s["num_pruning_rounds"] = spec_.num_pruning_rounds;
  s["window_size"] = spec_.window_size;
  s["mab_prior_mean"] = spec_.mab_prior_mean;
  s["mab_prior_precision"] = spec_.mab_prior_precision;
  s["mab_num_explorations"] = spec_.mab_num_explorations;
  s["mab_seed"] = optional_json(spec_.mab_seed);
  j["spec"] = s;
  j["max_power_w"] = max_power_.value();
  j["stage"] = name(stage());
  json e;
  e["batch_sizes"] = explorer_.batch_sizes();
  e["default_batch_size"] = explorer_.default_batch_size();
  e["num_rounds"] = explorer_.num_rounds();
  e["round"] = explorer_.round();
  json entries = json::array();
  for (const auto& [b, entry] : explorer_.entries())
    entries.push_back({{"batch_size", b}, {"status", name(entry.status)}, {"cost", number(entry.cost)}});
  e["entries"] = entries;
  j["explorer"] = e;
  if (mab_) {
    json m;
    m["prior_mean"] = mab_->prior_mean();
    m["prior_precision"] = mab_->prior_precision();
    m["num_explorations"] = mab_->num_explorations();
    json arms = json::array();
    for (const auto& [arm, st] : mab_->states())
      arms.push_back({{"batch_size", arm},
                      {"param_mean", number(st.param_mean)},
                      {"param_precision", number(st.param_precision)},
                      {"reward_precision", number(st.reward_precision)},
                      {"num_observations", st.num_observations}});
    m["arms"] = arms;
    j["mab"] = m;
  } else {
    j["mab"] = nullptr;
  }
  json trials = json::array();
  for (const auto& t : trials_)
    trials.push_back({{"trial_number", t.trial_number},
                      {"batch_size", t.batch_size},
                      {"type", name(t.type)},
                      {"status", name(t.status)},
                      {"cost", t.cost ? number(*t.cost) : json(nullptr)},
                      {"converged", optional_json(t.converged)},
                      {"energy_j", optional_json(t.energy_j)},
                      {"time_s", optional_json(t.time_s)}});
  j["trials"] = trials;
  j["min_cost"] = optional_json(min_cost_);
  j["min_cost_batch_size"] = min_cost_batch_size_;
  j["rng"] = rng_.state();
  return j.dump();
}

Result<Optimizer> Optimizer::restore(std::string_view state) {
  const auto bad = [](const std::string& why) {
    return fail(ErrorCode::kInvalidArgument, "not a saved batch-size optimizer: " + why);
  };
  try {
    const json j = json::parse(state);
    if (j.at("version").get<int>() != kStateVersion)
      return bad("state version " + j.at("version").dump() + " (this erg reads " + std::to_string(kStateVersion) + ")");
    const json& s = j.at("spec");
    JobSpec spec;
    spec.batch_sizes = s.at("batch_sizes").get<std::vector<int>>();
    spec.default_batch_size = s.at("default_batch_size").get<int>();
    spec.eta_knob = s.at("eta_knob").get<double>();
    spec.beta_knob = optional_from<double>(s.at("beta_knob"));
    spec.target_metric = s.at("target_metric").get<double>();
    spec.higher_is_better_metric = s.at("higher_is_better_metric").get<bool>();
    spec.max_epochs = s.at("max_epochs").get<int>();
    spec.num_pruning_rounds = s.at("num_pruning_rounds").get<int>();
    spec.window_size = s.at("window_size").get<int>();
    spec.mab_prior_mean = s.at("mab_prior_mean").get<double>();
    spec.mab_prior_precision = s.at("mab_prior_precision").get<double>();
    spec.mab_num_explorations = s.at("mab_num_explorations").get<int>();
    spec.mab_seed = optional_from<std::uint64_t>(s.at("mab_seed"));
    if (auto v = validate(spec); !v) return bad(v.error().message);

    const json& e = j.at("explorer");
    std::map<int, PruningExplorer::Entry> entries;
    for (const auto& x : e.at("entries"))
      entries[x.at("batch_size").get<int>()] = {parse<PruningExplorer::Status>(x.at("status")), number(x.at("cost"))};
    auto explorer =
        PruningExplorer::restore(e.at("batch_sizes").get<std::vector<int>>(), e.at("default_batch_size").get<int>(),
                                 e.at("num_rounds").get<int>(), e.at("round").get<int>(), std::move(entries));
    if (!explorer) return bad(explorer.error().message);
    auto rng = Rng::restore(j.at("rng").get<std::string>());
    if (!rng) return bad(rng.error().message);
    const Watts max_power(j.at("max_power_w").get<double>());
    if (!(max_power.value() > 0.0)) return bad("max_power_w must be greater than 0");

    Optimizer o(std::move(spec), max_power, std::move(*explorer), *rng);
    if (!j.at("mab").is_null()) {
      const json& m = j.at("mab");
      std::map<int, ArmState> arms;
      for (const auto& a : m.at("arms"))
        arms[a.at("batch_size").get<int>()] = {number(a.at("param_mean")), number(a.at("param_precision")),
                                               number(a.at("reward_precision")), a.at("num_observations").get<int>()};
      auto ts = GaussianTs::restore(m.at("prior_mean").get<double>(), m.at("prior_precision").get<double>(),
                                    m.at("num_explorations").get<int>(), std::move(arms));
      if (!ts) return bad(ts.error().message);
      o.mab_ = std::move(*ts);
    }
    if (parse<Stage>(j.at("stage")) != o.stage()) return bad("stage does not match the bandit");
    for (const auto& x : j.at("trials")) {
      Trial t;
      t.trial_number = x.at("trial_number").get<int>();
      if (t.trial_number != static_cast<int>(o.trials_.size()) + 1) return bad("trials out of order");
      t.batch_size = x.at("batch_size").get<int>();
      t.type = parse<TrialType>(x.at("type"));
      t.status = parse<TrialStatus>(x.at("status"));
      if (!x.at("cost").is_null()) t.cost = number(x.at("cost"));
      t.converged = optional_from<bool>(x.at("converged"));
      t.energy_j = optional_from<double>(x.at("energy_j"));
      t.time_s = optional_from<double>(x.at("time_s"));
      o.trials_.push_back(t);
    }
    o.min_cost_ = optional_from<double>(j.at("min_cost"));
    o.min_cost_batch_size_ = j.at("min_cost_batch_size").get<int>();
    return o;
  } catch (const nlohmann::json::exception& ex) {
    return bad(ex.what());
  }
}

}  // namespace erg::batch_size
