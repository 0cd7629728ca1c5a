#include "erg/backends/jetson/hwmon.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <map>

namespace erg::jetson {
namespace fs = std::filesystem;

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::string upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

/// A small sysfs file (one page at most). Errors name the file.
Result<std::string> read_text(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int e = errno;
    return fail(e == EACCES || e == EPERM ? ErrorCode::kNoPermission
                : e == ENOENT             ? ErrorCode::kNotFound
                                          : ErrorCode::kIo,
                "cannot read " + path.string() + ": " + std::strerror(e));
  }
  char buf[4096];
  const ssize_t n = ::read(fd, buf, sizeof buf);
  const int e = errno;
  ::close(fd);
  if (n < 0) return fail(ErrorCode::kIo, "cannot read " + path.string() + ": " + std::strerror(e));
  return std::string(buf, static_cast<std::size_t>(n));
}

}  // namespace

Result<std::int64_t> parse_value(std::string_view text) {
  const std::string_view t = trim(text);
  std::int64_t v = 0;
  const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (t.empty() || ec != std::errc() || end != t.data() + t.size())
    return fail(ErrorCode::kInvalidArgument, "not a decimal integer: '" + std::string(t) + "'");
  return v;
}

std::string parse_label(std::string_view text) { return std::string(trim(text)); }

RailKind classify_rail(std::string_view label) {
  const std::string l = upper(trim(label));
  const bool cpu = l.find("CPU") != std::string::npos;
  const bool gpu = l.find("GPU") != std::string::npos;
  if (l == "VDD_IN" || (l.size() > 3 && l.compare(l.size() - 3, 3, "_IN") == 0)) return RailKind::kTotal;
  if (cpu && gpu) return RailKind::kCpuGpu;
  if (gpu) return RailKind::kGpu;
  if (cpu) return RailKind::kCpu;
  return RailKind::kOther;
}

std::vector<RailFiles> scan_rails(const fs::path& root, std::vector<Error>* problems) {
  std::map<unsigned, fs::path> devices;  // hwmonK by K
  std::error_code ec;
  for (fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string n = it->path().filename().string();
    if (n.rfind("hwmon", 0) != 0) continue;
    unsigned k = 0;
    const auto [p, e] = std::from_chars(n.data() + 5, n.data() + n.size(), k);
    if (e != std::errc() || p != n.data() + n.size() || n.size() == 5) continue;
    devices.emplace(k, it->path());
  }
  std::vector<RailFiles> rails;
  for (const auto& [k, dir] : devices) {
    auto name = read_text(dir / "name");
    if (!name || parse_label(*name) != "ina3221") continue;
    std::optional<std::chrono::milliseconds> interval;
    if (auto t = read_text(dir / "update_interval"))
      if (auto v = parse_value(*t); v && *v > 0) interval = std::chrono::milliseconds(*v);
    for (unsigned ch = 1; ch <= 3; ++ch) {
      const std::string c = std::to_string(ch);
      auto label = read_text(dir / ("in" + c + "_label"));
      if (!label) continue;  // not connected
      const std::string l = parse_label(*label);
      if (l.empty() || upper(l) == "NC") continue;
      if (auto en = read_text(dir / ("in" + c + "_enable")))
        if (auto v = parse_value(*en); v && *v == 0) continue;
      RailFiles r{l, classify_rail(l), dir / ("in" + c + "_input"), dir / ("curr" + c + "_input"), {}, interval};
      if (fs::exists(dir / ("power" + c + "_input"), ec)) r.power_uw = dir / ("power" + c + "_input");
      // One read now: a rail that cannot be read is reported, not used.
      Result<std::string> probe = r.power_uw.empty() ? read_text(r.voltage_mv) : read_text(r.power_uw);
      if (probe && r.power_uw.empty()) probe = read_text(r.current_ma);
      if (!probe) {
        if (problems != nullptr) problems->push_back(probe.error());
        continue;
      }
      rails.push_back(std::move(r));
    }
  }
  return rails;
}

}  // namespace erg::jetson
