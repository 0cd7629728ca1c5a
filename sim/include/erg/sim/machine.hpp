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
///   ERG_AMDSMI_LIBRARY path of the simulated libamd_smi.so (beside it)
///   ERG_POWERCAP_ROOT  root of the generated powercap tree
///   ERG_HWMON_ROOT     root of the generated hwmon class (Jetson INA3221 rails; empty otherwise)
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
#include "erg/sim/sim_call.hpp"
#include "erg/sim/sku.hpp"
#include "erg/sim/spec.hpp"

namespace erg::sim {

/// A snapshot of one simulated GPU's controllable state.
struct GpuStatus {
  double utilization = 0.0;      ///< the load's busy level, 0..1
  MilliWatts power_limit;        ///< current limit
  Megahertz effective_sm_clock;  ///< table clock nearest the control loop's clock (what NVML reports)
  Megahertz target_sm_clock;     ///< where the power-limit control loop is heading
  Watts power;                   ///< true power over the current physics step
  Watts mean_power;              ///< steady power of the load at the current clock (no noise, ripple averaged)
  bool persistence = false;
  bool lost = false;
  double work_done = 0.0;      ///< work units completed (1 unit = 1 s at full clock, util 1)
  double drift_celsius = 0.0;  ///< heat of a thermal drift so far (set_thermal_drift), °C
  /// The SM and memory clock ranges locked through nvmlDeviceSet{Gpu,Memory}LockedClocks (any
  /// process); 0 and 0 when not locked (reset, or never set).
  Megahertz locked_sm_min{0.0}, locked_sm_max{0.0};
  Megahertz locked_mem_min{0.0}, locked_mem_max{0.0};
};

/// A GPU whose cooling cannot keep up (a failing fan, a clogged heat sink, a hot aisle), for
/// tests of thermally stable profiling. The model, per 1 ms physics step:
///   heat += celsius_per_s · activity · 1 ms − heat · 1 ms / cooling_time_constant_s,
///   clamped to [0, max_rise_celsius];
///   power = model power at the clock and activity · (1 + leakage_per_celsius · heat).
/// So the GPU gets hotter the more it works, and, as a hot chip leaks more current, draws more
/// power for the same work at the same clock: the energy per unit of work rises with its
/// temperature. The reported temperature is the model's plus the heat. The power-limit control
/// loop does not see the leakage (the GPU may exceed its limit by that share). Faithful model only.
struct ThermalDrift {
  double celsius_per_s = 0.0;            ///< heating while busy, at activity 1; 0 turns the drift off
  double leakage_per_celsius = 0.005;    ///< relative power added per °C (0.5 %/°C)
  double max_rise_celsius = 40.0;        ///< the heat stops rising here
  double cooling_time_constant_s = 0.0;  ///< time constant of shedding the heat; 0: never (idle does not cool it)
};

/// A load on a GPU. Activity is `utilization`, except in the last `ripple_duty` share of every
/// `step`, where it drops by `ripple_depth` (data loading, the optimizer step, communication):
/// power ripples at the workload's step period. Steps count from when the load is applied.
struct Load {
  double utilization = 1.0;
  std::chrono::nanoseconds step{0};  ///< 0: a steady load (no ripple)
  double ripple_depth = 0.0;         ///< 0..1, share of `utilization` lost in the low part
  double ripple_duty = 0.2;          ///< 0..1, share of each step in the low part

