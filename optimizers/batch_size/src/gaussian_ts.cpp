#include "erg/optimizers/batch_size/gaussian_ts.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

namespace erg::batch_size {
namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();
tl::unexpected<Error> bad(const std::string& what) { return fail(ErrorCode::kInvalidArgument, "bandit: " + what); }
}  // namespace

Result<GaussianTs> GaussianTs::create(std::vector<int> arms, double prior_mean, double prior_precision,
                                      int num_explorations) {
  std::map<int, ArmState> states;
  for (int a : arms) {
    if (states.contains(a)) return bad("arm " + std::to_string(a) + " listed twice");
    states[a] = ArmState{prior_mean, prior_precision, 0.0, 0};
  }
  return restore(prior_mean, prior_precision, num_explorations, std::move(states));
}

Result<GaussianTs> GaussianTs::restore(double prior_mean, double prior_precision, int num_explorations,
                                       std::map<int, ArmState> states) {
  if (states.empty()) return bad("no arms");
  if (!std::isfinite(prior_mean) || !(prior_precision >= 0.0) || !std::isfinite(prior_precision))
    return bad("bad prior");
  if (num_explorations < 0) return bad("negative number of explorations");
  GaussianTs ts;
  for (const auto& [arm, s] : states) {
    if (s.num_observations < 0) return bad("negative observation count");
    ts.arms_.push_back(arm);
  }
  ts.states_ = std::move(states);
  ts.prior_mean_ = prior_mean;
  ts.prior_precision_ = prior_precision;
  ts.num_explorations_ = num_explorations;
  return ts;
}

Result<void> GaussianTs::fit_arm(int arm, std::span<const double> rewards) {
  auto it = states_.find(arm);
  if (it == states_.end()) return fail(ErrorCode::kNotFound, "bandit: no arm " + std::to_string(arm));
  ArmState s{prior_mean_, prior_precision_, 0.0, 0};
  if (!rewards.empty()) {
    const double n = static_cast<double>(rewards.size());
    double sum = 0;
    for (double r : rewards) sum += r;
    const double mean = sum / n;
    double var = 0;
    for (double r : rewards) var += (r - mean) * (r - mean);
    var /= n;
    s.reward_precision = var == 0.0 ? kInf : 1.0 / var;
    if (std::isinf(s.reward_precision)) {
      s.param_precision = kInf;
      s.param_mean = mean;
    } else {
      s.param_precision = prior_precision_ + n * s.reward_precision;
      s.param_mean = (prior_precision_ * prior_mean_ + s.reward_precision * sum) / s.param_precision;
    }
    s.num_observations = static_cast<int>(rewards.size());
  }
  it->second = s;
  return ok();
}

int GaussianTs::predict(Rng& rng) const {
  for (std::size_t i : rng.permutation(arms_.size())) {
    const int arm = arms_[i];
    if (states_.at(arm).num_observations < num_explorations_) return arm;
  }
  int best = arms_.front();
  double best_sample = -kInf;
  for (int arm : arms_) {
    const ArmState& s = states_.at(arm);
    const double stddev = std::isinf(s.param_precision) ? 0.0 : 1.0 / std::sqrt(s.param_precision);
    const double sample = rng.normal(s.param_mean, stddev);
    if (sample > best_sample) {
      best_sample = sample;
      best = arm;
    }
  }
  return best;
}

int GaussianTs::best_arm() const {
  int best = arms_.front();
  for (int arm : arms_)
    if (states_.at(arm).param_mean > states_.at(best).param_mean) best = arm;
  return best;
}

}  // namespace erg::batch_size
