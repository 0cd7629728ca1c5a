#include "erg/optimizers/hetero/planner.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>

namespace erg::hetero {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

std::string fmt(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.10g", v);
  return buf;
}

// One GPU of the request, with what the searches need precomputed.
struct Slot {
  const Profile* profile = nullptr;
  int lo = 0, hi = 0;  // smallest and largest feasible batch share
  bool contiguous = true;
  std::vector<std::pair<int, int>> intervals;  // feasible shares, ascending
  double idle = 0;
  double strength = 0;  // samples/s at the largest feasible batch, highest feasible limit
};

std::string who(std::size_t i, const Slot& s) { return "GPU " + std::to_string(i) + " (" + s.profile->gpu_type + ")"; }

// The feasible shares of a profile: a profiled batch size with a feasible cell, and every integer
// between two neighbouring profiled sizes that share a limit feasible at both.
std::vector<std::pair<int, int>> feasible_intervals(const Profile& p) {
  const std::size_t nb = p.batch_sizes.size(), np = p.power_limits.size();
  auto point = [&](std::size_t b) {
    for (std::size_t l = 0; l < np; ++l)
      if (p.at(b, l)) return true;
    return false;
  };
  auto segment = [&](std::size_t b) {
    for (std::size_t l = 0; l < np; ++l)
      if (p.at(b, l) && p.at(b + 1, l)) return true;
    return false;
  };
  std::vector<std::pair<int, int>> out;
  for (std::size_t b = 0; b < nb; ++b) {
    if (!point(b)) continue;
    int lo = p.batch_sizes[b], hi = lo;
    if (!out.empty() && out.back().second == lo) {
      continue;  // already covered as the end of the previous segment
    }
    out.emplace_back(lo, hi);
    while (b + 1 < nb && segment(b)) {
      ++b;
      out.back().second = p.batch_sizes[b];
    }
  }
  return out;
}

// Totals of one assignment, the plan's formula (planner.hpp).
struct Totals {
  double step_time = 0, energy = 0, cost = 0;
};

class Planner {
 public:
  explicit Planner(const PlanRequest& r) : req_(r), n_(r.gpus.size()) {}

  Result<void> prepare() {
    if (n_ == 0) return fail(ErrorCode::kInvalidArgument, "no GPUs to plan for");
    if (!(req_.eta >= 0 && req_.eta <= 1))
      return fail(ErrorCode::kInvalidArgument, "eta must be between 0 and 1 (got " + fmt(req_.eta) + ")");
    if (req_.global_batch <= 0)
      return fail(ErrorCode::kInvalidArgument,
                  "global batch must be greater than 0 (got " + std::to_string(req_.global_batch) + ")");
    slots_.resize(n_);
    max_power_sum_ = 0;
    idle_sum_ = 0;
    for (std::size_t i = 0; i < n_; ++i) {
      const Profile* p = req_.gpus[i];
      if (p == nullptr) return fail(ErrorCode::kInvalidArgument, "GPU " + std::to_string(i) + " has no profile");
      Slot& s = slots_[i];
      s.profile = p;
      if (p->batch_sizes.empty() || p->power_limits.empty() ||
          p->cells.size() != p->batch_sizes.size() * p->power_limits.size())
        return fail(ErrorCode::kInvalidArgument, who(i, s) + ": the profile has no configurations");
      if (!p->any_feasible())
        return fail(ErrorCode::kInvalidArgument,
                    who(i, s) +
                        ": the profile has no feasible configuration (every batch size × power limit is "
                        "marked infeasible)");
      s.intervals = feasible_intervals(*p);
      s.lo = s.intervals.front().first;
      s.hi = s.intervals.back().second;
      s.contiguous = s.intervals.size() == 1;
      s.idle = p->idle_power.value();
      for (std::size_t b = p->batch_sizes.size(); b-- > 0 && s.strength == 0;)
        for (std::size_t l = p->power_limits.size(); l-- > 0;)
          if (const auto& c = p->at(b, l)) {
            s.strength = p->batch_sizes[b] / c->step_time.count();
            break;
          }
      max_power_sum_ += p->max_power_limit.value();
      idle_sum_ += s.idle;
    }
    // Every GPU type's strength, strongest first: the heuristic and the baseline hand rounding
    // remainders to stronger GPUs first.
    by_strength_.resize(n_);
    std::iota(by_strength_.begin(), by_strength_.end(), 0);
    std::stable_sort(by_strength_.begin(), by_strength_.end(),
                     [&](std::size_t a, std::size_t b) { return slots_[a].strength > slots_[b].strength; });
    barrier_rate_ = req_.eta * idle_sum_ + (1 - req_.eta) * max_power_sum_;
    return check_reachable();
  }

