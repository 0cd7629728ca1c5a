#pragma once
// Waiting for Ctrl-C (SIGINT) or SIGTERM without a signal handler: the signals are blocked in
// every thread (so the sampler threads never see them) and taken with sigtimedwait.

#include <signal.h>

#include <chrono>
#include <optional>

namespace erg::cli {

class StopSignals {
 public:
  /// Blocks SIGINT and SIGTERM for this thread and threads created after this point.
  StopSignals();
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;
  /// Waits up to `timeout` (forever if nullopt); returns the signal if one arrived.
  std::optional<int> wait(std::optional<std::chrono::nanoseconds> timeout);

 private:
  sigset_t set_{};
  sigset_t old_{};
};

}  // namespace erg::cli
