#pragma once
/// The bandit stage of the batch-size optimizer: Gaussian Thompson sampling in which each arm
/// (batch size) learns its own reward precision from the rewards it has seen.

#include <map>
#include <span>
#include <vector>

#include "erg/core/result.hpp"
#include "erg/optimizers/batch_size/rng.hpp"

namespace erg::batch_size {

/// The belief about one arm's mean reward: N(param_mean, 1 / param_precision).
struct ArmState {
  double param_mean = 0;
  double param_precision = 0;   ///< +∞ when the rewards seen so far are all equal.
  double reward_precision = 0;  ///< 1 / variance of the rewards seen (+∞ for zero variance).
  int num_observations = 0;
  friend bool operator==(const ArmState&, const ArmState&) = default;
};

/// Rewards are −cost, so the best arm has the highest reward. Not thread-safe.
class GaussianTs {
 public:
  /// `arms` non-empty and distinct; prior precision ≥ 0; num_explorations ≥ 0.
  static Result<GaussianTs> create(std::vector<int> arms, double prior_mean, double prior_precision,
                                   int num_explorations);

  /// Refits `arm` from the prior on `rewards` (its whole window): reward precision
  /// r = 1 / var(rewards) (population variance). If r is infinite, the posterior is the sample
  /// mean with infinite precision; otherwise precision' = prior_precision + n·r and
  /// mean' = (prior_precision·prior_mean + r·Σrewards) / precision'. No rewards: back to the
  /// prior. kNotFound for an unknown arm.
  Result<void> fit_arm(int arm, std::span<const double> rewards);

  /// The arm to pull: the arms are visited in a random order and the first with fewer than
  /// num_explorations observations is returned; if there is none, each arm's mean reward is
  /// sampled from its posterior (arms in ascending order) and the highest sample wins.
  int predict(Rng& rng) const;

  /// The arm with the highest posterior mean (ties: the smaller arm); the bandit's current
  /// answer when no more exploration is wanted.
  [[nodiscard]] int best_arm() const;

  [[nodiscard]] const std::vector<int>& arms() const { return arms_; }
  [[nodiscard]] const std::map<int, ArmState>& states() const { return states_; }
  [[nodiscard]] double prior_mean() const { return prior_mean_; }
  [[nodiscard]] double prior_precision() const { return prior_precision_; }
  [[nodiscard]] int num_explorations() const { return num_explorations_; }

  /// Rebuilds a bandit with the given arm states (for a saved optimizer).
  static Result<GaussianTs> restore(double prior_mean, double prior_precision, int num_explorations,
                                    std::map<int, ArmState> states);

  friend bool operator==(const GaussianTs&, const GaussianTs&) = default;

 private:
  GaussianTs() = default;
  std::vector<int> arms_;
  std::map<int, ArmState> states_;
  double prior_mean_ = 0;
  double prior_precision_ = 0;
  int num_explorations_ = 0;
};

}  // namespace erg::batch_size
