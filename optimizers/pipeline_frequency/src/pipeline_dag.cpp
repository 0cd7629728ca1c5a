#include "erg/optimizers/pipeline_frequency/pipeline_dag.hpp"

#include <algorithm>

namespace erg::pipeline_frequency {

Result<PipelineDag> PipelineDag::synchronous_1f1b(int stages, int micro_batches) {
  if (stages < 1 || micro_batches < 1)
    return fail(ErrorCode::kInvalidArgument, "a pipeline needs at least 1 stage and 1 micro-batch (got " +
                                                 std::to_string(stages) + " stages, " + std::to_string(micro_batches) +
                                                 " micro-batches)");
  if (static_cast<long long>(stages) * micro_batches > 1'000'000)
    return fail(ErrorCode::kInvalidArgument, "pipeline too large");
  PipelineDag dag;
  dag.stages_ = stages;
  dag.micro_batches_ = micro_batches;
  for (int s = 0; s < stages; ++s) {
    const int warmup = std::min(stages - 1 - s, micro_batches);
    auto add = [&](Instruction i, int m) { dag.activities_.push_back({s, i, m}); };
    for (int m = 0; m < warmup; ++m) add(Instruction::kForward, m);
    for (int k = 0; k + warmup < micro_batches; ++k) {
      add(Instruction::kForward, k + warmup);
      add(Instruction::kBackward, k);
    }
    for (int m = micro_batches - warmup; m < micro_batches; ++m) add(Instruction::kBackward, m);
  }
  const int n = static_cast<int>(dag.activities_.size());
  dag.order_.resize(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) dag.order_[static_cast<std::size_t>(i)] = i;
  for (int s = 0; s < stages; ++s) {
    const int base = s * 2 * micro_batches;
    for (int k = 1; k < 2 * micro_batches; ++k) dag.edges_.emplace_back(base + k - 1, base + k);
  }
  for (int m = 0; m < micro_batches; ++m) {
    for (int s = 1; s < stages; ++s) {
      dag.edges_.emplace_back(dag.id(s - 1, Instruction::kForward, m), dag.id(s, Instruction::kForward, m));
      dag.edges_.emplace_back(dag.id(s, Instruction::kBackward, m), dag.id(s - 1, Instruction::kBackward, m));
    }
    dag.edges_.emplace_back(dag.id(stages - 1, Instruction::kForward, m),
                            dag.id(stages - 1, Instruction::kBackward, m));
  }
  std::sort(dag.edges_.begin(), dag.edges_.end());
  dag.edges_.erase(std::unique(dag.edges_.begin(), dag.edges_.end()), dag.edges_.end());
  return dag;
}

int PipelineDag::id(int stage, Instruction instruction, int micro_batch) const {
  if (stage < 0 || stage >= stages_ || micro_batch < 0 || micro_batch >= micro_batches_) return -1;
  // A stage's activities are few (2M); a scan keeps the layout the one source of truth.
  for (int i : stage_order(stage)) {
    const auto& a = activities_[static_cast<std::size_t>(i)];
    if (a.instruction == instruction && a.micro_batch == micro_batch) return i;
  }
  return -1;
}

std::span<const int> PipelineDag::stage_order(int stage) const {
  if (stage < 0 || stage >= stages_) return {};
  return std::span<const int>(order_).subspan(static_cast<std::size_t>(stage) * 2 * micro_batches_,
                                              2 * static_cast<std::size_t>(micro_batches_));
}

namespace {

template <class T>
Result<T> longest(std::span<const T> durations, std::span<const Edge> edges) {
  const int n = static_cast<int>(durations.size());
  std::vector<std::vector<int>> succ(static_cast<std::size_t>(n));
  std::vector<int> indegree(static_cast<std::size_t>(n), 0);
  for (const auto& [from, to] : edges) {
    if (from < 0 || from >= n || to < 0 || to >= n) return fail(ErrorCode::kInvalidArgument, "edge out of range");
    succ[static_cast<std::size_t>(from)].push_back(to);
    ++indegree[static_cast<std::size_t>(to)];
  }
  std::vector<T> finish(static_cast<std::size_t>(n), T{});
  std::vector<T> start(static_cast<std::size_t>(n), T{});
  std::vector<int> ready;
  for (int i = 0; i < n; ++i)
    if (indegree[static_cast<std::size_t>(i)] == 0) ready.push_back(i);
  int done = 0;
  T best{};
  while (!ready.empty()) {
    const int u = ready.back();
    ready.pop_back();
    ++done;
    const auto uu = static_cast<std::size_t>(u);
    finish[uu] = start[uu] + durations[uu];
    best = std::max(best, finish[uu]);
    for (int v : succ[uu]) {
      const auto vv = static_cast<std::size_t>(v);
      start[vv] = std::max(start[vv], finish[uu]);
      if (--indegree[vv] == 0) ready.push_back(v);
    }
  }
  if (done != n) return fail(ErrorCode::kInvalidArgument, "the dependency graph has a cycle");
  return best;
}

}  // namespace

Result<long long> longest_path(std::span<const int> durations, std::span<const Edge> edges) {
  std::vector<long long> d(durations.begin(), durations.end());
  return longest<long long>(d, edges);
}

Result<double> longest_path(std::span<const double> durations, std::span<const Edge> edges) {
  return longest<double>(durations, edges);
}

}  // namespace erg::pipeline_frequency