  // The step-time-independent part of a GPU's cost at (b, limit): η·(P − idle)·T; the rest of
  // the cost is barrier_rate_·T (planner.hpp: E = Σ(P_i − idle_i)·T_i + Σidle·T).
  [[nodiscard]] double own_cost(std::size_t i, const Measurement& m) const {
    return req_.eta * (m.avg_power.value() - slots_[i].idle) * m.step_time.count();
  }

  [[nodiscard]] bool in_domain(std::size_t i, int b) const {
    const auto& s = slots_[i];
    if (b < s.lo || b > s.hi) return false;
    if (s.contiguous) return true;
    for (const auto& [lo, hi] : s.intervals)
      if (b >= lo && b <= hi) return true;
    return false;
  }

  // --- brute force -----------------------------------------------------------------------------

  Result<Plan> brute() {
    // Upper bound of the work: every share of the first n−1 GPUs × every limit combination.
    double work = 1;
    for (std::size_t i = 0; i < n_; ++i) {
      if (i + 1 < n_) work *= static_cast<double>(slots_[i].hi - slots_[i].lo + 1);
      work *= static_cast<double>(slots_[i].profile->power_limits.size());
    }
    if (work > static_cast<double>(kMaxBruteEvaluations))
      return fail(ErrorCode::kInvalidArgument, "brute force would cost up to " + fmt(work) + " plans (limit " +
                                                   fmt(kMaxBruteEvaluations) +
                                                   "); use the heuristic, or fewer GPUs or a smaller grid");
    suffix_lo_.assign(n_ + 1, 0);
    suffix_hi_.assign(n_ + 1, 0);
    for (std::size_t i = n_; i-- > 0;) {
      suffix_lo_[i] = suffix_lo_[i + 1] + slots_[i].lo;
      suffix_hi_[i] = suffix_hi_[i + 1] + slots_[i].hi;
    }
    options_.assign(n_, {});
    share_.assign(n_, 0);
    limit_.assign(n_, 0);
    best_cost_ = kInf;
    evaluations_ = 0;
    brute_shares(0, req_.global_batch);
    if (!std::isfinite(best_cost_))
      return fail(ErrorCode::kInvalidArgument, "global batch " + std::to_string(req_.global_batch) +
                                                   ": no split over these GPUs has a feasible configuration");
    return make_plan(best_share_, best_limit_, Method::kBrute);
  }

  // --- heuristic -------------------------------------------------------------------------------

  Result<Plan> heuristic() {
    evaluations_ = 0;
    std::vector<std::vector<int>> starts;
    starts.push_back(equalized_split());
    starts.push_back(even_split());
    std::vector<int> best;
    std::vector<std::size_t> best_limits;
    double best_cost = kInf;
    std::vector<std::size_t> limits(n_);
    for (auto& split : starts) {
      if (!repair(split)) continue;
      double cost = split_cost(split, limits);
      if (!std::isfinite(cost)) continue;
      refine(split, cost);
      if (cost < best_cost) {
        best_cost = cost;
        best = split;
        split_cost(best, limits);
        best_limits = limits;
      }
    }
    if (!std::isfinite(best_cost)) {
      // Only with holes in a GPU's domain: find any reachable split, then refine it.
      auto any = reachable_split();
      if (!any)
        return fail(ErrorCode::kInvalidArgument, "global batch " + std::to_string(req_.global_batch) +
                                                     ": no split over these GPUs has a feasible configuration");
      best = *any;
      best_cost = split_cost(best, limits);
      if (!std::isfinite(best_cost))
        return fail(ErrorCode::kInvalidArgument, "global batch " + std::to_string(req_.global_batch) +
                                                     ": no split over these GPUs has a feasible configuration");
      refine(best, best_cost);
      split_cost(best, limits);
      best_limits = limits;
    }
    return make_plan(best, best_limits, Method::kHeuristic);
  }

  // --- baseline --------------------------------------------------------------------------------

