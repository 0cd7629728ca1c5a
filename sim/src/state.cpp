#include "state.hpp"

#include <signal.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>

namespace erg::sim::detail {

std::int64_t monotonic_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000LL + ts.tv_nsec;
}

std::int64_t sim_now(const State& s) { return s.virtual_clock != 0 ? s.virtual_ns : monotonic_ns() + s.real_offset_ns; }

Lock::Lock(State* s, Kind kind) : s_(s) {
  int rc = ::pthread_mutex_lock(&s_->mutex);
  if (rc == EOWNERDEAD) {
    // A process died holding the lock (tests SIGKILL children). Every update is a handful of
    // stores, so the state is usable; mark the mutex consistent and continue.
    ::pthread_mutex_consistent(&s_->mutex);
    rc = 0;
  }
  locked_ = rc == 0;
  // Before any change this lock may make: a reader that still sees the old epoch reads as if
  // it ran before this lock.
  if (kind == kControl) std::atomic_ref(s_->control_epoch).fetch_add(1, std::memory_order_acq_rel);
}

Lock::~Lock() {
  if (locked_) ::pthread_mutex_unlock(&s_->mutex);
}

int init_mutex(State* s) {
  pthread_mutexattr_t attr;
  int rc = ::pthread_mutexattr_init(&attr);
  if (rc != 0) return rc;
  rc = ::pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
  if (rc == 0) rc = ::pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
  if (rc == 0) rc = ::pthread_mutex_init(&s->mutex, &attr);
  ::pthread_mutexattr_destroy(&attr);
  return rc;
}

const Sku& sku_of(const GpuState& g) { return all_skus()[static_cast<std::size_t>(g.sku_index)]; }

std::uint64_t mix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

double uniform01(std::uint64_t key) { return static_cast<double>(mix64(key) >> 11) * 0x1.0p-53; }

double gauss(std::uint64_t key) {
  // Irwin–Hall with four terms: mean 2, variance 1/3; cheap, smooth enough, and bounded.
  const std::uint64_t h = mix64(key);
  const std::uint64_t h2 = mix64(h ^ 0x5bd1e9955bd1e995ULL);
  const double sum = static_cast<double>(h & 0xffffffffULL) + static_cast<double>(h >> 32) +
                     static_cast<double>(h2 & 0xffffffffULL) + static_cast<double>(h2 >> 32);
  return (sum * 0x1.0p-32 - 2.0) * 1.7320508075688772;
}

