#pragma once
// Runs a shell command for end-to-end tests and captures its exit code, stdout and stderr.

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

}  // namespace erg::testing
