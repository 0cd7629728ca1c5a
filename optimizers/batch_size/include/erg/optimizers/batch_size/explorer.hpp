#pragma once
/// The pruning stage of the batch-size optimizer (Zeus NSDI'23 §4.3): a few rounds that walk
/// the batch sizes outward from the default and keep only those that reach the target.

#include <map>
#include <vector>

#include "erg/core/result.hpp"

namespace erg::batch_size {

/// One round walks down from b0 (b0 first, then each smaller batch size, descending) and then
/// up (each larger one, ascending), one exploration at a time. A direction ends at its first
/// batch size that did not converge. When the round is over, the batch sizes that converged are
/// the candidates of the next round and the cheapest of them is its b0; a round in which none
/// converged is an error. After the last round the survivors are the bandit's arms.
///
/// Concurrent submissions: while an exploration is out, next() answers kConcurrent (the caller
/// runs the cheapest batch size known so far, which the explorer does not track), and only the
/// outstanding exploration's report moves the walk on. Not thread-safe.
class PruningExplorer {
 public:
  enum class Status { kUnexplored, kDispatched, kConverged, kFailed };
  enum class Action {
    kExplore,     ///< Run `batch_size` as an exploration and report() its outcome.
    kConcurrent,  ///< An exploration is still running; run the cheapest batch size known.
    kDone,        ///< Pruning is over; batch_sizes() are the survivors.
  };
  struct Next {
    Action action = Action::kDone;
    int batch_size = 0;  ///< For kExplore.
  };
  /// Where one batch size stands in the current round.
  struct Entry {
    Status status = Status::kUnexplored;
    double cost = 0;  ///< The reported cost, for kConverged and kFailed.
    friend bool operator==(const Entry&, const Entry&) = default;
  };

  /// `batch_sizes` (any order; kept sorted), `default_batch_size` one of them, `num_rounds` ≥ 0.
  /// kInvalidArgument otherwise.
  static Result<PruningExplorer> create(std::vector<int> batch_sizes, int default_batch_size, int num_rounds);

  /// What to run next. Marks a kExplore batch size dispatched. Ends finished rounds on the way;
  /// kNotFound ("no batch size converged ...") when a round ends with none converged.
  Result<Next> next();
  /// The outcome of a dispatched exploration of this round. kInvalidArgument if `batch_size`
  /// is not out for exploration in the current round (e.g. a concurrent or stale trial: the
  /// caller records those elsewhere).
  Result<void> report(int batch_size, double cost, bool converged);
  /// A dispatched exploration that ended without a result (the job died): the batch size is
  /// explored again. kInvalidArgument if it is not out for exploration.
  Result<void> cancel(int batch_size);

  /// Whether `batch_size` is out for exploration in the current round.
  [[nodiscard]] bool dispatched(int batch_size) const;
  [[nodiscard]] bool done() const { return round_ >= num_rounds_; }
  /// Rounds finished so far.
  [[nodiscard]] int round() const { return round_; }
  [[nodiscard]] int num_rounds() const { return num_rounds_; }
  /// The current round's candidates, ascending (after the last round: the survivors).
  [[nodiscard]] const std::vector<int>& batch_sizes() const { return batch_sizes_; }
  /// The current round's b0.
  [[nodiscard]] int default_batch_size() const { return default_; }
  /// The current round's entries, by batch size.
  [[nodiscard]] const std::map<int, Entry>& entries() const { return entries_; }

  /// Rebuilds an explorer from the fields above (for a saved optimizer); kInvalidArgument if
  /// they do not fit together.
  static Result<PruningExplorer> restore(std::vector<int> batch_sizes, int default_batch_size, int num_rounds,
                                         int round, std::map<int, Entry> entries);

  friend bool operator==(const PruningExplorer&, const PruningExplorer&) = default;

 private:
  PruningExplorer() = default;
  void start_round();
  /// The current round's walk: b0 and below descending, then above ascending.
  [[nodiscard]] std::vector<int> walk(bool down) const;

  std::vector<int> batch_sizes_;
  int default_ = 0;
  int num_rounds_ = 0;
  int round_ = 0;
  std::map<int, Entry> entries_;
};

}  // namespace erg::batch_size
