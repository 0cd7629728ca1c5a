#pragma once
/// Device interfaces. Every hardware backend (NVML, RAPL, AMD SMI, Jetson and the ergd
/// client) implements these, and one typed conformance suite (tests/conformance) runs over each.
///
/// Conventions: raw integers never cross this interface; values carry unit types. Anything a
/// backend does not know is std::nullopt, never 0. Unless stated otherwise every method is
/// thread-safe (vendor libraries such as NVML are thread-safe; sysfs readers lock internally).

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "erg/core/result.hpp"
#include "erg/core/units.hpp"

namespace erg {

enum class GpuVendor { kNvidia, kAmd };
std::string_view to_string(GpuVendor vendor);

/// Power readings a GPU can give.
enum class PowerDomain {
  kDeviceInstant,  ///< Instantaneous board power.
  kDeviceAverage,  ///< Board power averaged over about 1 s by the driver.
  kMemoryAverage,  ///< Memory power averaged over about 1 s.
};
/// Zeus's names: "device_instant", "device_average", "memory_average".
std::string_view to_string(PowerDomain domain);
Result<PowerDomain> parse_power_domain(std::string_view name);

/// What a GPU can do, probed once at discovery. Describes, never promises: a call may still
/// fail later (e.g. GPU lost).
struct GpuCapabilities {
  bool energy_counter = false;             ///< Cumulative energy counter (NVIDIA Volta and newer).
  std::vector<PowerDomain> power_domains;  ///< Readable power domains.
  bool power_limit = false;                ///< Power limit can be read.
  bool clocks = false;                     ///< Supported clocks can be listed.
  bool persistence_mode = false;           ///< Persistence mode can be read.
  bool temperature = false;                ///< temperature() can be read.
  /// default_power_limit() can be read; reset_power_limit() restores it. Without it (ergd's
  /// API has no such call) default_power_limit() is NotSupported and reset_power_limit() sets
  /// the maximum limit, as zeusd's clients do.
  bool default_power_limit = false;
  /// energy_reading() and power_reading() carry `updated_at`: the driver's time for the value
  /// (NVML field values: the sensor's update time, or on some drivers the time of the query; a
  /// caller tells them apart, see measure/CounterHistory). False where the source gives no time
  /// (ergd's HTTP API): `updated_at` is then always nullopt, and readings are timed by the caller.
  /// A backend that wraps another (the client's HybridGpu) reports what it forwards.
  bool reading_timestamps = false;
  /// Setting limits/clocks/persistence needs privilege (root or CAP_SYS_ADMIN) on this backend.
  bool setters_need_privilege = true;
  /// running_processes() answers (it may still fail later, e.g. GPU lost).
  bool running_processes = false;
  /// process_utilization() answered at discovery: false on MIG-enabled GPUs, before Maxwell, and
  /// where the backend has no such call. MIG turned on later makes the call NotSupported then.
  bool process_utilization = false;
  /// How often the energy counter changes; nullopt if unknown.
  std::optional<std::chrono::microseconds> energy_update_period;
  /// How often instant power changes; nullopt if unknown.
  std::optional<std::chrono::microseconds> power_update_period;
};

struct PowerLimitConstraints {
  MilliWatts min;
  MilliWatts max;
};

/// An energy counter reading with what is known about its age.
struct EnergyReading {
  MilliJoules energy;  ///< Cumulative counter value.
  /// Wall-clock time (since the Unix epoch) at which the driver last updated the counter;
  /// nullopt if unknown. The counter updates only every ~100 ms on NVIDIA GPUs, so a reading
  /// can be up to one period old.
  std::optional<std::chrono::nanoseconds> updated_at;
  /// Instant power read together with the counter; nullopt if not read.
  std::optional<MilliWatts> power;
};

/// A power reading with the time the sensor produced it.
struct PowerReading {
  MilliWatts power;
  /// Wall-clock time (since the Unix epoch) at which the driver last updated the value;
  /// nullopt if unknown.
  std::optional<std::chrono::nanoseconds> updated_at;
};

/// A process with a context on a GPU (NVML: nvmlDeviceGetComputeRunningProcesses_v3).
struct GpuProcess {
  /// The process id as the driver knows it: the host's pid namespace (inside a container NVML
  /// still reports host pids).
  std::uint32_t pid = 0;
  std::optional<std::uint64_t> used_memory_bytes;  ///< nullopt when the driver does not know (WDDM)
  std::optional<unsigned> gpu_instance;            ///< MIG GPU instance; nullopt when not MIG
  std::optional<unsigned> compute_instance;        ///< MIG compute instance; nullopt when not MIG
};

/// One per-process utilization sample (NVML: nvmlDeviceGetProcessUtilization): what share of
/// the sample period the process kept the GPU busy, in whole percent, as the driver samples it
/// (every 1/6 s to 1 s, at the driver's discretion).
struct ProcessUtilizationSample {
  std::uint32_t pid = 0;
  /// Wall-clock time of the sample (since the Unix epoch, µs, the driver's CPU timestamp): the
  /// end of the period it covers.
  std::chrono::microseconds timestamp{0};
  unsigned sm_percent = 0;
  unsigned memory_percent = 0;
  unsigned encoder_percent = 0;
  unsigned decoder_percent = 0;
};

/// One GPU. erg index = position in the visible list (CUDA_VISIBLE_DEVICES order).
class Gpu {
 public:
  virtual ~Gpu() = default;