namespace {

constexpr double kNsPerS = 1e9;

// --- model constants (sim/README.md, "The faithful model") --------------------------------
// Electrical response of the board to a change of demand (VRM and decoupling; kernels ramp in
// a few ms): first-order lag.
constexpr double kElecTauMs = 2.0;
// Load-change transient: an overshoot (or dip) of this share of the change of mean power,
// decaying with kTransientTauMs.
constexpr double kTransientGain = 0.2;
constexpr double kTransientTauMs = 25.0;
// The power-limit control loop: the SM clock approaches the clock the limit allows with these
// time constants — slowly when it must come down (the cap settles over ~0.5 s: 3τ ≈ 0.45 s to
// within 5 %), fast when the GPU may boost.
constexpr double kClockDownTauMs = 150.0;
constexpr double kClockUpTauMs = 15.0;
// Physical power noise per 1 ms step: relative and absolute parts (σ).
constexpr double kNoiseRel = 0.015;
constexpr double kNoiseAbsW = 0.3;
// Sensors: per-device gain error (uniform ±), per-update noise (σ), update-period drift
// (uniform ±), update jitter σ as a share of the period (uniform in the range).
constexpr double kGainError = 0.02;
constexpr double kUpdateNoise = 0.003;
constexpr double kPeriodDrift = 0.0005;
constexpr double kJitterMin = 0.001, kJitterMax = 0.01;
// RAPL package power noise per step (σ, relative).
constexpr double kCpuNoiseRel = 0.02;

// Seed salts, one per random quantity.
enum Salt : std::uint64_t {
  kSaltGain = 1,
  kSaltEnergyTicks,
  kSaltPowerTicks,
  kSaltNoise,
  kSaltUpdateNoise,
  kSaltCounterStart,
  kSaltPhase,
  kSaltDrift,
  kSaltJitter,
  kSaltCpu,
  kSaltUtilTicks,
  kSaltStamp,
};

// The sensor zoo (sim/README.md, "Sensors").
// A random-walk step is never shorter than this (a huge jitter must not reorder updates).
constexpr std::int64_t kMinWalkStepNs = 1000;
// Phase jumps: the jump, as a share of the period (uniform in the range).
constexpr double kJumpMin = 0.2, kJumpMax = 0.8;
// Partial increments on a SKU that samples no window of its own sample this one.
constexpr std::int64_t kDefaultSampledWindowNs = 25'000'000;
// Period change: the default new period, relative to the old one.
constexpr double kPeriodAfterDefault = 1.3;
// The exponential average's time constant.
constexpr double kAverageTauS = 1.0;
// The unrelated stamp clock: a constant offset uniform in this range (s) and a drift uniform in ±.
constexpr double kUnrelatedOffsetMinS = 3.0, kUnrelatedOffsetMaxS = 8.0;
constexpr double kUnrelatedDrift = 1e-3;

std::uint64_t key(std::uint64_t seed, std::uint64_t salt, std::uint64_t a = 0, std::uint64_t b = 0) {
  return mix64(mix64(mix64(seed ^ (salt * 0x100000001b3ULL)) ^ a) ^ b);
}

std::int64_t floor_div(std::int64_t a, std::int64_t b) {
  std::int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

double decay(double tau_ms) { return std::exp(-1.0 / tau_ms); }  // per 1 ms step

// Per-step factors of the physics lags. Namespace scope, not function-local statics: those need
// the C++ runtime's guard functions, which the simulated driver does not link.
const double kUp = 1.0 - decay(kClockUpTauMs), kDown = 1.0 - decay(kClockDownTauMs);
const double kElec = 1.0 - decay(kElecTauMs), kTrans = decay(kTransientTauMs);

/// Update k's offset from its schedule: clip(σ·g_k, ±3σ), whole ns.
std::int64_t jitter_of(const TickSeries& t, std::int64_t k) {
  if (t.jitter_ns <= 0.0) return 0;
  const double j = std::clamp(t.jitter_ns * gauss(mix64(t.salt ^ static_cast<std::uint64_t>(k))), -3.0 * t.jitter_ns,
                              3.0 * t.jitter_ns);
  return static_cast<std::int64_t>(std::llround(j));
}

std::int64_t tick_time(const TickSeries& t, std::int64_t k) { return t.origin_ns + k * t.period_ns + jitter_of(t, k); }

/// A seeded uniform draw of the sensor zoo's schedules: `what` names the quantity, `k` its index.
double zoo_uniform(const TickSeries& t, std::uint64_t what, std::int64_t k) {
  return uniform01(mix64(mix64(t.salt ^ (what * 0x9e3779b97f4a7c15ULL)) ^ static_cast<std::uint64_t>(k)));
}

/// The next update of a sequential (sensor zoo) schedule after t.last_ns; moves the schedule's
/// state on. t.next_index is the index of the update being scheduled.
std::int64_t zoo_next(TickSeries& t) {
  switch (t.schedule) {
    case kScheduleRandomWalk:  // τ_k = τ_{k−1} + period + clip(σ·g_k, ±3σ)
      return t.last_ns + std::max(kMinWalkStepNs, t.period_ns + jitter_of(t, t.next_index));
    case kSchedulePhaseJumps: {
      std::int64_t at = tick_time(t, t.grid_k);
      while (t.event_ns > 0 && at >= t.event_ns) {  // a jump: this and every later update moves later
        const double share = kJumpMin + (kJumpMax - kJumpMin) * zoo_uniform(t, 1, t.jumps);
        t.origin_ns += std::llround(share * static_cast<double>(t.period_ns));
        ++t.jumps;
        t.event_ns += t.every_ns;
        at = tick_time(t, t.grid_k);
      }
      ++t.grid_k;
      return at;
    }
    case kScheduleSkips:
      for (;;) {
        const std::int64_t k = t.grid_k;
        const double u = zoo_uniform(t, 2, k);
        if (u < t.skip_share) {  // skipped: the next update covers this period too
          ++t.grid_k;
          continue;
        }
        if (u < 2.0 * t.skip_share && t.mid_done == 0) {  // doubled: first an update in the middle
          t.mid_done = 1;
          return tick_time(t, k - 1) + (tick_time(t, k) - tick_time(t, k - 1)) / 2;
        }
        t.mid_done = 0;
        ++t.grid_k;
        return tick_time(t, k);
      }
    case kSchedulePeriodChange: {
      const std::int64_t k = t.grid_k++;
      if (t.jumps == 0 && t.origin_ns + k * t.period_ns >= t.event_ns) {
        // The grid goes on from its last nominal point before the change with the new period.
        const std::int64_t prev = t.origin_ns + (k - 1) * t.period_ns;
        t.period_ns = t.period_after_ns;
        t.origin_ns = prev - (k - 1) * t.period_ns;
        t.jumps = 1;
      }
      return tick_time(t, k);
    }
    default: return tick_time(t, t.next_index);
  }
}

void step_series(TickSeries& t) {
  t.last_ns = t.next_ns;
  ++t.next_index;
  t.next_ns = t.schedule == kScheduleGrid ? tick_time(t, t.next_index) : zoo_next(t);
}

/// Sets up a schedule so that last_ns ≤ now < next_ns.
void init_series(TickSeries& t, std::int64_t now) {
  if (t.schedule != kScheduleGrid) {
    // Sequential: from the grid point before the first one (the period under way at creation).
    t.grid_k = 0;
    t.mid_done = 0;
    t.next_index = 0;
    t.last_ns = std::min(tick_time(t, -1), now);
    t.next_ns = zoo_next(t);
    while (t.next_ns <= now) step_series(t);
    return;
  }
  std::int64_t k = floor_div(now - t.origin_ns, t.period_ns);
  while (tick_time(t, k) > now) --k;
  while (tick_time(t, k + 1) <= now) ++k;
  t.last_ns = tick_time(t, k);
  t.next_index = k + 1;
  t.next_ns = tick_time(t, k + 1);
}

std::int64_t sampled_window_ns(const GpuState& g) { return g.partial_sampling ? g.sample_window_ns : 0; }
std::int64_t instant_window_ns(const GpuState& g) {
  return g.faithful ? static_cast<std::int64_t>(sku_of(g).instant_window_ms) * 1'000'000 : 0;
}
const TickSeries& power_series(const GpuState& g) { return g.shared_ticks ? g.energy_ticks : g.power_ticks; }

bool in_low_phase(const GpuState& g, std::int64_t t) {
  if (g.step_ns <= 0 || g.ripple_depth <= 0.0) return false;
  const std::int64_t pos = (t - g.load_origin_ns) % g.step_ns;
  const std::int64_t p = pos < 0 ? pos + g.step_ns : pos;
  return static_cast<double>(p) >= (1.0 - g.ripple_duty) * static_cast<double>(g.step_ns);
}

double activity(const GpuState& g, std::int64_t t) {
  return in_low_phase(g, t) ? g.utilization * (1.0 - g.ripple_depth) : g.utilization;
}

double clock_floor(const GpuState& g) { return g.locked_max_mhz != 0 ? g.locked_min_mhz : 0.0; }
double clock_cap(const GpuState& g) { return g.locked_max_mhz != 0 ? g.locked_max_mhz : sku_of(g).max_sm_mhz; }

void update_target(GpuState& g) {
  const Sku& sku = sku_of(g);
  const unsigned cap = static_cast<unsigned>(clock_cap(g));
  const unsigned floor = static_cast<unsigned>(clock_floor(g));
  // The limit binds on the load's average power: the controller averages over many steps.
  g.target_clock_mhz = model_clock_mhz(sku, mean_activity(g), g.limit_mw / 1000.0, cap, g.mem_ratio, floor);
}

/// Power and work rate of the segment starting at `t` from the current physics state.
void evaluate(GpuState& g, std::int64_t t) {
  const Sku& sku = sku_of(g);
  if (!g.faithful) {
    g.power_w = model_power_w(sku, g.clock_mhz, g.utilization, g.mem_ratio);
    g.work_rate = g.utilization * model_speed(sku, g.clock_mhz, g.mem_ratio);
    return;
  }
  const double a = activity(g, t);
  const double noise =
      (kNoiseRel * g.elec_w + kNoiseAbsW) * gauss(key(g.seed, kSaltNoise, static_cast<std::uint64_t>(g.step_index)));
  // A dual-die card's second die draws nothing of its own (its power is the card's, on die 0).
  g.power_w = sku.secondary_die ? 0.0 : std::max(0.0, g.elec_w + noise);
  g.work_rate = a * model_speed(sku, g.clock_mhz, g.mem_ratio);
}

/// The physics step that starts at `t` (faithful model only).
void physics_step(GpuState& g, std::int64_t t) {
  const Sku& sku = sku_of(g);
  const double target = g.target_clock_mhz;
  g.clock_mhz += (target - g.clock_mhz) * (target < g.clock_mhz ? kDown : kUp);
  if (std::abs(g.clock_mhz - target) < 0.5) g.clock_mhz = target;
  g.clock_mhz = std::clamp(g.clock_mhz, std::max<double>(clock_floor(g), sku.min_sm_mhz), clock_cap(g));
  // The transient rides on the demand and both pass the board's electrical response.
  g.transient_w *= kTrans;
  if (std::abs(g.transient_w) < 1e-3) g.transient_w = 0.0;
  const double a = activity(g, t);
  if (g.drift_c_per_s > 0.0 || g.drift_c > 0.0) {  // thermal drift (set_thermal_drift): one 1 ms step
    if (g.drift_tau_s > 0.0) g.drift_c -= g.drift_c * (1e-3 / g.drift_tau_s);
    g.drift_c = std::clamp(g.drift_c + g.drift_c_per_s * a * 1e-3, 0.0, g.drift_max_c);
  }
  const double leakage = 1.0 + g.drift_leak_per_c * g.drift_c;
  const double demand = model_power_w(sku, g.clock_mhz, a, g.mem_ratio) * leakage + g.transient_w;
  g.elec_w += (demand - g.elec_w) * kElec;
  evaluate(g, t);
}

void push_ring(GpuState& g, std::int64_t t, double s) {
  const auto i = static_cast<std::size_t>(g.ring_count % kTickRing);
  g.ring_t[i] = t;
  g.ring_s[i] = s;
  g.ring_a[i] = g.avg_exp_w;
  ++g.ring_count;
}

void push_power(GpuState& g, std::int64_t t, double w) {
  const auto i = static_cast<std::size_t>(g.pw_count % kPowerRing);
  g.pw_t[i] = t;
  g.pw_w[i] = w;
  ++g.pw_count;
}

/// A physical breakpoint: power may change after `t` (a physics step, a control event).
void push_phys(GpuState& g, std::int64_t t) {
  if (g.phys_count > 0 && g.phys_t[static_cast<std::size_t>((g.phys_count - 1) % kPhysRing)] == t) {
    g.phys_e[static_cast<std::size_t>((g.phys_count - 1) % kPhysRing)] = g.energy_j;  // the same instant
    return;
  }
  const auto i = static_cast<std::size_t>(g.phys_count % kPhysRing);
  g.phys_t[i] = t;
  g.phys_e[i] = g.energy_j;
  ++g.phys_count;
}

void power_update(GpuState& g) {
  const TickSeries& ps = power_series(g);
  if (g.instant_ns > 0) {
    double w = g.instant_j / (static_cast<double>(g.instant_ns) / kNsPerS);
    if (g.faithful)
      w *= (1.0 + g.gain) *
           (1.0 + kUpdateNoise * gauss(key(g.seed, kSaltUpdateNoise, 2, static_cast<std::uint64_t>(ps.next_index))));
    g.instant_w = std::max(0.0, w);
  } else {
    g.instant_w = g.power_w;  // ideal: the power of the segment that ended at the update
  }
  g.instant_j = 0.0;
  g.instant_ns = 0;
  push_power(g, ps.next_ns, g.instant_w);
}

void energy_update(GpuState& g) {
  const TickSeries& et = g.energy_ticks;
  const double period_s = static_cast<double>(et.next_ns - et.last_ns) / kNsPerS;
  double inc = g.acc_j;
  if (g.partial_sampling) {
    // The sampled window's mean power times the actual period, or (partial_nominal) the nominal one.
    const double times_s =
        g.increment == kIncrementPartialNominal ? static_cast<double>(g.nominal_period_ns) / kNsPerS : period_s;
    inc = (g.window_ns > 0 ? g.window_j / (static_cast<double>(g.window_ns) / kNsPerS) : g.power_w) * times_s;
  }
  if (g.faithful)
    inc *= (1.0 + g.gain) *
           (1.0 + kUpdateNoise * gauss(key(g.seed, kSaltUpdateNoise, 1, static_cast<std::uint64_t>(et.next_index))));
  g.sensor_energy_j += std::max(0.0, inc);
  if (g.average == kAverageExponential && period_s > 0.0)  // A += (p − A)(1 − e^(−Δ/τ)), p = this update's power
    g.avg_exp_w += (std::max(0.0, inc) / period_s - g.avg_exp_w) * (1.0 - std::exp(-period_s / kAverageTauS));
  // kBackwards (CounterMode, ROCm/amdsmi #115): every 2 s the counter steps back by about 50 ms
  // of energy, then counts on.
  if (g.counter_mode == 2 && et.period_ns > 0) {
    const std::int64_t every = std::max<std::int64_t>(1, 2'000'000'000 / et.period_ns);
    if (et.next_index % every == 0) {
      const double back_j = std::max(0.0, inc) * (50e6 / static_cast<double>(et.period_ns));
      g.counter_offset_mj += back_j * 1000.0;
      ++g.backwards_steps;
    }
  }
  g.acc_j = 0.0;
  g.window_j = 0.0;
  g.window_ns = 0;
  push_ring(g, et.next_ns, g.sensor_energy_j);
  {  // the process truth as of this update
    ProcTable& t = g.procs;
    const auto k = static_cast<std::size_t>(t.truth_count % kTruthRing);
    t.truth_t[k] = et.next_ns;
    t.truth_idle[k] = t.idle_j;
    t.truth_unattributed[k] = t.unattributed_j;
    for (unsigned i = 0; i < kMaxProcs; ++i) {
      t.truth_pid[k][i] = t.slots[i].pid;
      t.truth_energy[k][i] = t.slots[i].energy_j;
      t.truth_busy[k][i] = t.slots[i].busy_s;
    }
    ++t.truth_count;
  }
  if (g.shared_ticks) power_update(g);
  step_series(g.energy_ticks);
}

/// The processes' part of a segment of `ns` with energy `e`: their time-sliced busy time and
/// the truth of their energy. While the GPU is oversubscribed (Σ share > 1) each process runs
/// share / Σ share of the time; the energy above the SKU's idle power is split in proportion.
void account_processes(GpuState& g, std::int64_t ns, double e) {
  ProcTable& t = g.procs;
  const Sku& sku = sku_of(g);
  const double dt = static_cast<double>(ns) / kNsPerS;
  const double idle = sku.secondary_die ? 0.0 : sku.idle_w * dt;
  t.idle_j += idle;
  const double excess = e - idle;
  double total = 0.0, weight = 0.0;
  for (const auto& p : t.slots)
    if (p.pid != 0) total += p.share, weight += p.share * p.intensity;
  if (total <= 0.0 || weight <= 0.0) {
    t.unattributed_j += excess;
    return;
  }
  const double scale = total > 1.0 ? 1.0 / total : 1.0;
  for (auto& p : t.slots) {
    if (p.pid == 0 || p.share <= 0.0) continue;
    p.busy_ns += p.share * scale * static_cast<double>(ns);
    p.busy_s += p.share * scale * dt;
    // Its part of the power model's activity: time share × its power per unit of activity.
    p.energy_j += excess * p.share * p.intensity / weight;
  }
}

/// A utilization sample for every process that ran in the period that ends now: its busy share
/// in whole percent (the driver reports integers), into the bounded buffer.
void sample_processes(GpuState& g) {
  ProcTable& t = g.procs;
  const double period = static_cast<double>(t.ticks.next_ns - t.ticks.last_ns);
  for (auto& p : t.slots) {
    if (p.pid == 0 || p.busy_ns <= 0.0 || period <= 0.0) {
      p.busy_ns = 0.0;
      continue;
    }
    const double pct = std::min(100.0, std::round(100.0 * p.busy_ns / period));
    UtilSample& u = t.ring[t.ring_count % kUtilRing];
    u.time_ns = t.ticks.next_ns;
    u.pid = p.pid;
    u.sm = static_cast<std::uint32_t>(pct);
    u.mem = static_cast<std::uint32_t>(std::round(0.4 * pct));  // memory traffic: a fixed part of it
    u.pad = 0;
    ++t.ring_count;
    p.busy_ns = 0.0;
  }
}

/// The segment loop shared by advance_gpu and advance_gpu_until_work.
std::int64_t run(GpuState& g, std::int64_t now, const double* work_target) {
  const std::int64_t sw = sampled_window_ns(g);
  const std::int64_t iw = instant_window_ns(g);
  while (g.last_ns < now) {
    const std::int64_t last = g.last_ns;
    std::int64_t end = now;
    const std::int64_t step_end = g.epoch_ns + (g.step_index + 1) * kStepNs;
    if (g.faithful) end = std::min(end, step_end);
    const std::int64_t e_next = g.energy_ticks.next_ns;
    const std::int64_t p_next = power_series(g).next_ns;
    end = std::min(end, e_next);
    if (!g.shared_ticks) end = std::min(end, p_next);
    const std::int64_t u_next = g.procs.ticks.next_ns;
    if (g.procs.ticks.period_ns > 0) end = std::min(end, u_next);
    const std::int64_t w_start = e_next - sw, i_start = p_next - iw;
    if (sw > 0 && w_start > last) end = std::min(end, w_start);
    if (iw > 0 && i_start > last) end = std::min(end, i_start);

    if (work_target != nullptr && g.work_rate > 0.0) {
      const double left = *work_target - g.work;
      if (left <= 0.0) return last;
      const double need_ns = std::ceil(left / g.work_rate * kNsPerS);
      if (need_ns < static_cast<double>(end - last)) end = last + static_cast<std::int64_t>(need_ns);
    }
    const double dt = static_cast<double>(end - last) / kNsPerS;
    const double e = g.power_w * dt;
    g.energy_j += e;
    g.work += g.work_rate * dt;
    g.acc_j += e;
    account_processes(g, end - last, e);
    if (sw > 0 && last >= w_start) g.window_j += e, g.window_ns += end - last;
    if (iw > 0 && last >= i_start) g.instant_j += e, g.instant_ns += end - last;
    g.last_ns = end;
    if (end == e_next) energy_update(g);
    if (g.procs.ticks.period_ns > 0 && end == u_next) {
      sample_processes(g);
      step_series(g.procs.ticks);
    }
    if (!g.shared_ticks && end == p_next) {
      power_update(g);
      step_series(g.power_ticks);
    }
    if (g.faithful && end == step_end) {
      ++g.step_index;
      physics_step(g, end);
      push_phys(g, end);
    }
    if (work_target != nullptr && g.work >= *work_target) return end;
  }
  return g.last_ns;
}

}  // namespace

double mean_activity(const GpuState& g) {
  return g.step_ns > 0 ? g.utilization * (1.0 - g.ripple_depth * g.ripple_duty) : g.utilization;
}

double mean_power_w(const GpuState& g) { return model_power_w(sku_of(g), g.clock_mhz, mean_activity(g), g.mem_ratio); }

void init_gpu(GpuState& g, const GpuInit& init, std::int64_t now) {
  g.sku_index = init.sku_index;
  const Sku& sku = sku_of(g);
  g.seed = key(init.seed, 0x6770755fULL, init.position);  // "gpu_"
  g.faithful = init.faithful ? 1 : 0;
  g.partial_sampling =
      (init.faithful && (init.partial_sampling < 0 ? sku.sampled_window_ms > 0 : init.partial_sampling != 0)) ? 1 : 0;
  if (g.partial_sampling && sku.sampled_window_ms == 0) g.partial_sampling = 0;  // nothing to sample
  g.sample_window_ns = sku.sampled_window_ms > 0 ? static_cast<std::int64_t>(sku.sampled_window_ms) * 1'000'000
                                                 : kDefaultSampledWindowNs;
  g.increment = g.partial_sampling ? kIncrementPartial : kIncrementWhole;
  // The sensor zoo: faithful only (the ideal model has every imperfection off).
  if (init.faithful && init.increment >= 0) {
    g.increment = init.increment;
    g.partial_sampling = init.increment != kIncrementWhole ? 1 : 0;
  }
  g.average = init.faithful ? init.average : kAverageBoxcar;
  g.stamp_mode = init.faithful ? init.stamps : -1;
  g.publish_delay_ns = init.faithful ? std::llround(init.publish_delay_ms * 1e6) : 0;
  g.stamp_unit_us = std::max<std::int64_t>(1, std::llround(init.stamp_unit_ms * 1e3));
  g.stamp_offset_ns = std::llround(1e9 * (kUnrelatedOffsetMinS + (kUnrelatedOffsetMaxS - kUnrelatedOffsetMinS) *
                                                                     uniform01(key(g.seed, kSaltStamp, 1))));
  g.stamp_rate = kUnrelatedDrift * (2.0 * uniform01(key(g.seed, kSaltStamp, 2)) - 1.0);
  g.nominal_period_ns =
      std::llround((init.faithful && init.energy_period_ms > 0.0 ? init.energy_period_ms : sku.energy_period_ms) * 1e6);
  g.shared_ticks = sku.power_period_ms == sku.energy_period_ms ? 1 : 0;  // (see custom below)
  g.gain = init.faithful ? kGainError * (2.0 * uniform01(key(g.seed, kSaltGain)) - 1.0) : 0.0;
  g.limit_mw = sku.default_limit_w * 1000u;
  g.mem_ratio = 1.0;
  for (auto& f : g.faults) f = FaultSlot{};

  auto make_series = [&](TickSeries& t, double period_ms, std::uint64_t salt, double override_ms, double jitter_ms,
                         bool zoo = false) {
    const double nominal = period_ms * 1e6;
    if (init.faithful) {
      const double drift = kPeriodDrift * (2.0 * uniform01(key(g.seed, kSaltDrift, salt)) - 1.0);
      t.period_ns = override_ms > 0.0 ? static_cast<std::int64_t>(override_ms * 1e6)
                                      : static_cast<std::int64_t>(std::llround(nominal * (1.0 + drift)));
      t.origin_ns =
          now + static_cast<std::int64_t>(uniform01(key(g.seed, kSaltPhase, salt)) * static_cast<double>(t.period_ns));
      const double share = kJitterMin + (kJitterMax - kJitterMin) * uniform01(key(g.seed, kSaltJitter, salt));
      t.jitter_ns = jitter_ms >= 0.0 ? jitter_ms * 1e6 : share * static_cast<double>(t.period_ns);
    } else {
      t.period_ns = static_cast<std::int64_t>(nominal);
      t.origin_ns = 0;
      t.jitter_ns = 0.0;
    }
    t.salt = key(g.seed, salt);
    if (zoo && init.faithful && init.schedule != kScheduleGrid) {
      t.schedule = init.schedule;
      t.every_ns = std::llround(init.phase_jump_s * 1e9);
      t.skip_share = init.skip_share;
      t.period_after_ns = init.period_after_ms > 0.0
                              ? std::llround(init.period_after_ms * 1e6)
                              : std::llround(kPeriodAfterDefault * static_cast<double>(t.period_ns));
      if (init.schedule == kSchedulePhaseJumps) t.event_ns = now + t.every_ns;
      if (init.schedule == kSchedulePeriodChange) t.event_ns = now + std::llround(init.change_at_s * 1e9);
    }
    init_series(t, now);
  };
  const bool custom = init.faithful && (init.energy_period_ms > 0.0 || init.jitter_ms >= 0.0);
  if (custom) g.shared_ticks = 0;  // the power fields keep the SKU's schedule
  make_series(g.energy_ticks, sku.energy_period_ms, kSaltEnergyTicks, init.energy_period_ms, init.jitter_ms, true);
  if (!g.shared_ticks) make_series(g.power_ticks, sku.power_period_ms, kSaltPowerTicks, 0.0, -1.0);
  g.procs = ProcTable{};
  make_series(g.procs.ticks, static_cast<double>(kUtilPeriodNs) / 1e6, kSaltUtilTicks, 0.0, -1.0);

  // Idle at the lowest clock, settled.
  g.utilization = 0.0;
  update_target(g);
  g.clock_mhz = g.target_clock_mhz;
  g.elec_w = model_power_w(sku, g.clock_mhz, 0.0, g.mem_ratio);
  g.transient_w = 0.0;
  g.last_ns = now;
  g.epoch_ns = now;
  g.step_index = 0;
  evaluate(g, now);

  // The device existed before the simulation: the sensor periods under way at creation are
  // credited with the idle power from their start, so the first update reports a whole period.
  const double p0 = g.elec_w;
  const std::int64_t since_e = now - g.energy_ticks.last_ns;
  g.acc_j = p0 * static_cast<double>(since_e) / kNsPerS;
  const std::int64_t sw = sampled_window_ns(g);
  if (sw > 0) {
    const std::int64_t ws = std::max(g.energy_ticks.next_ns - sw, g.energy_ticks.last_ns);
    if (now > ws) g.window_ns = now - ws, g.window_j = p0 * static_cast<double>(g.window_ns) / kNsPerS;
  }
  const std::int64_t iw = instant_window_ns(g);
  const TickSeries& ps = power_series(g);
  if (iw > 0) {
    const std::int64_t is = std::max(ps.next_ns - iw, ps.last_ns);
    if (now > is) g.instant_ns = now - is, g.instant_j = p0 * static_cast<double>(g.instant_ns) / kNsPerS;
  }
  g.instant_w = p0;
  g.avg_exp_w = p0;
  g.sensor_energy_j = 0.0;
  g.ring_count = 0;
  push_ring(g, g.energy_ticks.last_ns, 0.0);
  g.pw_count = 0;
  push_power(g, ps.last_ns, p0);
  g.phys_count = 0;
  push_phys(g, now);
  // A driver loaded long ago: the counter starts at a seeded value (1 MJ to 100 MJ in mJ).
  g.counter_start_mj = init.faithful ? std::floor(1e9 + 99e9 * uniform01(key(g.seed, kSaltCounterStart))) : 0.0;
  g.counter_offset_mj = 0.0;
}

double process_demand(const GpuState& g) {
  double total = 0.0;
  for (const auto& p : g.procs.slots)
    if (p.pid != 0) total += p.share;
  return total;
}

void set_utilization_period(GpuState& g, std::int64_t period_ns, std::int64_t now) {
  TickSeries& t = g.procs.ticks;
  const double share = t.period_ns > 0 ? t.jitter_ns / static_cast<double>(t.period_ns) : 0.0;
  t.period_ns = period_ns;
  t.origin_ns = now;
  t.jitter_ns = share * static_cast<double>(period_ns);
  init_series(t, now);
  for (auto& p : g.procs.slots) p.busy_ns = 0.0;
}

double process_activity(const GpuState& g) {
  const double total = process_demand(g);
  const double scale = total > 1.0 ? 1.0 / total : 1.0;
  double a = 0.0;
  for (const auto& p : g.procs.slots)
    if (p.pid != 0) a += p.share * scale * p.intensity;
  return std::min(1.0, a);
}

bool reap_exited(GpuState& g) {
  bool any = false;
  for (auto& p : g.procs.slots) {
    if (p.pid == 0 || p.real == 0) continue;
    if (::kill(p.pid, 0) != 0 && errno == ESRCH) {
      p = ProcSlot{};
      any = true;
    }
  }
  return any;
}

void advance_gpu(GpuState& g, std::int64_t now) {
  if (now > g.last_ns) run(g, now, nullptr);
}

std::int64_t advance_gpu_until_work(GpuState& g, std::int64_t now, double target) {
  if (g.work >= target) return g.last_ns;
  if (now <= g.last_ns) return g.last_ns;
  return run(g, now, &target);
}

void controls_changed(GpuState& g, double mean_power_before) {
  const Sku& sku = sku_of(g);
  // Memory clock: the highest supported one within a lock, if any (else the lowest supported).
  double mem = sku.mem_clocks_mhz[0];
  if (g.mem_locked_max_mhz != 0 && mem > 0) {
    const unsigned n = mem_clock_count(sku);
    mem = sku.mem_clocks_mhz[n - 1];
    for (unsigned i = 0; i < n; ++i)
      if (sku.mem_clocks_mhz[i] <= g.mem_locked_max_mhz) {
        mem = sku.mem_clocks_mhz[i];
        break;
      }
  }
  g.mem_ratio = sku.mem_clocks_mhz[0] != 0 ? mem / sku.mem_clocks_mhz[0] : 1.0;
  update_target(g);
  push_phys(g, g.last_ns);  // power may change from here (the ideal model's does)
  if (!g.faithful) {
    g.clock_mhz = g.target_clock_mhz;
    g.elec_w = mean_power_w(g);
  } else {
    // Locked clocks act at once (a hard cap); the power limit through the control loop.
    g.clock_mhz = std::clamp(g.clock_mhz, std::max<double>(clock_floor(g), sku.min_sm_mhz), clock_cap(g));
    if (mean_power_before >= 0.0) g.transient_w += kTransientGain * (mean_power_w(g) - mean_power_before);
  }
  evaluate(g, g.last_ns);
}

namespace {

std::size_t ring_at(std::int64_t k) { return static_cast<std::size_t>(k % kTickRing); }
std::size_t power_at(std::int64_t k) { return static_cast<std::size_t>(k % kPowerRing); }

/// The latest energy update readable at the processed time (a count into ring_t/ring_s): the
/// latest one, or under a publish delay the latest at least that old (the oldest kept at worst).
std::int64_t visible_update(const GpuState& g) {
  std::int64_t k = g.ring_count - 1;
  if (g.publish_delay_ns <= 0) return k;
  const std::int64_t oldest = std::max<std::int64_t>(0, g.ring_count - kTickRing);
  const std::int64_t cutoff = g.last_ns - g.publish_delay_ns;
  while (k > oldest && g.ring_t[ring_at(k)] > cutoff) --k;
  return k;
}

/// The same for the instant-power updates (pw_t/pw_w).
std::int64_t visible_power(const GpuState& g) {
  std::int64_t k = g.pw_count - 1;
  if (g.publish_delay_ns <= 0) return k;
  const std::int64_t oldest = std::max<std::int64_t>(0, g.pw_count - kPowerRing);
  const std::int64_t cutoff = g.last_ns - g.publish_delay_ns;
  while (k > oldest && g.pw_t[power_at(k)] > cutoff) --k;
  return k;
}

/// The boxcar average's span as of update `last`: from update `from` (from == last: fewer than
/// two updates yet).
std::int64_t average_from(const GpuState& g, std::int64_t last) {
  const std::int64_t oldest = std::max<std::int64_t>(0, g.ring_count - kTickRing);
  const std::int64_t per_second = std::max<std::int64_t>(1, 1000 / sku_of(g).energy_period_ms);
  return std::max(oldest, last - per_second);
}

}  // namespace

double visible_sensor_energy_j(const GpuState& g) {
  return g.publish_delay_ns <= 0 ? g.sensor_energy_j : g.ring_s[ring_at(visible_update(g))];
}

std::int64_t energy_tick_ns(const GpuState& g) {
  return g.publish_delay_ns <= 0 ? g.energy_ticks.last_ns : g.ring_t[ring_at(visible_update(g))];
}

std::int64_t power_tick_ns(const GpuState& g) {
  if (g.publish_delay_ns > 0) return g.pw_t[power_at(visible_power(g))];
  return g.shared_ticks ? g.energy_ticks.last_ns : g.power_ticks.last_ns;
}

double reading_instant_w(const GpuState& g) {
  return g.publish_delay_ns <= 0 ? g.instant_w : g.pw_w[power_at(visible_power(g))];
}

std::uint64_t reported_energy_mj(const GpuState& g) {
  const double mj = std::floor(g.counter_start_mj + visible_sensor_energy_j(g) * 1000.0 - g.counter_offset_mj);
  return mj > 0.0 ? static_cast<std::uint64_t>(mj) : 0;
}

std::uint64_t reported_amd_count(const GpuState& g) {
  constexpr double kUnitsPerJ = 65536.0;  // 2^-16 J per unit
  const double start_j = g.counter_start_mj / 1000.0;
  if (g.counter_mode == 1) return static_cast<std::uint64_t>(std::floor(start_j * kUnitsPerJ));  // frozen
  const double j = start_j + visible_sensor_energy_j(g) - g.counter_offset_mj / 1000.0;
  return j > 0.0 ? static_cast<std::uint64_t>(std::floor(j * kUnitsPerJ)) : 0;
}

std::int64_t next_sensor_update_ns(const GpuState& g) {
  const std::int64_t next =
      g.shared_ticks ? g.energy_ticks.next_ns : std::min(g.energy_ticks.next_ns, g.power_ticks.next_ns);
  if (g.publish_delay_ns <= 0) return next;
  // Under a publish delay the readings change when an update becomes readable: the first one not
  // readable yet (kept, or still to come) plus the delay.
  const std::int64_t e = visible_update(g) + 1, p = visible_power(g) + 1;
  const std::int64_t e_next = e < g.ring_count ? g.ring_t[ring_at(e)] : g.energy_ticks.next_ns;
  const std::int64_t p_next = p < g.pw_count ? g.pw_t[power_at(p)] : power_series(g).next_ns;
  return std::min(e_next, p_next) + g.publish_delay_ns;
}

double reading_average_w(const GpuState& g) {
  const std::int64_t last = visible_update(g);
  if (g.average == kAverageExponential) return g.publish_delay_ns <= 0 ? g.avg_exp_w : g.ring_a[ring_at(last)];
  const std::int64_t from = average_from(g, last);
  if (from >= last) return reading_instant_w(g);  // fewer than two updates yet
  const auto i = ring_at(last), j = ring_at(from);
  const double dt = static_cast<double>(g.ring_t[i] - g.ring_t[j]) / kNsPerS;
  return dt > 0.0 ? (g.ring_s[i] - g.ring_s[j]) / dt : reading_instant_w(g);
}

int reading_temperature_c(const GpuState& g) {
  const Sku& sku = sku_of(g);
  // 30 °C at rest, +45 °C at the maximum power limit: a plausible, monotonic stand-in.
  // Plus the heat of a thermal drift (set_thermal_drift).
  return static_cast<int>(std::lround(30.0 + 45.0 * reading_instant_w(g) / sku.max_limit_w + g.drift_c));
}

unsigned reported_clock_mhz(const GpuState& g) { return nearest_sm_clock_mhz(sku_of(g), g.clock_mhz); }

bool sensor_energy_at(const GpuState& g, std::int64_t t, double& joules) {
  const std::int64_t n = g.ring_count;
  const std::int64_t oldest = std::max<std::int64_t>(0, n - kTickRing);
  if (n < 2) return false;
  auto time_of = [&](std::int64_t k) { return g.ring_t[static_cast<std::size_t>(k % kTickRing)]; };
  auto energy_of = [&](std::int64_t k) { return g.ring_s[static_cast<std::size_t>(k % kTickRing)]; };
  if (t < time_of(oldest) || t >= time_of(n - 1)) return false;
  std::int64_t lo = oldest, hi = n - 1;  // time_of(lo) ≤ t < time_of(hi)
  while (hi - lo > 1) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    (time_of(mid) <= t ? lo : hi) = mid;
  }
  const double frac = static_cast<double>(t - time_of(lo)) / static_cast<double>(time_of(hi) - time_of(lo));
  joules = energy_of(lo) + (energy_of(hi) - energy_of(lo)) * frac;
  return true;
}

bool physical_energy_at(const GpuState& g, std::int64_t t, double& joules) {
  const std::int64_t n = g.phys_count;
  const std::int64_t oldest = std::max<std::int64_t>(0, n - kPhysRing);
  auto time_of = [&](std::int64_t k) { return g.phys_t[static_cast<std::size_t>(k % kPhysRing)]; };
  auto energy_of = [&](std::int64_t k) { return g.phys_e[static_cast<std::size_t>(k % kPhysRing)]; };
  if (n == 0 || t < time_of(oldest) || t > g.last_ns) return false;
  std::int64_t lo = oldest, hi = n;  // time_of(lo) ≤ t < time_of(hi) (hi = n: the open segment)
  while (hi - lo > 1) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    (time_of(mid) <= t ? lo : hi) = mid;
  }
  const double dt = static_cast<double>(t - time_of(lo));
  if (hi == n) {
    // The open segment: power has been power_w since the last breakpoint.
    joules = energy_of(lo) + g.power_w * dt / kNsPerS;
  } else {
    joules = energy_of(lo) + (energy_of(hi) - energy_of(lo)) * dt / static_cast<double>(time_of(hi) - time_of(lo));
  }
  return true;
}

