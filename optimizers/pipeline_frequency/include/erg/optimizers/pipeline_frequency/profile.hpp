#pragma once
/// The Perseus profile (reference/zeus.md §6): time and energy of each pipeline stage's forward
/// and backward computation at each GPU frequency, and the candidate execution options the
/// planner chooses from. Parsing is a pure function over the CSV text.

#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "erg/core/result.hpp"

namespace erg::pipeline_frequency {

/// The pipeline computations a frequency is chosen for.
enum class Instruction { kForward, kBackward };

/// "forward" or "backward", as in the profile CSV and Zeus's plan files.
std::string_view to_string(Instruction instruction);
/// The instruction a name stands for (case-sensitive, as Zeus writes them); nullopt otherwise.
std::optional<Instruction> parse_instruction(std::string_view name);

/// One measurement: `stage`'s `instruction` for one micro-batch at `frequency_mhz`.
struct ProfileRow {
  int stage = 0;
  Instruction instruction = Instruction::kForward;
  int frequency_mhz = 0;
  double time_s = 0;    ///< Wall time of one execution.
  double energy_j = 0;  ///< GPU energy of one execution.
};

struct Profile {
  std::vector<ProfileRow> rows;
  /// 1 + the largest stage number; 0 when empty.
  [[nodiscard]] int num_stages() const;
};

/// Parses the profile CSV: a header naming at least the columns stage, instruction, frequency,
/// time (s) and energy (J) in any order (other columns are ignored, as pandas would), then one row
/// per line; blank lines and a CR before LF are accepted. kInvalidArgument names the line and
/// column of a missing column, a non-numeric or negative value, an unknown instruction, or a
/// frequency listed twice for one stage and instruction.
Result<Profile> parse_profile_csv(std::string_view csv);
/// Reads and parses a file; kNotFound or kIo name the path, parse errors are prefixed with it.
Result<Profile> read_profile_csv(const std::filesystem::path& path);

/// One way to run one (stage, instruction): a frequency and what it costs.
struct ExecutionOption {
  int frequency_mhz = 0;
  double time_s = 0;    ///< As profiled.
  double energy_j = 0;  ///< As profiled.
  /// Effective energy: energy_j − P2P-blocking power × time_s. A GPU waiting on a pipeline
  /// neighbour still draws the blocking power, so only the energy above it is what choosing this
  /// frequency costs.
  double cost_j = 0;
  /// time_s in planner time units, rounded up: a duration of `units` always fits this option.
  int units = 0;
};

/// The options of one (stage, instruction) the planner chooses among, slowest first.
struct CandidateOptions {
  int stage = 0;
  Instruction instruction = Instruction::kForward;
  std::vector<ExecutionOption> options;  ///< Pareto-optimal, distinct `units`, units descending.

  [[nodiscard]] int min_units() const { return options.back().units; }
  [[nodiscard]] int max_units() const { return options.front().units; }
  /// The slowest option that finishes within `units` (the fastest one if none does).
  [[nodiscard]] const ExecutionOption& option_for(int units) const;
};

/// The candidate options of one (stage, instruction) from its profile rows: effective energy at
/// `p2p_power_w`; Pareto filtering on (time, effective energy) — an option is dropped when another
/// is no slower and no costlier and better in one; then quantization to `unit_s`, rounding up; where
/// two options share a quantized time the slower (cheaper) one stays, since both fit the same
/// duration. kInvalidArgument when `rows` is empty or `unit_s` is not positive.
Result<CandidateOptions> candidate_options(std::span<const ProfileRow> rows, double p2p_power_w, double unit_s);

}  // namespace erg::pipeline_frequency
