#pragma once
/// Plans a heterogeneous data-parallel step (issue 21, Zeus²-style): splits a global batch over
/// GPUs of different types and picks each GPU's power limit, minimizing Zeus's cost.
///
/// Model (docs/hetero.md). GPU i runs its share b_i under limit p_i in T_i(b_i, p_i) seconds at
/// mean power P_i(b_i, p_i); the step ends at the barrier, T = max_i T_i. A GPU that finishes
/// early waits T − T_i at its type's idle power. Per step:
///
///     E_i  = P_i·T_i + idle_i·(T − T_i)
///     E    = Σ_i E_i
///     cost = η·E + (1 − η)·(Σ_i max_power_limit_i)·T          (Zeus's cost, summed max power)
///
/// Domain. Each b_i is an integer in [smallest, largest] profiled batch size of its type: step
/// time and power are linearly interpolated between the two profiled batch sizes around b_i at
/// the same power limit (profiled batch sizes are exact); (b, p) is feasible when both of those
/// cells are. No extrapolation; every GPU gets at least its type's smallest profiled batch.
/// Power limits: the profiled ones only.
///
/// Methods:
/// - kBrute: every integral split summing to N × every combination of profiled limits (exact).
///   Refused (kInvalidArgument) beyond kMaxBruteEvaluations.
/// - kHeuristic: (1) each GPU's strength is its profiled throughput (samples/s) at its largest
///   feasible batch and highest limit; (2) the split that equalizes step times at the highest
///   limits (bisection on the step time), the rounding remainder given to the stronger GPUs
///   first; (3) for a split, each GPU takes the cheapest limit that meets a candidate step time,
///   scanning every candidate (exact for that split); (4) local refinement: move δ samples
///   between each pair of GPUs while the cost falls, δ halving from N/8 to 1, from that start and
///   from the even split.
/// - kBaseline: the even split (remainder to the stronger GPUs first) at each GPU's highest
///   profiled limit.
///
/// Pure functions of their inputs; thread-safe.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "erg/core/result.hpp"
#include "erg/core/units.hpp"
#include "erg/optimizers/hetero/profile.hpp"

namespace erg::hetero {

enum class Method { kBrute, kHeuristic, kBaseline };

/// "brute", "heuristic", "baseline".
std::string_view to_string(Method m);
std::optional<Method> parse_method(std::string_view name);

/// What to plan: one profile per GPU (GPUs of one type share a Profile).
struct PlanRequest {
  std::vector<const Profile*> gpus;
  int global_batch = 0;
  double eta = 0.5;  ///< Weight of energy against time, 0 to 1.
};

/// One GPU's part of a plan.
struct GpuPlan {
  std::string gpu_type;
  int batch_size = 0;
  Watts power_limit;
  Seconds step_time{0.0};  ///< T_i: its own compute time.
  Watts avg_power;         ///< P_i while computing.
  Joules energy;           ///< E_i, waiting at the barrier included.
};

struct Plan {
  Method method = Method::kBaseline;
  std::vector<GpuPlan> gpus;  ///< In the request's order.
  Seconds step_time{0.0};     ///< T: the slowest GPU's.
  Joules energy;              ///< Per step, all GPUs, waiting included.
  double cost = 0;            ///< η·E + (1 − η)·Σmax_power·T, per step (joules).
  double eta = 0.5;
  Watts max_power_sum;            ///< Σ_i max_power_limit_i.
  std::uint64_t evaluations = 0;  ///< Plans costed (a measure of the search's work).
};

/// Brute force refuses searches larger than this (splits × limit combinations).
inline constexpr std::uint64_t kMaxBruteEvaluations = 4'000'000'000ULL;

/// Checks a request without planning. kInvalidArgument naming the cause: no GPUs, η outside
/// [0, 1], a GPU whose profile has no feasible configuration (named by index and type), or a
/// global batch no split can reach (with the reachable range).
Result<void> validate(const PlanRequest& request);

/// Plans with one method; errors as validate() (and kBrute's size limit).
Result<Plan> plan(const PlanRequest& request, Method method);

/// The interpolated measurement of a profile at batch b and its p-th power limit; nullopt outside
/// the domain or infeasible.
std::optional<Measurement> interpolate(const Profile& profile, int batch_size, std::size_t limit_index);

/// Recomputes a plan's totals from its per-GPU batch sizes and limits (used by the tests and the
/// CLI to check one another): kInvalidArgument for an infeasible or out-of-domain assignment.
Result<Plan> evaluate(const PlanRequest& request, const std::vector<int>& batch_sizes,
                      const std::vector<Watts>& power_limits, Method method);

}  // namespace erg::hetero