  Result<Plan> baseline() {
    evaluations_ = 0;
    auto split = even_split_raw();
    std::vector<std::size_t> limits(n_);
    for (std::size_t i = 0; i < n_; ++i) {
      if (!in_domain(i, split[i]))
        return fail(ErrorCode::kInvalidArgument, "baseline: the even share " + std::to_string(split[i]) +
                                                     " is outside " + who(i, slots_[i]) + "'s feasible batch sizes " +
                                                     intervals_text(slots_[i]));
      const auto& p = *slots_[i].profile;
      bool found = false;
      for (std::size_t l = p.power_limits.size(); l-- > 0;)
        if (interpolate(p, split[i], l)) {
          limits[i] = l;
          found = true;
          break;
        }
      if (!found)
        return fail(
            ErrorCode::kInvalidArgument,
            "baseline: " + who(i, slots_[i]) + " has no feasible power limit at batch " + std::to_string(split[i]));
    }
    ++evaluations_;
    return make_plan(split, limits, Method::kBaseline);
  }

  Result<Plan> fixed(const std::vector<int>& shares, const std::vector<Watts>& limits, Method method) {
    if (shares.size() != n_ || limits.size() != n_)
      return fail(ErrorCode::kInvalidArgument, "one batch size and one power limit per GPU");
    if (std::accumulate(shares.begin(), shares.end(), 0LL) != req_.global_batch)
      return fail(ErrorCode::kInvalidArgument, "the batch sizes do not sum to the global batch");
    std::vector<std::size_t> idx(n_);
    for (std::size_t i = 0; i < n_; ++i) {
      const auto& pl = slots_[i].profile->power_limits;
      auto it = std::find(pl.begin(), pl.end(), limits[i]);
      if (it == pl.end())
        return fail(ErrorCode::kInvalidArgument,
                    who(i, slots_[i]) + ": power limit " + fmt(limits[i].value()) + " W was not profiled");
      idx[i] = static_cast<std::size_t>(it - pl.begin());
      if (!interpolate(*slots_[i].profile, shares[i], idx[i]))
        return fail(ErrorCode::kInvalidArgument, who(i, slots_[i]) + ": batch " + std::to_string(shares[i]) + " @ " +
                                                     fmt(limits[i].value()) + " W is not feasible");
    }
    return make_plan(shares, idx, method);
  }

 private:
  static std::string intervals_text(const Slot& s) {
    std::string t;
    for (const auto& [lo, hi] : s.intervals)
      t += (t.empty() ? "" : ", ") + (lo == hi ? std::to_string(lo) : std::to_string(lo) + "–" + std::to_string(hi));
    return t;
  }

  Result<void> check_reachable() {
    const long long n = req_.global_batch;
    long long lo = 0, hi = 0;
    bool contiguous = true;
    for (const auto& s : slots_) {
      lo += s.lo;
      hi += s.hi;
      contiguous = contiguous && s.contiguous;
    }
    auto ranges_text = [&] {
      std::string ranges;
      for (std::size_t i = 0; i < n_; ++i)
        ranges += (ranges.empty() ? "" : "; ") + who(i, slots_[i]) + ": " + intervals_text(slots_[i]);
      return ranges;
    };
    if (n < lo || n > hi)
      return fail(ErrorCode::kInvalidArgument,
                  "global batch " + std::to_string(n) + ": no split reaches it; these GPUs take between " +
                      std::to_string(lo) + " and " + std::to_string(hi) +
                      " samples per step (feasible per-GPU batch sizes: " + ranges_text() + ")");
    if (!contiguous && !reachable_split())
      return fail(ErrorCode::kInvalidArgument, "global batch " + std::to_string(n) +
                                                   ": no split reaches it with every share feasible (feasible "
                                                   "per-GPU batch sizes: " +
                                                   ranges_text() + ")");
    return ok();
  }

  // Reachability over the feasible shares (only needed when a domain has holes): dynamic
  // programming over GPUs, then back-tracking one split.
  std::optional<std::vector<int>> reachable_split() const {
    const auto n = static_cast<std::size_t>(req_.global_batch);
    std::vector<std::vector<char>> reach(n_ + 1, std::vector<char>(n + 1, 0));
    reach[0][0] = 1;
    for (std::size_t i = 0; i < n_; ++i)
      for (std::size_t t = 0; t <= n; ++t) {
        if (!reach[i][t]) continue;
        for (const auto& [lo, hi] : slots_[i].intervals)
          for (int b = lo; b <= hi && t + static_cast<std::size_t>(b) <= n; ++b) reach[i + 1][t + b] = 1;
      }
    if (!reach[n_][n]) return std::nullopt;
    std::vector<int> split(n_);
    std::size_t t = n;
    for (std::size_t i = n_; i-- > 0;) {
      bool found = false;
      for (const auto& [lo, hi] : slots_[i].intervals) {
        for (int b = lo; b <= hi && static_cast<std::size_t>(b) <= t; ++b)
          if (reach[i][t - b]) {
            split[i] = b;
            t -= b;
            found = true;
            break;
          }
        if (found) break;
      }
      if (!found) return std::nullopt;
    }
    return split;
  }

