#pragma once
// Internal: the shared state of a simulated machine and the model engine that advances it.
// Used by the control API (erg_sim) and by the simulated libnvidia-ml.so.1, so it depends on
// nothing but libc/pthreads and the SKU table, and never throws.
//
// The state is one POD struct in a file (`dir/state`) that every attached process mmaps
// MAP_SHARED. A robust, process-shared pthread mutex guards it; a process killed while holding
// it leaves it EOWNERDEAD, and the next locker marks it consistent and carries on.
//
// Physics and sensors are separate (sim/README.md, "The faithful model"):
//  - physics advances in 1 ms steps: power follows the load (ripple at the workload's step
//    period) through an electrical lag, with a transient at each load change and seeded noise; a
//    control loop moves the SM clock toward the clock the power limit allows. Power is constant
//    within a step, so the true energy is an exact sum;
//  - each sensor updates on its own schedule (a per-device period, phase and jitter) from what it
//    measured of the physics: the whole period, or only its last part (partial sampling), with a
//    per-device gain error and per-update noise. The energy it integrated is the second truth.
// Everything random derives from the machine seed and is a pure function of (seed, device, index),
// so processes that advance the same state in different chunks get identical results.
// The ideal model (tests of exact arithmetic) switches every imperfection off.

#include <pthread.h>

#include <cstdint>

#include "erg/sim/sim_call.hpp"
#include "erg/sim/sku.hpp"