// --- timestamps -----------------------------------------------------------------------------

std::int32_t nvml_stamp_mode(const State& s, const GpuState& g) {
  if (g.stamp_mode >= 0) return g.stamp_mode;
  return s.stamp_update_time ? kStampUpdate : kStampRead;
}

namespace {

/// The update that produced a field's readable value and the start of the interval it covers.
void field_interval(const GpuState& g, StampField field, std::int64_t& update, std::int64_t& start) {
  if (field == StampField::kPowerInstant) {
    const std::int64_t k = visible_power(g);
    update = g.pw_t[power_at(k)];
    const std::int64_t oldest = std::max<std::int64_t>(0, g.pw_count - kPowerRing);
    start = k > oldest ? g.pw_t[power_at(k - 1)] : update - power_series(g).period_ns;
    return;
  }
  const std::int64_t k = visible_update(g);
  update = g.ring_t[ring_at(k)];
  const std::int64_t oldest = std::max<std::int64_t>(0, g.ring_count - kTickRing);
  // The boxcar average covers its whole span; the counter and the exponential average the period.
  const std::int64_t from =
      field == StampField::kPowerAverage && g.average == kAverageBoxcar ? average_from(g, k) : std::max(oldest, k - 1);
  start = from < k ? g.ring_t[ring_at(from)] : update - g.energy_ticks.period_ns;
}

}  // namespace