  /// The training-like load the SKU table is calibrated against (CalibrationLoad in sku.hpp).
  static Load training(double utilization = 1.0) {
    return Load{utilization, std::chrono::nanoseconds(static_cast<long long>(CalibrationLoad::kStepMs * 1e6)),
                CalibrationLoad::kRippleDepth, CalibrationLoad::kRippleDuty};
  }
};

/// What a GPU's sensors do, hidden from erg on real hardware (tests use it to state bounds).
struct SensorInfo {
  std::chrono::nanoseconds energy_period{0};  ///< actual energy-counter update period
  std::chrono::nanoseconds power_period{0};   ///< actual instant-power update period
  std::chrono::nanoseconds jitter{0};         ///< σ of each energy update's offset from its schedule
  std::chrono::nanoseconds power_jitter{0};   ///< the same for the instant-power updates
  double gain = 0.0;                          ///< relative gain error of the sensor
  bool partial_sampling = false;              ///< measures only part of each period
  std::chrono::nanoseconds sampled_window{0};
  std::chrono::nanoseconds last_update{0};  ///< sim time of the latest energy-counter update
  std::chrono::nanoseconds next_update{0};  ///< sim time of the next one
  /// Per-process utilization sample period (1/6 s nominal, drift and jitter as the others).
  std::chrono::nanoseconds utilization_period{0};
  std::chrono::nanoseconds utilization_jitter{0};  ///< σ of each sample's offset from its schedule
  // --- the sensor zoo (GpuSpec; sim/README.md, "Sensors") --------------------------------------
  Schedule schedule = Schedule::kGrid;           ///< how the energy counter's updates are scheduled
  std::chrono::nanoseconds phase_jump_every{0};  ///< kPhaseJumps: time between jumps (the first one after creation)
  double skip_share = 0.0;                       ///< kSkips: share skipped, and the same share doubled
  std::chrono::nanoseconds period_change_at{0};  ///< kPeriodChange: sim time of the change
  std::chrono::nanoseconds period_after{0};      ///< kPeriodChange: the period from then on
  /// An update's readings become readable this long after it (last_update/next_update are the
  /// updates themselves; the integrated energy is unaffected).
  std::chrono::nanoseconds publish_delay{0};
  StampMode stamps = StampMode::kRead;       ///< NVML field timestamps (the machine-wide meaning unless set per GPU)
  std::chrono::nanoseconds stamp_unit{0};    ///< kFloored: the unit (wall-clock µs floored to it)
  std::chrono::nanoseconds stamp_offset{0};  ///< kUnrelated: the clock's constant offset from the read time
  double stamp_drift = 0.0;                  ///< kUnrelated: its drift (relative to sim time since creation)
  Increment increment = Increment::kWhole;   ///< what each counter update adds
  /// What kPartialNominal multiplies by: energy_period_ms if given, else the SKU's nominal period.
  std::chrono::nanoseconds nominal_period{0};
  AverageMode average = AverageMode::kBoxcar;  ///< the averaged power reading
};

/// A process with a context on a simulated GPU. While a GPU has processes, its load is theirs:
/// utilization = Σ actual share × intensity, steady (set_load/set_utilization override it until
/// the process table next changes). When Σ share > 1 the GPU time-slices: each runs
/// share / Σ share of the time (what its utilization samples report).
struct SimProcess {
  std::uint32_t pid = 0;                 ///< > 0
  double share = 0.0;                    ///< the activity it asks of the GPU, 0..1
  std::uint64_t used_memory_bytes = 0;   ///< what nvmlProcessInfo_t reports
  bool real = false;                     ///< a live process of this machine: dropped once it exits
  std::optional<unsigned> gpu_instance;  ///< its MIG GPU instance (reported only while MIG is on)
  /// Its power per unit of activity relative to the SKU's model, (0, 1]: kernels differ (tensor
  /// cores vs memory-bound work) at the same SM utilization. Its samples do not show it; its
  /// truth does. 1 (the default) makes every process draw alike.
  double intensity = 1.0;
};

/// The simulator's truth of how a GPU's energy divides among its processes (never visible to
/// erg). Every 1 ms physics segment's energy e splits into idle = the SKU's idle power × time
/// and the rest; the rest goes to the processes in proportion to share × intensity while any is
/// active (each one's part of the time-sliced GPU's power), else to `unattributed` (noise, lag
/// tails).
/// So idle + Σ processes + unattributed = the true (physical) energy since creation.
struct ProcessTruth {
  struct Entry {
    std::uint32_t pid = 0;
    Joules energy;                          ///< its energy above idle since it was added
    std::chrono::nanoseconds busy_time{0};  ///< ∫ its actual share dt since it was added
  };
  Joules idle;
  Joules unattributed;
  std::vector<Entry> processes;  ///< the processes on the GPU now
};

/// One per-process utilization sample as the simulated driver holds it.
struct SimUtilSample {
  std::uint32_t pid = 0;
  std::chrono::nanoseconds time{0};  ///< sim time of the sample (the end of its period)
  unsigned sm_percent = 0;
};

/// One nvmlDeviceSetPowerManagementLimit call the simulated driver answered.
struct PowerLimitCall {
  unsigned gpu = 0;                  ///< GPU index on the machine
  MilliWatts limit;                  ///< the limit asked for
  std::chrono::nanoseconds time{0};  ///< sim time of the call
  int nvml_return = 0;               ///< 0 (NVML_SUCCESS): the limit was set; else why not
  [[nodiscard]] bool ok() const { return nvml_return == 0; }
};

class Machine {
 public:
  /// Creates a new simulation in `dir` (created if missing): the state file `dir/state`
  /// and the sysfs-shaped powercap tree under `dir/sys` (powercap_root() is its class
  /// directory, `dir/sys/class/powercap`). The creator owns `dir` and removes it on
  /// destruction unless `keep_dir` is set.
  /// `virtual_clock`: start on the virtual clock at the moment of creation (so two machines of
  /// the same seed driven the same way are identical; see use_virtual_clock).
  static Result<std::unique_ptr<Machine>> create(const MachineSpec& spec, const std::filesystem::path& dir,
                                                 bool keep_dir = false, bool virtual_clock = false);
  /// Creates a new simulation in a fresh temporary directory `erg-sim-XXXXXX` under the
  /// temporary parent (temp_parent()). The directory records its creator (pid, process start
  /// time, boot id) in the file `creator`; the creator removes the directory on destruction.
  /// First removes the stale temporary machines there (reap_stale_temp), so machines whose
  /// creator was killed (SIGKILL, a crash) do not pile up.
  static Result<std::unique_ptr<Machine>> create_temp(const MachineSpec& spec, bool virtual_clock = false);
  /// Where create_temp makes machines: $ERG_SIM_TMPDIR, else /dev/shm when writable (a tmpfs,
  /// like sysfs), else $TMPDIR or /tmp.
  static std::filesystem::path temp_parent();
  /// Removes the stale temporary machines directly under `parent` and returns their paths. A
  /// directory is removed only if all of these hold: its name starts with `erg-sim-`, it is a
  /// directory (not a link) owned by this user, it holds a complete `creator` record (only
  /// create_temp writes one: a directory made by create(), kept with keep_dir or not, is never
  /// touched), its creator is dead (a live process with the recorded pid but another start
  /// time or boot is PID reuse, not the creator), no live process of this user has it as
  /// ERG_SIM_STATE in its environment (the children of a killed erg still running on it), and
  /// this process's ERG_SIM_STATE does not name it. Best effort: never fails.
  static std::vector<std::filesystem::path> reap_stale_temp(const std::filesystem::path& parent);
  /// Attaches to an existing simulation's state file.
  static Result<std::unique_ptr<Machine>> attach(const std::filesystem::path& state_file);
  /// Attaches to the simulation named by ERG_SIM_STATE; NotFound if unset.
  static Result<std::unique_ptr<Machine>> attach_from_env();