  // The feasible limits of GPU i at share b: (limit index, T, own cost).
  struct Option {
    std::size_t limit;
    double time, own;
  };
  // (interpolate() for every limit, with the bracketing batch sizes found once: the searches'
  // inner loop.)
  void options_at(std::size_t i, int b, std::vector<Option>& out) const {
    out.clear();
    const auto& p = *slots_[i].profile;
    const auto& bs = p.batch_sizes;
    if (b < bs.front() || b > bs.back()) return;
    const auto hi = static_cast<std::size_t>(std::lower_bound(bs.begin(), bs.end(), b) - bs.begin());
    const double idle = slots_[i].idle, eta = req_.eta;
    if (bs[hi] == b) {
      for (std::size_t l = 0; l < p.power_limits.size(); ++l)
        if (const auto& c = p.at(hi, l)) {
          const double t = c->step_time.count();
          out.push_back({l, t, eta * (c->avg_power.value() - idle) * t});
        }
      return;
    }
    const double w = static_cast<double>(b - bs[hi - 1]) / static_cast<double>(bs[hi] - bs[hi - 1]);
    for (std::size_t l = 0; l < p.power_limits.size(); ++l) {
      const auto& x = p.at(hi - 1, l);
      const auto& y = p.at(hi, l);
      if (!x || !y) continue;
      const double t = x->step_time.count() + w * (y->step_time.count() - x->step_time.count());
      const double pw = x->avg_power.value() + w * (y->avg_power.value() - x->avg_power.value());
      out.push_back({l, t, eta * (pw - idle) * t});
    }
  }

  void brute_shares(std::size_t i, long long remaining) {
    if (i + 1 == n_) {
      if (remaining < slots_[i].lo || remaining > slots_[i].hi || !in_domain(i, static_cast<int>(remaining))) return;
      share_[i] = static_cast<int>(remaining);
      options_at(i, share_[i], options_[i]);
      brute_limits(0, 0.0, 0.0);
      return;
    }
    const long long from = std::max<long long>(slots_[i].lo, remaining - suffix_hi_[i + 1]);
    const long long to = std::min<long long>(slots_[i].hi, remaining - suffix_lo_[i + 1]);
    for (long long b = from; b <= to; ++b) {
      if (!in_domain(i, static_cast<int>(b))) continue;
      share_[i] = static_cast<int>(b);
      options_at(i, share_[i], options_[i]);
      if (options_[i].empty()) continue;
      brute_shares(i + 1, remaining - b);
    }
  }

  void brute_limits(std::size_t i, double own, double time) {
    if (i == n_) {
      ++evaluations_;
      const double cost = own + barrier_rate_ * time;
      if (cost < best_cost_) {
        best_cost_ = cost;
        best_share_ = share_;
        best_limit_ = limit_;
      }
      return;
    }
    for (const auto& o : options_[i]) {
      limit_[i] = o.limit;
      brute_limits(i + 1, own + o.own, std::max(time, o.time));
    }
  }

  // The exact best limits for a fixed split: for each candidate step time (any GPU's step time
  // at any of its limits), every GPU takes its cheapest limit meeting it; the cost charged at the
  // candidate bounds the true one, and the optimum's own step time is a candidate. Infinity when
  // a share has no feasible limit.
  double split_cost(const std::vector<int>& split, std::vector<std::size_t>& limits) {
    ++evaluations_;
    scratch_.resize(n_);
    for (std::size_t i = 0; i < n_; ++i) {
      if (!in_domain(i, split[i])) return kInf;
      options_at(i, split[i], scratch_[i]);
      if (scratch_[i].empty()) return kInf;
    }
    double best = kInf;
    for (std::size_t c = 0; c < n_; ++c)
      for (const auto& cand : scratch_[c]) {
        const double t = cand.time;
        double own = 0;
        bool ok = true;
        for (std::size_t i = 0; i < n_ && ok; ++i) {
          double m = kInf;
          for (const auto& o : scratch_[i])
            if (o.time <= t && o.own < m) m = o.own;
          ok = std::isfinite(m);
          own += m;
        }
        if (!ok) continue;
        const double cost = own + barrier_rate_ * t;
        if (cost < best) {
          best = cost;
          for (std::size_t i = 0; i < n_; ++i) {
            double m = kInf;
            for (const auto& o : scratch_[i])
              if (o.time <= t && o.own < m) {
                m = o.own;
                limits[i] = o.limit;
              }
          }
        }
      }
    return best;
  }

