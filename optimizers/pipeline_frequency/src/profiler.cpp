#include "erg/optimizers/pipeline_frequency/profiler.hpp"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <string>

namespace erg::pipeline_frequency {

Result<Profile> sweep_frequencies(const SweepOptions& options, const MeasureInstruction& measure) {
  if (options.stages < 1) return fail(ErrorCode::kInvalidArgument, "profiling sweep: stages must be at least 1");
  if (options.frequencies_mhz.empty())
    return fail(ErrorCode::kInvalidArgument, "profiling sweep: no frequencies to try");
  if (options.stop_after_rises < 0)
    return fail(ErrorCode::kInvalidArgument, "profiling sweep: stop_after_rises must not be negative");
  std::vector<int> freqs = options.frequencies_mhz;
  std::sort(freqs.begin(), freqs.end(), std::greater<>());
  freqs.erase(std::unique(freqs.begin(), freqs.end()), freqs.end());

  Profile profile;
  for (int stage = 0; stage < options.stages; ++stage)
    for (const Instruction instruction : {Instruction::kForward, Instruction::kBackward}) {
      int rises = 0;
      double previous = 0;
      for (std::size_t i = 0; i < freqs.size(); ++i) {
        auto m = measure(stage, instruction, freqs[i]);
        if (!m)
          return fail(m.error().code, "stage " + std::to_string(stage) + " " + std::string(to_string(instruction)) +
                                          " at " + std::to_string(freqs[i]) + " MHz: " + m.error().message);
        profile.rows.push_back(ProfileRow{stage, instruction, freqs[i], m->time_s, m->energy_j});
        // A rise is measured against the frequency just above, so one noisy reading below the
        // optimum restarts the count rather than ending the sweep early.
        rises = (i > 0 && m->energy_j > previous) ? rises + 1 : 0;
        previous = m->energy_j;
        if (options.stop_after_rises > 0 && rises >= options.stop_after_rises) break;
      }
    }
  return profile;
}

std::string to_profile_csv(const Profile& profile) {
  std::string out = "stage,instruction,frequency,time,energy\n";
  char buf[128];
  for (const auto& r : profile.rows) {
    // %.17g round-trips a double exactly.
    std::snprintf(buf, sizeof buf, "%d,%s,%d,%.17g,%.17g\n", r.stage, std::string(to_string(r.instruction)).c_str(),
                  r.frequency_mhz, r.time_s, r.energy_j);
    out += buf;
  }
  return out;
}

}  // namespace erg::pipeline_frequency
