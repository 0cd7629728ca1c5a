#pragma once
// Internal: the shared state of a simulated machine and the model engine that advances it.
// Used by the control API (erg_sim) and by the simulated libnvidia-ml.so.1, so it depends on
// nothing but libc/pthreads and the SKU table, and never throws.
//
// The state is one POD struct in a file (`dir/state`) that every attached process mmaps
// MAP_SHARED. A robust, process-shared pthread mutex guards it; a process killed while holding
// it leaves it EOWNERDEAD, and the next locker marks it consistent and carries on (every update
// below is a few stores, so the worst case is one lost update).
//
// Model integration is lazy and exact: each device's power is constant between control events
// (utilization, limit, clock changes), so every access under the lock first advances the device
// from `last_ns` to now, adding P·dt to the true energy, and records the readings the sensors
// would show (energy counter at the last 100 ms tick, instant power at the last power tick,
// energies at power ticks for the 1 s average).

#include <pthread.h>

#include <cstdint>

#include "erg/sim/sku.hpp"

namespace erg::sim::detail {

inline constexpr std::uint64_t kMagic = 0x45524753494d5354ULL;  // "ERGSIMST"
inline constexpr std::uint32_t kVersion = 2;
inline constexpr unsigned kMaxGpus = 16;
inline constexpr unsigned kMaxCpus = 8;
inline constexpr unsigned kMaxFaults = 8;
inline constexpr unsigned kRing = 64;       // power ticks kept; ≥ 1 s / shortest power period (20 ms) + 1
inline constexpr unsigned kCallKinds = 32;  // ≥ SimCall::kCount
inline constexpr unsigned kSpecTextSize = 16384;
inline constexpr unsigned kPathSize = 4096;

struct FaultSlot {
  std::int32_t call = -1;  // SimCall value; -1 = free slot
  std::int32_t nvml_return = 0;
  std::int32_t remaining = 0;  // < 0: until cleared
};

struct GpuState {
  // Identity, fixed at creation.
  std::int32_t sku_index = 0;
  char uuid[96] = {};
  // Controls.
  double utilization = 0.0;
  std::uint32_t limit_mw = 0;
  std::uint32_t locked_min_mhz = 0, locked_max_mhz = 0;  // 0/0 = not locked
  std::uint32_t mem_locked_min_mhz = 0, mem_locked_max_mhz = 0;
  std::int32_t persistence = 0;
  std::int32_t lost = 0;
  // Derived from the controls (constant until the next control event).
  double power_w = 0.0;
  double clock_mhz = 0.0;
  double work_rate = 0.0;  // work units per second
  // Integration.
  std::int64_t last_ns = 0;
  double energy_j = 0.0;  // true energy since creation
  double work = 0.0;
  // Energy counter: energy at the latest energy tick ≤ last_ns.
  double tick_energy_j = 0.0;
  // Power sensor: power during the segment holding the latest power tick, and the energies at
  // power ticks (ring[k % kRing]) for averages; ticks first_tick..last_tick are valid.
  double tick_power_w = 0.0;
  std::int64_t first_tick = 0, last_tick = -1;
  double ring[kRing] = {};
  // Reported counter = tick energy (mJ) − counter_base_mj (reset / backwards faults), ≥ 0.
  double counter_base_mj = 0.0;
  FaultSlot faults[kMaxFaults];
  std::uint64_t calls[kCallKinds] = {};  // atomic (std::atomic_ref): the read path counts without the lock
  // The lock-free read path: the sensor readings as of the last locked read, published with a
  // sequence counter (odd while written). They stay what the driver would report for sim times
  // in [snap_from_ns, snap_until_ns) — the next energy or power tick — unless a control event
  // intervenes, which State::control_epoch tells. All accessed atomically.
  std::uint64_t snap_seq = 0;
  std::uint64_t locked_calls = 0;  // calls that took the lock (the others were lock-free reads)
  std::uint64_t snap_epoch = 0;    // control_epoch when published
  std::int64_t snap_from_ns = 0, snap_until_ns = 0;
  std::int64_t snap_real_offset_ns = 0;  // sim time = CLOCK_MONOTONIC + this (real clock only)
  std::uint64_t snap_energy_mj = 0;
  std::int64_t snap_energy_wall_us = 0;
  std::uint32_t snap_power_mw = 0;
  std::uint32_t snap_flags = 0;  // bit 0: energy counter valid; bit 1: instant power is what GetPowerUsage reports
  std::int64_t snap_power_wall_us = 0;
};

struct CpuState {
  std::int32_t dram = 1;
  double idle_package_w = 0, idle_dram_w = 0;
  std::uint64_t max_energy_range_uj = 0;
  double package_w = 0, dram_w = 0;
  double package_j = 0, dram_j = 0;
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
  std::int64_t virtual_ns = 0;          // sim time while virtual
  std::int64_t real_offset_ns = 0;      // sim time = CLOCK_MONOTONIC + offset while real
  std::int64_t wall_offset_ns = 0;      // wall time = sim time + offset
  std::int32_t lease_pid = 0;           // process that writes the powercap files (real clock)
  std::int64_t lease_heartbeat_ns = 0;  // CLOCK_MONOTONIC of its last refresh
  std::uint32_t gpu_count = 0, cpu_count = 0;
  std::int32_t psys = 0;
  double psys_extra_w = 10.0;  // platform power beyond packages and DRAM
  double psys_j = 0.0;
  std::int64_t cpu_last_ns = 0;  // CPU packages, DRAM and psys are integrated together
  char spec_text[kSpecTextSize] = {};
  char powercap_root[kPathSize] = {};
  GpuState gpus[kMaxGpus];
  CpuState cpus[kMaxCpus];
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

inline constexpr std::uint32_t kSnapEnergy = 1;          // the GPU has an energy counter
inline constexpr std::uint32_t kSnapUsageIsInstant = 2;  // nvmlDeviceGetPowerUsage reports instant power

/// A GPU's readings from the lock-free read path.
struct Snapshot {
  std::uint64_t energy_mj = 0;
  std::int64_t energy_wall_us = 0;
  std::uint32_t power_mw = 0;
  std::uint32_t flags = 0;
  std::int64_t power_wall_us = 0;
};

/// Publishes GPU `g`'s readings for the lock-free read path (after advance_gpu, under a lock).
/// Nothing is published while the GPU is lost, has faults armed, or the clock is virtual.
void publish_snapshot(const State& s, GpuState& g);
/// Without the lock: the readings the driver would report now, if the published snapshot is
/// still valid (no control event since, the next tick not reached); false → take the lock.
bool load_snapshot(const State& s, GpuState& g, Snapshot& out);

/// Initializes a zeroed State's mutex (process-shared, robust). Returns errno or 0.
int init_mutex(State* s);

const Sku& sku_of(const GpuState& g);

/// Brings GPU `g` up to `now` (no-op if now ≤ last_ns). Under the lock.
void advance_gpu(GpuState& g, std::int64_t now);
/// Recomputes power, clock and work rate from the controls. Call after advance_gpu(now).
void recompute_gpu(GpuState& g);
/// Initializes a GPU at time `now`.
void init_gpu(GpuState& g, int sku_index, std::int64_t now);
/// Reported energy counter in mJ (after advance_gpu).
std::uint64_t reported_energy_mj(const GpuState& g);
/// Sim time (ns) of the latest energy-counter update, i.e. when the reported counter was
/// produced (after advance_gpu); the driver reports it as the field value's timestamp.
std::int64_t energy_tick_ns(const GpuState& g);
/// Sim time (ns) of the latest instant-power update (after advance_gpu).
std::int64_t power_tick_ns(const GpuState& g);
/// Instant power reading in W (after advance_gpu).
double reading_instant_w(const GpuState& g);
/// 1 s average power reading in W (after advance_gpu).
double reading_average_w(const GpuState& g);
/// Temperature in °C from the instant power reading.
int reading_temperature_c(const GpuState& g);

/// Brings every CPU package, DRAM domain and psys up to `now`.
void advance_cpus(State& s, std::int64_t now);
/// psys power in W (sum of packages and DRAM plus platform power).
double psys_power_w(const State& s);
/// Brings every device up to `now`.
void advance_all(State& s, std::int64_t now);

}  // namespace erg::sim::detail
