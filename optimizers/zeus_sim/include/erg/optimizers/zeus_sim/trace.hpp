#pragma once
/// The Zeus NSDI'23 traces (data/README.md): parsing is a pure function over the CSV text;
/// load_traces() reads a directory of them.

#include <filesystem>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "erg/core/result.hpp"
#include "erg/core/units.hpp"

namespace erg::zeus_sim {

/// One row of summary_train.csv: when one training run first reached one target.
struct TrainRow {
  std::string dataset, network, optimizer;
  int batch_size = 0;
  std::string learning_rate;  ///< As logged (text).
  int run = 0;
  double target_metric = 0;
  std::optional<int> target_epoch;  ///< nullopt: the run never reached the target (`nan`).
};

/// One row of summary_power_<gpu>.csv: one epoch of a workload at a batch size and power limit.
struct PowerRow {
  std::string dataset, network, optimizer;
  int batch_size = 0;
  Watts power_limit;
  Seconds time_per_epoch{0.0};
  Watts average_power;
};

/// Parses summary_train.csv's text: the exact header, then one row per line (a final newline
/// is optional; CR before LF is accepted). kInvalidArgument names the line and the column.
Result<std::vector<TrainRow>> parse_train_trace(std::string_view csv);
/// Parses a summary_power_<gpu>.csv's text; errors as parse_train_trace().
Result<std::vector<PowerRow>> parse_power_trace(std::string_view csv);

/// The GPUs that have power traces, as named in the files: a40, p100, rtx6000, v100.
std::span<const std::string_view> trace_gpus();

/// The train trace and the power traces found beside it, by GPU name.
struct Traces {
  std::vector<TrainRow> train;
  std::map<std::string, std::vector<PowerRow>, std::less<>> power;
};

/// Reads `dir`: summary_train.csv and each summary_power_<gpu>.csv present (at least one).
/// kNotFound for a missing directory or file, kIo for an unreadable one, kInvalidArgument for
/// a malformed one; messages name the path.
Result<Traces> load_traces(const std::filesystem::path& dir);

/// Where erg looks for the traces when not told: the source tree's optimizers/zeus_sim/data
/// (a build) and then the installed share/erg/zeus-traces.
std::vector<std::filesystem::path> default_trace_dirs();
/// The first of default_trace_dirs() holding summary_train.csv; kNotFound naming them all.
Result<std::filesystem::path> find_trace_dir();

}  // namespace erg::zeus_sim
