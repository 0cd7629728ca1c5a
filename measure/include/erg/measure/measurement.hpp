#pragma once
/// What a measurement window returns: plain values, seconds and joules.

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "erg/core/result.hpp"
#include "erg/core/units.hpp"

namespace erg::measure {

/// Where a device's energy figure came from.
enum class EnergySource {
  kCounter,        ///< Difference of the hardware energy counter.
  kIntegrated,     ///< Integral of the sampled power timeline (GPUs without a counter).
  kInstantApprox,  ///< Instant power × window time (counter did not move; approx_instant_energy).
};
std::string_view to_string(EnergySource source);

struct GpuEnergy {
  unsigned index = 0;  ///< erg GPU index.
  Joules energy;
  EnergySource source = EnergySource::kCounter;
  /// The window is shorter than about two update periods of the counter it used, so the
  /// figure is coarse (it may even be 0 J).
  bool short_window = false;
  /// How much of the window, at its end, lies past the counter's last update: that part of the
  /// energy is extrapolated at the power of the last updates (0 once the end edge settled, see
  /// EnergyMonitorOptions::settle). A load change in that span is not in the figure.
  Seconds extrapolated{0.0};
  /// How long the spans around the window's edges were in which the counter's updates went
  /// unread (its reader was starved for more than an update period): across such a span the
  /// edge is interpolated evenly between the updates read on either side of it, not as the
  /// sensor counted period by period, so a load change inside it can move the figure by up to
  /// the span times the power swing. 0 normally.
  Seconds unread{0.0};
  /// The counter reset or went backwards during the window; the figure is a lower bound.
  bool affected = false;
  /// Set when the device could not be read at the window's end (the energy is then 0).
  std::optional<Error> error;
};

struct CpuEnergy {
  unsigned index = 0;  ///< RAPL package index.
  Joules package;
  std::optional<Joules> dram;  ///< nullopt when the package has no DRAM domain.
  /// A read failed during the window (an I/O error, or a counter that reset or read corrupt:
  /// the energy around it is not counted); the figure is a lower bound.
  bool affected = false;
  /// Set when the package could not be read at the window's end.
  std::optional<Error> error;
};

struct Measurement {
  std::string name;
  Seconds time{0.0};                       ///< Window duration.
  std::chrono::nanoseconds start_wall{0};  ///< Wall-clock start, since the Unix epoch.
  std::vector<GpuEnergy> gpus;
  std::vector<CpuEnergy> cpus;

  [[nodiscard]] Joules gpu_energy() const;    ///< Sum over GPUs (Zeus's total_energy).
  [[nodiscard]] Joules cpu_energy() const;    ///< Sum of package energy.
  [[nodiscard]] Joules dram_energy() const;   ///< Sum of DRAM energy.
  [[nodiscard]] Joules total_energy() const;  ///< GPUs + packages + DRAM.
  /// True if any device's figure is affected by a counter anomaly or a read error.
  [[nodiscard]] bool affected() const;
};

}  // namespace erg::measure
