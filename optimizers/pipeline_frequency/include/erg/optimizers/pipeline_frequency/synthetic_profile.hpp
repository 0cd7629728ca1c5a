#pragma once
/// A made-up but plausible profile for benchmarks, examples and tests — not a measurement.
///
/// Per stage s with load factor k_s (imbalanced: 1.0, 0.9, 0.95, 1.15, repeating), instruction
/// scale x (forward 1, backward 2) and frequency f (MHz, f_max the highest listed):
///   time(f)  = x·k_s·(3 ms + 8 ms · f_max / f)   — a memory-bound part that does not scale with
///                                                  the SM clock and a compute part that does;
///   power(f) = 90 W + 210 W · (f / f_max)²       — static power plus dynamic power rising with f
///                                                  (voltage rises with frequency);
///   energy   = power × time.
/// With the default 70 W P2P-blocking power the effective energy falls from f_max down to about
/// 450 MHz and rises again below it (static power over a long time), so the lowest frequencies
/// are not Pareto-optimal — as on real GPUs.

#include <span>

#include "erg/optimizers/pipeline_frequency/profile.hpp"

namespace erg::pipeline_frequency {

Profile synthetic_profile(int stages, std::span<const int> frequencies_mhz);

}  // namespace erg::pipeline_frequency
