#pragma once
// The tables of Zeus's batch-size server (Job, BatchSize, GaussianTsArmState, Trial) plus erg's
// optimizer_state column, as migrations both databases run, and the row values both mirror.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "erg/optimizers/batch_size/optimizer.hpp"
#include "erg/optimizers/batch_size/server/store.hpp"

namespace erg::batch_size::server::detail {

/// Migration i (0-based) takes a database from schema version i to i + 1. `real` is the
/// database's double type, `blob_text` its unbounded text type.
std::vector<std::string> migrations(const std::string& real);

/// The values of the Job row besides its spec columns.
struct JobState {
  std::string stage;  ///< "Pruning" or "MAB"
  std::optional<double> min_cost;
  int min_cost_batch_size = 0;
  int exp_default_batch_size = 0;
  std::string rng_state;
};
JobState job_state(const Optimizer& optimizer);

/// Names Zeus stores in its enums.
const char* trial_type_name(TrialType type);
const char* trial_status_name(TrialStatus status);

/// The seed as the signed 64-bit integer both databases store (bit pattern kept: seeds ≥ 2^63
/// read back negative in SQL but the optimizer_state holds the exact value).
std::optional<std::int64_t> seed_column(const std::optional<std::uint64_t>& seed);

/// UTC now as ISO 8601 with microseconds.
std::string now_iso8601();
/// `t` as UTC ISO 8601 with microseconds ("2026-01-02T03:04:05.000006Z"): fixed width for years
/// 1970 to 9999, so these strings sort as the times do (the trial timeout compares them).
std::string iso8601(std::chrono::system_clock::time_point t);

}  // namespace erg::batch_size::server::detail