  // Local refinement: move δ samples from one GPU to another while the cost falls; δ halves.
  void refine(std::vector<int>& split, double& cost) {
    std::vector<std::size_t> limits(n_);
    int delta = std::max(1, req_.global_batch / 8);
    // The move that would undo the last accepted one leads back to a costlier split: skipped
    // (same result, fewer evaluations).
    std::size_t undo_from = n_, undo_to = n_;
    for (;;) {
      bool improved = true;
      while (improved) {
        improved = false;
        for (std::size_t from : by_strength_)
          for (std::size_t to : by_strength_) {
            if (from == to || split[from] - delta < slots_[from].lo || split[to] + delta > slots_[to].hi) continue;
            if (from == undo_from && to == undo_to) continue;
            split[from] -= delta;
            split[to] += delta;
            const double c = split_cost(split, limits);
            if (c < cost * (1 - 1e-12)) {
              cost = c;
              improved = true;
              undo_from = to, undo_to = from;
            } else {
              split[from] += delta;
              split[to] -= delta;
            }
          }
      }
      if (delta == 1) break;
      delta /= 2;
      undo_from = undo_to = n_;  // a smaller step back may pay
    }
  }

  // Hands out `left` samples one at a time, stronger GPUs first (a negative `left` takes them
  // back, weaker GPUs first), within each GPU's range.
  void distribute(std::vector<int>& split, long long left) const {
    while (left > 0) {
      bool moved = false;
      for (std::size_t i : by_strength_)
        if (left > 0 && split[i] < slots_[i].hi) {
          ++split[i];
          --left;
          moved = true;
        }
      if (!moved) return;
    }
    while (left < 0) {
      bool moved = false;
      for (auto it = by_strength_.rbegin(); it != by_strength_.rend(); ++it)
        if (left < 0 && split[*it] > slots_[*it].lo) {
          --split[*it];
          ++left;
          moved = true;
        }
      if (!moved) return;
    }
  }

  // Clamps a split into every GPU's range and restores its sum; false if it cannot.
  bool repair(std::vector<int>& split) const {
    long long sum = 0;
    for (std::size_t i = 0; i < n_; ++i) {
      split[i] = std::clamp(split[i], slots_[i].lo, slots_[i].hi);
      sum += split[i];
    }
    distribute(split, req_.global_batch - sum);
    return std::accumulate(split.begin(), split.end(), 0LL) == req_.global_batch;
  }

  std::vector<int> even_split_raw() const {
    std::vector<int> split(n_, static_cast<int>(req_.global_batch / static_cast<long long>(n_)));
    long long left = req_.global_batch % static_cast<long long>(n_);
    for (std::size_t i : by_strength_)
      if (left-- > 0) ++split[i];
    return split;
  }
  std::vector<int> even_split() const { return even_split_raw(); }

  // Shares that equalize step times at each GPU's highest feasible limit: start proportional to
  // profiled strength, then re-weight by each GPU's throughput at its current share (a fixed
  // point of equal step times when step time is affine in the batch); the rounding remainder
  // goes to the stronger GPUs first.
  std::vector<int> equalized_split() const {
    const double n = req_.global_batch;
    std::vector<double> share(n_), rate(n_);
    double total = 0;
    for (std::size_t i = 0; i < n_; ++i) total += slots_[i].strength;
    for (std::size_t i = 0; i < n_; ++i) share[i] = n * slots_[i].strength / total;
    for (int round = 0; round < 3; ++round) {
      double sum_rate = 0;
      for (std::size_t i = 0; i < n_; ++i) {
        const int b = std::clamp(static_cast<int>(std::lround(share[i])), slots_[i].lo, slots_[i].hi);
        rate[i] = slots_[i].strength;
        const auto& p = *slots_[i].profile;
        for (std::size_t l = p.power_limits.size(); l-- > 0;)
          if (auto m = interpolate(p, b, l)) {
            rate[i] = b / m->step_time.count();
            break;
          }
        sum_rate += rate[i];
      }
      for (std::size_t i = 0; i < n_; ++i) share[i] = n * rate[i] / sum_rate;
    }
    std::vector<int> split(n_);
    long long sum = 0;
    for (std::size_t i = 0; i < n_; ++i) {
      split[i] = static_cast<int>(std::floor(share[i]));
      sum += split[i];
    }
    long long left = req_.global_batch - sum;
    for (std::size_t i : by_strength_)
      if (left-- > 0) ++split[i];
    return split;
  }

