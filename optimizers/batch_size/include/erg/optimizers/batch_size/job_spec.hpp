#pragma once
/// A recurring training job as the batch-size optimizer sees it, and the cost it minimizes.

#include <cstdint>
#include <optional>
#include <vector>

#include "erg/core/result.hpp"
#include "erg/core/units.hpp"

namespace erg::batch_size {

/// The parameters of one recurring job. Defaults are Zeus's (`JobSpec`); validate() checks them.
struct JobSpec {
  std::vector<int> batch_sizes;  ///< Candidate batch sizes; validate() wants them positive and distinct.
  int default_batch_size = 0;    ///< b0, the user's batch size; must be one of `batch_sizes`.
  double eta_knob = 0.5;         ///< η in [0, 1]: weight of energy against time in the cost.
  /// β > 0: a trial is stopped once its cost passes β × the minimum cost seen; nullopt disables.
  std::optional<double> beta_knob = 2.0;
  double target_metric = 0.50;            ///< Validation target that counts as converged.
  bool higher_is_better_metric = true;    ///< false for metrics such as WER, where lower is better.
  int max_epochs = 100;                   ///< A trial that has not converged by then has failed.
  int num_pruning_rounds = 2;             ///< Rounds of the pruning explorer before Thompson sampling.
  int window_size = 0;                    ///< Latest results per batch size the bandit fits on; 0 = all.
  double mab_prior_mean = 0.0;            ///< Prior mean of each arm's reward (reward = −cost).
  double mab_prior_precision = 0.0;       ///< Prior precision; 0 = uninformative.
  int mab_num_explorations = 2;           ///< Results each arm needs before it is sampled.
  std::optional<std::uint64_t> mab_seed;  ///< Seed of the optimizer's RNG; nullopt = from the clock.
  friend bool operator==(const JobSpec&, const JobSpec&) = default;
};

/// Checks `spec`: non-empty, positive, distinct batch sizes containing the default; η in [0, 1];
/// β > 0 when set; max_epochs ≥ 1; num_pruning_rounds ≥ 0; window_size ≥ 0; prior precision
/// ≥ 0 and finite; mab_num_explorations ≥ 1 (or 0 with a positive prior precision, so no arm
/// is ever sampled from a flat prior). kInvalidArgument names the first bad field.
Result<void> validate(const JobSpec& spec);

/// Zeus's energy-time cost `η·E + (1 − η)·max_power·T` (joules). `max_power` is the maximum
/// power limit of all the job's GPUs together.
double zeus_cost(Joules energy, Seconds time, double eta, Watts max_power);

}  // namespace erg::batch_size
