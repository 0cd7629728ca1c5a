#pragma once
/// What a simulated machine contains: parsed from `4xA100`, `2xH100,1xV100,cpus=2`,
/// `2xMI300X`, `1xA100,1xMI300X:frozen`, `jetson=orin`, or a JSON file (path ending in .json, or starting with
/// '{'). A dual-die card (`1xMI250`) is two GPUs, one per die, as AMD SMI lists it.
///
/// Model options (tokens, or top-level JSON keys): `ideal` / `faithful` (default), `seed=N`,
/// `timestamps=read|update`, `rapl=random|zero|near-wrap`. See sim/README.md.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "erg/core/result.hpp"
#include "erg/sim/jetson.hpp"
#include "erg/sim/sku.hpp"

namespace erg::sim {

/// How the simulated hardware behaves.
enum class ModelKind {
  /// Like measured hardware: noise, ripple, transients, a power-limit control loop, sensors that
  /// update with jitter and independent phases, partial sampling on A100/H100, counters starting
  /// at seeded values. The default everywhere.
  kFaithful,
  /// Constant power between control events, exact counters on aligned ticks, instant limits,
  /// counters from 0, update-time stamps. Only for tests of exact arithmetic, which say so.
  kIdeal,
};

/// What the `timestamp` of an NVML field value means.
enum class TimestampMeaning {
  kReadTime,    ///< When the value was read (the query), whatever its age.
  kUpdateTime,  ///< When the driver last updated the value.
};

/// Where RAPL counters start.
enum class RaplStart {
  kRandom,    ///< A seeded value anywhere in the counter range.
  kZero,      ///< 0.
  kNearWrap,  ///< A few seconds of idle energy below max_energy_range_uj: wraps in ordinary runs.
};

/// What a simulated AMD GPU's energy counter does (hardware.md §4.2).
enum class CounterMode {
  kNormal,
  /// Never moves (amdsmi_get_energy_count stale until reboot on MI100: ROCm/amdsmi #38, #22,
  /// AMDResearch/hpcfund #21). Spec: `1xMI300X:frozen`, JSON "counter": "frozen".
  kFrozen,
  /// Steps back every 2 s by about 50 ms of energy, then counts on (ROCm/amdsmi #115).
  /// Spec: `1xMI300X:backwards`.
  kBackwards,
};

/// How a GPU's energy counter schedules its updates (sensor zoo; sim/README.md, "Sensors").
enum class Schedule {
  /// Update k at origin + k·period + clip(σ·g_k, ±3σ): jitter around a fixed grid (the default).
  kGrid,
  /// Update k one period after update k − 1, plus clip(σ·g_k, ±3σ): a random walk that drifts
  /// from every fixed grid without bound (the deviation grows like σ·√k).
  kRandomWalk,
  /// The grid, but every `phase_jump_s` the phase jumps later by a seeded share of the period,
  /// uniform in [0.2, 0.8].
  kPhaseJumps,
  /// The grid, but a seeded share of updates is skipped (the next one covers both periods) and
  /// the same share doubled (an extra update in the middle of the period, covering its first half).
  kSkips,
  /// The grid, but the period changes to `period_after_ms` at `change_at_s` after creation.
  kPeriodChange,
};

/// What a GPU's energy and power field timestamps mean (overrides the machine-wide `timestamps`).
enum class StampMode {
  kUpdate,         ///< the time of the update that produced the value
  kRead,           ///< the read time
  kIntervalStart,  ///< the start of the interval the value covers (the previous update's time)
  kFloored,        ///< the update time floored to `stamp_unit_ms` (wall clock)
  kUnrelated,      ///< a seeded monotonic clock: the read time + a seeded offset (3–8 s) + a seeded drift (±0.1 %)
};

/// What one energy-counter update adds.
enum class Increment {
  kWhole,           ///< ∫P over the period
  kPartial,         ///< mean power over the sampled window × the actual period (partial sampling)
  kPartialNominal,  ///< mean power over the sampled window × the nominal period
};

/// How the averaged power reading (POWER_AVERAGE, GetPowerUsage on average-only SKUs, AMD
/// average power) is formed.
enum class AverageMode {
  kBoxcar,       ///< the energy of the last 1 s of updates over their time span
  kExponential,  ///< an exponentially weighted average of each update's power, time constant 1 s
};

struct ModelSpec {
  ModelKind kind = ModelKind::kFaithful;
  /// The AMD SMI ABI the simulated libamd_smi.so speaks (24, 25 or 26: the layout of
  /// amdsmi_power_info_t and amdsmi_version_t). Token `amdsmi=24`. Default 26 (ROCm 7).
  unsigned amdsmi_abi = 26;
  std::uint64_t seed = 1;  ///< Every random quantity of the machine derives from it.
  /// Default: kReadTime (faithful), kUpdateTime (ideal).
  std::optional<TimestampMeaning> timestamps;
  /// Default: kRandom (faithful), kZero (ideal).
  std::optional<RaplStart> rapl_start;

