#pragma once
/// What a measurement window returns: plain values, seconds and joules.

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "erg/core/device.hpp"
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
  /// nullopt when the energy cannot be known (the GPU could not be read at an edge of the window,
  /// even after retries, or was lost): `error` says why. Never a 0 J standing in for unknown.
  std::optional<Joules> energy;
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
  /// sensor counted it period by period, so a load change inside it can move the figure by up to
  /// the span times the power swing. 0 normally.
  Seconds unread{0.0};
  /// Counter anomalies inside the window: the counter restarted from zero (a driver reload) or
  /// stepped backwards. The span between the reads around each one is bridged with the
  /// counter's recent rate (`bridged` long); the figure is then off by at most `error_bound`.
  std::uint64_t counter_restarts = 0;
  std::uint64_t counter_backwards = 0;
  /// Updates whose advance fell short of what the power read around them says they counted (a
  /// step back that coincided with an update and was smaller than it, so no decrease was read;
  /// checked on GPUs that read power with the counter). Nothing is bridged: the figure is the
  /// counter's, low by at most the part of `error_bound` they add.
  std::uint64_t counter_shortfalls = 0;
  Seconds bridged{0.0};
  Joules error_bound{0.0};
  /// Reads of the GPU that failed during the window (each retried; a counter keeps counting
  /// across failed reads, so the figure stays exact if a later read succeeds).
  std::uint64_t read_errors = 0;
  /// The counter's update schedule was not trusted at an edge of the window (the updates had
  /// just contradicted the learned one: a drifting or jumping schedule, a changed period, and it
  /// was being learned again): that edge is the plain value read there, as Zeus takes it, off by
  /// up to one update period's energy, instead of being placed on the schedule.
  bool plain_difference = false;
  /// A counter anomaly, a failed read, or an unknown energy: look at the fields above.
  bool affected = false;
  /// Why the energy is unknown (with `energy` nullopt), or the last read error when a read at an
  /// edge failed but the figure could still be made (e.g. from the reads around it).
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

/// One SoC rail's energy over a window.
struct RailEnergy {
  std::string name;  ///< The sensor's label ("VDD_GPU_SOC").
  RailKind kind = RailKind::kOther;
  Joules energy;
};

/// A SoC module's energy over a window (Jetson: integrated from INA3221 power samples).
struct SocEnergy {
  unsigned index = 0;
  std::vector<RailEnergy> rails;
  std::optional<Joules> cpu;  ///< Sum of the cpu rails; nullopt when the module has none.
  std::optional<Joules> gpu;  ///< Sum of the gpu rails; nullopt when the module has none.
  /// The module input rail where there is one (VDD_IN), else the sum of every rail (each a
  /// separate supply of the module). The carrier board is not measured.
  Joules total;
  /// Set when the rails could not be read at an edge (then no figure is given).
  std::optional<Error> error;
};

struct Measurement {
  std::string name;
  Seconds time{0.0};                       ///< Window duration.
  std::chrono::nanoseconds start_wall{0};  ///< Wall-clock start, since the Unix epoch.
  std::vector<GpuEnergy> gpus;
  std::vector<CpuEnergy> cpus;
  std::vector<SocEnergy> socs;  ///< EnergyMonitorOptions::socs, in order.

  [[nodiscard]] Joules gpu_energy() const;    ///< Sum over GPUs whose energy is known (Zeus's total_energy).
  [[nodiscard]] Joules cpu_energy() const;    ///< Sum of package energy.
  [[nodiscard]] Joules dram_energy() const;   ///< Sum of DRAM energy.
  [[nodiscard]] Joules soc_energy() const;    ///< Sum of the SoCs' totals.
  [[nodiscard]] Joules total_energy() const;  ///< GPUs + packages + DRAM + SoCs, over the devices it covers.
  /// The devices the totals leave out because their energy is unknown ("gpu1", ...); empty
  /// when the totals cover every monitored device.
  [[nodiscard]] std::vector<std::string> missing_devices() const;
  /// True if any device's figure is affected by a counter anomaly or a read error.
  [[nodiscard]] bool affected() const;
};

}  // namespace erg::measure