  ~Machine();
  Machine(const Machine&) = delete;
  Machine& operator=(const Machine&) = delete;

  /// Sets ERG_SIM_STATE, ERG_NVML_LIBRARY, ERG_AMDSMI_LIBRARY, ERG_POWERCAP_ROOT and ERG_SIMULATE in this process's
  /// environment (inherited by children). Fails if the simulated driver library cannot be found.
  Result<void> export_env() const;
  /// Path of the simulated libnvidia-ml.so.1: $ERG_SIM_NVML_LIBRARY, else next to the running
  /// executable's install tree, else the build tree, else the install prefix erg was built for.
  static Result<std::filesystem::path> driver_library_path();

  [[nodiscard]] const std::filesystem::path& dir() const;
  [[nodiscard]] std::filesystem::path state_file() const;
  [[nodiscard]] std::filesystem::path powercap_root() const;
  /// The generated hwmon class directory (`dir/sys/class/hwmon`): the Jetson's INA3221 devices
  /// and a thermal sensor, or nothing when the spec has no Jetson.
  [[nodiscard]] std::filesystem::path hwmon_root() const;
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
  /// A steady load (no ripple) at `utilization`.
  Result<void> set_utilization(unsigned gpu, double utilization);
  /// Applies `load` from now. InvalidArgument for values out of range.
  Result<void> set_load(unsigned gpu, const Load& load);
  /// Runs `work` units at `utilization` on the GPU, blocking (real clock) or advancing the
  /// virtual clock until done; returns the time it took. Utilization returns to 0 after.
  Result<std::chrono::nanoseconds> run_work(unsigned gpu, double work, double utilization = 1.0);
  /// run_work under `load`.
  Result<std::chrono::nanoseconds> run_work(unsigned gpu, double work, const Load& load);
  /// Mean package and DRAM power from now (the model adds noise).
  Result<void> set_cpu_power(unsigned cpu, Watts package, Watts dram);
  /// Gives the GPU a thermal drift from now (see ThermalDrift); celsius_per_s = 0 ends it and
  /// drops its heat. InvalidArgument for negative values or a max_rise_celsius over 100;
  /// NotSupported on the ideal model (it has no physics steps).
  Result<void> set_thermal_drift(unsigned gpu, const ThermalDrift& drift);

