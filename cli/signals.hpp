#pragma once
// Waiting for Ctrl-C (SIGINT) or SIGTERM without a signal handler: the signals are blocked in
// every thread (so the sampler threads never see them) and taken with sigtimedwait.

#include <signal.h>
#include <sys/types.h>

#include <chrono>
#include <functional>
#include <optional>
#include <string>

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

/// Reads the lines a child writes to `fd` (the read end of its pipe), handing each to `handle`
/// as it arrives, until the child `pid` exits; returns its waitpid status. Polls the pipe every
/// 100 ms so a child that closed its end (or never writes) is still reaped.
int pump_child_lines(int fd, pid_t pid, const std::function<void(const std::string&)>& handle);

}  // namespace erg::cli
