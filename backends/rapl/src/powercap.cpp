#include "erg/backends/rapl/powercap.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <system_error>

namespace erg::rapl {
namespace {

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

std::string_view trim(std::string_view text) {
  while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
  while (!text.empty() && is_space(text.back())) text.remove_suffix(1);
  return text;
}

// Parses a non-empty all-digit decimal number; nullopt otherwise (no sign, no spaces).
std::optional<unsigned> parse_index(std::string_view digits) {
  if (digits.empty()) return std::nullopt;
  unsigned value = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (ec != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
  return value;
}

std::string quoted_excerpt(std::string_view text) {
  constexpr std::size_t kMax = 32;
  std::string out(text.substr(0, kMax));
  if (text.size() > kMax) out += "...";
  return "'" + out + "'";
}

}  // namespace

Result<std::uint64_t> parse_energy_uj(std::string_view text) {
  const std::string_view digits = trim(text);
  if (digits.empty()) return fail(ErrorCode::kInvalidArgument, "empty energy value");
  if (digits.front() < '0' || digits.front() > '9')
    return fail(ErrorCode::kInvalidArgument, "not a decimal integer: " + quoted_excerpt(digits));
  std::uint64_t value = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (ec == std::errc::result_out_of_range)
    return fail(ErrorCode::kInvalidArgument, "energy value out of 64-bit range: " + quoted_excerpt(digits));
  if (ec != std::errc() || end != digits.data() + digits.size())
    return fail(ErrorCode::kInvalidArgument, "not a decimal integer: " + quoted_excerpt(digits));
  return value;
}

Result<std::string> parse_zone_name(std::string_view text) {
  const std::string_view name = trim(text);
  if (name.empty()) return fail(ErrorCode::kInvalidArgument, "empty zone name");
  return std::string(name);
}

std::optional<ZoneId> parse_zone_id(std::string_view entry_name) {
  constexpr std::string_view kPrefix = "intel-rapl:";
  if (!entry_name.starts_with(kPrefix)) return std::nullopt;
  std::string_view rest = entry_name.substr(kPrefix.size());
  const auto colon = rest.find(':');
  ZoneId id;
  const auto zone = parse_index(rest.substr(0, colon));
  if (!zone) return std::nullopt;
  id.zone = *zone;
  if (colon != std::string_view::npos) {
    const auto sub = parse_index(rest.substr(colon + 1));
    if (!sub) return std::nullopt;
    id.sub = *sub;
  }
  return id;
}

bool is_package_zone_name(std::string_view name) { return name.starts_with("package"); }

std::string permission_message(const std::filesystem::path& path) {
  return "cannot read " + path.string() +
         ": permission denied; RAPL energy needs root since CVE-2020-8694 — run as root or through ergd "
         "(ERG_DAEMON_SOCK)";
}

Error read_error(const std::filesystem::path& path, int err) {
  switch (err) {
    case ENOENT:
    case ENOTDIR: return Error{ErrorCode::kNotFound, "cannot read " + path.string() + ": no such file"};
    case ENODEV:  // what a kept-open sysfs attribute reads after its zone was removed
      return Error{ErrorCode::kNotFound, "cannot read " + path.string() + ": no such device (the zone was removed)"};
    case EACCES:
    case EPERM: return Error{ErrorCode::kNoPermission, permission_message(path)};
    case ENODATA:
    case EOPNOTSUPP:
      return Error{ErrorCode::kNotSupported, "cannot read " + path.string() + ": " + std::strerror(err) +
                                                 " (the kernel does not support this zone)"};
    default: return Error{ErrorCode::kIo, "cannot read " + path.string() + ": " + std::strerror(err)};
  }
}

Result<std::string> PosixSysfsReader::read(const std::filesystem::path& path) const {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return fail(read_error(path, errno));
  constexpr std::size_t kMaxBytes = 4096;
  std::string content;
  char buffer[256];
  while (content.size() < kMaxBytes) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      return fail(read_error(path, err));
    }
    if (n == 0) break;
    content.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return content;
}

namespace {

/// SysfsReader::open's default: every read goes through the reader.
class ReaderFile final : public SysfsFile {
 public:
  ReaderFile(const SysfsReader& reader, std::filesystem::path path) : reader_(reader), path_(std::move(path)) {}
  Result<std::uint64_t> read_energy() override { return read_energy_file(reader_, path_); }

 private:
  const SysfsReader& reader_;
  std::filesystem::path path_;
};

/// A descriptor kept open, read with pread from offset 0.
class PosixSysfsFile final : public SysfsFile {
 public:
  PosixSysfsFile(int fd, std::filesystem::path path) : fd_(fd), path_(std::move(path)) {}
  ~PosixSysfsFile() override { ::close(fd_); }
  PosixSysfsFile(const PosixSysfsFile&) = delete;
  PosixSysfsFile& operator=(const PosixSysfsFile&) = delete;

  Result<std::uint64_t> read_energy() override {
    // An energy value is at most 20 digits and a newline (a simulated tree pads it to the range's
    // width); more than fits here is not an energy file.
    char buffer[64];
    ssize_t n;
    do {
      n = ::pread(fd_, buffer, sizeof buffer, 0);
    } while (n < 0 && errno == EINTR);
    if (n < 0) return fail(read_error(path_, errno));
    auto value = parse_energy_uj(std::string_view(buffer, static_cast<std::size_t>(n)));
    if (!value) return fail(ErrorCode::kIo, "malformed " + path_.string() + ": " + value.error().message);
    return *value;
  }

 private:
  int fd_;
  std::filesystem::path path_;
};

}  // namespace

Result<std::unique_ptr<SysfsFile>> SysfsReader::open(const std::filesystem::path& path) const {
  return std::unique_ptr<SysfsFile>(new ReaderFile(*this, path));
}

Result<std::unique_ptr<SysfsFile>> PosixSysfsReader::open(const std::filesystem::path& path) const {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return fail(read_error(path, errno));
  return std::unique_ptr<SysfsFile>(new PosixSysfsFile(fd, path));
}

std::shared_ptr<const SysfsReader> default_reader() {
  static const auto reader = std::make_shared<const PosixSysfsReader>();
  return reader;
}

Result<std::uint64_t> read_energy_file(const SysfsReader& reader, const std::filesystem::path& path) {
  auto text = reader.read(path);
  if (!text) return fail(text.error());
  auto value = parse_energy_uj(*text);
  if (!value) return fail(ErrorCode::kIo, "malformed " + path.string() + ": " + value.error().message);
  return *value;
}

Result<std::string> read_name_file(const SysfsReader& reader, const std::filesystem::path& path) {
  auto text = reader.read(path);
  if (!text) return fail(text.error());
  auto name = parse_zone_name(*text);
  if (!name) return fail(ErrorCode::kIo, "malformed " + path.string() + ": " + name.error().message);
  return name;
}

}  // namespace erg::rapl
