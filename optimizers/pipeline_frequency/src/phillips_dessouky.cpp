#include "erg/optimizers/pipeline_frequency/phillips_dessouky.hpp"

#include <algorithm>
#include <boost/graph/boykov_kolmogorov_max_flow.hpp>
#include <boost/graph/compressed_sparse_row_graph.hpp>
#include <cmath>
#include <limits>

namespace erg::pipeline_frequency {

namespace {

struct ArcId {
  std::size_t id = 0;  // 2k: arc k as added; 2k + 1: its reverse edge
};
using FlowGraph = boost::compressed_sparse_row_graph<boost::directedS, boost::no_property, ArcId>;
using FlowEdge = boost::graph_traits<FlowGraph>::edge_descriptor;

/// A Boost flow network built arc by arc, each arc with the zero-capacity reverse edge Boost's
/// max-flow algorithms require. Nodes that no arc touches are left out, and the graph is a
/// compressed sparse row graph with its properties in plain vectors: the planner builds one or two
/// per step, so building them must not allocate per edge.
class FlowNet {
 public:
  explicit FlowNet(int nodes) : compact_(static_cast<std::size_t>(nodes), kNone) {}

  /// Returns the arc's index for flow().
  std::size_t add(int from, int to, std::int64_t capacity) {
    pending_.push_back({node(from), node(to), capacity});
    return pending_.size() - 1;
  }

  std::int64_t max_flow(int source, int sink) {
    const auto s = node(source), t = node(sink);
    std::vector<std::pair<std::size_t, std::size_t>> ends;
    std::vector<ArcId> ids;
    ends.reserve(2 * pending_.size());
    ids.reserve(2 * pending_.size());
    for (std::size_t k = 0; k < pending_.size(); ++k) {
      ends.emplace_back(pending_[k].from, pending_[k].to);
      ids.push_back({2 * k});
      ends.emplace_back(pending_[k].to, pending_[k].from);
      ids.push_back({2 * k + 1});
    }
    g_ = FlowGraph(boost::edges_are_unsorted_multi_pass, ends.begin(), ends.end(), ids.begin(), nodes_);
    const auto n_edges = boost::num_edges(g_);
    cap_.assign(n_edges, 0);
    res_.assign(n_edges, 0);
    rev_.resize(n_edges);
    std::vector<FlowEdge> by_id(n_edges);
    for (auto [it, end] = boost::edges(g_); it != end; ++it) by_id[g_[*it].id] = *it;
    const auto index = boost::get(boost::edge_index, g_);
    arcs_.resize(pending_.size());
    for (std::size_t k = 0; k < pending_.size(); ++k) {
      const auto e = by_id[2 * k], r = by_id[2 * k + 1];
      cap_[boost::get(boost::edge_index, g_, e)] = pending_[k].capacity;
      rev_[boost::get(boost::edge_index, g_, e)] = r;
      rev_[boost::get(boost::edge_index, g_, r)] = e;
      arcs_[k] = e;
    }
    const auto cap = boost::make_iterator_property_map(cap_.begin(), index);
    const auto res = boost::make_iterator_property_map(res_.begin(), index);
    const auto rev = boost::make_iterator_property_map(rev_.begin(), index);
    const auto vindex = boost::get(boost::vertex_index, g_);
    std::vector<boost::default_color_type> color(nodes_);
    std::vector<FlowEdge> pred(nodes_);
    std::vector<std::int64_t> dist(nodes_);
    return boost::boykov_kolmogorov_max_flow(g_, cap, res, rev, boost::make_iterator_property_map(pred.begin(), vindex),
                                             boost::make_iterator_property_map(color.begin(), vindex),
                                             boost::make_iterator_property_map(dist.begin(), vindex), vindex, s, t);
  }

  [[nodiscard]] std::int64_t flow(std::size_t arc) const {
    const auto i = boost::get(boost::edge_index, g_, arcs_[arc]);
    return cap_[i] - res_[i];
  }

