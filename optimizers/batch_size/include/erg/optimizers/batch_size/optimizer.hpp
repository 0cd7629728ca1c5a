#pragma once
/// The batch-size optimizer of one recurring job (Zeus NSDI'23 §4): pruning exploration, then
/// Gaussian Thompson sampling, with early stopping of trials that cost too much. In-process and
/// free of I/O: a server (or the trace simulator) owns an Optimizer per job, asks it for a
/// batch size per run, and tells it how runs went. The whole state saves to a JSON string.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "erg/core/result.hpp"
#include "erg/core/units.hpp"
#include "erg/optimizers/batch_size/explorer.hpp"
#include "erg/optimizers/batch_size/gaussian_ts.hpp"
#include "erg/optimizers/batch_size/job_spec.hpp"
#include "erg/optimizers/batch_size/rng.hpp"

namespace erg::batch_size {

enum class Stage { kPruning, kMab };
enum class TrialType {
  kExploration,  ///< Pruning explores this batch size.
  kConcurrent,   ///< Submitted while an exploration was out: the cheapest batch size known.
  kMab,          ///< Chosen by Thompson sampling.
};
enum class TrialStatus { kDispatched, kSucceeded, kFailed };

/// One run of the job with one batch size.
struct Trial {
  int trial_number = 0;  ///< 1, 2, ... in the order predict() handed them out.
  int batch_size = 0;
  TrialType type = TrialType::kExploration;
  TrialStatus status = TrialStatus::kDispatched;
  std::optional<double> cost;      ///< Set when it finished (kSucceeded).
  std::optional<bool> converged;   ///< Set when it finished.
  std::optional<double> energy_j;  ///< Cumulative energy of its last report, J.
  std::optional<double> time_s;    ///< Cumulative time of its last report, s.
  friend bool operator==(const Trial&, const Trial&) = default;
};

/// A trial's progress, reported after each evaluation.
struct TrainingResult {
  int trial_number = 0;
  Joules energy;      ///< Since the trial started, all GPUs.
  Seconds time{0.0};  ///< Since the trial started.
  double metric = 0;  ///< The validation metric just measured.
  int current_epoch = 0;
};

/// What the trial should do now.
struct ReportResponse {
  bool stop_train = false;
  bool converged = false;  ///< Meaningful once stop_train is true.
  std::string message;
};

/// Not thread-safe: one owner per job (a server serializes calls per job).
class Optimizer {
 public:
  /// An optimizer for `spec` (validated; batch sizes sorted) on GPUs whose maximum power
  /// limits add up to `max_power` (> 0). kInvalidArgument for a bad spec or power.
  static Result<Optimizer> create(JobSpec spec, Watts max_power);

  /// Hands out the next trial: in pruning, the explorer's batch size (kExploration) or, while an
  /// exploration is out, the cheapest converged batch size so far (kConcurrent); then the
  /// bandit's choice (kMab). kNotFound when a pruning round ended with no batch size converged.
  Result<Trial> predict();

  /// A trial's progress (Zeus's report): cost = zeus_cost(energy, time); converged = the
  /// metric reached the target; the trial goes on iff cost ≤ cost_upper_bound(), the epoch is
  /// below max_epochs and it has not converged. Otherwise it is finished with
  /// converged = converged ∧ cost ≤ bound. A finished trial answers stop_train with its stored
  /// outcome. kNotFound for an unknown trial; kInvalidArgument for a failed one.
  Result<ReportResponse> report(const TrainingResult& result);

  /// Finishes a dispatched trial with an outcome computed elsewhere (the trace simulator
  /// decides early stopping itself). kNotFound / kInvalidArgument as report().
  Result<void> observe(int trial_number, double cost, bool converged);

  /// A trial that ended without finishing (its job died): marks a dispatched trial failed and
  /// lets pruning explore its batch size again. Finished trials are left as they are.
  /// kNotFound for an unknown trial.
  Result<void> end_trial(int trial_number);

  /// β × the minimum cost of a converged trial; +∞ without β or before any converged.
  [[nodiscard]] double cost_upper_bound() const;
  /// The minimum cost of a converged trial so far. Unlike Zeus's server (which also counts
  /// early-stopped trials, lowering the bound), only converged trials count.
  [[nodiscard]] std::optional<double> min_cost() const { return min_cost_; }
  /// The batch size of min_cost() (the default batch size before any converged).
  [[nodiscard]] int min_cost_batch_size() const { return min_cost_batch_size_; }
  /// The batch size the optimizer believes best now: the arm with the highest posterior mean
  /// reward in the bandit stage, min_cost_batch_size() before it.
  [[nodiscard]] int best_batch_size() const;

  [[nodiscard]] Stage stage() const { return mab_ ? Stage::kMab : Stage::kPruning; }
  [[nodiscard]] const JobSpec& spec() const { return spec_; }
  [[nodiscard]] Watts max_power() const { return max_power_; }
  [[nodiscard]] const PruningExplorer& explorer() const { return explorer_; }
  /// The bandit, once pruning is over.
  [[nodiscard]] const GaussianTs* mab() const { return mab_ ? &*mab_ : nullptr; }
  [[nodiscard]] const std::vector<Trial>& trials() const { return trials_; }
  [[nodiscard]] const Rng& rng() const { return rng_; }

  /// The whole state as a JSON object (spec, explorer, bandit, trials, RNG state): restore()
  /// of it continues exactly where this optimizer is, including the random sequence.
  [[nodiscard]] std::string save_state() const;
  /// An optimizer from save_state()'s text; kInvalidArgument if it is not one.
  static Result<Optimizer> restore(std::string_view state);

  friend bool operator==(const Optimizer&, const Optimizer&) = default;

 private:
  Optimizer(JobSpec spec, Watts max_power, PruningExplorer explorer, Rng rng);
  Result<Trial*> find_trial(int trial_number);
  void finish(Trial& trial, double cost, bool converged);
  /// Rewards (−cost) of the finished trials of `batch_size`, oldest first, at most window_size.
  [[nodiscard]] std::vector<double> window(int batch_size) const;
  Result<void> start_bandit();

  JobSpec spec_;
  Watts max_power_;
  PruningExplorer explorer_;
  std::optional<GaussianTs> mab_;
  Rng rng_;
  std::vector<Trial> trials_;
  std::optional<double> min_cost_;
  int min_cost_batch_size_ = 0;
};

}  // namespace erg::batch_size