namespace erg::sim::detail {

inline constexpr std::uint64_t kMagic = 0x45524753494d5354ULL;  // "ERGSIMST"
// 6: GPU processes (GpuState::procs); 7: the sensor zoo; 8: the powercap as-of records.
inline constexpr std::uint32_t kVersion = 8;
inline constexpr unsigned kMaxGpus = 16;
inline constexpr unsigned kMaxCpus = 8;
/// Energy files of a powercap tree at most: package, DRAM and core per CPU, and psys.
inline constexpr unsigned kMaxEnergyFiles = 3 * kMaxCpus + 1;
/// Records kept per energy file with their as-of times, one per refresh (~1 ms on the real
/// clock): 128 cover a reader preempted for ~0.1 s between its read and its look-up.
inline constexpr unsigned kAsOfRing = 128;
inline constexpr unsigned kMaxFaults = 8;
inline constexpr unsigned kTickRing = 1024;  // energy-counter updates kept per GPU: ~100 s at 100 ms
inline constexpr unsigned kCallKinds = 32;   // ≥ SimCall::kCount
static_assert(kCallKinds >= static_cast<unsigned>(SimCall::kCount));
inline constexpr unsigned kSpecTextSize = 16384;
inline constexpr unsigned kPathSize = 4096;
/// Physics step: power is constant within one.
inline constexpr std::int64_t kStepNs = 1'000'000;
/// RAPL update period: the MSR time unit, 2^-10 s (hardware.md §4.3: "about every 1 ms").
inline constexpr std::int64_t kRaplPeriodNs = 976'562;
/// nvmlDeviceSetPowerManagementLimit calls kept in the machine's ordered log (the latest ones).
inline constexpr unsigned kLimitLogSize = 4096;
/// Processes a simulated GPU can run at once.
inline constexpr unsigned kMaxProcs = 16;
/// Per-process utilization samples a GPU keeps (the driver's bounded buffer): with three busy
/// processes at 6 samples/s, about 28 s; older samples are gone.
inline constexpr unsigned kUtilRing = 512;
/// Per-process utilization sample period: 1/6 s, the short end of the 1/6 s to 1 s that the
/// NVML header states for its utilization sampling (vendor-abi.md, nvmlDeviceGetUtilizationRates).
inline constexpr std::int64_t kUtilPeriodNs = 166'666'667;
/// Energy-counter updates for which the process truth is kept (~12.8 s at 100 ms).
inline constexpr unsigned kTruthRing = 128;
/// Instant-power updates kept per GPU (publish delay, stamps): ~20 s at 20 ms.
inline constexpr unsigned kPowerRing = 1024;
/// Physical-energy breakpoints kept per GPU (Machine::physical_energy_at): one per 1 ms physics
/// step and per control event, so a little over 20 s of the faithful model.
inline constexpr unsigned kPhysRing = 20480;

// The sensor zoo's modes as stored in the state (the same order as the enums of erg/sim/spec.hpp,
// which the engine cannot include; machine.cpp checks they agree).
inline constexpr std::int32_t kScheduleGrid = 0, kScheduleRandomWalk = 1, kSchedulePhaseJumps = 2, kScheduleSkips = 3,
                              kSchedulePeriodChange = 4;
inline constexpr std::int32_t kStampUpdate = 0, kStampRead = 1, kStampIntervalStart = 2, kStampFloored = 3,
                              kStampUnrelated = 4;
inline constexpr std::int32_t kIncrementWhole = 0, kIncrementPartial = 1, kIncrementPartialNominal = 2;
inline constexpr std::int32_t kAverageBoxcar = 0, kAverageExponential = 1;

struct FaultSlot {
  std::int32_t call = -1;  // SimCall value; -1 = free slot
  std::int32_t nvml_return = 0;
  std::int32_t remaining = 0;  // < 0: until cleared
};

/// One sensor's update schedule: update k happens at origin + k·period + jitter(k), with
/// jitter(k) a seeded Gaussian of σ = jitter_ns clipped to ±3σ (≪ period: updates stay ordered).
/// The other schedules of the sensor zoo (kSchedule*) are sequential: each update is computed
/// from the state the previous one left (grid_k, origin_ns and period_ns move).
struct TickSeries {
  std::int64_t period_ns = 0;
  std::int64_t origin_ns = 0;
  double jitter_ns = 0.0;
  std::uint64_t salt = 0;
  std::int64_t next_index = 0;  // the next update
  std::int64_t next_ns = 0;
  std::int64_t last_ns = 0;  // the latest update at or before the processed time
  // --- version 7: the sensor zoo's schedules -------------------------------------------------
  std::int32_t schedule = kScheduleGrid;
  std::int32_t mid_done = 0;         // skips: the extra update before grid point grid_k has happened
  std::int64_t grid_k = 0;           // phase jumps, skips, period change: the next grid point
  std::int64_t event_ns = 0;         // phase jumps: the next jump; period change: the change
  std::int64_t every_ns = 0;         // phase jumps: time between jumps
  std::int64_t period_after_ns = 0;  // period change: the new period
  double skip_share = 0.0;           // skips: share skipped, and the same share doubled
  std::int64_t jumps = 0;            // phase jumps made so far (seeds the next one); period change: 1 once made
};

/// One process with a context on a simulated GPU (the simulator's process table).
struct ProcSlot {
  std::int32_t pid = 0;            // 0: free slot
  std::int32_t real = 0;           // a real process of this machine: dropped once it is gone
  std::int32_t gpu_instance = -1;  // MIG GPU instance; -1: none (reported as 0xFFFFFFFF)
  std::int32_t pad = 0;
  std::uint64_t used_memory = 0;  // bytes
  double share = 0.0;             // the activity it asks of the GPU, 0..1
  double intensity = 1.0;         // its power per unit of activity, relative to the SKU's model (0..1]
  double busy_ns = 0.0;           // ∫ its actual (time-sliced) share dt in the current sample period
  double energy_j = 0.0;          // truth: its part of the energy above idle since it was added
  double busy_s = 0.0;            // truth: ∫ its actual share dt since it was added
};

/// One per-process utilization sample (what nvmlProcessUtilizationSample_t reports).
struct UtilSample {
  std::int64_t time_ns = 0;  // sim time of the sample (the end of its period)
  std::int32_t pid = 0;
  std::uint32_t sm = 0, mem = 0, pad = 0;  // %
};

/// A GPU's processes, their sampled utilization and the truth of their energy.
struct ProcTable {
  std::int32_t mig = 0;  // MIG mode enabled: no per-process utilization
  std::int32_t pad = 0;
  ProcSlot slots[kMaxProcs];
  TickSeries ticks;  // the utilization sampler's schedule
  UtilSample ring[kUtilRing];
  std::uint64_t ring_count = 0;
  double idle_j = 0.0;          // truth: the SKU's idle power × time, since creation
  double unattributed_j = 0.0;  // truth: energy above idle while no process was active (noise, lag tails)
  // The truth as of each energy-counter update (for comparing with a reader of the counter).
  std::int64_t truth_t[kTruthRing] = {};
  double truth_idle[kTruthRing] = {};
  double truth_unattributed[kTruthRing] = {};
  std::int32_t truth_pid[kTruthRing][kMaxProcs] = {};
  double truth_energy[kTruthRing][kMaxProcs] = {};
  double truth_busy[kTruthRing][kMaxProcs] = {};
  std::uint64_t truth_count = 0;
};

struct GpuState {
  // --- identity and model parameters, fixed at creation --------------------------------------
  std::int32_t sku_index = 0;
  char uuid[96] = {};
  std::uint64_t seed = 0;
  std::int32_t faithful = 1;
  std::int32_t partial_sampling = 0;
  std::int32_t shared_ticks = 1;  // the power fields update with the energy counter
  double gain = 0.0;              // sensor gain error (relative)
  // --- controls ------------------------------------------------------------------------------
  double utilization = 0.0;  // busy level of the load, 0..1
  std::int64_t step_ns = 0;  // the load's step period (ripple); 0 = steady
  double ripple_depth = 0.0, ripple_duty = 0.0;
  std::int64_t load_origin_ns = 0;  // steps count from here
  std::uint32_t limit_mw = 0;
  std::uint32_t locked_min_mhz = 0, locked_max_mhz = 0;  // 0/0 = not locked
  std::uint32_t mem_locked_min_mhz = 0, mem_locked_max_mhz = 0;
  std::int32_t persistence = 0;
  std::int32_t lost = 0;
  // --- physics ------------------------------------------------------------------------------
  double clock_mhz = 0.0;         // SM clock now (continuous; reported as the nearest table clock)
  double target_clock_mhz = 0.0;  // where the power-limit control loop is heading
  double mem_ratio = 1.0;         // memory clock / highest memory clock
  double elec_w = 0.0;            // electrical power: the demand through a first-order lag
  double transient_w = 0.0;       // load-change transient, decaying
  double power_w = 0.0;           // power over the current segment
  double work_rate = 0.0;         // work units per second over the current segment
  std::int64_t epoch_ns = 0;      // creation: physics steps and sensor phases count from here
  std::int64_t step_index = 0;    // physics step the current segment belongs to (from epoch_ns)
  std::int64_t last_ns = 0;       // physics and sensors are processed up to here
  double energy_j = 0.0;          // true energy since creation
  double work = 0.0;
  // --- sensors ------------------------------------------------------------------------------
  TickSeries energy_ticks, power_ticks;  // power_ticks unused when shared_ticks
  double sensor_energy_j = 0.0;          // sensor-integrated energy at the latest energy update
  double acc_j = 0.0;                    // ∫P since the latest energy update
  double window_j = 0.0;                 // ∫P inside this period's sampled window (partial sampling)
  std::int64_t window_ns = 0;
  double instant_j = 0.0;  // ∫P inside this power period's instant-power window
  std::int64_t instant_ns = 0;
  double instant_w = 0.0;  // latest instant power reading
  // Reported counter = max(0, floor(counter_start_mj + sensor_energy_j·1000 − counter_offset_mj)).
  double counter_start_mj = 0.0;
  double counter_offset_mj = 0.0;  // reset / backwards faults
  // Energy-counter updates: time and sensor energy, for the 1 s average and the sensor truth.
  std::int64_t ring_t[kTickRing] = {};
  double ring_s[kTickRing] = {};
  std::int64_t ring_count = 0;
  // --- faults and observation ----------------------------------------------------------------
  FaultSlot faults[kMaxFaults];
  std::uint64_t calls[kCallKinds] = {};  // atomic (std::atomic_ref): the read path counts without the lock
  // The lock-free read path: the sensor readings as of the last locked read, published with a
  // sequence counter (odd while written). They stay what the driver would report for sim times
  // in [snap_from_ns, snap_until_ns) — until the next sensor update — unless a control event
  // intervenes, which State::control_epoch tells. All accessed atomically.
  std::uint64_t snap_seq = 0;
  std::uint64_t locked_calls = 0;  // calls that took the lock (the others were lock-free reads)
  std::uint64_t snap_epoch = 0;    // control_epoch when published
  std::int64_t snap_from_ns = 0, snap_until_ns = 0;
  std::int64_t snap_real_offset_ns = 0;  // sim time = CLOCK_MONOTONIC + this (real clock only)
  std::int64_t snap_wall_offset_ns = 0;
  std::uint64_t snap_energy_mj = 0;
  std::int64_t snap_energy_wall_us = 0;
  std::uint32_t snap_power_mw = 0;
  std::uint32_t snap_flags = 0;
  std::int64_t snap_power_wall_us = 0;
  // --- thermal drift (Machine::set_thermal_drift; faithful model only) ----------------------
  // A GPU whose cooling cannot keep up: while busy it heats at drift_c_per_s (°C per second at
  // activity 1), sheds that heat only with drift_tau_s (0: never), up to drift_max_c; its power
  // at a given clock and activity rises by drift_leak_per_c per °C of that heat (leakage), so the
  // energy per unit of work rises with it. The reported temperature includes the heat.
  double drift_c_per_s = 0.0;
  double drift_leak_per_c = 0.0;
  double drift_max_c = 0.0;
  double drift_tau_s = 0.0;
  double drift_c = 0.0;  // heat so far, °C above the model's temperature
  // --- AMD ----------------------------------------------------------------------------------
  std::int32_t counter_mode = 0;     // erg::sim::CounterMode
  double die_utilization = 0.0;      // a dual-die card's die: the load asked of this die
  std::int64_t backwards_steps = 0;  // kBackwards: steps taken so far
  // --- processes (version 6) ------------------------------------------------------------------
  ProcTable procs;
  // --- the sensor zoo (version 7; faithful model only) ----------------------------------------
  std::int32_t increment = kIncrementWhole;  // kIncrement*; partial_sampling = (increment != whole)
  std::int32_t average = kAverageBoxcar;     // kAverage*
  std::int32_t stamp_mode = -1;              // kStamp*; -1: the machine-wide meaning (AMD: update time)
  std::int32_t pad7 = 0;
  std::int64_t sample_window_ns = 0;   // the window partial increments sample
  std::int64_t nominal_period_ns = 0;  // what kIncrementPartialNominal multiplies by
  std::int64_t publish_delay_ns = 0;   // an update's readings become readable this long after it
  std::int64_t stamp_unit_us = 0;      // kStampFloored
  std::int64_t stamp_offset_ns = 0;    // kStampUnrelated: constant offset
  double stamp_rate = 0.0;             // kStampUnrelated: drift (relative)
  double avg_exp_w = 0.0;              // kAverageExponential: the average as of the latest energy update
  double ring_a[kTickRing] = {};       // ... and as of each kept energy update (beside ring_t/ring_s)
  // Instant-power updates: time and reading (the energy updates' when shared_ticks).
  std::int64_t pw_t[kPowerRing] = {};
  double pw_w[kPowerRing] = {};
  std::int64_t pw_count = 0;
  // The physical energy at breakpoints between which power is constant (every faithful 1 ms step,
  // every control event): phys_e[k] = energy_j at sim time phys_t[k].
  std::int64_t phys_t[kPhysRing] = {};
  double phys_e[kPhysRing] = {};
  std::int64_t phys_count = 0;
};

/// One nvmlDeviceSetPowerManagementLimit call the driver answered, in the machine's ordered log.
struct LimitLogEntry {
  std::int64_t time_ns = 0;  // sim time of the call
  std::uint32_t gpu = 0;
  std::uint32_t limit_mw = 0;
  std::int32_t nvml_return = 0;
  std::int32_t pad = 0;
};

/// One RAPL energy domain: physics, and the counter the hardware exposes.
struct RaplDomain {
  double power_w = 0.0;        // mean power (set by the control API)
  double step_power_w = 0.0;   // over the current physics step (mean + noise)
  double energy_j = 0.0;       // true energy since creation
  double tick_energy_j = 0.0;  // energy at the latest RAPL update
  double start_j = 0.0;        // where the counter started (seeded)
  double unit_uj = 1.0;        // counter resolution
  std::uint64_t range_uj = 0;
};

struct CpuState {
  std::int32_t dram = 1;
  std::int32_t core = 0;
  double idle_package_w = 0, idle_dram_w = 0;
  std::uint64_t max_energy_range_uj = 0;
  RaplDomain package, dram_domain, core_domain;
};

/// Jetson INA3221 rails (sim/src/jetson_model.hpp advances them; the control API only).
inline constexpr unsigned kMaxRails = 8;
struct RailState {
  char label[32] = {};
  std::uint32_t address = 0, channel = 0, shunt_uohm = 0;
  std::int32_t input = 0;      // the module's input rail: carries every other rail plus power_w
  std::uint32_t position = 0;  // among its chip's enabled channels (conversion order)
  std::uint32_t chip_channels = 0;
  std::uint32_t hwmon = 0;  // hwmonK of its chip
  double bus_v = 0.0;
  double power_w = 0.0;     // mean power (control API); input rails: their own share
  double step_w = 0.0;      // over the current physics step (noise included)
  double energy_j = 0.0;    // true energy since creation
  double shunt_gain = 0.0;  // actual/nominal shunt resistance − 1 (seeded; 1 % parts)
  double slot_j = 0.0;      // ∫P over the current shunt conversion slot
  double avg_w = 0.0;       // sum of the slot means of the current averaging round
  std::uint32_t avg_count = 0;
  std::int32_t in_mv = 0, curr_ma = 0;  // the published readings (what the files show)
  std::uint64_t updates = 0;            // readings published so far
};
struct JetsonState {
  std::int32_t layout = -1;  // erg::sim::JetsonLayout; -1: no Jetson
  std::uint32_t rail_count = 0;
  std::uint32_t samples = 1;       // INA3221 averaging count
  std::int64_t conversion_ns = 0;  // one shunt or bus conversion
  std::int64_t origin_ns = 0;      // conversion cycles count from here (seeded phase)
  std::int64_t last_ns = 0;        // processed up to here
  std::int64_t step_index = 0;     // physics step (from created_ns)
  RailState rails[kMaxRails];
};
struct PowercapAsOf {
  std::uint64_t seq = 0;
  std::int64_t as_of_ns = 0;  // simulated time the value was computed for
  std::uint64_t value_uj = 0;
};
struct State {
  std::uint64_t magic = 0;
  std::uint32_t version = 0;
  std::uint32_t size = 0;
  pthread_mutex_t mutex;
  // Bumped (atomically, under the mutex) by every lock that may change what a sensor reports:
  // control events, faults, clock changes. Locks of the driver's read calls do not bump it.
  std::uint64_t control_epoch = 0;
  std::int32_t privilege = 0;  // erg::sim::Privilege
  std::int32_t virtual_clock = 0;
  std::int32_t faithful = 1;
  std::int32_t stamp_update_time = 0;  // field timestamps: 1 = sensor update time, 0 = read time
  std::uint64_t seed = 0;
  std::int32_t rapl_start = 0;          // erg::sim::RaplStart
  std::int32_t amdsmi_abi = 26;         // what the simulated libamd_smi.so speaks
  std::int64_t virtual_ns = 0;          // sim time while virtual
  std::int64_t real_offset_ns = 0;      // sim time = CLOCK_MONOTONIC + offset while real
  std::int64_t wall_offset_ns = 0;      // wall time = sim time + offset
  std::int64_t created_ns = 0;          // sim time of creation
  std::int32_t lease_pid = 0;           // process that writes the powercap files (real clock)
  std::int64_t lease_heartbeat_ns = 0;  // CLOCK_MONOTONIC of its last refresh
  std::uint32_t gpu_count = 0, cpu_count = 0;
  std::int32_t psys = 0;
  double psys_extra_w = 10.0;  // platform power beyond packages and DRAM
  RaplDomain psys_domain;
  std::int64_t cpu_last_ns = 0;     // CPU packages, DRAM and psys are integrated together
  std::int64_t cpu_step_index = 0;  // from created_ns
  std::int64_t rapl_next_ns = 0;    // next RAPL update
  char spec_text[kSpecTextSize] = {};
  char powercap_root[kPathSize] = {};
  GpuState gpus[kMaxGpus];
  CpuState cpus[kMaxCpus];
  // Every nvmlDeviceSetPowerManagementLimit call the driver answered, machine-wide, in call order
  // (under the lock): entry k sits at limit_log[k % kLimitLogSize]; limit_log_count counts all.
  std::uint64_t limit_log_count = 0;
  LimitLogEntry limit_log[kLimitLogSize];
  JetsonState jetson;  // version 5
  // Bytes per nvmlProcessInfo_t that nvmlDeviceGetComputeRunningProcesses_v3 writes: 0 = 24 (the
  // current headers); 32 = drivers 535.43–535.86 (vendor-abi.md §1.3, the stride hazard).
  std::int32_t process_info_stride = 0;  // version 6
  // --- version 8: what each powercap energy file shows, as of when --------------------------
  // What each energy file shows (files in the tree's fixed order) as of the simulated time it was
  // computed for: one record per refresh, the last kAsOfRing kept, made under the lock before the
  // file is written, so a reader that got a value from the file finds it here. Per entry a
  // seqlock (odd while written); the count is the number of records made.
  PowercapAsOf powercap_as_of[kMaxEnergyFiles][kAsOfRing];
  std::uint64_t powercap_as_of_count[kMaxEnergyFiles] = {};
};

/// CLOCK_MONOTONIC in ns.
std::int64_t monotonic_ns();
/// Simulation time now (virtual, or CLOCK_MONOTONIC + offset). Call under the lock.
std::int64_t sim_now(const State& s);

/// Locks the state's robust mutex (recovering from a dead owner). RAII. A kControl lock (the
/// default) invalidates every published read snapshot; kRead is for calls that only advance the
/// model and read it (the driver's getters).
class Lock {
 public:
  enum Kind { kControl, kRead };
  explicit Lock(State* s, Kind kind = kControl);
  ~Lock();
  Lock(const Lock&) = delete;
  Lock& operator=(const Lock&) = delete;

