#pragma once
/// The SKU table of the simulated machine: what each simulated GPU reports through NVML
/// (name, architecture, limits, clocks, sensor periods) and the parameters of its power,
/// throughput and sensor models. Plain data, no allocation on lookup, usable from the driver.
///
/// Steady-state model (sim/README.md says how the numbers were chosen and where they come from):
///   x = f / f_max                    (f: SM clock, MHz)
///   y = m / m_max                    (m: memory clock, MHz; 1 unless memory clocks are locked)
///   P(f, m, a) = idle_w + h(a) · (active_w · (1 − s + s·y) + dynamic_w · (ℓ·x + (1 − ℓ)·x³))
///   speed(f, m) = 1 / ((1 − μ) / x + μ / y)      (1 at f_max, m_max; μ = memory_bound)
///   work rate = a · speed                        (1 work unit = 1 s of a fully busy GPU at f_max)
/// with a the activity (0 idle … 1 fully busy), ℓ = linear_share, s = memory_active_share, and
///   h(a) = 0.93 · (1 − e^(−a/τ)) / (1 − e^(−0.93/τ)),  τ = kActivityTau
/// the power-relevant activity: 0 at idle, 0.93 at the calibration load's mean activity, concave
/// (a GPU busy 70 % of the time keeps its clocks, voltage and memory up between kernels and draws
/// most of its busy power). The power limiter keeps the power with the dynamic part raised by
/// peak_dynamic (short peaks above the mean) under the limit: a binding limit leaves the average
/// below it, as measured (sim/README.md, Calibration).

#include <cstdint>
#include <span>
#include <string_view>