  [[nodiscard]] TimestampMeaning timestamp_meaning() const {
    return timestamps.value_or(kind == ModelKind::kIdeal ? TimestampMeaning::kUpdateTime : TimestampMeaning::kReadTime);
  }
  [[nodiscard]] RaplStart rapl() const {
    return rapl_start.value_or(kind == ModelKind::kIdeal ? RaplStart::kZero : RaplStart::kRandom);
  }
};

struct GpuSpec {
  std::string sku;                             ///< Key into the SKU table ("A100", "V100", ...).
  std::optional<std::string> uuid;             ///< Default: derived from the position.
  CounterMode counter = CounterMode::kNormal;  ///< AMD GPUs only.
  /// Sensor samples only part of each period; default: the SKU's (A100/H100), never in ideal.
  std::optional<bool> partial_sampling;
  /// Energy-counter update period, ms (default: the SKU's nominal 100 ms, with a seeded drift).
  /// For tests that break an assumption of the reader (a period far from the nominal one).
  std::optional<double> energy_period_ms;
  /// σ of each counter update's offset from its schedule, ms (default: seeded, 0.1–1 % of the
  /// period). For tests that break an assumption of the reader (large jitter).
  std::optional<double> jitter_ms;
  // --- the sensor zoo: behaviours that break a reader's assumptions (faithful model only) ---
  /// How the energy counter's updates are scheduled (default: the grid).
  std::optional<Schedule> schedule;
  /// kPhaseJumps: seconds between phase jumps (default 5).
  std::optional<double> phase_jump_s;
  /// kSkips: share of updates skipped, and the same share doubled (default 0.05).
  std::optional<double> skip_share;
  /// kPeriodChange: seconds after creation when the period changes (default 5).
  std::optional<double> change_at_s;
  /// kPeriodChange: the period after the change, ms (default 1.3 × the period).
  std::optional<double> period_after_ms;
  /// A counter value (and its power and average fields) becomes readable this many ms after its
  /// update; until then reads show the previous update's (default 0).
  std::optional<double> publish_delay_ms;
  /// This GPU's field timestamps (default: the machine-wide `timestamps`; AMD: the update time).
  std::optional<StampMode> stamps;
  /// kFloored: the unit the update time is floored to, ms (default 1000).
  std::optional<double> stamp_unit_ms;
  /// What each counter update adds (default: kPartial where the SKU samples part of the period,
  /// else kWhole; `partial_sampling` true/false is kPartial/kWhole).
  std::optional<Increment> increment;
  /// The averaged power reading (default kBoxcar).
  std::optional<AverageMode> average;
};

struct CpuSpec {
  bool dram = true;
  bool core = false;  ///< Add a `core` sub-zone (client parts have one; Xeon servers do not).
  double idle_package_w = 20.0;
  double idle_dram_w = 4.0;
  /// Raw package counter range before energy_uj wraps (µJ). Default: Intel's 32-bit counter in
  /// 61.035 µJ units (ESU 14). DRAM uses the server parts' fixed 15.3 µJ unit and its own range
  /// (65712999613) unless this is set to something other than the default.
  std::uint64_t max_energy_range_uj = 262143328850ULL;
};

/// The default DRAM counter range (2^32 − 1 units of 15.3 µJ).
inline constexpr std::uint64_t kDramEnergyRangeUj = 65712999613ULL;

struct MachineSpec {
  std::string text;  ///< The spec as given (for ERG_SIMULATE).
  std::vector<GpuSpec> gpus;
  std::vector<CpuSpec> cpus;  ///< Default: one package with DRAM.
  bool psys = false;          ///< Add a psys zone (never summed into packages).
  /// A Jetson module's INA3221 rails under the generated hwmon tree (`jetson=orin`,
  /// `jetson=orin-nano`, `jetson=xavier`; JSON "jetson": "orin"). A Jetson spec without
  /// `cpus=` has no RAPL packages (an Arm module has none).
  std::optional<JetsonLayout> jetson;
  ModelSpec model;
};

/// Parses a spec string or JSON file. Errors name the bad token.
Result<MachineSpec> parse_spec(std::string_view text);

std::string_view to_string(ModelKind kind);
std::string_view to_string(TimestampMeaning meaning);
std::string_view to_string(RaplStart start);
std::string_view to_string(Schedule schedule);
std::string_view to_string(StampMode stamps);
std::string_view to_string(Increment increment);
std::string_view to_string(AverageMode average);

}  // namespace erg::sim