std::int64_t unrelated_stamp_us(const State& s, const GpuState& g, std::int64_t now) {
  const double drift = g.stamp_rate * static_cast<double>(now - s.created_ns);
  return (now + s.wall_offset_ns + g.stamp_offset_ns + static_cast<std::int64_t>(std::llround(drift))) / 1000;
}

std::int64_t field_stamp_us(const State& s, const GpuState& g, StampField field, std::int64_t now) {
  const std::int32_t mode = nvml_stamp_mode(s, g);
  if (mode == kStampRead) return (now + s.wall_offset_ns) / 1000;
  if (mode == kStampUnrelated) return unrelated_stamp_us(s, g, now);
  std::int64_t update = 0, start = 0;
  field_interval(g, field, update, start);
  if (mode == kStampIntervalStart) return (start + s.wall_offset_ns) / 1000;
  const std::int64_t us = (update + s.wall_offset_ns) / 1000;
  if (mode == kStampFloored) return floor_div(us, g.stamp_unit_us) * g.stamp_unit_us;
  return us;
}

std::int64_t amd_energy_stamp_ns(const State& s, const GpuState& g, std::int64_t now) {
  std::int64_t t = 0;
  switch (g.stamp_mode) {
    case kStampRead: t = now - s.created_ns; break;
    case kStampUnrelated:
      t = now - s.created_ns + g.stamp_offset_ns +
          static_cast<std::int64_t>(std::llround(g.stamp_rate * static_cast<double>(now - s.created_ns)));
      break;
    default: {  // -1 (not set): the update time, as gpu_metrics stamps it
      std::int64_t update = 0, start = 0;
      field_interval(g, StampField::kEnergy, update, start);
      t = (g.stamp_mode == kStampIntervalStart ? start : update) - s.created_ns;
      if (g.stamp_mode == kStampFloored) t = floor_div(t, g.stamp_unit_us * 1000) * (g.stamp_unit_us * 1000);
    }
  }
  return std::max<std::int64_t>(0, t);
}

