#pragma once
/// Every metric ergd exports on /metrics, in one place (Prometheus naming: unit suffixes,
/// `_total` for counters).

namespace erg::daemon::metrics {

/// Counter, J: GPU energy from the driver's cumulative counter. Labels: index, uuid, name.
inline constexpr const char* kGpuEnergy = "erg_gpu_energy_joules_total";
/// Gauge, W: instantaneous GPU board power. Labels: index, uuid, name.
inline constexpr const char* kGpuPower = "erg_gpu_power_watts";
/// Gauge, W: current GPU power limit. Labels: index, uuid, name.
inline constexpr const char* kGpuPowerLimit = "erg_gpu_power_limit_watts";
/// Counter, J: CPU package energy (RAPL, wraps compensated). Labels: index, name.
inline constexpr const char* kCpuEnergy = "erg_cpu_energy_joules_total";
/// Counter, J: DRAM energy of a CPU package (RAPL). Labels: index, name.
inline constexpr const char* kDramEnergy = "erg_dram_energy_joules_total";

}  // namespace erg::daemon::metrics