namespace erg::sim {

enum class Vendor : unsigned char { kNvidia, kAmd };

struct Sku {
  std::string_view key;             ///< Short name used in specs ("A100", "RTX6000", "MI300X").
  std::string_view name;            ///< As nvmlDeviceGetName / amdsmi market_name reports it.
  Vendor vendor = Vendor::kNvidia;  ///< Which simulated driver library lists it.
  unsigned arch = 0;                ///< NVML_DEVICE_ARCH_* value (NVIDIA only).
  unsigned pci_device_id = 0;       ///< PCI device id (vendor 0x10de / 0x1002), as lspci -n shows it.
  // --- AMD ---------------------------------------------------------------------------------
  /// amdsmi_power_info_t fills current_socket_power (MI300 and newer); else average_socket_power
  /// (MI200 and older, a 1 s average).
  bool amd_current_power = false;
  /// One die of a dual-die card (MI250): the spec's `1xMI250` is two GPUs, this SKU's die and
  /// `second_die` after it. The card's physics and sensor live on the first die.
  std::string_view second_die;
  /// The second die of a dual-die card: no power of its own (its power is on the first die),
  /// not named in specs.
  bool secondary_die = false;
  bool ga100_or_older = false;        ///< nvmlDeviceGetPowerUsage is instantaneous (else a 1 s average).
  bool has_energy_counter = true;     ///< Volta and newer.
  bool has_average_power = false;     ///< NVML_FI_DEV_POWER_AVERAGE: Ampere except GA100, and newer.
  bool has_memory_power = false;      ///< Scope MEMORY of POWER_AVERAGE (H100 only, per Zeus).
  bool gpu_locked_clocks = true;      ///< Volta and newer.
  bool memory_locked_clocks = false;  ///< Ampere and newer.
  unsigned min_limit_w = 0, max_limit_w = 0, default_limit_w = 0;
  // --- sensors -------------------------------------------------------------------------------
  unsigned energy_period_ms = 100;  ///< Nominal energy-counter update period.
  unsigned power_period_ms = 100;   ///< Nominal instant-power update period.
  /// The sensor measures only the last `sampled_window_ms` of each update period and scales it
  /// to the whole period (A100/H100, Yang et al.); 0 = the whole period is measured.
  unsigned sampled_window_ms = 0;
  /// Instant power is the average over the last `instant_window_ms` of each power period.
  unsigned instant_window_ms = 20;
  // --- clocks --------------------------------------------------------------------------------
  // SM clock table: f_max down to f_min in steps of clock_step_mhz (floored to integers).
  unsigned max_sm_mhz = 0, min_sm_mhz = 0;
  double clock_step_mhz = 15.0;
  unsigned mem_clocks_mhz[2] = {0, 0};  ///< Supported memory clocks, descending; 0 = unused slot.
  /// Highest graphics clock supported at the second (idle) memory clock, as on GDDR boards.
  unsigned max_sm_at_low_mem_mhz = 0;
  // --- power and throughput -----------------------------------------------------------------
  double idle_w = 0;                 ///< Board power at activity 0.
  double active_w = 0;               ///< Clock-independent extra power of a busy GPU (memory, fabric, leakage).
  double dynamic_w = 0;              ///< Clock-dependent power of a fully busy GPU at f_max.
  double linear_share = 0.5;         ///< Share of dynamic power linear in the clock (the rest is cubic).
  double memory_bound = 0.4;         ///< Fraction of a fully busy step that does not scale with the SM clock.
  double memory_active_share = 0.4;  ///< Share of active_w that scales with the memory clock.
  double memory_power_share = 0.0;   ///< Share of board power reported in the MEMORY scope.
  /// Short peaks of the dynamic power above its mean, as a fraction of it: the limiter keeps
  /// idle + h(a)·(active + (1 + peak_dynamic)·dynamic) under the limit.
  double peak_dynamic = 0.0;
};

/// Time constant τ of the power-relevant activity h(a) (see the model above).
inline constexpr double kActivityTau = 0.25;
/// h(a): the activity the power model sees (0 → 0, 0.93 → 0.93, concave; a in 0..1).
double power_activity(double a);

/// The training-like load the SKU parameters are calibrated against (sim/README.md): busy
/// (activity 1) for 80 % of each step, at 65 % for the other 20 % (data loading, optimizer step,
/// communication). Its mean activity is what the power-limit controller sees.
struct CalibrationLoad {
  static constexpr double kUtil = 1.0;
  static constexpr double kRippleDepth = 0.35;
  static constexpr double kRippleDuty = 0.2;
  static constexpr double kStepMs = 230.0;
  static constexpr double kMeanActivity = kUtil * (1.0 - kRippleDepth * kRippleDuty);  // 0.93
};

/// Every SKU the simulator knows, in a stable order.
std::span<const Sku> all_skus();
/// Case-insensitive lookup by key or NVML name, ignoring spaces, '-' and '_'
/// ("a100", "A100", "rtx6000", "RTX 6000", "Quadro RTX 6000"). nullptr if unknown. Secondary
/// dies are not found (a spec names the card).
const Sku* lookup_sku(std::string_view name);
/// Exact lookup by key, secondary dies included (for the machine's own state). nullptr if unknown.
const Sku* sku_by_key(std::string_view key);
/// "A100, A40, A10, H100, P100, RTX6000, T4, V100, MI210, MI250, MI300X" (for error messages).
std::string_view known_sku_list();

/// Number of entries in the SM clock table (descending, index 0 = f_max).
unsigned sm_clock_count(const Sku& sku);
/// Entry `i` of the SM clock table, MHz.
unsigned sm_clock_mhz(const Sku& sku, unsigned i);
/// Number of supported memory clocks.
unsigned mem_clock_count(const Sku& sku);
/// Number of SM clocks supported at memory clock `mem_mhz` (0 if it is not a supported one):
/// the whole table at the highest memory clock, the clocks ≤ max_sm_at_low_mem_mhz at the other.
unsigned sm_clock_count_at(const Sku& sku, unsigned mem_mhz);
/// The clock table entry nearest to `mhz` (ties go down).
unsigned nearest_sm_clock_mhz(const Sku& sku, double mhz);

/// Board power in W at SM clock `mhz`, activity `u` (0..1) and memory-clock ratio `mem_ratio`.
double model_power_w(const Sku& sku, double mhz, double u, double mem_ratio = 1.0);
/// The power the limiter holds under the limit: model_power_w with the dynamic part's peaks.
double model_limiter_power_w(const Sku& sku, double mhz, double u, double mem_ratio = 1.0);
/// Relative speed (1 at f_max and the highest memory clock).
double model_speed(const Sku& sku, double mhz, double mem_ratio = 1.0);
/// The steady clock under a power limit: the highest table clock in [floor_mhz, cap_mhz] whose
/// limiter power (model_limiter_power_w) at activity `u` is within `limit_w` (the lowest such clock if none is). At u
/// == 0 the GPU idles at the lowest clock it may use.
unsigned model_clock_mhz(const Sku& sku, double u, double limit_w, unsigned cap_mhz, double mem_ratio = 1.0,
                         unsigned floor_mhz = 0);

}  // namespace erg::sim
