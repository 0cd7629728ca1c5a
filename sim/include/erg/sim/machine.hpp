#pragma once
/// The simulated machine: GPUs and CPU packages whose state lives in one file-backed shared
/// memory region, so every process that attaches to the same state (erg, ergd, a child
/// `erg simulate load`, the simulated libnvidia-ml.so.1 inside any of them) sees the same
/// hardware. This header is the *control API* used by tests, demos and `erg simulate`; it is
/// separate from the NVML symbols the simulated driver exports.
///
/// Environment contract (set by `Machine::export_env()`, read by the driver library):
///   ERG_SIM_STATE      path of the state file
///   ERG_NVML_LIBRARY   path of the simulated libnvidia-ml.so.1
///   ERG_POWERCAP_ROOT  root of the generated powercap tree
///   ERG_SIMULATE       the spec string (so children know they run simulated)
///
/// Thread- and process-safe: every method takes the state's robust process-shared mutex.

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "erg/core/clock.hpp"
#include "erg/core/result.hpp"
#include "erg/core/units.hpp"
#include "erg/sim/spec.hpp"

namespace erg::sim {

/// NVML entry points of the simulated driver, for fault injection and call counts.
enum class SimCall : int {
  kAny = 0,  ///< Matches every call (fault injection only).
  kGetName,
  kGetUuid,
  kGetArchitecture,
  kGetTotalEnergyConsumption,
  kGetFieldValues,
  kGetPowerUsage,
  kGetPowerManagementLimit,
  kGetPowerManagementLimitConstraints,
  kGetPowerManagementDefaultLimit,
  kSetPowerManagementLimit,
  kGetPersistenceMode,
  kSetPersistenceMode,
  kGetSupportedMemoryClocks,
  kGetSupportedGraphicsClocks,
  kGetClockInfo,
  kSetGpuLockedClocks,
  kResetGpuLockedClocks,
  kSetMemoryLockedClocks,
  kResetMemoryLockedClocks,
  kGetTemperature,
  kGetHandle,
  kGetPciInfo,
  kCount
};

/// Who may call the simulated setters (power limit, clocks, persistence).
enum class Privilege {
  kRootOnly,  ///< Callers with euid 0 (default; like the real driver without CAP_SYS_ADMIN).
  kEveryone,
  kNobody,
};

/// A snapshot of one simulated GPU's controllable state.
struct GpuStatus {
  double utilization = 0.0;      ///< 0..1
  MilliWatts power_limit;        ///< current limit
  Megahertz effective_sm_clock;  ///< clock the model runs at now
  Watts power;                   ///< true power now
  bool persistence = false;
  bool lost = false;
  double work_done = 0.0;  ///< work units completed (1 unit = 1 s at full clock, util 1)
};

class Machine {
 public:
  /// Creates a new simulation in `dir` (created if missing): the state file `dir/state`
  /// and the powercap tree `dir/powercap`. The creator owns `dir` and removes it on
  /// destruction unless `keep_dir` is set.
  static Result<std::unique_ptr<Machine>> create(const MachineSpec& spec, const std::filesystem::path& dir,
                                                 bool keep_dir = false);
  /// Creates a new simulation in a fresh temporary directory.
  static Result<std::unique_ptr<Machine>> create_temp(const MachineSpec& spec);
  /// Attaches to an existing simulation's state file.
  static Result<std::unique_ptr<Machine>> attach(const std::filesystem::path& state_file);
  /// Attaches to the simulation named by ERG_SIM_STATE; NotFound if unset.
  static Result<std::unique_ptr<Machine>> attach_from_env();

  ~Machine();
  Machine(const Machine&) = delete;
  Machine& operator=(const Machine&) = delete;