// --- CPUs -----------------------------------------------------------------------------------

namespace {

template <class F>
void for_each_domain(State& s, F&& f) {
  for (unsigned c = 0; c < s.cpu_count && c < kMaxCpus; ++c) {
    CpuState& cpu = s.cpus[c];
    f(cpu.package, c * 4 + 0);
    if (cpu.dram) f(cpu.dram_domain, c * 4 + 1);
    if (cpu.core) f(cpu.core_domain, c * 4 + 2);
  }
  if (s.psys) f(s.psys_domain, 4 * kMaxCpus);
}

void cpu_step(State& s) {
  const bool faithful = s.faithful != 0;
  double platform = s.psys_extra_w;
  for (unsigned c = 0; c < s.cpu_count && c < kMaxCpus; ++c) {
    CpuState& cpu = s.cpus[c];
    auto noisy = [&](RaplDomain& d, std::uint64_t which) {
      d.step_power_w =
          faithful ? std::max(0.0, d.power_w *
                                       (1.0 + kCpuNoiseRel * gauss(key(s.seed, kSaltCpu, c * 4 + which,
                                                                       static_cast<std::uint64_t>(s.cpu_step_index)))))
                   : d.power_w;
    };
    noisy(cpu.package, 0);
    cpu.dram_domain.power_w = cpu.dram ? cpu.dram_domain.power_w : 0.0;
    noisy(cpu.dram_domain, 1);
    // The core sub-zone is part of the package (the cores' share of it).
    cpu.core_domain.step_power_w = 0.6 * cpu.package.step_power_w;
    platform += cpu.package.step_power_w + (cpu.dram ? cpu.dram_domain.step_power_w : 0.0);
  }
  s.psys_domain.step_power_w = platform;
}

}  // namespace