  [[nodiscard]] virtual unsigned index() const = 0;           ///< erg (framework) index.
  [[nodiscard]] virtual unsigned physical_index() const = 0;  ///< Vendor library index.
  [[nodiscard]] virtual GpuVendor vendor() const = 0;
  [[nodiscard]] virtual const std::string& name() const = 0;
  /// The vendor's UUID ("GPU-…" for NVIDIA); empty when the driver does not report it. A backend
  /// that cannot learn it (RemoteGpu) makes up an id that is unique among its GPUs and cannot be
  /// taken for a vendor UUID.
  [[nodiscard]] virtual const std::string& uuid() const = 0;
  /// PCI address "dddd:bb:dd.f" (lowercase hex, as sysfs and zeusd write it); empty when unknown.
  [[nodiscard]] virtual const std::string& pci_address() const {
    static const std::string unknown;
    return unknown;
  }
  /// Architecture name: "pascal", "volta", "ampere", ... or "unknown".
  [[nodiscard]] virtual const std::string& architecture() const = 0;
  [[nodiscard]] virtual const GpuCapabilities& capabilities() const = 0;

  /// Cumulative energy since the driver was loaded. NotSupported before Volta.
  virtual Result<MilliJoules> total_energy() = 0;
  /// The energy counter with its update time and the instant power, in one driver call where
  /// the backend can (NVML field values). `energy` is total_energy()'s counter; `updated_at` is
  /// present exactly when capabilities().reading_timestamps. Default: total_energy() with
  /// nothing else known (a backend that overrides neither reports reading_timestamps = false).
  virtual Result<EnergyReading> energy_reading() {
    auto e = total_energy();
    if (!e) return fail(e.error());
    return EnergyReading{*e, std::nullopt, std::nullopt};
  }
  /// Power in the given domain. NotSupported if the domain is not readable.
  virtual Result<MilliWatts> power(PowerDomain domain) = 0;
  /// power() with the sensor's update time where the backend knows it (NVML field values):
  /// `updated_at` is present exactly when capabilities().reading_timestamps.
  virtual Result<PowerReading> power_reading(PowerDomain domain) {
    auto p = power(domain);
    if (!p) return fail(p.error());
    return PowerReading{*p, std::nullopt};
  }

  virtual Result<MilliWatts> power_limit() = 0;
  virtual Result<PowerLimitConstraints> power_limit_constraints() = 0;
  /// NotSupported unless capabilities().default_power_limit.
  virtual Result<MilliWatts> default_power_limit() = 0;
  /// Needs privilege; out of range → InvalidArgument. Skips the driver call if unchanged.
  virtual Result<void> set_power_limit(MilliWatts limit) = 0;
  /// Back to the default limit (the maximum where the default is unknown, see
  /// GpuCapabilities::default_power_limit). Needs privilege.
  virtual Result<void> reset_power_limit() = 0;

  /// NotSupported unless capabilities().persistence_mode.
  virtual Result<bool> persistence_mode() = 0;
  virtual Result<void> set_persistence_mode(bool enabled) = 0;  ///< Needs privilege.

  /// The clock lists are NotSupported unless capabilities().clocks.
  virtual Result<std::vector<Megahertz>> supported_memory_clocks() = 0;
  virtual Result<std::vector<Megahertz>> supported_graphics_clocks(Megahertz memory_clock) = 0;
  virtual Result<void> set_gpu_locked_clocks(Megahertz min, Megahertz max) = 0;  ///< Needs privilege.
  virtual Result<void> reset_gpu_locked_clocks() = 0;
  virtual Result<void> set_memory_locked_clocks(Megahertz min, Megahertz max) = 0;  ///< Needs privilege.
  virtual Result<void> reset_memory_locked_clocks() = 0;

