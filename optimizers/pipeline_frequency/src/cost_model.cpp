#include "erg/optimizers/pipeline_frequency/cost_model.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <vector>

namespace erg::pipeline_frequency {

std::string_view to_string(CostModel::Kind kind) {
  switch (kind) {
    case CostModel::Kind::kConstant: return "constant";
    case CostModel::Kind::kLinear: return "linear";
    case CostModel::Kind::kExponential: return "exponential";
  }
  return "constant";
}

double CostModel::operator()(double units) const {
  switch (kind) {
    case Kind::kConstant: return c;
    case Kind::kLinear: return a * (units - t0) + c;
    case Kind::kExponential: return a * std::exp(b * (units - t0)) + c;
  }
  return c;
}

namespace {

struct LineFit {
  double slope = 0, intercept = 0, sse = 0;
};

/// Least squares y ≈ slope·x + intercept.
std::optional<LineFit> line(const std::vector<double>& x, const std::vector<double>& y) {
  const double n = static_cast<double>(x.size());
  double sx = 0, sy = 0;
  for (std::size_t i = 0; i < x.size(); ++i) sx += x[i], sy += y[i];
  const double mx = sx / n, my = sy / n;
  double sxx = 0, sxy = 0;
  for (std::size_t i = 0; i < x.size(); ++i) sxx += (x[i] - mx) * (x[i] - mx), sxy += (x[i] - mx) * (y[i] - my);
  if (!(sxx > 0)) return std::nullopt;
  LineFit f;
  f.slope = sxy / sxx;
  f.intercept = my - f.slope * mx;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double r = y[i] - (f.slope * x[i] + f.intercept);
    f.sse += r * r;
  }
  return f;
}

}  // namespace

Result<CostModel> CostModel::fit(std::span<const CostPoint> points) {
  if (points.empty()) return fail(ErrorCode::kInvalidArgument, "cost model: no points to fit");
  std::vector<CostPoint> p(points.begin(), points.end());
  for (const auto& q : p)
    if (!std::isfinite(q.units) || !std::isfinite(q.cost_j))
      return fail(ErrorCode::kInvalidArgument, "cost model: non-finite point");
  std::sort(p.begin(), p.end(), [](const auto& x, const auto& y) { return x.units < y.units; });
  for (std::size_t i = 1; i < p.size(); ++i)
    if (p[i].units == p[i - 1].units) return fail(ErrorCode::kInvalidArgument, "cost model: repeated duration");
  CostModel m;
  m.t0 = p.front().units;
  if (p.size() == 1) {
    m.kind = Kind::kConstant;
    m.c = p.front().cost_j;
    return m;
  }
  const double span = p.back().units - p.front().units;
  if (p.size() == 2) {
    m.kind = Kind::kLinear;
    m.a = (p[1].cost_j - p[0].cost_j) / span;
    m.c = p[0].cost_j;
    return m;
  }
  // Normalized time x in [0, 1]; the decay k is in e-folds over the span, b = −k / span.
  std::vector<double> y;
  for (const auto& q : p) y.push_back(q.cost_j);
  std::vector<double> x(p.size());
  auto at = [&](double k) -> std::optional<LineFit> {
    for (std::size_t i = 0; i < p.size(); ++i) x[i] = std::exp(-k * (p[i].units - m.t0) / span);
    auto f = line(x, y);
    if (!f || !(f->slope > 0)) return std::nullopt;
    return f;
  };
  constexpr int kGrid = 64;
  constexpr double kMin = 1e-3, kMax = 50.0;
  auto grid_k = [&](int i) { return kMin * std::pow(kMax / kMin, static_cast<double>(i) / (kGrid - 1)); };
  int best = -1;
  double best_sse = std::numeric_limits<double>::infinity();
  for (int i = 0; i < kGrid; ++i)
    if (auto f = at(grid_k(i)); f && f->sse < best_sse) best_sse = f->sse, best = i;
  if (best < 0) {
    // No decreasing exponential fits (the points are not a falling frontier); the least-squares
    // line is the honest fallback, clamped to non-increasing so the planner's costs stay sane.
    std::vector<double> t;
    for (const auto& q : p) t.push_back(q.units - m.t0);
    const auto f = line(t, y);
    m.kind = Kind::kLinear;
    if (f && f->slope <= 0) {
      m.a = f->slope;
      m.c = f->intercept;
    } else {
      double sum = 0;
      for (double v : y) sum += v;
      m.a = 0;
      m.c = sum / static_cast<double>(y.size());
    }
    return m;
  }
  // Golden-section search on log k between the neighbours of the best grid point; a k whose
  // fit is not decreasing scores +inf, so the search stays among admitted fits.
  auto score = [&](double lk) {
    auto f = at(std::exp(lk));
    return f ? f->sse : std::numeric_limits<double>::infinity();
  };
  double lo = std::log(grid_k(std::max(0, best - 1))), hi = std::log(grid_k(std::min(kGrid - 1, best + 1)));
  const double g = (std::sqrt(5.0) - 1) / 2;
  double x1 = hi - g * (hi - lo), x2 = lo + g * (hi - lo);
  double f1 = score(x1), f2 = score(x2);
  for (int it = 0; it < 60; ++it) {
    if (f1 <= f2) {
      hi = x2, x2 = x1, f2 = f1;
      x1 = hi - g * (hi - lo), f1 = score(x1);
    } else {
      lo = x1, x1 = x2, f1 = f2;
      x2 = lo + g * (hi - lo), f2 = score(x2);
    }
  }
  double k = grid_k(best);
  if (std::min(f1, f2) < best_sse) k = std::exp(f1 <= f2 ? x1 : x2);
  const auto f = at(k);
  m.kind = Kind::kExponential;
  m.b = -k / span;
  m.a = f->slope;
  m.c = f->intercept;
  return m;
}

}  // namespace erg::pipeline_frequency
