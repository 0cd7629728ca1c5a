#pragma once
/// Putting GPU power limits back. A RestoreGuard resets each of its GPUs to its default limit
/// (Gpu::reset_power_limit) when it is destroyed or restore() is called, and — while it lives —
/// before the process dies of SIGTERM or SIGINT or returns from main. docs/power-limit-optimizer.md
/// states what is guaranteed in each way a process can end.

#include <memory>
#include <vector>

#include "erg/core/device.hpp"
#include "erg/core/result.hpp"

namespace erg::power_limit {

namespace detail {
struct RestoreTargets;  // the GPUs of one guard, shared with the process-wide registry
}

class RestoreGuard {
 public:
  /// `on_signals`: also restore on SIGTERM/SIGINT (see install_signal_restore) and at exit().
  explicit RestoreGuard(std::vector<std::shared_ptr<Gpu>> gpus, bool on_signals = true);
  /// restore(); errors are dropped (nothing to report them to).
  ~RestoreGuard();
  RestoreGuard(const RestoreGuard&) = delete;
  RestoreGuard& operator=(const RestoreGuard&) = delete;

  /// Resets every GPU to its default limit (the maximum where the default is unknown) and stops
  /// watching. Idempotent: later calls do nothing and succeed. Tries every GPU; returns the first
  /// error (NoPermission, GpuLost, ...). Thread-safe.
  Result<void> restore();
  [[nodiscard]] bool restored() const;

 private:
  std::shared_ptr<detail::RestoreTargets> impl_;
};

/// Makes SIGTERM and SIGINT restore every live RestoreGuard's GPUs before the process dies of
/// the signal (the signal's default action then runs: same exit status as without erg). A signal
/// whose disposition is not SIG_DFL (a handler of the program's, Python's SIGINT handler that
/// raises KeyboardInterrupt, SIG_IGN) is left alone: the program's own handling ends it, and the
/// guards' destructors or exit() restore. The handler only writes to a pipe; a watcher thread
/// does the restoring (driver calls are not async-signal-safe). Also registers an atexit handler
/// that restores the guards still alive at exit(). Called by RestoreGuard; idempotent.
void install_signal_restore();

}  // namespace erg::power_limit