  /// Sets ERG_SIM_STATE, ERG_NVML_LIBRARY, ERG_POWERCAP_ROOT and ERG_SIMULATE in this process's
  /// environment (inherited by children). Fails if the simulated driver library cannot be found.
  Result<void> export_env() const;
  /// Path of the simulated libnvidia-ml.so.1: $ERG_SIM_NVML_LIBRARY, else next to the running
  /// executable's install tree, else the build tree.
  static Result<std::filesystem::path> driver_library_path();

  [[nodiscard]] const std::filesystem::path& dir() const;
  [[nodiscard]] std::filesystem::path state_file() const;
  [[nodiscard]] std::filesystem::path powercap_root() const;
  [[nodiscard]] const MachineSpec& spec() const;
  [[nodiscard]] unsigned gpu_count() const;
  [[nodiscard]] unsigned cpu_count() const;

  // --- time -----------------------------------------------------------------------------
  /// Switches the shared simulation to a virtual clock that only `advance` moves.
  void use_virtual_clock(bool on);
  /// Advances the virtual clock (no-op error if the clock is real) and brings the model,
  /// counters and powercap files up to the new time.
  Result<void> advance(std::chrono::nanoseconds d);
  /// Simulation time now (virtual or CLOCK_MONOTONIC).
  [[nodiscard]] std::chrono::nanoseconds now() const;
  /// Wall-clock time of the simulation (the time base of the driver's field timestamps).
  [[nodiscard]] std::chrono::nanoseconds wall_now() const;

  // --- load -----------------------------------------------------------------------------
  Result<void> set_utilization(unsigned gpu, double utilization);
  /// Runs `work` units at `utilization` on the GPU, blocking (real clock) or advancing the
  /// virtual clock until done; returns the time it took. Utilization returns to 0 after.
  Result<std::chrono::nanoseconds> run_work(unsigned gpu, double work, double utilization = 1.0);
  Result<void> set_cpu_power(unsigned cpu, Watts package, Watts dram);

  // --- ground truth ------------------------------------------------------------------------
  /// True energy of the GPU since the simulation started (exact integral of the model).
  Result<Joules> true_energy(unsigned gpu);
  Result<Joules> true_cpu_energy(unsigned cpu);
  Result<Joules> true_dram_energy(unsigned cpu);
  Result<GpuStatus> status(unsigned gpu);

  // --- faults -----------------------------------------------------------------------------
  /// The next `count` calls of `call` on `gpu` return `nvml_return` (count < 0: until cleared).
  Result<void> inject_error(unsigned gpu, SimCall call, int nvml_return, int count = -1);
  Result<void> clear_faults(unsigned gpu);
  /// Every call on the GPU returns NVML_ERROR_GPU_IS_LOST while set.
  Result<void> set_lost(unsigned gpu, bool lost);
  /// The energy counter restarts from 0 (driver reload).
  Result<void> reset_energy_counter(unsigned gpu);
  /// The energy counter jumps back by `amount` (seen on AMD; modelled for both).
  Result<void> energy_counter_backwards(unsigned gpu, MilliJoules amount);

  // --- privilege and observation -------------------------------------------------------------
  void set_privilege(Privilege p);
  /// How many times `call` reached the simulated driver for `gpu` (all processes).
  Result<std::uint64_t> call_count(unsigned gpu, SimCall call);
  /// How many of those calls were answered from the GPU's published readings without taking
  /// the state's lock (sensor reads between two sensor updates with no control event between).
  Result<std::uint64_t> lock_free_reads(unsigned gpu);

 private:
  struct Impl;
  explicit Machine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

/// The simulation's time as an erg::Clock, so measurement code on a virtual clock sees exactly
/// the time the simulated devices see. The machine must outlive the clock.
class MachineClock final : public Clock {
 public:
  explicit MachineClock(const Machine& machine) : machine_(machine) {}
  [[nodiscard]] std::chrono::nanoseconds now() const override { return machine_.now(); }
  [[nodiscard]] std::chrono::nanoseconds wall_now() const override { return machine_.wall_now(); }

 private:
  const Machine& machine_;
};

}  // namespace erg::sim
