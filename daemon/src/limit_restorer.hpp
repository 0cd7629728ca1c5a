#pragma once
// Part of the gpu-control group: power limits come back when the process that set them exits.
//
// The rule (docs/ergd.md, "Power limits come back when their setter exits"): the last process to
// set a GPU's power limit through ergd owns that limit. When the owner has exited — normally,
// killed, crashed — ergd sets the GPU's default limit again, on the GPU's owner thread, unless
// by then another set_power_limit reached the GPU (the new setter owns it) or the limit was
// changed outside ergd (the GPU no longer shows the owner's value: left alone). A setter whose
// process ergd cannot name (TCP, a pid namespace ergd cannot see) owns nothing and ends the
// previous owner's claim: its limit stays.
//
// Locked clocks follow the same rule, each domain (SM, memory) on its own: the last process to lock
// a GPU's SM (memory) clocks through ergd owns them, and when it has exited ergd resets that
// domain's locked clocks (Gpu::reset_gpu_locked_clocks / reset_memory_locked_clocks) unless another
// set or a reset of that domain reached the GPU through ergd since. There is no "changed outside
// ergd" check for clocks: core's Gpu interface cannot read locked clocks back.
//
// Claims outlive ergd (state_dir): every change is written to STATE_DIR/claims.json (atomically:
// a temporary file, fsync, rename) with each owner's pid, start time and the boot it ran in. A
// new ergd reads it at start: a claim whose owner has exited since is restored then (the same
// checks), one whose owner lives is adopted and restored when it exits, one from an earlier
// boot is dropped (the driver reset the GPU at boot).
//
// A process is held by a pidfd (SO_PEERPIDFD from the request's socket, else pidfd_open of its
// SO_PEERCRED pid), so pid reuse cannot fool it, and its exit is seen at once by poll(2) on a
// watcher thread. Where pidfds are unavailable (kernels before 5.3, a seccomp filter), the pid and
// its start time (/proc/PID/stat) are checked every kFallbackPeriod instead.

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "device_slots.hpp"
#include "erg/core/units.hpp"
#include "erg/daemon/request_handler.hpp"

namespace erg::daemon {

/// One client process, held so its exit can be seen. Move-only; closes its pidfd.
class ClientProcess {
 public:
  /// The process behind a request's peer: nullptr when it cannot be named (TCP, pid unknown).
  static std::shared_ptr<const ClientProcess> of(const Peer& peer);
  ~ClientProcess();
  ClientProcess(const ClientProcess&) = delete;
  ClientProcess& operator=(const ClientProcess&) = delete;

  [[nodiscard]] pid_t pid() const { return pid_; }
  [[nodiscard]] int pidfd() const { return pidfd_; }
  /// Whether the process has exited (a pidfd poll, else /proc/PID/stat and the start time).
  [[nodiscard]] bool exited() const;
  /// Its start time (/proc/PID/stat field 22, clock ticks since boot): with the boot, what names
  /// it across ergd restarts. 0 when it was gone already.
  [[nodiscard]] std::uint64_t start_time() const { return start_time_; }
  /// The process `pid` if it is still the one that started at `start_time` (a recorded owner,
  /// after an ergd restart); else one that has exited.
  static std::shared_ptr<const ClientProcess> adopt(pid_t pid, std::uint64_t start_time);

 private:
  ClientProcess(pid_t pid, int pidfd, std::uint64_t start_time, bool gone)
      : pid_(pid), pidfd_(pidfd), start_time_(start_time), gone_(gone) {}
  pid_t pid_;
  int pidfd_;                 // -1: the fallback (start time)
  std::uint64_t start_time_;  // /proc/PID/stat field 22, clock ticks since boot
  bool gone_;                 // already gone when the request was handled
};

class LimitRestorer {
 public:
  /// How often processes without a pidfd are checked.
  static constexpr std::chrono::milliseconds kFallbackPeriod{500};

  /// `devices` must outlive the restorer; `log` gets one line per restore (may be empty).
  /// `state_dir` non-empty: claims are kept in STATE_DIR/claims.json, and those an earlier ergd
  /// left there are taken up (restored at once when their owner has exited).
  LimitRestorer(const DeviceSlots& devices, std::function<void(const std::string&)> log, std::string state_dir = {});
  ~LimitRestorer();
  LimitRestorer(const LimitRestorer&) = delete;
  LimitRestorer& operator=(const LimitRestorer&) = delete;

  /// Stops watching (idempotent); limits owned at that moment stay as they are.
  void stop();

  /// On GPU `gpu`'s owner thread, before a set_power_limit runs: remembers the limit to come
  /// back to (the GPU's default limit; without one, the limit ergd first found).
  void before_set(unsigned gpu);
  /// On GPU `gpu`'s owner thread, after a set_power_limit to `limit` succeeded: `owner` (nullptr:
  /// a process ergd cannot name) now owns the GPU's limit.
  void claimed(unsigned gpu, std::shared_ptr<const ClientProcess> owner, MilliWatts limit);

  /// The two locked-clock domains.
  enum class Clocks { kSm, kMemory };
  /// On GPU `gpu`'s owner thread, after a set of `domain`'s locked clocks to [min, max] succeeded:
  /// `owner` (nullptr: a process ergd cannot name, which owns nothing) now owns them.
  void clocks_claimed(unsigned gpu, Clocks domain, std::shared_ptr<const ClientProcess> owner, Megahertz min,
                      Megahertz max);
  /// On GPU `gpu`'s owner thread, after a reset of `domain`'s locked clocks through ergd succeeded:
  /// nobody owns them any more (nothing to reset when the last setter exits).
  void clocks_reset(unsigned gpu, Clocks domain);

 private:
  /// What a claim is on: the power limit, or one clock domain.
  enum Kind : unsigned { kPowerLimit = 0, kSmClocks = 1, kMemoryClocks = 2, kKinds = 3 };
  struct Claim {
    std::shared_ptr<const ClientProcess> owner;
    MilliWatts limit;    // kPowerLimit
    Megahertz min, max;  // the clock kinds
    std::uint64_t generation = 0;
  };
  static unsigned slot(unsigned gpu, Kind kind) { return gpu * kKinds + kind; }
  void watch_loop();
  /// Writes the claims to STATE_DIR/claims.json; call with mutex_ held.
  void persist();
  /// Takes up the claims an earlier ergd recorded (constructor).
  void load_recorded();
  /// Posts the restore of every claim whose owner exited; call with mutex_ held.
  void restore_exited();
  void restore(unsigned gpu, std::uint64_t generation, pid_t pid, MilliWatts limit);
  void reset_clocks(unsigned gpu, Kind kind, std::uint64_t generation, pid_t pid, Megahertz min, Megahertz max);

  const DeviceSlots& devices_;
  std::function<void(const std::string&)> log_;
  std::mutex mutex_;
  std::vector<std::optional<Claim>> claims_;        // per slot(GPU, kind)
  std::vector<std::uint64_t> generation_;           // per slot(GPU, kind): bumped by every set
  std::vector<std::optional<MilliWatts>> default_;  // per GPU: the limit to come back to
  bool stopping_ = false;
  std::string state_dir_;  // empty: claims live in memory only
  std::string boot_id_;    // /proc/sys/kernel/random/boot_id
  bool persist_failed_ = false;
  int wake_fd_ = -1;  // eventfd: a new claim, or stop
  std::thread thread_;
};

}  // namespace erg::daemon