  // --- processes (per-process attribution) -------------------------------------------------
  /// Adds a process to the GPU's table, or updates the one with the same pid (share, memory,
  /// instance; its truth carries on). InvalidArgument for pid 0 or a share outside 0..1;
  /// Unavailable when 16 processes are on the GPU already.
  Result<void> set_process(unsigned gpu, const SimProcess& process);
  /// Changes a process's share from now. NotFound for an unknown pid.
  Result<void> set_process_share(unsigned gpu, std::uint32_t pid, double share);
  /// Removes a process (its truth goes with it). NotFound for an unknown pid.
  Result<void> remove_process(unsigned gpu, std::uint32_t pid);
  /// The processes on the GPU now (real ones that have exited are dropped first).
  Result<std::vector<SimProcess>> processes(unsigned gpu);
  /// The truth of the GPU's energy split among its processes, up to now.
  Result<ProcessTruth> process_truth(unsigned gpu);
  /// The same truth as of the energy-counter update nearest sim time `t` (within 1 ms), so a
  /// test on the real clock can compare a counter window with it. Kept for the latest 128
  /// updates (~12.8 s); NotFound otherwise.
  Result<ProcessTruth> process_truth_at(unsigned gpu, std::chrono::nanoseconds t);
  /// Every per-process utilization sample the driver still holds, oldest first.
  Result<std::vector<SimUtilSample>> utilization_samples(unsigned gpu);
  /// The per-process utilization sampler's nominal period from now (default 1/6 s; NVML's
  /// header allows up to 1 s). InvalidArgument outside 10 ms .. 10 s.
  Result<void> set_utilization_period(unsigned gpu, std::chrono::nanoseconds period);
  /// MIG mode: while on, nvmlDeviceGetProcessUtilization answers NOT_SUPPORTED (as on hardware)
  /// and running processes carry their GPU instance.
  Result<void> set_mig_mode(unsigned gpu, bool enabled);
  /// Bytes per entry that nvmlDeviceGetComputeRunningProcesses_v3 writes: 24 (the current
  /// headers, the default) or 32 (drivers 535.43–535.86 declared `_v3` with the 32-byte
  /// nvmlProcessDetail_v1_t layout without a version bump: the stride hazard of vendor-abi.md).
  /// InvalidArgument otherwise.
  Result<void> set_process_info_stride(unsigned bytes);

  // --- Jetson rails ---------------------------------------------------------------------------
  /// The simulated Jetson's rail labels in hwmon order (empty without a Jetson).
  [[nodiscard]] std::vector<std::string> rail_labels() const;
  /// Mean power of a rail from now (the model adds noise). For the module input rail (VDD_IN)
  /// this is its own share: it also carries every other rail. NotFound for an unknown label.
  Result<void> set_rail_power(const std::string& label, Watts mean);
  /// True (physical) energy of a rail since the simulation started.
  Result<Joules> true_rail_energy(const std::string& label);
  /// Readings the rail's INA3221 channel has published so far.
  Result<std::uint64_t> rail_updates(const std::string& label);

