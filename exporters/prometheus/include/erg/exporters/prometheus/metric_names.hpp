#pragma once
/// Every metric erg exports to Prometheus, pulled (ergd's /metrics, `erg exporter`) or pushed
/// (EnergyHistogram, EnergyCumulativeCounter, PowerGauge), in one place. Pulled names follow
/// Prometheus naming (unit suffixes, `_total` for counters); pushed names are Zeus's, so Zeus's
/// dashboards keep working.
///
/// Energy counter semantics (every `*_energy_joules_total`): joules the device consumed since the
/// exporter first read it (so every energy series starts at 0), never decreasing: RAPL wraps are
/// compensated by the RAPL backend, and a GPU driver counter that restarts or steps back is
/// bridged (and counted in erg_gpu_energy_anomalies_total). While a device does not
/// answer, its series are withdrawn (no frozen value); when it answers again they continue from
/// where they were (the energy drawn meanwhile included), so rate() and increase() stay right.

namespace erg::prom::names {

// ---- pulled: device metrics ------------------------------------------------------------------

/// Counter, J: GPU energy (semantics above). Labels: index, uuid, name, node, user labels.
inline constexpr const char* kGpuEnergy = "erg_gpu_energy_joules_total";
/// Gauge, W: GPU power by `domain` (device_instant, device_average, memory_average).
inline constexpr const char* kGpuPower = "erg_gpu_power_watts";
/// Gauge, W: current GPU power limit.
inline constexpr const char* kGpuPowerLimit = "erg_gpu_power_limit_watts";
/// Gauge, °C: GPU core temperature (GPUs that report it).
inline constexpr const char* kGpuTemperature = "erg_gpu_temperature_celsius";
/// Gauge, 1/0: the GPU answered this scrape's reads. 0 (lost, failing after retries): its energy,
/// power, limit and temperature series are withdrawn until it answers again.
inline constexpr const char* kGpuUp = "erg_gpu_up";
/// Counter: times the GPU's energy counter went back (a driver reload restarting it, or a step
/// back); the energy metric never goes back with it.
inline constexpr const char* kGpuCounterAnomalies = "erg_gpu_energy_anomalies_total";
/// Counter, J: CPU package energy, RAPL (semantics above). Labels: index, name, node, user labels.
inline constexpr const char* kCpuEnergy = "erg_cpu_energy_joules_total";
/// Counter, J: DRAM energy of a CPU package, RAPL (packages with a DRAM zone).
inline constexpr const char* kDramEnergy = "erg_dram_energy_joules_total";
/// Gauge, 1/0: the CPU package's RAPL zones answered this scrape.
inline constexpr const char* kCpuUp = "erg_cpu_up";
/// Counter, J: energy of one SoC power rail (Jetson INA3221), integrated from power samples by
/// the SoC's backend (semantics above). Labels: index, name (the SoC's), rail (the sensor's
/// label), kind (cpu, gpu, cpu_gpu, total, other), node, user labels. A `total` rail is the
/// module's input and includes the others: do not add it to them.
inline constexpr const char* kSocEnergy = "erg_soc_energy_joules_total";
/// Gauge, W: power of one SoC rail now (one reading). Labels as kSocEnergy.
inline constexpr const char* kSocPower = "erg_soc_power_watts";
/// Gauge, 1/0: the SoC's rails answered this scrape. 0: its energy and power series withdrawn.
inline constexpr const char* kSocUp = "erg_soc_up";
/// Gauge, always 1: what is exporting. Labels: version, exporter (ergd or erg-exporter), node,
/// simulated ("true" on a simulated machine), user labels.
inline constexpr const char* kInfo = "erg_info";

// ---- pulled: per-process attribution (CollectorOptions::process_metrics; docs/attribution.md) ----
// Labels of a process series: the GPU's (index, name, uuid), pid, comm (/proc/<pid>/comm),
// container (its 64-hex id, "" when none), pod (the Kubernetes pod UID, "" when none), node, user
// labels. A process's series appear at the first scrape that sees it and are gone from the first
// scrape after it left the driver's process table; its energy then moves into
// kGpuExitedProcessesEnergy. Processes beyond CollectorOptions::max_process_series (over all GPUs)
// are summed into one series per GPU with pid="other" (comm, container and pod ""). Every energy
// here counts from the exporter's first scrape and never decreases; per GPU
//   Σ processes + other + exited + idle + unattributed = part="measured"
// at every scrape (to rounding).

/// Counter, J: energy attributed to the process since the exporter first saw it.
inline constexpr const char* kGpuProcessEnergy = "erg_gpu_process_energy_joules_total";
/// Gauge, J: |kGpuProcessEnergy − the truth| ≤ this, under the model (docs/attribution.md).
inline constexpr const char* kGpuProcessEnergyBound = "erg_gpu_process_energy_bound_joules";
/// Gauge, W: power attributed to the process over the latest attributed interval: the one between
/// the two scrapes before this one (measure::ProcessTracker attributes an interval one scrape late,
/// once the driver has sampled past its end).
inline constexpr const char* kGpuProcessPower = "erg_gpu_process_power_watts";
/// Gauge, W: the bound of kGpuProcessPower.
inline constexpr const char* kGpuProcessPowerBound = "erg_gpu_process_power_bound_watts";
/// Counter, J: energy of the processes that had series of their own and exited, the last interval
/// of every process that exited, and processes that ran only between two scrapes. Labels: the GPU's.
inline constexpr const char* kGpuExitedProcessesEnergy = "erg_gpu_exited_processes_energy_joules_total";
/// Counter, J: the attribution's parts by `part`: measured (the counter's energy since the first
/// scrape), idle (the idle model's), unattributed (no process was seen busy; all of it on a GPU
/// that is not attributable). Labels: the GPU's, part.
inline constexpr const char* kGpuAttributionEnergy = "erg_gpu_attribution_energy_joules_total";
/// Gauge, J: the bound of each part by `part`: measured, idle, unattributed, exited, other.
inline constexpr const char* kGpuAttributionBound = "erg_gpu_attribution_bound_joules";
/// Gauge, 1/0: the GPU's energy can be split among its processes (0 on a MIG GPU: no process
/// series; its energy counts as unattributed, never 0 J per process).
inline constexpr const char* kGpuAttributable = "erg_gpu_attributable";
/// Counter, J: energy attributed to a Kubernetes pod's processes on the GPU (all of them, those in
/// "other" included, up to each one's last interval) while the pod has a process on it. Labels:
/// the GPU's, pod (UID). The series goes when the pod has no process on the GPU left (a pod that
/// comes back starts again at 0: a counter reset). At most max_process_series pods over all GPUs.
inline constexpr const char* kGpuPodEnergy = "erg_gpu_pod_energy_joules_total";
/// Gauge, J: the bound of kGpuPodEnergy (Σ of its processes' bounds).
inline constexpr const char* kGpuPodEnergyBound = "erg_gpu_pod_energy_bound_joules";
/// Gauge: processes with series of their own now, and the cap (no labels but node, user labels).
inline constexpr const char* kProcessSeries = "erg_exporter_process_series";
inline constexpr const char* kProcessSeriesLimit = "erg_exporter_process_series_limit";

// ---- pulled: the exporter's own metrics ----------------------------------------------------------

/// Gauge, s: how long this scrape took to read every device.
inline constexpr const char* kScrapeDuration = "erg_exporter_scrape_duration_seconds";
/// Counter: device reads that failed (after the retries a transient error gets). Labels: device
/// (gpu, cpu, soc), index.
inline constexpr const char* kReadErrors = "erg_exporter_read_errors_total";

// ---- pushed: Zeus's names (reference/zeus.md §7), labels window and index -------------------------

/// Histogram (EnergyHistogram) or counter (EnergyCumulativeCounter), J.
inline constexpr const char* kPushGpuEnergy = "energy_monitor_gpu_energy_joules";
inline constexpr const char* kPushCpuEnergy = "energy_monitor_cpu_energy_joules";
inline constexpr const char* kPushDramEnergy = "energy_monitor_dram_energy_joules";
/// Gauge (PowerGauge), W.
inline constexpr const char* kPushGpuPower = "power_monitor_gpu_power_watts";

}  // namespace erg::prom::names