 private:
  State* s_;
  bool locked_ = false;
};

/// W → mW as the driver reports power (rounded, never negative).
inline std::uint32_t watts_to_mw(double w) { return w <= 0.0 ? 0u : static_cast<std::uint32_t>(w * 1000.0 + 0.5); }

// --- deterministic randomness -----------------------------------------------------------------

std::uint64_t mix64(std::uint64_t x);
/// Uniform in [0, 1) from a key.
double uniform01(std::uint64_t key);
/// Approximately standard normal (sum of four uniforms, scaled; bounded at ±3.46) from a key.
double gauss(std::uint64_t key);

// --- the lock-free read path ----------------------------------------------------------------

inline constexpr std::uint32_t kSnapEnergy = 1;          // the GPU has an energy counter
inline constexpr std::uint32_t kSnapUsageIsInstant = 2;  // nvmlDeviceGetPowerUsage reports instant power
inline constexpr std::uint32_t kSnapStampRead = 4;       // field timestamps are the read time
inline constexpr std::uint32_t kSnapStampUnrelated = 8;  // ... on the GPU's unrelated clock (with kSnapStampRead)

/// A GPU's readings from the lock-free read path.
struct Snapshot {
  std::uint64_t energy_mj = 0;
  std::int64_t energy_wall_us = 0;
  std::uint32_t power_mw = 0;
  std::uint32_t flags = 0;
  std::int64_t power_wall_us = 0;
  std::int64_t now_wall_us = 0;  // the read time, for read-time stamps (the unrelated clock's when kSnapStampUnrelated)
};

/// Publishes GPU `g`'s readings for the lock-free read path (after advance_gpu, under a lock).
/// Nothing is published while the GPU is lost, has faults armed, or the clock is virtual.
void publish_snapshot(const State& s, GpuState& g);
/// Without the lock: the readings the driver would report now, if the published snapshot is
/// still valid (no control event since, the next sensor update not reached); false → take the lock.
bool load_snapshot(const State& s, GpuState& g, Snapshot& out);

/// Initializes a zeroed State's mutex (process-shared, robust). Returns errno or 0.
int init_mutex(State* s);

const Sku& sku_of(const GpuState& g);

// --- GPUs -----------------------------------------------------------------------------------

struct GpuInit {
  int sku_index = 0;
  unsigned position = 0;   // GPU index (salts the seed)
  std::uint64_t seed = 1;  // machine seed
  bool faithful = true;
  int partial_sampling = -1;      // -1: the SKU's default
  double energy_period_ms = 0.0;  // > 0: overrides the SKU's (and its drift)
  double jitter_ms = -1.0;        // ≥ 0: overrides the seeded jitter
  // The sensor zoo (faithful only; GpuSpec documents them).
  std::int32_t schedule = kScheduleGrid;
  double phase_jump_s = 5.0;
  double skip_share = 0.05;
  double change_at_s = 5.0;
  double period_after_ms = 0.0;  // 0: 1.3 × the period
  double publish_delay_ms = 0.0;
  std::int32_t stamps = -1;  // -1: the machine-wide meaning
  double stamp_unit_ms = 1000.0;
  std::int32_t increment = -1;  // -1: from partial_sampling
  std::int32_t average = kAverageBoxcar;
};
/// Initializes a GPU at sim time `now`: idle, default limit, sensor schedules, seeded counter.
void init_gpu(GpuState& g, const GpuInit& init, std::int64_t now);
/// Σ share of the GPU's processes.
double process_demand(const GpuState& g);
/// The load the processes put on the GPU's power model: Σ actual (time-sliced) share × intensity.
double process_activity(const GpuState& g);
/// Gives the GPU's utilization sampler a new nominal period from `now` (its jitter keeps the same
/// share of the period); the samples in progress restart. Under the lock, after advance_gpu(now).
void set_utilization_period(GpuState& g, std::int64_t period_ns, std::int64_t now);
/// Drops the real processes that have exited (kill(pid, 0) fails with ESRCH). True if any was
/// dropped (the caller re-applies the load). Under the lock.
bool reap_exited(GpuState& g);
/// Brings GPU `g` up to `now` (no-op if now ≤ last_ns). Under the lock.
void advance_gpu(GpuState& g, std::int64_t now);
/// Like advance_gpu, but stops as soon as the work counter reaches `target` (before `now`);
/// returns the time it stopped at.
std::int64_t advance_gpu_until_work(GpuState& g, std::int64_t now, double target);
/// Applies changed controls (load, limit, clocks) at the processed time: the control loop's
/// target, and the power and work rate of the rest of the current step. `mean_power_before` is
/// the steady power of the old load (for the load-change transient); pass a negative value when
/// the load did not change. Call after advance_gpu(now).
void controls_changed(GpuState& g, double mean_power_before = -1.0);
/// Steady power of the current load at the current clock (no noise, ripple averaged).
double mean_power_w(const GpuState& g);
/// The load's mean activity (ripple averaged).
double mean_activity(const GpuState& g);
/// Reported energy counter in mJ (after advance_gpu).
std::uint64_t reported_energy_mj(const GpuState& g);
/// The AMD energy accumulator: whole units of 2^-16 J (15.259 µJ, the hardware unit of
/// gpu_metrics energy_accumulator; the library reports a resolution of 15.3 µJ), after
/// advance_gpu. Counter modes apply (frozen: stays at its start).
std::uint64_t reported_amd_count(const GpuState& g);
/// Sim time (ns) of the latest readable energy-counter update (the latest one unless a publish
/// delay holds it back; after advance_gpu).
std::int64_t energy_tick_ns(const GpuState& g);
/// Sim time (ns) of the latest readable instant-power update.
std::int64_t power_tick_ns(const GpuState& g);
/// The sensor energy as of the latest readable energy update (sensor_energy_j without a delay).
double visible_sensor_energy_j(const GpuState& g);
/// Sim time at which the readings next change: the next sensor update of either kind, or the
/// next one to become readable under a publish delay (what ends a read snapshot).
std::int64_t next_sensor_update_ns(const GpuState& g);
/// Instant power reading in W (after advance_gpu): as of the latest readable power update.
double reading_instant_w(const GpuState& g);
/// 1 s average power reading in W (after advance_gpu).
double reading_average_w(const GpuState& g);
/// Temperature in °C from the instant power reading.
int reading_temperature_c(const GpuState& g);
/// The reported SM clock: the table clock nearest the control loop's clock.
unsigned reported_clock_mhz(const GpuState& g);
/// The sensor-integrated energy at sim time `t`, interpolated linearly between the counter
/// updates around it (the sensor's own estimate of each period spread evenly over it). False
/// when `t` is before the oldest kept update or the update after `t` has not happened yet.
bool sensor_energy_at(const GpuState& g, std::int64_t t, double& joules);
/// The physical energy (energy_j) at sim time `t` ≤ last_ns, exactly: linear between the kept
/// breakpoints (power is constant between them). False when `t` is older than the oldest kept.
bool physical_energy_at(const GpuState& g, std::int64_t t, double& joules);

/// Which field a timestamp is for.
enum class StampField { kEnergy, kPowerInstant, kPowerAverage };
/// The stamp mode in effect for NVML fields: the GPU's own, else the machine-wide meaning.
std::int32_t nvml_stamp_mode(const State& s, const GpuState& g);
/// An NVML field timestamp in wall µs for a read at sim time `now` (after advance_gpu(now)).
std::int64_t field_stamp_us(const State& s, const GpuState& g, StampField field, std::int64_t now);
/// The kStampUnrelated clock at sim time `now`, in wall µs.
std::int64_t unrelated_stamp_us(const State& s, const GpuState& g, std::int64_t now);
/// The AMD energy timestamp (ns of the GPU's own clock, from creation) for a read at `now`.
std::int64_t amd_energy_stamp_ns(const State& s, const GpuState& g, std::int64_t now);

// --- CPUs -----------------------------------------------------------------------------------

/// Brings every CPU package, DRAM domain and psys up to `now`.
void advance_cpus(State& s, std::int64_t now);
/// The value `energy_uj` shows for a domain (after advance_cpus).
std::uint64_t rapl_value_uj(const State& s, const RaplDomain& d);
/// Brings every device up to `now`.
void advance_all(State& s, std::int64_t now);

}  // namespace erg::sim::detail