  /// Per node of the caller's numbering: reachable from `source` along edges with residual
  /// capacity (nodes no arc touched are not).
  [[nodiscard]] std::vector<bool> reachable(int source) const {
    std::vector<bool> seen(nodes_, false);
    const auto s = compact_[static_cast<std::size_t>(source)];
    std::vector<std::size_t> stack{s};
    seen[s] = true;
    while (!stack.empty()) {
      const auto u = stack.back();
      stack.pop_back();
      for (auto [it, end] = boost::out_edges(u, g_); it != end; ++it) {
        const auto v = boost::target(*it, g_);
        if (!seen[v] && res_[boost::get(boost::edge_index, g_, *it)] > 0) {
          seen[v] = true;
          stack.push_back(v);
        }
      }
    }
    std::vector<bool> out(compact_.size(), false);
    for (std::size_t v = 0; v < compact_.size(); ++v)
      if (compact_[v] != kNone) out[v] = seen[compact_[v]];
    return out;
  }

 private:
  static constexpr std::size_t kNone = static_cast<std::size_t>(-1);
  std::size_t node(int v) {
    auto& c = compact_[static_cast<std::size_t>(v)];
    if (c == kNone) c = nodes_++;
    return c;
  }

  struct Pending {
    std::size_t from, to;
    std::int64_t capacity;
  };
  std::vector<std::size_t> compact_;
  std::size_t nodes_ = 0;
  std::vector<Pending> pending_;
  FlowGraph g_;
  std::vector<std::int64_t> cap_, res_;
  std::vector<FlowEdge> rev_;
  std::vector<FlowEdge> arcs_;
};

// Costs enter the flow network in nanojoules: integer capacities make the maximum flow exact
// (no tolerance on saturation) and 1 nJ is far below any profiled difference.
constexpr double kNanojoules = 1e9;
// Sums of capacities must stay well inside int64 with room for the unbounded stand-in.
constexpr std::int64_t kMaxCapacitySum = std::int64_t{1} << 60;

}  // namespace

Result<std::optional<MinCut>> min_cut_with_lower_bounds(int num_nodes, int source, int sink,
                                                        std::span<const BoundedArc> arcs) {
  if (num_nodes < 2 || source < 0 || source >= num_nodes || sink < 0 || sink >= num_nodes || source == sink)
    return fail(ErrorCode::kInvalidArgument, "min cut: bad source, sink or node count");
  // The unbounded stand-in exceeds any finite cut: Σ finite upper bounds + 1.
  std::int64_t finite = 1;
  for (const auto& a : arcs) {
    if (a.from < 0 || a.from >= num_nodes || a.to < 0 || a.to >= num_nodes)
      return fail(ErrorCode::kInvalidArgument, "min cut: arc node out of range");
    if (a.lower < 0 || (a.upper != kUnbounded && (a.upper < a.lower)))
      return fail(ErrorCode::kInvalidArgument, "min cut: arc bounds must satisfy 0 <= lower <= upper");
    finite += a.upper == kUnbounded ? a.lower : a.upper;
    if (finite > kMaxCapacitySum / 4) return fail(ErrorCode::kInvalidArgument, "min cut: capacities too large");
  }
  const std::int64_t inf = finite;
  auto upper = [&](const BoundedArc& a) { return a.upper == kUnbounded ? inf : a.upper; };

  // (1) A flow meeting every lower bound: the reduced network carries flow − lower on each arc.
  std::vector<std::int64_t> flow(arcs.size(), 0);
  std::vector<std::int64_t> excess(static_cast<std::size_t>(num_nodes), 0);
  bool any_lower = false;
  for (const auto& a : arcs) {
    excess[static_cast<std::size_t>(a.to)] += a.lower;
    excess[static_cast<std::size_t>(a.from)] -= a.lower;
    any_lower = any_lower || a.lower > 0;
  }
  if (any_lower) {
    const int super_source = num_nodes, super_sink = num_nodes + 1;
    FlowNet reduced(num_nodes + 2);
    for (const auto& a : arcs) reduced.add(a.from, a.to, upper(a) - a.lower);
    reduced.add(sink, source, inf);  // closes the s–t flow into a circulation
    std::int64_t need = 0;
    for (int v = 0; v < num_nodes; ++v) {
      const auto e = excess[static_cast<std::size_t>(v)];
      if (e > 0) reduced.add(super_source, v, e), need += e;
      if (e < 0) reduced.add(v, super_sink, -e);
    }
    if (reduced.max_flow(super_source, super_sink) < need) return std::optional<MinCut>{};
    for (std::size_t i = 0; i < arcs.size(); ++i) flow[i] = arcs[i].lower + reduced.flow(i);
  }

  // (2) Augment to a maximum s–t flow in the residual network of that flow; each direction with
  // room is its own Boost arc, so every Boost reverse edge starts at zero capacity.
  FlowNet residual(num_nodes);
  for (std::size_t i = 0; i < arcs.size(); ++i) {
    const auto& a = arcs[i];
    if (upper(a) - flow[i] > 0) residual.add(a.from, a.to, upper(a) - flow[i]);
    if (flow[i] - a.lower > 0) residual.add(a.to, a.from, flow[i] - a.lower);
  }
  residual.max_flow(source, sink);
  MinCut cut;
  cut.source_side = residual.reachable(source);
  for (const auto& a : arcs) {
    const bool from_in = cut.source_side[static_cast<std::size_t>(a.from)];
    const bool to_in = cut.source_side[static_cast<std::size_t>(a.to)];
    if (from_in && !to_in) {
      if (a.upper == kUnbounded)
        cut.bounded = false;
      else
        cut.value += a.upper;
    } else if (!from_in && to_in) {
      cut.value -= a.lower;
    }
  }
  return std::optional<MinCut>(std::move(cut));
}

Result<PhillipsDessouky> PhillipsDessouky::create(std::vector<TradeoffActivity> activities, std::vector<Edge> edges,
                                                  std::optional<std::vector<int>> start_units) {
  const int n = static_cast<int>(activities.size());
  if (n == 0) return fail(ErrorCode::kInvalidArgument, "time-cost trade-off: no activities");
  for (int i = 0; i < n; ++i) {
    const auto& a = activities[static_cast<std::size_t>(i)];
    const std::string which = "activity " + std::to_string(i) + ": ";
    if (a.min_units < 0 || a.max_units < a.min_units)
      return fail(ErrorCode::kInvalidArgument, which + "needs 0 <= min_units <= max_units");
    if (a.cost_j.size() != static_cast<std::size_t>(a.max_units - a.min_units + 1))
      return fail(ErrorCode::kInvalidArgument, which + "needs one cost per duration");
    for (std::size_t k = 0; k < a.cost_j.size(); ++k) {
      if (!std::isfinite(a.cost_j[k])) return fail(ErrorCode::kInvalidArgument, which + "non-finite cost");
      const double tol = 1e-9 * std::max(1.0, std::abs(a.cost_j[k]));
      if (k > 0 && a.cost_j[k] > a.cost_j[k - 1] + tol)
        return fail(ErrorCode::kInvalidArgument, which + "cost rises with duration");
      if (k > 1 && a.cost_j[k - 2] - a.cost_j[k - 1] < a.cost_j[k - 1] - a.cost_j[k] - tol)
        return fail(ErrorCode::kInvalidArgument, which + "cost is not convex in duration");
    }
  }
  PhillipsDessouky pd;
  pd.succ_.resize(static_cast<std::size_t>(n));
  pd.pred_.resize(static_cast<std::size_t>(n));
  std::sort(edges.begin(), edges.end());
  edges.erase(std::unique(edges.begin(), edges.end()), edges.end());
  std::vector<int> indegree(static_cast<std::size_t>(n), 0);
  for (const auto& [from, to] : edges) {
    if (from < 0 || from >= n || to < 0 || to >= n || from == to)
      return fail(ErrorCode::kInvalidArgument, "time-cost trade-off: edge out of range");
    pd.succ_[static_cast<std::size_t>(from)].push_back(to);
    pd.pred_[static_cast<std::size_t>(to)].push_back(from);
    ++indegree[static_cast<std::size_t>(to)];
  }
  std::vector<int> ready;
  for (int i = 0; i < n; ++i)
    if (indegree[static_cast<std::size_t>(i)] == 0) ready.push_back(i);
  while (!ready.empty()) {
    const int u = ready.back();
    ready.pop_back();
    pd.topo_.push_back(u);
    for (int v : pd.succ_[static_cast<std::size_t>(u)])
      if (--indegree[static_cast<std::size_t>(v)] == 0) ready.push_back(v);
  }
  if (static_cast<int>(pd.topo_.size()) != n)
    return fail(ErrorCode::kInvalidArgument, "time-cost trade-off: the dependency graph has a cycle");
  if (start_units) {
    if (start_units->size() != activities.size())
      return fail(ErrorCode::kInvalidArgument, "time-cost trade-off: one start duration per activity");
    for (int i = 0; i < n; ++i) {
      const int d = (*start_units)[static_cast<std::size_t>(i)];
      const auto& a = activities[static_cast<std::size_t>(i)];
      if (d < a.min_units || d > a.max_units)
        return fail(ErrorCode::kInvalidArgument, "activity " + std::to_string(i) + ": start duration out of range");
    }
    pd.durations_ = std::move(*start_units);
  } else {
    for (const auto& a : activities) pd.durations_.push_back(a.max_units);
  }
  pd.activities_ = std::move(activities);
  pd.edges_ = std::move(edges);
  pd.update_times();
  return pd;
}

void PhillipsDessouky::update_times() {
  const auto n = durations_.size();
  earliest_start_.assign(n, 0);
  tail_.assign(n, 0);
  for (int u : topo_) {
    const auto uu = static_cast<std::size_t>(u);
    for (int v : succ_[uu])
      earliest_start_[static_cast<std::size_t>(v)] =
          std::max(earliest_start_[static_cast<std::size_t>(v)], earliest_start_[uu] + durations_[uu]);
  }
  makespan_ = 0;
  for (auto it = topo_.rbegin(); it != topo_.rend(); ++it) {
    const auto uu = static_cast<std::size_t>(*it);
    long long after = 0;
    for (int v : succ_[uu]) after = std::max(after, tail_[static_cast<std::size_t>(v)]);
    tail_[uu] = durations_[uu] + after;
    makespan_ = std::max(makespan_, earliest_start_[uu] + tail_[uu]);
  }
}

double PhillipsDessouky::cost_j() const {
  double sum = 0;
  for (std::size_t i = 0; i < activities_.size(); ++i)
    sum += activities_[i].cost_j[static_cast<std::size_t>(durations_[i] - activities_[i].min_units)];
  return sum;
}

std::vector<bool> PhillipsDessouky::critical() const {
  std::vector<bool> out(durations_.size());
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = earliest_start_[i] + tail_[i] == makespan_;
  return out;
}

Result<std::optional<TradeoffStep>> PhillipsDessouky::step() {
  const int n = static_cast<int>(durations_.size());
  const auto crit = critical();
  const int source = 2 * n, sink = 2 * n + 1;
  auto cost = [&](int i, int d) {
    const auto& a = activities_[static_cast<std::size_t>(i)];
    return a.cost_j[static_cast<std::size_t>(d - a.min_units)];
  };
  std::vector<BoundedArc> arcs;
  std::vector<int> activity_arc(static_cast<std::size_t>(n), -1);
  for (int i = 0; i < n; ++i) {
    const auto ii = static_cast<std::size_t>(i);
    if (!crit[ii]) continue;
    const auto& a = activities_[ii];
    const int d = durations_[ii];
    BoundedArc arc{2 * i, 2 * i + 1, 0, kUnbounded};
    if (d > a.min_units) arc.upper = std::llround((cost(i, d - 1) - cost(i, d)) * kNanojoules);
    if (d < a.max_units) arc.lower = std::llround((cost(i, d) - cost(i, d + 1)) * kNanojoules);
    arc.upper = arc.upper == kUnbounded ? kUnbounded : std::max<std::int64_t>(arc.upper, 0);
    arc.lower = std::max<std::int64_t>(arc.lower, 0);
    if (arc.upper != kUnbounded) arc.lower = std::min(arc.lower, arc.upper);  // rounding only (costs are convex)
    activity_arc[ii] = static_cast<int>(arcs.size());
    arcs.push_back(arc);
    // A critical activity with nothing before it starts the iteration; with nothing after, ends it.
    if (pred_[ii].empty()) arcs.push_back({source, 2 * i, 0, kUnbounded});
    if (succ_[ii].empty()) arcs.push_back({2 * i + 1, sink, 0, kUnbounded});
    for (int v : succ_[ii])
      if (crit[static_cast<std::size_t>(v)] &&
          earliest_start_[ii] + d == earliest_start_[static_cast<std::size_t>(v)] &&
          tail_[static_cast<std::size_t>(v)] + d == tail_[ii])
        arcs.push_back({2 * i + 1, 2 * v, 0, kUnbounded});
  }

  TradeoffStep out;
  auto cut = min_cut_with_lower_bounds(2 * n + 2, source, sink, arcs);
  if (!cut) return fail(cut.error());
  if (!*cut) {
    for (auto& a : arcs) a.lower = 0;
    out.without_slow_down = true;
    cut = min_cut_with_lower_bounds(2 * n + 2, source, sink, arcs);
    if (!cut) return fail(cut.error());
    if (!*cut) return fail(ErrorCode::kInternal, "time-cost trade-off: no feasible flow without lower bounds");
  }
  const auto& side = (*cut)->source_side;
  if (!(*cut)->bounded) return std::optional<TradeoffStep>{};

  const double before_cost = cost_j();
  out.makespan_before = makespan_;
  for (int i = 0; i < n; ++i) {
    const auto ii = static_cast<std::size_t>(i);
    if (activity_arc[ii] < 0) continue;
    const bool in = side[static_cast<std::size_t>(2 * i)], outn = side[static_cast<std::size_t>(2 * i + 1)];
    if (in && !outn) {
      out.sped_up.push_back(i);
      --durations_[ii];  // bounded cut: this activity was above its fastest
    } else if (!in && outn && durations_[ii] < activities_[ii].max_units &&
               arcs[static_cast<std::size_t>(activity_arc[ii])].lower > 0) {
      // Lengthening an activity that saves nothing would only risk a new longest path.
      out.slowed_down.push_back(i);
      ++durations_[ii];
    }
  }
  if (out.sped_up.empty()) return fail(ErrorCode::kInternal, "time-cost trade-off: a bounded cut sped nothing up");
  update_times();
  while (makespan_ >= out.makespan_before) {
    // A path off the critical DAG went through a lengthened activity and now is too long: put
    // back the lengthened activities on a longest path (all of them if, impossibly, none is).
    const auto now = critical();
    std::vector<int> keep, undo;
    for (int i : out.slowed_down) (now[static_cast<std::size_t>(i)] ? undo : keep).push_back(i);
    if (undo.empty()) std::swap(undo, keep);
    if (undo.empty()) return fail(ErrorCode::kInternal, "time-cost trade-off: a step did not shorten the iteration");
    for (int i : undo) --durations_[static_cast<std::size_t>(i)];
    out.slowed_down = std::move(keep);
    update_times();
  }
  out.makespan_after = makespan_;
  out.cost_change_j = cost_j() - before_cost;
  return std::optional<TradeoffStep>(std::move(out));
}

}  // namespace erg::pipeline_frequency
