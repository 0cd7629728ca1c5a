#pragma once
/// The Phillips–Dessouky time–cost trade-off on an activity-on-node DAG with integer durations
/// (reference/zeus.md §6): starting from every activity at its slowest (cheapest) duration, each
/// step shortens the longest path by at least one time unit at the least modelled extra cost,
/// found as a minimum s–t cut of the critical activities.

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "erg/core/result.hpp"
#include "erg/optimizers/pipeline_frequency/pipeline_dag.hpp"

namespace erg::pipeline_frequency {

/// One arc of a flow network with a lower and an upper bound on its flow.
struct BoundedArc {
  int from = 0, to = 0;
  std::int64_t lower = 0;
  std::int64_t upper = 0;  ///< At least `lower`; kUnbounded for no bound.
};
inline constexpr std::int64_t kUnbounded = -1;

struct MinCut {
  std::vector<bool> source_side;  ///< Per node: on the source's side of the cut.
  /// Σ upper over arcs leaving the source side − Σ lower over arcs entering it; meaningful only
  /// when `bounded` (no unbounded arc leaves the source side).
  std::int64_t value = 0;
  bool bounded = true;
};

/// A minimum s–t cut of a network whose arcs carry lower and upper flow bounds, by Boost.Graph's
/// boykov_kolmogorov_max_flow (on the planner's small critical networks it ran in 40 % of
/// push_relabel_max_flow's time and 35 % of edmonds_karp_max_flow's), twice: (1) a feasible flow by the standard
/// reduction — each arc keeps capacity upper − lower, every node gets the net lower-bound flow it must pass on as
/// supply from a new source or demand to a new sink, and an unbounded t→s arc closes the circulation; a flow is
/// feasible iff the maximum flow saturates the new source; (2) a maximum s–t flow in the residual network of that
/// feasible flow (forward capacity upper − flow, backward flow − lower). The source side is what s reaches in the final
/// residual network. nullopt when no flow meets the lower bounds; kInvalidArgument for a node out of range, s = t, or
/// lower > upper.
Result<std::optional<MinCut>> min_cut_with_lower_bounds(int num_nodes, int source, int sink,
                                                        std::span<const BoundedArc> arcs);

/// One activity's durations, in time units, and the modelled cost of each.
struct TradeoffActivity {
  int min_units = 0;
  int max_units = 0;
  /// cost_j[d − min_units] for d in [min_units, max_units]: non-increasing and convex in d (each
  /// unit of speed-up costs at least as much as the one before).
  std::vector<double> cost_j;
};

/// What one step did.
struct TradeoffStep {
  std::vector<int> sped_up;      ///< Activities shortened by one unit (the cut's forward arcs).
  std::vector<int> slowed_down;  ///< Activities lengthened by one unit (its backward arcs).
  long long makespan_before = 0, makespan_after = 0;
  double cost_change_j = 0;
  /// The lower bounds admitted no feasible flow (the state is not optimal for its makespan after
  /// an earlier step had to undo a slow-down), so this step's cut only speeds up.
  bool without_slow_down = false;
};

class PhillipsDessouky {
 public:
  /// A problem over `activities` with dependencies `edges` (an acyclic graph), every activity at
  /// its max_units, or at `start_units` when given (each within its range). kInvalidArgument for
  /// an empty problem, a bad range, a cost table of the wrong size, increasing or non-convex costs
  /// (beyond 1e-9 relative), an edge out of range or a cycle.
  static Result<PhillipsDessouky> create(std::vector<TradeoffActivity> activities, std::vector<Edge> edges,
                                         std::optional<std::vector<int>> start_units = std::nullopt);

  [[nodiscard]] const std::vector<int>& durations() const { return durations_; }
  [[nodiscard]] long long makespan() const { return makespan_; }
  [[nodiscard]] double cost_j() const;
  /// Per activity: on a longest path under the current durations.
  [[nodiscard]] std::vector<bool> critical() const;

  /// One step. Builds the critical DAG in activity-on-arc form (activity i is an arc from node 2i
  /// to node 2i + 1; a dependency is an arc of zero duration; a source and a sink close it) and
  /// gives each critical activity the flow bounds lower = what lengthening it by one unit saves
  /// (0 at its slowest), upper = what shortening it by one unit costs (unbounded at its fastest);
  /// dependency arcs get [0, unbounded]. Costs enter the flow in integer nanojoules, so the
  /// maximum flow is exact. Along the minimum cut it shortens the arcs leaving the source side and
  /// lengthens those entering it, so every longest path loses one unit. A lengthened activity that
  /// an off-critical path turns critical again is put back (the step then costs more than the cut
  /// said but still shortens the makespan). nullopt when the makespan cannot shrink (a longest
  /// path has every activity at its fastest).
  Result<std::optional<TradeoffStep>> step();

 private:
  PhillipsDessouky() = default;
  void update_times();

  std::vector<TradeoffActivity> activities_;
  std::vector<Edge> edges_;
  std::vector<std::vector<int>> succ_, pred_;
  std::vector<int> topo_;
  std::vector<int> durations_;
  std::vector<long long> earliest_start_, tail_;  // tail: longest path from an activity's start to the end
  long long makespan_ = 0;
};

}  // namespace erg::pipeline_frequency
