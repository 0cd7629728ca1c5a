#pragma once
/// Profiles of GPU types for heterogeneous data-parallel planning (issue 21, Zeus²-style).
///
/// A profile is a CSV file, one row per measured configuration of one GPU type (docs/hetero.md):
///
///     gpu_type,batch_size,power_limit_w,step_time_s,avg_power_w,max_power_limit_w,idle_power_w
///     A10,32,150,0.081,148.2,150,22
///
/// - `batch_size`: the per-GPU batch of one training step (an integer > 0).
/// - `power_limit_w`: the power limit the step ran under (W, > 0, at most `max_power_limit_w`).
/// - `step_time_s`, `avg_power_w`: the measured mean step time (s, > 0) and mean board power over
///   the step (W, > 0). Both empty, `nan` or `oom`: the configuration was tried and cannot run
///   (out of memory, a failed job) — present, but infeasible.
/// - `max_power_limit_w`: the type's maximum power limit (W), the `max_power` of Zeus's cost for
///   every GPU of this type; `idle_power_w`: the power (W) a GPU of this type draws while it waits
///   at the data-parallel barrier for slower GPUs. Both repeat on every row and must agree within
///   a type, so one file describes itself.
///
/// Columns may come in any order; others are ignored; `#` lines and blank lines are skipped. A
/// profile must be a complete grid: every profiled batch size at every profiled power limit
/// (missing rows are an error that names them; erg's profiler resumes a partial file).

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "erg/core/result.hpp"
#include "erg/core/units.hpp"

namespace erg::hetero {

/// One measured configuration; nullopt step time/power: it cannot run (infeasible).
struct Measurement {
  Seconds step_time{0.0};
  Watts avg_power;
};

/// One GPU type's grid: batch_sizes × power_limits, both ascending, with one optional cell each.
struct Profile {
  std::string gpu_type;
  Watts max_power_limit;
  Watts idle_power;
  std::vector<int> batch_sizes;
  std::vector<Watts> power_limits;
  /// cells[b * power_limits.size() + p]; nullopt: infeasible (tried, could not run).
  std::vector<std::optional<Measurement>> cells;

  [[nodiscard]] const std::optional<Measurement>& at(std::size_t b, std::size_t p) const {
    return cells[b * power_limits.size() + p];
  }
  /// Whether any cell can run.
  [[nodiscard]] bool any_feasible() const;
};

/// One row as read or written (infeasible: measurement nullopt).
struct ProfileRow {
  std::string gpu_type;
  int batch_size = 0;
  Watts power_limit;
  std::optional<Measurement> measurement;
  Watts max_power_limit;
  Watts idle_power;
};

/// The header erg writes (the column order of the example above).
inline constexpr std::string_view kProfileHeader =
    "gpu_type,batch_size,power_limit_w,step_time_s,avg_power_w,max_power_limit_w,idle_power_w";

/// Parses profile CSV text into rows (no grid checks). kInvalidArgument naming `source`, the line
/// and the column: a missing column, a malformed or out-of-range number, a step time given without
/// a power (or the reverse), a power limit above the type's maximum.
Result<std::vector<ProfileRow>> parse_profile_rows(std::string_view csv, std::string_view source = "profile");

/// Groups rows into one Profile per GPU type (in order of first appearance). kInvalidArgument
/// naming the type: a duplicate configuration, max_power_limit_w or idle_power_w that differ
/// between rows, or missing configurations of the grid (each named, batch size @ power limit).
Result<std::vector<Profile>> build_profiles(const std::vector<ProfileRow>& rows, std::string_view source = "profile");

/// parse_profile_rows() then build_profiles().
Result<std::vector<Profile>> parse_profiles(std::string_view csv, std::string_view source = "profile");

/// Reads a file holding exactly one GPU type. kNotFound / kIo for the file, kInvalidArgument as
/// parse_profiles() or when the file holds no rows or several types; messages name the path.
Result<Profile> load_profile(const std::filesystem::path& path);

/// One CSV row (no newline) in kProfileHeader's order; infeasible rows write `oom`.
std::string to_csv_row(const ProfileRow& row);

}  // namespace erg::hetero