  /// GPU core temperature in °C. NotSupported unless capabilities().temperature.
  virtual Result<int> temperature() = 0;

  /// The processes with a context on the GPU now. NotSupported unless
  /// capabilities().running_processes (the default: AMD SMI, ergd); kNoPermission where the
  /// driver refuses.
  virtual Result<std::vector<GpuProcess>> running_processes() {
    return fail(ErrorCode::kNotSupported, "this GPU backend does not list running processes");
  }
  /// The per-process utilization samples the driver holds that are newer than `since` (a
  /// sample timestamp; 0 = every sample it still holds), oldest first. Empty when there is no
  /// newer sample. The driver keeps a bounded buffer: call at least every few seconds or
  /// samples are lost. NotSupported on MIG-enabled GPUs (the message says so), before Maxwell,
  /// and where the backend cannot read them (the default).
  virtual Result<std::vector<ProcessUtilizationSample>> process_utilization(std::chrono::microseconds since) {
    (void)since;
    return fail(ErrorCode::kNotSupported, "this GPU backend does not report per-process utilization");
  }
};

/// What a CPU package can do.
struct CpuCapabilities {
  bool dram = false;  ///< A DRAM energy domain exists.
  /// Counter range before the raw value wraps, µJ (RAPL `max_energy_range_uj`).
  std::optional<MicroJoules> max_energy_range;
  /// How often the counter changes; nullopt if unknown.
  std::optional<std::chrono::microseconds> update_period;
};

/// One CPU package (RAPL zone `intel-rapl:N` → index N).
class Cpu {
 public:
  virtual ~Cpu() = default;
  [[nodiscard]] virtual unsigned index() const = 0;
  [[nodiscard]] virtual const std::string& name() const = 0;
  [[nodiscard]] virtual const CpuCapabilities& capabilities() const = 0;

  /// Package energy since the first read of this object, monotonic, wraps compensated.
  virtual Result<MicroJoules> package_energy() = 0;
  /// DRAM energy since the first read of this object. NotSupported when there is no DRAM domain.
  virtual Result<MicroJoules> dram_energy() = 0;
};

/// What a SoC power rail supplies, from its label (see the backend's classification).
enum class RailKind {
  kCpu,     ///< CPU only (VDD_CPU_CV, CPU).
  kGpu,     ///< GPU only, or GPU with the rest of the SoC (VDD_GPU_SOC, GPU).
  kCpuGpu,  ///< CPU and GPU on one rail (VDD_CPU_GPU_CV): in neither figure alone.
  kTotal,   ///< The module's input: everything on the module (VDD_IN).
  kOther,   ///< Anything else (SOC, CV, VDDRQ, SYS5V, VIN_SYS_5V0, memory).
};
/// "cpu", "gpu", "cpu_gpu", "total", "other".
std::string_view to_string(RailKind kind);

struct SocRail {
  std::string name;  ///< The sensor's label, e.g. "VDD_GPU_SOC".
  RailKind kind = RailKind::kOther;
};

/// What a SoC (a Jetson module) measures.
struct SocCapabilities {
  std::vector<SocRail> rails;  ///< In the order of rail_power() and rail_energy().
  /// True when one rail is the module's input (kTotal); otherwise the rails are separate supplies
  /// of the module and their sum is its power.
  bool has_total_rail = false;
  /// How often the sensor's readings change; nullopt if unknown.
  std::optional<std::chrono::microseconds> update_period;
  /// How often the backend samples the rails to integrate their energy.
  std::optional<std::chrono::microseconds> sample_period;
};

/// A system-on-chip module whose rails are measured as power only (Jetson: INA3221 voltage and
/// current); the backend integrates energy from power samples.
class Soc {
 public:
  virtual ~Soc() = default;
  [[nodiscard]] virtual unsigned index() const = 0;
  [[nodiscard]] virtual const std::string& name() const = 0;
  [[nodiscard]] virtual const SocCapabilities& capabilities() const = 0;
  /// Power of every rail now (one reading each), in capabilities().rails order. Errors: the
  /// first rail that could not be read (kIo, kNoPermission, kNotFound).
  virtual Result<std::vector<MilliWatts>> rail_power() = 0;
  /// Energy of every rail since the first call, integrated by the backend from power samples
  /// and brought up to the moment of the call; monotonic. A rail that could not be read holds
  /// its last power across the gap.
  virtual Result<std::vector<MilliJoules>> rail_energy() = 0;
};

}  // namespace erg
