#include "erg/sim/powercap_tree.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace erg::sim {
namespace fs = std::filesystem;

Result<void> write_file_atomic(const fs::path& path, const std::string& content, unsigned mode) {
  fs::path tmp = path;
  tmp += ".tmp." + std::to_string(::getpid()) + "." + std::to_string(reinterpret_cast<std::uintptr_t>(&content));
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) return fail(ErrorCode::kIo, "cannot create " + tmp.string() + ": " + std::strerror(errno));
  ::fchmod(fd, mode);  // not subject to umask
  const char* p = content.data();
  std::size_t left = content.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      int e = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      return fail(ErrorCode::kIo, "cannot write " + tmp.string() + ": " + std::strerror(e));
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int e = errno;
    ::unlink(tmp.c_str());
    return fail(ErrorCode::kIo, "cannot replace " + path.string() + ": " + std::strerror(e));
  }
  return ok();
}

fs::path PowercapTree::zone_dir(int zone, int sub) const {
  fs::path dir = root_ / ("intel-rapl:" + std::to_string(zone));
  if (sub >= 0) dir /= "intel-rapl:" + std::to_string(zone) + ":" + std::to_string(sub);
  return dir;
}

Result<void> PowercapTree::add_zone(int zone, const std::string& name, std::uint64_t max_energy_range_uj, int sub) {
  std::error_code ec;
  fs::create_directories(root_ / "intel-rapl", ec);
  if (!fs::exists(root_ / "intel-rapl" / "enabled")) {
    if (auto r = write_file_atomic(root_ / "intel-rapl" / "enabled", "1\n", 0644); !r) return r;
  }
  fs::path dir = zone_dir(zone, sub);
  fs::create_directories(dir, ec);
  if (ec) return fail(ErrorCode::kIo, "cannot create " + dir.string() + ": " + ec.message());
  if (auto r = write_file_atomic(dir / "name", name + "\n", 0444); !r) return r;
  if (auto r = write_file_atomic(dir / "max_energy_range_uj", std::to_string(max_energy_range_uj) + "\n", 0444); !r)
    return r;
  return write_file_atomic(dir / "energy_uj", "0\n", 0444);
}

Result<void> PowercapTree::set_energy_uj(int zone, std::uint64_t energy_uj, int sub) {
  fs::path file = zone_dir(zone, sub) / "energy_uj";
  unsigned mode = 0444;
  struct stat st {};
  if (::stat(file.c_str(), &st) == 0) mode = st.st_mode & 07777;
  return write_file_atomic(file, std::to_string(energy_uj) + "\n", mode);
}

Result<void> PowercapTree::set_energy_mode(int zone, unsigned mode, int sub) {
  fs::path file = zone_dir(zone, sub) / "energy_uj";
  if (::chmod(file.c_str(), mode) != 0)
    return fail(ErrorCode::kIo, "cannot chmod " + file.string() + ": " + std::strerror(errno));
  return ok();
}

}  // namespace erg::sim
