#pragma once
// Runs a shell command for end-to-end tests and captures its exit code, stdout and stderr.

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>

namespace erg::testing {

struct CommandResult {
  int exit_code = -1;  ///< Exit status, or 128 + signal.
  std::string out;
  std::string err;
};

/// Runs `command` with /bin/sh -c, stdin from /dev/null.
CommandResult run_shell(const std::string& command);

/// Quotes a string for /bin/sh.
std::string shell_quote(const std::string& s);

/// A fresh directory under /tmp, removed in the destructor.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  [[nodiscard]] const std::string& path() const { return path_; }

 private:
  std::string path_;
};

/// A shell command running in the background in a process group of its own (/bin/sh -c, stdin
/// from /dev/null, stdout and stderr to files). `exec` in the command makes pid() the program's.
/// The destructor kills the whole group (SIGKILL) and reaps the shell.
class BackgroundShell {
 public:
  explicit BackgroundShell(const std::string& command);
  ~BackgroundShell();
  BackgroundShell(const BackgroundShell&) = delete;
  BackgroundShell& operator=(const BackgroundShell&) = delete;
  [[nodiscard]] pid_t pid() const { return pid_; }
  /// Sends `sig` to the process (not its group).
  void signal(int sig) const;
  /// Sends `sig` to every process left in its group.
  void signal_group(int sig) const;
  /// Waits up to `timeout` for the process to exit: its exit code (128 + signal), or nullopt.
  std::optional<int> wait(std::chrono::milliseconds timeout);
  [[nodiscard]] std::string out() const;
  [[nodiscard]] std::string err() const;

 private:
  TempDir dir_;
  pid_t pid_ = -1;
  std::optional<int> exit_code_;
};

/// Waits up to `timeout` for `path` to exist.
bool wait_for_file(const std::string& path, std::chrono::milliseconds timeout);
/// Waits up to `timeout` for process `pid` (not a child of ours) to be gone or a zombie.
bool wait_for_process_gone(pid_t pid, std::chrono::milliseconds timeout);

}  // namespace erg::testing
