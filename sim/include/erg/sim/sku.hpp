#pragma once
/// The SKU table of the simulated machine: what each simulated GPU reports through NVML
/// (name, architecture, limits, clocks, sensor periods) and the parameters of its power and
/// throughput model. Plain data, no allocation on lookup, usable from the simulated driver.
///
/// Model (see sim/README.md for how the numbers were chosen):
///   x = f / f_max                                  (f: effective SM clock, MHz)
///   P(f, u) = idle_w + u * (active_w + dynamic_w * (linear_share * x + (1 - linear_share) * x^3))
///   speed(f) = 1 / ((1 - memory_bound) / x + memory_bound)   (1 at f_max)
///   work rate = u * speed(f)   (1 work unit = 1 s of a fully busy GPU at f_max)

#include <cstdint>
#include <span>
#include <string_view>

namespace erg::sim {

struct Sku {
  std::string_view key;               ///< Short name used in specs ("A100", "RTX6000").
  std::string_view name;              ///< As nvmlDeviceGetName reports it.
  unsigned arch = 0;                  ///< NVML_DEVICE_ARCH_* value.
  unsigned pci_device_id = 0;         ///< PCI device id (vendor 0x10de), as lspci -n shows it.
  bool ga100_or_older = false;        ///< nvmlDeviceGetPowerUsage is instantaneous (else a 1 s average).
  bool has_energy_counter = true;     ///< Volta and newer.
  bool has_average_power = false;     ///< NVML_FI_DEV_POWER_AVERAGE: Ampere except GA100, and newer.
  bool has_memory_power = false;      ///< Scope MEMORY of POWER_AVERAGE (H100 only, per Zeus).
  bool gpu_locked_clocks = true;      ///< Volta and newer.
  bool memory_locked_clocks = false;  ///< Ampere and newer.
  unsigned min_limit_w = 0, max_limit_w = 0, default_limit_w = 0;
  unsigned energy_period_ms = 100;  ///< Energy counter update period.
  unsigned power_period_ms = 100;   ///< Instant power update period.
  // SM clock table: f_max down to f_min in steps of clock_step_mhz (floored to integers).
  unsigned max_sm_mhz = 0, min_sm_mhz = 0;
  double clock_step_mhz = 15.0;
  unsigned mem_clocks_mhz[2] = {0, 0};  ///< Supported memory clocks, descending; 0 = unused slot.
  // Power model.
  double idle_w = 0;                ///< Board power at utilization 0.
  double active_w = 0;              ///< Clock-independent extra power of a busy GPU (memory, fabric, leakage).
  double dynamic_w = 0;             ///< Clock-dependent power of a fully busy GPU at f_max.
  double linear_share = 0.5;        ///< Share of dynamic power linear in the clock (the rest is cubic).
  double memory_bound = 0.4;        ///< Fraction of a fully busy step that does not scale with the clock.
  double memory_power_share = 0.0;  ///< Share of board power reported in the MEMORY scope.
};

/// Every SKU the simulator knows, in a stable order.
std::span<const Sku> all_skus();
/// Case-insensitive lookup by key or NVML name, ignoring spaces, '-' and '_'
/// ("a100", "A100", "rtx6000", "RTX 6000", "Quadro RTX 6000"). nullptr if unknown.
const Sku* lookup_sku(std::string_view name);
/// "A100, A40, H100, P100, RTX6000, V100" (for error messages).
std::string_view known_sku_list();

/// Number of entries in the SM clock table (descending, index 0 = f_max).
unsigned sm_clock_count(const Sku& sku);
/// Entry `i` of the SM clock table, MHz.
unsigned sm_clock_mhz(const Sku& sku, unsigned i);
/// Number of supported memory clocks.
unsigned mem_clock_count(const Sku& sku);

/// Board power in W of the model at SM clock `mhz` and utilization `u` (0..1).
double model_power_w(const Sku& sku, double mhz, double u);
/// Relative speed (1 at f_max) at SM clock `mhz`.
double model_speed(const Sku& sku, double mhz);
/// The clock the GPU runs at: the highest table clock ≤ `cap_mhz` whose power at `u` is within
/// `limit_w` (the lowest table clock if none is). At u == 0 the GPU idles at the lowest clock.
unsigned model_clock_mhz(const Sku& sku, double u, double limit_w, unsigned cap_mhz);

}  // namespace erg::sim