void advance_cpus(State& s, std::int64_t now) {
  const bool faithful = s.faithful != 0;
  while (s.cpu_last_ns < now) {
    const std::int64_t last = s.cpu_last_ns;
    const std::int64_t step_end = s.created_ns + (s.cpu_step_index + 1) * kStepNs;
    std::int64_t end = std::min(now, step_end);
    if (faithful) end = std::min(end, s.rapl_next_ns);
    const double dt = static_cast<double>(end - last) / kNsPerS;
    for_each_domain(s, [&](RaplDomain& d, unsigned) { d.energy_j += d.step_power_w * dt; });
    s.cpu_last_ns = end;
    if (faithful && end == s.rapl_next_ns) {
      for_each_domain(s, [&](RaplDomain& d, unsigned) { d.tick_energy_j = d.energy_j; });
      s.rapl_next_ns += kRaplPeriodNs;
    }
    if (end == step_end) {
      ++s.cpu_step_index;
      cpu_step(s);
    }
  }
  if (!faithful) for_each_domain(s, [&](RaplDomain& d, unsigned) { d.tick_energy_j = d.energy_j; });
}

std::uint64_t rapl_value_uj(const State& s, const RaplDomain& d) {
  const double uj = (d.start_j + d.tick_energy_j) * 1e6;
  if (uj <= 0.0 || d.range_uj == 0) return 0;
  // The hardware counts whole units; the kernel shows units × unit in µJ, modulo the range.
  const double quantized = s.faithful ? std::floor(std::floor(uj / d.unit_uj) * d.unit_uj) : std::floor(uj);
  return static_cast<std::uint64_t>(std::fmod(quantized, static_cast<double>(d.range_uj)));
}