  // --- ground truth ------------------------------------------------------------------------
  /// The model options the machine was created with.
  [[nodiscard]] const ModelSpec& model() const;
  /// True (physical) energy of the GPU since the simulation started (exact integral of the model).
  Result<Joules> true_energy(unsigned gpu);
  /// The second truth: the energy the GPU's sensor integrated up to sim time `t` (the counter's
  /// own figure, interpolated linearly between its updates; sensor_energy(t1) − sensor_energy(t0)
  /// is what a perfect reader of the counter reports for [t0, t1]). Unavailable while the update
  /// after `t` has not happened yet (advance past it); NotFound for times older than the kept
  /// updates (about 100 s) or GPUs without a counter.
  Result<Joules> sensor_energy_at(unsigned gpu, std::chrono::nanoseconds t);
  /// The GPU's sensor schedule and errors.
  Result<SensorInfo> sensor_info(unsigned gpu);
  /// The physical energy (what true_energy reports) at sim time `t`, exactly: the model's ∫P up
  /// to `t`, from breakpoints kept at every 1 ms physics step and control event (power is
  /// constant between them), so for times within roughly the last 20 s. NotFound for older
  /// times, Unavailable for times after now.
  Result<Joules> physical_energy_at(unsigned gpu, std::chrono::nanoseconds t);
  Result<Joules> true_cpu_energy(unsigned cpu);
  Result<Joules> true_dram_energy(unsigned cpu);
  /// The raw value the package's (`dram`: its DRAM sub-zone's) `energy_uj` shows as of its
  /// latest RAPL update: what the file holds when its writer is not late (under load the file
  /// can lag it, never lead it). NotSupported for a package without DRAM.
  Result<std::uint64_t> rapl_energy_uj(unsigned cpu, bool dram = false);
  /// The RAPL counter (as rapl_energy_uj) together with the simulated time it is the value of,
  /// both taken under one lock.
  struct RaplReading {
    std::chrono::nanoseconds at{0};
    std::uint64_t uj = 0;
  };
  Result<RaplReading> rapl_reading(unsigned cpu, bool dram = false);
  /// The simulated time as of which the powercap file energy_uj of `cpu`'s package (or DRAM)
  /// shows `value_uj`: the latest of the last 128 records of that file, one per refresh by
  /// whichever process writes the tree (the lease holder's updater, or advance() on the virtual
  /// clock), each made before the file is written. Lock-free (a seqlock per record).
  /// kNotFound if that value is not among them — a torn or invented read, or one older than 128
  /// refreshes (~0.13 s on the real clock); NotSupported for a package without DRAM.
  Result<std::chrono::nanoseconds> powercap_as_of(unsigned cpu, bool dram, std::uint64_t value_uj);

  /// One energy zone of the powercap tree: `intel-rapl:zone`, or its sub-zone
  /// `intel-rapl:zone:sub` when sub >= 0.
  struct PowercapZone {
    int zone = 0;
    int sub = -1;
    std::string name;  ///< "package-N", "dram", "core" or "psys"
    std::uint64_t max_energy_range_uj = 0;
  };
  /// The tree's energy zones in its order: each package, then its sub-zones (dram, core), then psys.
  [[nodiscard]] std::vector<PowercapZone> powercap_zones() const;
  /// The counter of zone `index` (of powercap_zones()) now, as the kernel computes it at a read:
  /// the value as of the latest RAPL update (what a file served at read time shows, e.g. by
  /// erg-sim-powercapfs). kNotFound for an index out of range.
  Result<std::uint64_t> powercap_energy_uj(std::size_t index);
  /// The name of the powercap updater thread (as /proc/PID/task/TID/comm shows it): one per
  /// process that attaches to a machine with a tree; it wakes once per RAPL period (~1,024/s)
  /// while its process holds the tree's lease, and every 100 ms otherwise (to take the lease over
  /// when the holder is gone or silent for 200 ms).
  static constexpr const char* kPowercapUpdaterThread = "erg-powercap";
  Result<GpuStatus> status(unsigned gpu);

  // --- faults -----------------------------------------------------------------------------
  /// The next `count` calls of `call` on `gpu` return `nvml_return` (count < 0: until cleared).
  Result<void> inject_error(unsigned gpu, SimCall call, int nvml_return, int count = -1);
  Result<void> clear_faults(unsigned gpu);
  /// Every call on the GPU returns NVML_ERROR_GPU_IS_LOST while set.
  Result<void> set_lost(unsigned gpu, bool lost);
  /// The energy counter reads 0 from now on and counts up again from the next update (driver reload).
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
  /// Every nvmlDeviceSetPowerManagementLimit call the driver answered (from any process), in call
  /// order across all GPUs: the exact sequence of limits set, refusals included (out of range, no
  /// privilege; calls failed by inject_error never reach it). Keeps the latest 4096 calls;
  /// `dropped` (if given) receives how many older ones fell out.
  [[nodiscard]] std::vector<PowerLimitCall> power_limit_log(std::uint64_t* dropped = nullptr) const;
  /// Empties the power-limit log.
  void clear_power_limit_log();

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
  /// On the virtual clock: advances the machine to `t`; on the real clock: waits.
  void sleep_until(std::chrono::nanoseconds t) const override;

 private:
  const Machine& machine_;
};

}  // namespace erg::sim
