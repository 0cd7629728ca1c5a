#include "erg/sim/powercap_tree.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "erg/core/file.hpp"

namespace erg::sim {
namespace fs = std::filesystem;

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
