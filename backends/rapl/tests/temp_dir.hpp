#pragma once
// A temporary directory for generated powercap trees, removed with its content.

#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>

namespace erg::rapl::testing {

class TempDir {
 public:
  TempDir() {
    std::string templ = "/tmp/erg-rapl-test-XXXXXX";
    if (::mkdtemp(templ.data()) == nullptr) std::abort();
    ::chmod(templ.c_str(), 0755);  // Traversable by other users (the permission test runs as nobody).
    path_ = templ;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  [[nodiscard]] const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace erg::rapl::testing
