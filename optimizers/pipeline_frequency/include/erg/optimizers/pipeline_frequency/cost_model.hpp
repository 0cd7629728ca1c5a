#pragma once
/// Perseus's continuous cost model of one (stage, instruction): effective energy as a function of
/// its duration, cost(t) = a·e^{b·(t − t0)} + c, fit to the candidate options (reference/zeus.md §6).

#include <span>
#include <string_view>

#include "erg/core/result.hpp"

namespace erg::pipeline_frequency {

struct CostPoint {
  double units = 0;   ///< Duration, in planner time units.
  double cost_j = 0;  ///< Effective energy.
};

/// A decreasing convex function of duration. `kind` says which form the fit took:
///  - kExponential: a·e^{b·(t − t0)} + c with a > 0 and b < 0 (three or more points);
///  - kLinear: a·(t − t0) + c with a ≤ 0 (two points: an exponential through two points is not
///    determined, and the line is its limit as b → 0);
///  - kConstant: c (one point; the duration cannot change).
struct CostModel {
  enum class Kind { kConstant, kLinear, kExponential };
  Kind kind = Kind::kConstant;
  double a = 0, b = 0, c = 0;
  double t0 = 0;  ///< The shortest duration fit; the exponent is taken from it to stay in range.

  [[nodiscard]] double operator()(double units) const;

  /// Least-squares fit. For an exponential the problem is linear in (a, c) once b is fixed, so the
  /// fit profiles b out (variable projection): for each b the best (a, c) is a 2×2 linear solve;
  /// the sum of squared errors over b is scanned on a log grid of the decay over the fitted span
  /// (1e-3 to 50 e-folds) and refined by golden-section search between the best grid point's
  /// neighbours. Only b giving a > 0 is admitted (the points are a Pareto frontier, so cost falls as
  /// time grows); if none does, the least-squares line is used. Deterministic, no initial guess.
  /// kInvalidArgument for no points, non-finite values or repeated durations.
  static Result<CostModel> fit(std::span<const CostPoint> points);
};

std::string_view to_string(CostModel::Kind kind);

}  // namespace erg::pipeline_frequency
