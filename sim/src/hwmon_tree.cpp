#include "erg/sim/hwmon_tree.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "erg/core/file.hpp"

namespace erg::sim {
namespace fs = std::filesystem;

namespace {

std::string hwmon_name(unsigned index) { return "hwmon" + std::to_string(index); }

std::string i2c_name(unsigned address) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "1-%04x", address);
  return buf;
}

Result<void> make_dirs(const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return fail(ErrorCode::kIo, "cannot create " + dir.string() + ": " + ec.message());
  return ok();
}

/// Creates SYS/class/hwmon/hwmonK -> ../../<relative device dir>.
Result<void> link_class(const fs::path& root, unsigned index, const fs::path& relative_device_dir) {
  if (auto r = make_dirs(root); !r) return r;
  std::error_code ec;
  const fs::path link = root / hwmon_name(index);
  if (fs::is_symlink(fs::symlink_status(link, ec))) return ok();
  fs::create_directory_symlink(fs::path("../..") / relative_device_dir, link, ec);
  if (ec) return fail(ErrorCode::kIo, "cannot link " + link.string() + ": " + ec.message());
  return ok();
}

}  // namespace

HwmonTree::HwmonTree(const fs::path& sysfs_root) : sys_(sysfs_root), root_(sysfs_root / "class" / "hwmon") {}

fs::path HwmonTree::device_dir(unsigned hwmon_index) const { return root_ / hwmon_name(hwmon_index); }

Result<void> HwmonTree::create_root() const { return make_dirs(root_); }

std::string HwmonTree::format_value(std::int64_t value) {
  std::string digits = std::to_string(value);
  if (digits.size() < kValueWidth) digits.insert(0, kValueWidth - digits.size(), ' ');
  digits += '\n';
  return digits;
}

Result<void> HwmonTree::write_value(int fd, std::int64_t value) {
  const std::string text = format_value(value);
  const ssize_t n = ::pwrite(fd, text.data(), text.size(), 0);
  if (n != static_cast<ssize_t>(text.size()))
    return fail(ErrorCode::kIo, std::string("cannot write a hwmon value: ") + std::strerror(n < 0 ? errno : EIO));
  return ok();
}

Result<void> HwmonTree::add_ina3221(unsigned hwmon_index, unsigned address, const std::vector<Channel>& channels,
                                    unsigned samples, unsigned update_interval_ms) const {
  const fs::path rel = fs::path("devices/platform/i2c-1") / i2c_name(address) / "hwmon" / hwmon_name(hwmon_index);
  const fs::path dir = sys_ / rel;
  if (auto r = make_dirs(dir); !r) return r;
  if (auto r = write_file_atomic(dir / "name", "ina3221\n", 0444); !r) return r;
  if (auto r = write_file_atomic(dir / "samples", std::to_string(samples) + "\n", 0644); !r) return r;
  if (auto r = write_file_atomic(dir / "update_interval", std::to_string(update_interval_ms) + "\n", 0644); !r)
    return r;
  for (const auto& c : channels) {
    const std::string n = std::to_string(c.channel);
    if (!c.label.empty())
      if (auto r = write_file_atomic(dir / ("in" + n + "_label"), c.label + "\n", 0444); !r) return r;
    if (auto r = write_file_atomic(dir / ("in" + n + "_enable"), c.label.empty() ? "0\n" : "1\n", 0644); !r) return r;
    if (auto r = write_file_atomic(dir / ("shunt" + n + "_resistor"), std::to_string(c.shunt_uohm) + "\n", 0644); !r)
      return r;
    if (auto r = write_file_atomic(dir / ("in" + n + "_input"), format_value(0), 0444); !r) return r;
    if (auto r = write_file_atomic(dir / ("curr" + n + "_input"), format_value(0), 0444); !r) return r;
  }
  return link_class(root_, hwmon_index, rel);
}

Result<void> HwmonTree::add_other(unsigned hwmon_index, const std::string& name) const {
  const fs::path rel = fs::path("devices/virtual/thermal") / hwmon_name(hwmon_index);
  const fs::path dir = sys_ / rel;
  if (auto r = make_dirs(dir); !r) return r;
  if (auto r = write_file_atomic(dir / "name", name + "\n", 0444); !r) return r;
  if (auto r = write_file_atomic(dir / "temp1_input", "41500\n", 0444); !r) return r;
  return link_class(root_, hwmon_index, rel);
}

Result<void> HwmonTree::set_value(unsigned hwmon_index, const std::string& file, std::int64_t value) const {
  const fs::path path = device_dir(hwmon_index) / file;
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) {
    // 0444 like the kernel's: its owner makes it writable for the moment of the open.
    if (errno != EACCES || ::chmod(path.c_str(), 0644) != 0)
      return fail(ErrorCode::kIo, "cannot open " + path.string() + ": " + std::strerror(errno));
    const int fd2 = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    ::chmod(path.c_str(), 0444);
    if (fd2 < 0) return fail(ErrorCode::kIo, "cannot open " + path.string() + ": " + std::strerror(errno));
    auto r = write_value(fd2, value);
    ::close(fd2);
    return r;
  }
  auto r = write_value(fd, value);
  ::close(fd);
  return r;
}

}  // namespace erg::sim