  Plan make_plan(const std::vector<int>& shares, const std::vector<std::size_t>& limits, Method method) const {
    Plan plan;
    plan.method = method;
    plan.eta = req_.eta;
    plan.max_power_sum = Watts(max_power_sum_);
    plan.evaluations = evaluations_;
    double t = 0;
    std::vector<Measurement> ms(n_);
    for (std::size_t i = 0; i < n_; ++i) {
      ms[i] = *interpolate(*slots_[i].profile, shares[i], limits[i]);
      t = std::max(t, ms[i].step_time.count());
    }
    double energy = 0;
    for (std::size_t i = 0; i < n_; ++i) {
      GpuPlan g;
      g.gpu_type = slots_[i].profile->gpu_type;
      g.batch_size = shares[i];
      g.power_limit = slots_[i].profile->power_limits[limits[i]];
      g.step_time = ms[i].step_time;
      g.avg_power = ms[i].avg_power;
      const double e =
          ms[i].avg_power.value() * ms[i].step_time.count() + slots_[i].idle * (t - ms[i].step_time.count());
      g.energy = Joules(e);
      energy += e;
      plan.gpus.push_back(std::move(g));
    }
    plan.step_time = Seconds(t);
    plan.energy = Joules(energy);
    plan.cost = req_.eta * energy + (1 - req_.eta) * max_power_sum_ * t;
    return plan;
  }

  const PlanRequest& req_;
  std::size_t n_;
  std::vector<Slot> slots_;
  std::vector<std::size_t> by_strength_;
  double max_power_sum_ = 0, idle_sum_ = 0, barrier_rate_ = 0;
  std::uint64_t evaluations_ = 0;
  // brute-force state
  std::vector<long long> suffix_lo_, suffix_hi_;
  std::vector<std::vector<Option>> options_;
  std::vector<int> share_, best_share_;
  std::vector<std::size_t> limit_, best_limit_;
  double best_cost_ = kInf;
  // heuristic scratch
  std::vector<std::vector<Option>> scratch_;
};

}  // namespace

std::string_view to_string(Method m) {
  switch (m) {
    case Method::kBrute: return "brute";
    case Method::kHeuristic: return "heuristic";
    case Method::kBaseline: return "baseline";
  }
  return "unknown";
}

std::optional<Method> parse_method(std::string_view name) {
  for (auto m : {Method::kBrute, Method::kHeuristic, Method::kBaseline})
    if (name == to_string(m)) return m;
  return std::nullopt;
}

std::optional<Measurement> interpolate(const Profile& p, int b, std::size_t l) {
  const auto& bs = p.batch_sizes;
  if (bs.empty() || l >= p.power_limits.size() || b < bs.front() || b > bs.back()) return std::nullopt;
  const auto hi = static_cast<std::size_t>(std::lower_bound(bs.begin(), bs.end(), b) - bs.begin());
  if (bs[hi] == b) return p.at(hi, l);
  const auto& a = p.at(hi - 1, l);
  const auto& c = p.at(hi, l);
  if (!a || !c) return std::nullopt;
  const double w = static_cast<double>(b - bs[hi - 1]) / static_cast<double>(bs[hi] - bs[hi - 1]);
  return Measurement{Seconds(a->step_time.count() + w * (c->step_time.count() - a->step_time.count())),
                     Watts(a->avg_power.value() + w * (c->avg_power.value() - a->avg_power.value()))};
}

Result<void> validate(const PlanRequest& request) {
  Planner p(request);
  return p.prepare();
}

Result<Plan> plan(const PlanRequest& request, Method method) {
  Planner p(request);
  if (auto v = p.prepare(); !v) return fail(v.error());
  switch (method) {
    case Method::kBrute: return p.brute();
    case Method::kHeuristic: return p.heuristic();
    case Method::kBaseline: return p.baseline();
  }
  return fail(ErrorCode::kInvalidArgument, "unknown method");
}

Result<Plan> evaluate(const PlanRequest& request, const std::vector<int>& batch_sizes,
                      const std::vector<Watts>& power_limits, Method method) {
  Planner p(request);
  if (auto v = p.prepare(); !v) return fail(v.error());
  return p.fixed(batch_sizes, power_limits, method);
}

}  // namespace erg::hetero