void advance_all(State& s, std::int64_t now) {
  for (unsigned i = 0; i < s.gpu_count && i < kMaxGpus; ++i) advance_gpu(s.gpus[i], now);
  advance_cpus(s, now);
}

// --- the lock-free read path ----------------------------------------------------------------

void publish_snapshot(const State& s, GpuState& g) {
  if (s.virtual_clock != 0 || g.lost != 0) return;
  for (const auto& f : g.faults)
    if (f.call >= 0 && f.remaining != 0) return;
  const Sku& sku = sku_of(g);
  // The readings change at the next sensor update after last_ns.
  const std::int64_t until = next_sensor_update_ns(g);

  // A seqlock without fences (TSan does not model them): each field is stored with release, so a
  // reader that sees a new field also sees the odd sequence stored before it; readers load the
  // fields with acquire, so their second sequence load cannot move before them. Plain moves on x86.
  std::atomic_ref seq(g.snap_seq);
  // Even base: a publisher killed between its two stores (EOWNERDEAD) leaves the count odd.
  const std::uint64_t v = seq.load(std::memory_order_relaxed) & ~std::uint64_t{1};
  seq.store(v + 1, std::memory_order_relaxed);
  auto put = [](auto& field, auto value) { std::atomic_ref(field).store(value, std::memory_order_release); };
  put(g.snap_epoch, std::atomic_ref(const_cast<State&>(s).control_epoch).load(std::memory_order_relaxed));
  put(g.snap_from_ns, g.last_ns);
  put(g.snap_until_ns, until);
  put(g.snap_real_offset_ns, s.real_offset_ns);
  put(g.snap_wall_offset_ns, s.wall_offset_ns);
  put(g.snap_energy_mj, sku.has_energy_counter ? reported_energy_mj(g) : std::uint64_t{0});
  put(g.snap_energy_wall_us, field_stamp_us(s, g, StampField::kEnergy, g.last_ns));
  put(g.snap_power_mw, watts_to_mw(reading_instant_w(g)));
  put(g.snap_power_wall_us, field_stamp_us(s, g, StampField::kPowerInstant, g.last_ns));
  const std::int32_t stamps = nvml_stamp_mode(s, g);
  put(g.snap_flags, (sku.has_energy_counter ? kSnapEnergy : 0u) | (sku.ga100_or_older ? kSnapUsageIsInstant : 0u) |
                        (stamps == kStampRead || stamps == kStampUnrelated ? kSnapStampRead : 0u) |
                        (stamps == kStampUnrelated ? kSnapStampUnrelated : 0u));
  seq.store(v + 2, std::memory_order_release);
}

