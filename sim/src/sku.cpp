#include "erg/sim/sku.hpp"

#include <array>
#include <cctype>
#include <cmath>

namespace erg::sim {
namespace {

// NVML_DEVICE_ARCH_* values (see backends/nvml/include/erg/backends/nvml/nvml_abi.h).
constexpr unsigned kPascal = 4, kVolta = 5, kTuring = 6, kAmpere = 7, kHopper = 9;

constexpr Sku make(std::string_view key, std::string_view name, unsigned arch) {
  Sku s;
  s.key = key;
  s.name = name;
  s.arch = arch;
  return s;
}

// The power parameters of V100, A40, P100 and RTX 6000 were fitted (sim/README.md) so that a GPU
// running the calibration load (CalibrationLoad: mean activity 0.93) reproduces the median slowdown
// and energy curves of gpu-model-calibration.md: the fit was done at mean activity 1 and active_w
// and dynamic_w divided by 0.93, which leaves every steady-state curve unchanged. A100 and H100
// use A40-like shapes scaled so that a compute-heavy load demands more than the default limit
// (the cap binds, as it does on those parts). idle_w + active_w is the clock-independent power of a
// fully busy GPU; idle_w alone is a plausible idle board power.
constexpr double kA = CalibrationLoad::kMeanActivity;

constexpr std::array<Sku, 12> build() {
  std::array<Sku, 12> t{};
  {
    Sku s = make("V100", "Tesla V100-PCIE-32GB", kVolta);
    s.pci_device_id = 0x1db6;
    s.ga100_or_older = true;
    s.min_limit_w = 100, s.max_limit_w = 250, s.default_limit_w = 250;
    s.power_period_ms = 20;  // pre-Ampere boards refresh instant power every ~20 ms (Lang & Rünger)
    s.instant_window_ms = 20;
    s.max_sm_mhz = 1380, s.min_sm_mhz = 135, s.clock_step_mhz = 7.5;
    s.mem_clocks_mhz[0] = 877;
    s.idle_w = 31.0, s.active_w = 37.2 / kA, s.dynamic_w = 111.4 / kA, s.linear_share = 0.665;
    s.memory_bound = 0.772, s.peak_dynamic = 0.30;
    t[0] = s;
  }
  {
    Sku s = make("A100", "NVIDIA A100-SXM4-80GB", kAmpere);
    s.pci_device_id = 0x20b2;
    s.ga100_or_older = true;  // GA100: instant power, no POWER_AVERAGE field
    s.memory_locked_clocks = true;
    s.min_limit_w = 100, s.max_limit_w = 400, s.default_limit_w = 400;
    s.sampled_window_ms = 25, s.instant_window_ms = 25;  // 25 % of each 100 ms period (Yang et al.)
    s.max_sm_mhz = 1410, s.min_sm_mhz = 210, s.clock_step_mhz = 15;
    s.mem_clocks_mhz[0] = 1593;
    s.idle_w = 50.0, s.active_w = 14.0 / kA, s.dynamic_w = 370.0 / kA, s.linear_share = 0.6, s.memory_bound = 0.45;
    t[1] = s;
  }
  {
    Sku s = make("H100", "NVIDIA H100 80GB HBM3", kHopper);
    s.pci_device_id = 0x2330;
    s.has_average_power = true, s.has_memory_power = true, s.memory_locked_clocks = true;
    s.min_limit_w = 200, s.max_limit_w = 700, s.default_limit_w = 700;
    s.sampled_window_ms = 25, s.instant_window_ms = 25;  // as A100 (Yang et al.)
    s.max_sm_mhz = 1980, s.min_sm_mhz = 210, s.clock_step_mhz = 15;
    s.mem_clocks_mhz[0] = 2619;
    s.idle_w = 70.0, s.active_w = 60.0 / kA, s.dynamic_w = 640.0 / kA, s.linear_share = 0.66;
    s.memory_bound = 0.45;
    s.memory_power_share = 0.12;  // HBM3 share of board power, a plausible round figure
    t[2] = s;
  }
  {
    Sku s = make("A40", "NVIDIA A40", kAmpere);
    s.pci_device_id = 0x2235;
    s.has_average_power = true, s.memory_locked_clocks = true;
    s.min_limit_w = 100, s.max_limit_w = 300, s.default_limit_w = 300;
    s.max_sm_mhz = 1740, s.min_sm_mhz = 210, s.clock_step_mhz = 15;
    s.mem_clocks_mhz[0] = 7251, s.mem_clocks_mhz[1] = 405;
    s.max_sm_at_low_mem_mhz = 645;
    s.idle_w = 39.4, s.active_w = 64.4 / kA, s.dynamic_w = 116.0 / kA, s.linear_share = 0.84;
    s.memory_bound = 0.761, s.peak_dynamic = 0.116;
    t[3] = s;
  }
  {
    Sku s = make("RTX6000", "Quadro RTX 6000", kTuring);
    s.pci_device_id = 0x1e30;
    s.ga100_or_older = true;
    s.min_limit_w = 100, s.max_limit_w = 260, s.default_limit_w = 260;
    s.power_period_ms = 20;
    s.instant_window_ms = 20;
    s.max_sm_mhz = 2100, s.min_sm_mhz = 300, s.clock_step_mhz = 15;
    s.mem_clocks_mhz[0] = 7000, s.mem_clocks_mhz[1] = 405;
    s.max_sm_at_low_mem_mhz = 645;
    s.idle_w = 28.1, s.active_w = 56.7 / kA, s.dynamic_w = 110.8 / kA, s.linear_share = 0.363;
    s.memory_bound = 0.667, s.peak_dynamic = 0.277;
    t[4] = s;
  }
  {
    Sku s = make("P100", "Tesla P100-PCIE-16GB", kPascal);
    s.pci_device_id = 0x15f8;
    s.ga100_or_older = true;
    s.has_energy_counter = false;  // nvmlDeviceGetTotalEnergyConsumption is Volta+
    s.gpu_locked_clocks = false;   // locked clocks are Volta+
    s.min_limit_w = 125, s.max_limit_w = 250, s.default_limit_w = 250;
    s.power_period_ms = 20;
    s.instant_window_ms = 20;
    s.max_sm_mhz = 1328, s.min_sm_mhz = 544, s.clock_step_mhz = 13;
    s.mem_clocks_mhz[0] = 715;
    s.idle_w = 31.7, s.active_w = 16.4 / kA, s.dynamic_w = 102.1 / kA, s.linear_share = 0.33;
    s.memory_bound = 0.573, s.peak_dynamic = 0.10;
    t[5] = s;
  }
  // --- AMD Instinct ---------------------------------------------------------------------------
  // Limits, clocks and TBP from AMD's product pages (MI210: 300 W TBP, 1700 MHz peak engine
  // clock, HBM2e at 1.6 GHz; MI250: 560 W TBP per OAM card of two dies, 1700 MHz, 1.6 GHz;
  // MI300X: 750 W TBP, 2100 MHz, HBM3 at 5.2 Gbps = 1300 MHz). Minimum caps and idle powers are
  // plausible round figures, not published ones (MI200 idle "Average: 94" W in ROCm/pytorch PR
  // #1457). The power shapes are the A100's, scaled so that a compute-heavy load demands more
  // than the default cap, as it does on these parts. Sensor periods: AMD documents none; the
  // driver caches reads for 1 ms (ROCm legacy-rocm-build #1649); 10 ms is a stand-in.
  {
    Sku s = make("MI210", "AMD Instinct MI210", 0);
    s.vendor = Vendor::kAmd;
    s.pci_device_id = 0x740f;
    s.min_limit_w = 100, s.max_limit_w = 300, s.default_limit_w = 300;
    s.energy_period_ms = 10, s.power_period_ms = 10, s.instant_window_ms = 10;
    s.gpu_locked_clocks = true, s.memory_locked_clocks = true;
    s.max_sm_mhz = 1700, s.min_sm_mhz = 500, s.clock_step_mhz = 25;
    s.mem_clocks_mhz[0] = 1600;
    s.idle_w = 40.0, s.active_w = 50.0 / kA, s.dynamic_w = 250.0 / kA, s.linear_share = 0.66, s.memory_bound = 0.45;
    t[6] = s;
  }
  {
    Sku s = make("MI250", "AMD Instinct MI250", 0);
    s.vendor = Vendor::kAmd;
    s.pci_device_id = 0x740c;
    s.second_die = "MI250-die1";
    s.min_limit_w = 200, s.max_limit_w = 560, s.default_limit_w = 560;  // the card's cap
    s.energy_period_ms = 10, s.power_period_ms = 10, s.instant_window_ms = 10;
    s.gpu_locked_clocks = true, s.memory_locked_clocks = true;
    s.max_sm_mhz = 1700, s.min_sm_mhz = 500, s.clock_step_mhz = 25;
    s.mem_clocks_mhz[0] = 1600;
    // The whole card (both dies): its sensor is the first die's.
    s.idle_w = 90.0, s.active_w = 100.0 / kA, s.dynamic_w = 450.0 / kA, s.linear_share = 0.66, s.memory_bound = 0.45;
    t[7] = s;
  }
  {
    Sku s = t[7];
    s.key = "MI250-die1";
    s.second_die = {};
    s.secondary_die = true;
    s.idle_w = 0.0, s.active_w = 0.0, s.dynamic_w = 0.0;  // its power is the card's, on die 0
    t[8] = s;
  }
  {
    Sku s = make("MI300X", "AMD Instinct MI300X", 0);
    s.vendor = Vendor::kAmd;
    s.pci_device_id = 0x74a1;
    s.amd_current_power = true;
    s.min_limit_w = 200, s.max_limit_w = 750, s.default_limit_w = 750;
    s.energy_period_ms = 10, s.power_period_ms = 10, s.instant_window_ms = 10;
    s.gpu_locked_clocks = true, s.memory_locked_clocks = true;
    s.max_sm_mhz = 2100, s.min_sm_mhz = 500, s.clock_step_mhz = 25;
    s.mem_clocks_mhz[0] = 1300;
    s.idle_w = 140.0, s.active_w = 120.0 / kA, s.dynamic_w = 600.0 / kA, s.linear_share = 0.66;
    s.memory_bound = 0.45;
    t[9] = s;
  }
  // --- the inference/mixed-fleet parts of Zeus² (issue 21): A10 and T4 -----------------------
  // Limits, clocks and PCI ids from NVIDIA's product briefs and nvidia-smi -q as commonly
  // reported: A10 (GA102, Ampere) 150 W TDP, limits 100–150 W, boost 1695 MHz, GDDR6 at 6251 MHz;
  // T4 (TU104, Turing) 70 W TDP, limits 60–70 W, boost 1590 MHz, GDDR6 at 5001 MHz. The lowest
  // clocks, idle powers and the power shapes are assumptions: A10 takes A40's shape (the same
  // GA102 die: ℓ, μ) and T4 RTX 6000's (Turing: ℓ, μ), scaled so that a training load demands
  // more than the maximum limit (171 W and 90 W at f_max): both boards are known to run
  // power-capped under load. Not calibrated against traces (there are none for them).
  {
    Sku s = make("A10", "NVIDIA A10", kAmpere);
    s.pci_device_id = 0x2236;
    s.has_average_power = true, s.memory_locked_clocks = true;
    s.min_limit_w = 100, s.max_limit_w = 150, s.default_limit_w = 150;
    s.max_sm_mhz = 1695, s.min_sm_mhz = 210, s.clock_step_mhz = 15;
    s.mem_clocks_mhz[0] = 6251, s.mem_clocks_mhz[1] = 405;
    s.max_sm_at_low_mem_mhz = 645;
    s.idle_w = 16.0, s.active_w = 30.0 / kA, s.dynamic_w = 125.0 / kA, s.linear_share = 0.761;
    s.memory_bound = 0.487;
    t[10] = s;
  }
  {
    Sku s = make("T4", "Tesla T4", kTuring);
    s.pci_device_id = 0x1eb8;
    s.ga100_or_older = true;
    s.min_limit_w = 60, s.max_limit_w = 70, s.default_limit_w = 70;
    s.power_period_ms = 20;  // pre-Ampere: instant power every ~20 ms, as V100 and RTX 6000
    s.instant_window_ms = 20;
    s.max_sm_mhz = 1590, s.min_sm_mhz = 300, s.clock_step_mhz = 15;
    s.mem_clocks_mhz[0] = 5001, s.mem_clocks_mhz[1] = 405;
    s.max_sm_at_low_mem_mhz = 645;
    s.idle_w = 10.0, s.active_w = 18.0 / kA, s.dynamic_w = 62.0 / kA, s.linear_share = 0.501;
    s.memory_bound = 0.727;
    t[11] = s;
  }
  return t;
}

// Constant-initialized (no guard variable: the simulated driver links no C++ runtime).
constexpr std::array<Sku, 12> kTable = build();
const std::array<Sku, 12>& table() { return kTable; }

// Lower-case letters and digits only: "RTX 6000" == "rtx6000" == "Rtx-6000".
bool same_key(std::string_view a, std::string_view b) {
  auto next = [](std::string_view s, std::size_t& i) -> int {
    while (i < s.size() && !std::isalnum(static_cast<unsigned char>(s[i]))) ++i;
    return i < s.size() ? std::tolower(static_cast<unsigned char>(s[i++])) : -1;
  };
  std::size_t i = 0, j = 0;
  for (;;) {
    int x = next(a, i), y = next(b, j);
    if (x != y) return false;
    if (x < 0) return true;
  }
}

}  // namespace

std::span<const Sku> all_skus() { return table(); }

const Sku* lookup_sku(std::string_view name) {
  for (const Sku& s : table())
    if (!s.secondary_die && (same_key(name, s.key) || same_key(name, s.name))) return &s;
  return nullptr;
}

const Sku* sku_by_key(std::string_view key) {
  for (const Sku& s : table())
    if (s.key == key) return &s;
  return nullptr;
}

std::string_view known_sku_list() { return "A100, A40, A10, H100, P100, RTX6000, T4, V100, MI210, MI250, MI300X"; }

unsigned sm_clock_count(const Sku& sku) {
  return static_cast<unsigned>(std::floor((sku.max_sm_mhz - sku.min_sm_mhz) / sku.clock_step_mhz)) + 1;
}

unsigned sm_clock_mhz(const Sku& sku, unsigned i) {
  return static_cast<unsigned>(std::floor(sku.max_sm_mhz - i * sku.clock_step_mhz));
}

unsigned mem_clock_count(const Sku& sku) { return sku.mem_clocks_mhz[1] != 0 ? 2 : 1; }

unsigned sm_clock_count_at(const Sku& sku, unsigned mem_mhz) {
  if (mem_mhz == sku.mem_clocks_mhz[0]) return sm_clock_count(sku);
  if (mem_clock_count(sku) < 2 || mem_mhz != sku.mem_clocks_mhz[1]) return 0;
  // The table from the first clock ≤ max_sm_at_low_mem_mhz down: the count of the clocks below it.
  const unsigned n = sm_clock_count(sku);
  unsigned first = 0;
  while (first < n && sm_clock_mhz(sku, first) > sku.max_sm_at_low_mem_mhz) ++first;
  return n - first;
}

unsigned nearest_sm_clock_mhz(const Sku& sku, double mhz) {
  const unsigned n = sm_clock_count(sku);
  unsigned best = sm_clock_mhz(sku, 0);
  double best_d = 1e18;
  for (unsigned i = 0; i < n; ++i) {
    const double d = std::abs(sm_clock_mhz(sku, i) - mhz);
    if (d <= best_d) best_d = d, best = sm_clock_mhz(sku, i);  // later (lower) entries win ties
  }
  return best;
}

double power_activity(double a) {
  if (a <= 0.0) return 0.0;
  return CalibrationLoad::kMeanActivity * (1.0 - std::exp(-a / kActivityTau)) /
         (1.0 - std::exp(-CalibrationLoad::kMeanActivity / kActivityTau));
}

namespace {
double power_w(const Sku& sku, double mhz, double u, double mem_ratio, double dynamic_scale) {
  const double x = mhz / sku.max_sm_mhz;
  const double dyn = sku.dynamic_w * (sku.linear_share * x + (1.0 - sku.linear_share) * x * x * x);
  const double act = sku.active_w * (1.0 - sku.memory_active_share + sku.memory_active_share * mem_ratio);
  return sku.idle_w + power_activity(u) * (act + dynamic_scale * dyn);
}
}  // namespace

double model_power_w(const Sku& sku, double mhz, double u, double mem_ratio) {
  return power_w(sku, mhz, u, mem_ratio, 1.0);
}

double model_limiter_power_w(const Sku& sku, double mhz, double u, double mem_ratio) {
  return power_w(sku, mhz, u, mem_ratio, 1.0 + sku.peak_dynamic);
}

double model_speed(const Sku& sku, double mhz, double mem_ratio) {
  const double x = mhz / sku.max_sm_mhz;
  return 1.0 / ((1.0 - sku.memory_bound) / x + sku.memory_bound / mem_ratio);
}

unsigned model_clock_mhz(const Sku& sku, double u, double limit_w, unsigned cap_mhz, double mem_ratio,
                         unsigned floor_mhz) {
  const unsigned n = sm_clock_count(sku);
  unsigned lowest = sm_clock_mhz(sku, n - 1);
  for (unsigned i = n; i-- > 0;)
    if (sm_clock_mhz(sku, i) >= floor_mhz && sm_clock_mhz(sku, i) <= cap_mhz) {
      lowest = sm_clock_mhz(sku, i);
      break;
    }
  if (u <= 0.0) return lowest;
  for (unsigned i = 0; i < n; ++i) {
    const unsigned f = sm_clock_mhz(sku, i);
    if (f > cap_mhz || f < floor_mhz) continue;
    if (model_limiter_power_w(sku, f, u, mem_ratio) <= limit_w) return f;
  }
  return lowest;
}

}  // namespace erg::sim
