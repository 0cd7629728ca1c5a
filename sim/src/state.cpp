#include "state.hpp"

#include <time.h>

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

namespace {

std::int64_t floor_div(std::int64_t a, std::int64_t b) {
  std::int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

constexpr double kNsPerS = 1e9;

}  // namespace

void init_gpu(GpuState& g, int sku_index, std::int64_t now) {
  g.sku_index = sku_index;
  const Sku& sku = sku_of(g);
  g.limit_mw = sku.default_limit_w * 1000u;
  g.last_ns = now;
  const std::int64_t pp = static_cast<std::int64_t>(sku.power_period_ms) * 1'000'000;
  // Ticks strictly after creation are recorded; before the first, readings show the power now.
  g.first_tick = floor_div(now, pp) + 1;
  g.last_tick = g.first_tick - 1;
  for (auto& f : g.faults) f = FaultSlot{};
  recompute_gpu(g);
  g.tick_power_w = g.power_w;
}

void recompute_gpu(GpuState& g) {
  const Sku& sku = sku_of(g);
  const unsigned cap = g.locked_max_mhz != 0 ? g.locked_max_mhz : sku.max_sm_mhz;
  const double u = g.utilization;
  const unsigned f = model_clock_mhz(sku, u, g.limit_mw / 1000.0, cap);
  g.clock_mhz = f;
  g.power_w = model_power_w(sku, f, u);
  g.work_rate = u * model_speed(sku, f);
}

void advance_gpu(GpuState& g, std::int64_t now) {
  if (now <= g.last_ns) return;
  const Sku& sku = sku_of(g);
  const double p = g.power_w;
  const std::int64_t last = g.last_ns;
  // Energy counter: the latest energy tick in (last, now] sees E(last) + P·(tick − last).
  const std::int64_t ep = static_cast<std::int64_t>(sku.energy_period_ms) * 1'000'000;
  const std::int64_t etick = floor_div(now, ep) * ep;
  if (etick > last) g.tick_energy_j = g.energy_j + p * static_cast<double>(etick - last) / kNsPerS;
  // Power sensor: ticks in (last, now] all fall in this constant-power segment.
  const std::int64_t pp = static_cast<std::int64_t>(sku.power_period_ms) * 1'000'000;
  const std::int64_t j_end = floor_div(now, pp);
  std::int64_t j_begin = floor_div(last, pp) + 1;
  if (j_begin < g.first_tick) j_begin = g.first_tick;
  if (j_end >= j_begin) {
    g.tick_power_w = p;
    std::int64_t j = j_end - static_cast<std::int64_t>(kRing) + 1;
    if (j < j_begin) j = j_begin;
    for (; j <= j_end; ++j)
      g.ring[static_cast<std::size_t>(j % kRing)] = g.energy_j + p * static_cast<double>(j * pp - last) / kNsPerS;
    g.last_tick = j_end;
  }
  const double dt = static_cast<double>(now - last) / kNsPerS;
  g.energy_j += p * dt;
  g.work += g.work_rate * dt;
  g.last_ns = now;
}

std::uint64_t reported_energy_mj(const GpuState& g) {
  const double mj = std::floor(g.tick_energy_j * 1000.0 - g.counter_base_mj);
  return mj > 0.0 ? static_cast<std::uint64_t>(mj) : 0;
}

std::int64_t energy_tick_ns(const GpuState& g) {
  const std::int64_t ep = static_cast<std::int64_t>(sku_of(g).energy_period_ms) * 1'000'000;
  return floor_div(g.last_ns, ep) * ep;
}

std::int64_t power_tick_ns(const GpuState& g) {
  const std::int64_t pp = static_cast<std::int64_t>(sku_of(g).power_period_ms) * 1'000'000;
  // Before the first tick after creation, the reading is the one from the tick before it.
  return g.last_tick >= g.first_tick ? g.last_tick * pp : (g.first_tick - 1) * pp;
}

double reading_instant_w(const GpuState& g) { return g.tick_power_w; }

double reading_average_w(const GpuState& g) {
  const Sku& sku = sku_of(g);
  const std::int64_t n = 1000 / sku.power_period_ms;  // ticks per second
  const std::int64_t last = g.last_tick;
  if (last <= g.first_tick) return g.tick_power_w;  // fewer than two ticks recorded yet
  std::int64_t from = last - n;
  if (from < g.first_tick) from = g.first_tick;
  const double de = g.ring[static_cast<std::size_t>(last % kRing)] - g.ring[static_cast<std::size_t>(from % kRing)];
  return de / (static_cast<double>((last - from) * sku.power_period_ms) / 1000.0);
}

int reading_temperature_c(const GpuState& g) {
  const Sku& sku = sku_of(g);
  // 30 °C at rest, +45 °C at the maximum power limit: a plausible, monotonic stand-in.
  return static_cast<int>(std::lround(30.0 + 45.0 * g.tick_power_w / sku.max_limit_w));
}

double psys_power_w(const State& s) {
  double w = s.psys_extra_w;
  for (unsigned c = 0; c < s.cpu_count; ++c) w += s.cpus[c].package_w + (s.cpus[c].dram ? s.cpus[c].dram_w : 0.0);
  return w;
}

void advance_cpus(State& s, std::int64_t now) {
  if (now <= s.cpu_last_ns) return;
  const double dt = static_cast<double>(now - s.cpu_last_ns) / kNsPerS;
  for (unsigned c = 0; c < s.cpu_count && c < kMaxCpus; ++c) {
    CpuState& cpu = s.cpus[c];
    cpu.package_j += cpu.package_w * dt;
    if (cpu.dram) cpu.dram_j += cpu.dram_w * dt;
  }
  if (s.psys) s.psys_j += psys_power_w(s) * dt;
  s.cpu_last_ns = now;
}

void advance_all(State& s, std::int64_t now) {
  for (unsigned i = 0; i < s.gpu_count && i < kMaxGpus; ++i) advance_gpu(s.gpus[i], now);
  advance_cpus(s, now);
}

void publish_snapshot(const State& s, GpuState& g) {
  if (s.virtual_clock != 0 || g.lost != 0) return;
  for (const auto& f : g.faults)
    if (f.call >= 0 && f.remaining != 0) return;
  const Sku& sku = sku_of(g);
  const std::int64_t ep = static_cast<std::int64_t>(sku.energy_period_ms) * 1'000'000;
  const std::int64_t pp = static_cast<std::int64_t>(sku.power_period_ms) * 1'000'000;
  // The readings change at the next energy tick after last_ns and at the next power tick (the
  // first one at first_tick): see advance_gpu.
  const std::int64_t next_energy = floor_div(g.last_ns, ep) * ep + ep;
  const std::int64_t next_power = (g.last_tick + 1 > g.first_tick ? g.last_tick + 1 : g.first_tick) * pp;
  const std::int64_t until = next_energy < next_power ? next_energy : next_power;

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
  put(g.snap_energy_mj, sku.has_energy_counter ? reported_energy_mj(g) : std::uint64_t{0});
  put(g.snap_energy_wall_us, (energy_tick_ns(g) + s.wall_offset_ns) / 1000);
  put(g.snap_power_mw, watts_to_mw(reading_instant_w(g)));
  put(g.snap_power_wall_us, (power_tick_ns(g) + s.wall_offset_ns) / 1000);
  put(g.snap_flags, (sku.has_energy_counter ? kSnapEnergy : 0u) | (sku.ga100_or_older ? kSnapUsageIsInstant : 0u));
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
  out.energy_mj = get(g.snap_energy_mj);
  out.energy_wall_us = get(g.snap_energy_wall_us);
  out.power_mw = get(g.snap_power_mw);
  out.power_wall_us = get(g.snap_power_wall_us);
  out.flags = get(g.snap_flags);
  if (seq.load(std::memory_order_relaxed) != v) return false;
  if (std::atomic_ref(const_cast<State&>(s).control_epoch).load(std::memory_order_acquire) != epoch) return false;
  const std::int64_t now = monotonic_ns() + offset;
  return now >= from && now < until;
}

}  // namespace erg::sim::detail