bool load_snapshot(const State& s, GpuState& g, Snapshot& out) {
  std::atomic_ref seq(g.snap_seq);
  const std::uint64_t v = seq.load(std::memory_order_acquire);
  if (v == 0 || (v & 1) != 0) return false;
  auto get = [](auto& field) { return std::atomic_ref(field).load(std::memory_order_acquire); };
  const std::uint64_t epoch = get(g.snap_epoch);
  const std::int64_t from = get(g.snap_from_ns), until = get(g.snap_until_ns);
  const std::int64_t offset = get(g.snap_real_offset_ns);
  const std::int64_t wall_offset = get(g.snap_wall_offset_ns);
  out.energy_mj = get(g.snap_energy_mj);
  out.energy_wall_us = get(g.snap_energy_wall_us);
  out.power_mw = get(g.snap_power_mw);
  out.power_wall_us = get(g.snap_power_wall_us);
  out.flags = get(g.snap_flags);
  if (seq.load(std::memory_order_relaxed) != v) return false;
  if (std::atomic_ref(const_cast<State&>(s).control_epoch).load(std::memory_order_acquire) != epoch) return false;
  const std::int64_t now = monotonic_ns() + offset;
  // The unrelated clock's parameters never change after creation: plain reads.
  out.now_wall_us = (out.flags & kSnapStampUnrelated) != 0 ? unrelated_stamp_us(s, g, now) : (now + wall_offset) / 1000;
  return now >= from && now < until;
}

}  // namespace erg::sim::detail
