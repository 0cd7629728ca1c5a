#include "erg/optimizers/pipeline_frequency/synthetic_profile.hpp"

#include <algorithm>
#include <array>

namespace erg::pipeline_frequency {

Profile synthetic_profile(int stages, std::span<const int> frequencies_mhz) {
  static constexpr std::array<double, 4> kLoad = {1.0, 0.9, 0.95, 1.15};
  Profile p;
  if (frequencies_mhz.empty()) return p;
  const double f_max = *std::max_element(frequencies_mhz.begin(), frequencies_mhz.end());
  for (int s = 0; s < stages; ++s) {
    const double load = kLoad[static_cast<std::size_t>(s) % kLoad.size()];
    for (auto instruction : {Instruction::kForward, Instruction::kBackward}) {
      const double scale = instruction == Instruction::kForward ? 1.0 : 2.0;
      for (int f : frequencies_mhz) {
        const double ratio = f / f_max;
        const double time_s = scale * load * (0.003 + 0.008 / ratio);
        const double power_w = 90.0 + 210.0 * ratio * ratio;
        p.rows.push_back({s, instruction, f, time_s, power_w * time_s});
      }
    }
  }
  return p;
}

}  // namespace erg::pipeline_frequency
