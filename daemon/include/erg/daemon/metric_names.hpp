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
/// Gauge, 1/0: the GPU answered the last scrape's reads. 0 (lost, failing): its energy, power
/// and limit series are withdrawn until it answers again (no frozen values). Labels: index, uuid,
/// name.
inline constexpr const char* kGpuUp = "erg_gpu_up";
/// Counter: times the GPU's energy counter went back (a driver reload restarting it, or a step
/// back); the energy metric never goes back with it. Labels: index, uuid, name.
inline constexpr const char* kGpuCounterAnomalies = "erg_gpu_energy_counter_anomalies_total";
/// Gauge, 1/0: the CPU package's RAPL zones answered the last scrape. Labels: index, name.
inline constexpr const char* kCpuUp = "erg_cpu_up";
/// Counter, J: CPU package energy (RAPL, wraps compensated). Labels: index, name.
inline constexpr const char* kCpuEnergy = "erg_cpu_energy_joules_total";
/// Counter, J: DRAM energy of a CPU package (RAPL). Labels: index, name.
inline constexpr const char* kDramEnergy = "erg_dram_energy_joules_total";

}  // namespace erg::daemon::metrics
