#include "erg/optimizers/batch_size/job_spec.hpp"

#include <algorithm>
#include <cmath>
#include <set>
#include <string>

namespace erg::batch_size {
namespace {
tl::unexpected<Error> bad(const std::string& what) { return fail(ErrorCode::kInvalidArgument, "job spec: " + what); }
}  // namespace

Result<void> validate(const JobSpec& spec) {
  if (spec.batch_sizes.empty()) return bad("batch_sizes must not be empty");
  std::set<int> seen;
  for (int b : spec.batch_sizes) {
    if (b <= 0) return bad("batch_sizes must be positive (got " + std::to_string(b) + ")");
    if (!seen.insert(b).second) return bad("batch_sizes has " + std::to_string(b) + " twice");
  }
  if (!seen.contains(spec.default_batch_size))
    return bad("default_batch_size " + std::to_string(spec.default_batch_size) + " is not one of batch_sizes");
  if (!(spec.eta_knob >= 0.0 && spec.eta_knob <= 1.0))
    return bad("eta_knob must be in [0, 1] (got " + std::to_string(spec.eta_knob) + ")");
  if (spec.beta_knob && !(*spec.beta_knob > 0.0 && std::isfinite(*spec.beta_knob)))
    return bad("beta_knob must be greater than 0 (got " + std::to_string(*spec.beta_knob) + ")");
  if (!std::isfinite(spec.target_metric)) return bad("target_metric must be a finite number");
  if (spec.max_epochs < 1) return bad("max_epochs must be at least 1");
  if (spec.num_pruning_rounds < 0) return bad("num_pruning_rounds must be 0 or more");
  if (spec.window_size < 0) return bad("window_size must be 0 (all) or more");
  if (!std::isfinite(spec.mab_prior_mean)) return bad("mab_prior_mean must be a finite number");
  if (!(spec.mab_prior_precision >= 0.0 && std::isfinite(spec.mab_prior_precision)))
    return bad("mab_prior_precision must be 0 or more");
  if (spec.mab_num_explorations < 0) return bad("mab_num_explorations must be 0 or more");
  if (spec.mab_num_explorations == 0 && spec.mab_prior_precision == 0.0)
    return bad("mab_num_explorations must be at least 1 when mab_prior_precision is 0");
  return ok();
}

double zeus_cost(Joules energy, Seconds time, double eta, Watts max_power) {
  return eta * energy.value() + (1.0 - eta) * max_power.value() * time.count();
}

}  // namespace erg::batch_size
