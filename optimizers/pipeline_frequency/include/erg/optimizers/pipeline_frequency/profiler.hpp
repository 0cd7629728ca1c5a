#pragma once
/// Perseus's profiling sweep (reference/zeus.md §6, issue 20): per stage and instruction, measure
/// one execution's time and energy at each GPU frequency from the highest down, and stop once
/// lower frequencies have only made it costlier for a while. What runs the computation and reads
/// the energy is the caller's (a real pipeline, or the simulated one of the tests): this is the
/// order, the stopping rule and the CSV the planner reads.

#include <functional>
#include <string>
#include <vector>

#include "erg/core/result.hpp"
#include "erg/optimizers/pipeline_frequency/profile.hpp"

namespace erg::pipeline_frequency {

/// One execution of an instruction for one micro-batch, as measured.
struct InstructionMeasurement {
  double time_s = 0;
  double energy_j = 0;
};

/// Measures `stage`'s `instruction` at `frequency_mhz`.
using MeasureInstruction =
    std::function<Result<InstructionMeasurement>(int stage, Instruction instruction, int frequency_mhz)>;

struct SweepOptions {
  int stages = 0;
  /// The frequencies to try (MHz); tried highest first, whatever their order here.
  std::vector<int> frequencies_mhz;
  /// Stop a (stage, instruction) after this many consecutive frequencies each cost more energy
  /// than the one before (Zeus's Perseus profiler stops after 5: below the energy-optimal
  /// frequency the static power of a longer run outweighs what the lower clock saves, so lower
  /// ones are only slower and costlier). 0: try every frequency.
  int stop_after_rises = 5;
};

/// Runs the sweep, stage by stage, forward then backward, frequencies from the highest down.
/// Every measured row is kept (the planner's Pareto filter drops the costly slow ones).
/// kInvalidArgument for no stages or no frequencies; a measurement's error is returned as is,
/// prefixed with the stage, instruction and frequency.
Result<Profile> sweep_frequencies(const SweepOptions& options, const MeasureInstruction& measure);

/// The profile CSV that parse_profile_csv reads: `stage,instruction,frequency,time,energy`, one
/// row per line, times and energies with enough digits to round-trip.
std::string to_profile_csv(const Profile& profile);

}  // namespace erg::pipeline_frequency
