#pragma once
/// The computation DAG of one training iteration of a synchronous 1F1B pipeline (reference/zeus.md
/// §6): one activity per (stage, instruction, micro-batch), edges for what must finish first.

#include <span>
#include <utility>
#include <vector>

#include "erg/core/result.hpp"
#include "erg/optimizers/pipeline_frequency/profile.hpp"

namespace erg::pipeline_frequency {

struct Activity {
  int stage = 0;
  Instruction instruction = Instruction::kForward;
  int micro_batch = 0;
  friend bool operator==(const Activity&, const Activity&) = default;
};

/// A dependency: activity `from` finishes before activity `to` starts.
using Edge = std::pair<int, int>;

class PipelineDag {
 public:
  /// The synchronous 1F1B schedule of `stages` × `micro_batches`. Each stage runs
  /// w = min(stages − 1 − stage, micro_batches) warm-up forwards, then alternates one forward and
  /// one backward, then drains the remaining backwards (DeepSpeed's TrainSchedule order). Edges:
  ///  1. consecutive activities of one stage (one GPU runs one computation at a time);
  ///  2. forward(s − 1, m) → forward(s, m) (activations flow down the pipeline);
  ///  3. backward(s + 1, m) → backward(s, m) (gradients flow back up);
  ///  4. forward(S − 1, m) → backward(S − 1, m) (the last stage turns a micro-batch around; the
  ///     stage order already implies it, so it adds no edge).
  /// Activity ids run stage by stage in each stage's execution order. The only activity without
  /// a predecessor is forward(0, 0) and the only one without a successor is backward(0, M − 1).
  /// kInvalidArgument unless both counts are at least 1.
  static Result<PipelineDag> synchronous_1f1b(int stages, int micro_batches);

  [[nodiscard]] int stages() const { return stages_; }
  [[nodiscard]] int micro_batches() const { return micro_batches_; }
  [[nodiscard]] const std::vector<Activity>& activities() const { return activities_; }
  /// Deduplicated, sorted by (from, to).
  [[nodiscard]] const std::vector<Edge>& edges() const { return edges_; }
  /// The id of an activity; −1 if out of range.
  [[nodiscard]] int id(int stage, Instruction instruction, int micro_batch) const;
  /// The ids of one stage's activities in execution order.
  [[nodiscard]] std::span<const int> stage_order(int stage) const;

 private:
  int stages_ = 0, micro_batches_ = 0;
  std::vector<Activity> activities_;
  std::vector<Edge> edges_;
  std::vector<int> order_;  // stage s's ids at [s·2M, (s + 1)·2M)
};

/// The length of the longest path through a DAG of `durations.size()` activities (the sum of the
/// durations along it; dependency edges take no time). kInvalidArgument for an edge out of range
/// or a cycle.
Result<long long> longest_path(std::span<const int> durations, std::span<const Edge> edges);
Result<double> longest_path(std::span<const double> durations, std::span<const Edge> edges);

}  // namespace erg::pipeline_frequency
