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

namespace {

std::string zone_name(int zone, int sub) {
  std::string n = "intel-rapl:" + std::to_string(zone);
  if (sub >= 0) n += ":" + std::to_string(sub);
  return n;
}

Result<void> symlink_once(const fs::path& target, const fs::path& link) {
  std::error_code ec;
  if (fs::is_symlink(fs::symlink_status(link, ec))) return ok();
  fs::create_directory_symlink(target, link, ec);
  if (ec) return fail(ErrorCode::kIo, "cannot link " + link.string() + ": " + ec.message());
  return ok();
}

}  // namespace

PowercapTree PowercapTree::sysfs(const fs::path& sysfs_root) {
  return PowercapTree(sysfs_root / "class" / "powercap", sysfs_root / "devices" / "virtual" / "powercap");
}

fs::path PowercapTree::zone_dir(int zone, int sub) const {
  fs::path dir = root_ / zone_name(zone, -1);
  if (sub >= 0) dir /= zone_name(zone, sub);
  return dir;
}

fs::path PowercapTree::real_zone_dir(int zone, int sub) const {
  if (devices_.empty()) return zone_dir(zone, sub);
  fs::path dir = devices_ / "intel-rapl" / zone_name(zone, -1);
  if (sub >= 0) dir /= zone_name(zone, sub);
  return dir;
}

std::size_t PowercapTree::width_for(std::uint64_t max_energy_range_uj) {
  return std::to_string(max_energy_range_uj).size();
}

std::string PowercapTree::format_energy(std::uint64_t energy_uj, std::size_t width) {
  std::string digits = std::to_string(energy_uj);
  if (digits.size() < width) digits.insert(0, width - digits.size(), ' ');
  digits += '\n';
  return digits;
}

Result<void> PowercapTree::write_energy(int fd, std::uint64_t energy_uj, std::size_t width) {
  const std::string text = format_energy(energy_uj, width);
  // One pwrite of the whole value at offset 0, never a size change (see the header).
  const ssize_t n = ::pwrite(fd, text.data(), text.size(), 0);
  if (n != static_cast<ssize_t>(text.size()))
    return fail(ErrorCode::kIo, std::string("cannot write an energy value: ") + std::strerror(n < 0 ? errno : EIO));
  return ok();
}

Result<void> PowercapTree::add_zone(int zone, const std::string& name, std::uint64_t max_energy_range_uj, int sub,
                                    std::uint64_t energy_uj, unsigned energy_mode) {
  std::error_code ec;
  const fs::path control = devices_.empty() ? root_ / "intel-rapl" : devices_ / "intel-rapl";
  fs::create_directories(control, ec);
  if (ec) return fail(ErrorCode::kIo, "cannot create " + control.string() + ": " + ec.message());
  if (!fs::exists(control / "enabled"))
    if (auto r = write_file_atomic(control / "enabled", "1\n", 0644); !r) return r;
  const fs::path dir = real_zone_dir(zone, sub);
  fs::create_directories(dir, ec);
  if (ec) return fail(ErrorCode::kIo, "cannot create " + dir.string() + ": " + ec.message());
  if (!devices_.empty()) {
    fs::create_directories(root_, ec);
    if (ec) return fail(ErrorCode::kIo, "cannot create " + root_.string() + ": " + ec.message());
    // Relative links, as sysfs has them: class/powercap/X -> ../../devices/virtual/powercap/...
    if (auto r = symlink_once("../../devices/virtual/powercap/intel-rapl", root_ / "intel-rapl"); !r) return r;
    fs::path rel = fs::path("../../devices/virtual/powercap/intel-rapl") / zone_name(zone, -1);
    if (sub >= 0) rel /= zone_name(zone, sub);
    if (auto r = symlink_once(rel, root_ / zone_name(zone, sub)); !r) return r;
  }
  if (auto r = write_file_atomic(dir / "name", name + "\n", 0444); !r) return r;
  if (auto r = write_file_atomic(dir / "max_energy_range_uj", std::to_string(max_energy_range_uj) + "\n", 0444); !r)
    return r;
  if (auto r = write_file_atomic(dir / "enabled", "1\n", 0644); !r) return r;
  return write_file_atomic(dir / "energy_uj", format_energy(energy_uj, width_for(max_energy_range_uj)), energy_mode);
}

Result<void> PowercapTree::set_energy_uj(int zone, std::uint64_t energy_uj, int sub) const {
  const fs::path file = zone_dir(zone, sub) / "energy_uj";
  // Created (0400) when a test removed it.
  const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0400);
  if (fd < 0) return fail(ErrorCode::kIo, "cannot open " + file.string() + ": " + std::strerror(errno));
  struct stat st {};
  std::size_t width = 0;
  if (::fstat(fd, &st) == 0 && st.st_size > 1) width = static_cast<std::size_t>(st.st_size) - 1;
  Result<void> r = ok();
  if (std::to_string(energy_uj).size() > width) {
    // Wider than the file (a test writing past the range): rewrite the whole file.
    const std::string text = format_energy(energy_uj, 0);
    if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, text.data(), text.size(), 0) != static_cast<ssize_t>(text.size()))
      r = fail(ErrorCode::kIo, "cannot write " + file.string() + ": " + std::strerror(errno));
  } else {
    r = write_energy(fd, energy_uj, width);
    if (!r) r = fail(ErrorCode::kIo, "cannot write " + file.string() + ": " + r.error().message);
  }
  ::close(fd);
  return r;
}

Result<void> PowercapTree::set_energy_mode(int zone, unsigned mode, int sub) const {
  fs::path file = zone_dir(zone, sub) / "energy_uj";
  if (::chmod(file.c_str(), mode) != 0)
    return fail(ErrorCode::kIo, "cannot chmod " + file.string() + ": " + std::strerror(errno));
  return ok();
}

}  // namespace erg::sim
