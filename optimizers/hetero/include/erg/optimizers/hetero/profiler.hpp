#pragma once
/// Profiling a GPU type over batch sizes × power limits (issue 21): the bookkeeping around a
/// caller's measurement of one configuration. The caller sets the power limit, runs warm-up and
/// measured steps (as Zeus's profiling does) and returns the mean step time and power; this
/// module decides what is left to run, in which order, and hands each row to a sink as soon as it
/// exists, so that an interrupted run resumes from the rows already written.

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "erg/core/result.hpp"
#include "erg/core/units.hpp"
#include "erg/optimizers/hetero/profile.hpp"

namespace erg::hetero {

/// What to profile.
struct ProfileGrid {
  std::string gpu_type;
  std::vector<int> batch_sizes;     ///< > 0, distinct.
  std::vector<Watts> power_limits;  ///< > 0, distinct, at most max_power_limit.
  Watts max_power_limit;
  Watts idle_power;  ///< Measured by the caller (the GPU idle at its lowest clock) or given.
};

/// Measures one configuration; nullopt: it cannot run (out of memory, the job failed in a way
/// that says so). An error stops the run (the rows so far are already with the sink).
using RunConfiguration = std::function<Result<std::optional<Measurement>>(int batch_size, Watts power_limit)>;
/// Receives each new row (appends it to the profile file, say).
using RowSink = std::function<Result<void>(const ProfileRow& row)>;

/// The configurations of `grid` that `done` lacks, in run order: batch sizes ascending, and per
/// batch size the limits descending (the warm GPU steps down). kInvalidArgument when `grid` is
/// malformed or `done` disagrees with it (another GPU type, another max_power_limit_w or
/// idle_power_w, a configuration outside the grid), naming the row.
Result<std::vector<std::pair<int, Watts>>> remaining_configurations(const ProfileGrid& grid,
                                                                    const std::vector<ProfileRow>& done);

/// Runs every remaining configuration, sinking each row; returns `done` plus the new rows. A
/// batch size that cannot run at the highest limit is recorded infeasible at every lower limit
/// without running (less memory never fits a larger batch).
Result<std::vector<ProfileRow>> run_profile(const ProfileGrid& grid, const std::vector<ProfileRow>& done,
                                            const RunConfiguration& run, const RowSink& sink);

}  // namespace erg::hetero
