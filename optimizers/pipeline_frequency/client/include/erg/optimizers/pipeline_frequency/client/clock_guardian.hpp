#pragma once
/// A guardian process for locked GPU clocks: what resets them when the process that locked them
/// dies without doing it (SIGKILL, a crash), for ranks that drive their GPU directly rather than
/// through ergd (ergd resets the clocks of a setter that exited on its own, docs/ergd.md).
///
/// spawn() starts `erg perseus guard-clocks --gpu N --pid P` (posix_spawn: no code of this
/// process runs in the child, so it is safe in a multi-threaded process) in its own session, with
/// its standard input the read end of a pipe whose write end only this process holds (close on
/// exec). The guardian blocks reading it. release() writes "done" and closes it: the guardian
/// exits and touches nothing. If this process dies first, the kernel closes the write end, the
/// guardian reads end-of-file without "done", opens the devices from the same environment (the same
/// GPU index) and resets that GPU's SM and memory locked clocks.

#include <sys/types.h>

#include <memory>
#include <string>

#include "erg/core/result.hpp"

namespace erg::pipeline_frequency {

class ClockGuardian {
 public:
  /// `executable`: the `erg` command (a path, or a name looked up on PATH). kUnavailable when it
  /// cannot be started (with the reason).
  static Result<std::unique_ptr<ClockGuardian>> spawn(const std::string& executable, unsigned gpu_index);
  /// release(); errors are dropped.
  ~ClockGuardian();
  ClockGuardian(const ClockGuardian&) = delete;
  ClockGuardian& operator=(const ClockGuardian&) = delete;

  /// The clocks are reset: tells the guardian so and waits (up to 10 s) for it to exit.
  /// Idempotent.
  Result<void> release();
  /// Closes the pipe without "done", as the kernel does when this process dies (tests), and
  /// waits (up to 30 s) for the guardian to exit. Its exit status: 0 when it reset the clocks.
  Result<int> abandon();

  [[nodiscard]] pid_t pid() const { return pid_; }

 private:
  ClockGuardian(pid_t pid, int fd) : pid_(pid), fd_(fd) {}
  Result<int> close_and_wait(bool done, int timeout_s);
  pid_t pid_ = -1;
  int fd_ = -1;
};

}  // namespace erg::pipeline_frequency
