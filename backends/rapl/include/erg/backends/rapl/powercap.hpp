#pragma once
/// The powercap sysfs seam of the RAPL backend: pure parsers over bytes, and one narrow reader
/// interface for file access so tests can substitute errors a root test process cannot cause
/// (EACCES as root, EIO).
///
/// Files used (see backends/rapl/README.md): ROOT/intel-rapl:N/{name,energy_uj,max_energy_range_uj}
/// and the same three in the sub-zones ROOT/intel-rapl:N/intel-rapl:N:M/.

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "erg/core/result.hpp"

namespace erg::rapl {

/// Parses the content of `energy_uj` or `max_energy_range_uj`: a decimal unsigned 64-bit
/// integer, optionally surrounded by ASCII whitespace (the kernel appends '\n').
/// Errors: kInvalidArgument when empty, not a decimal integer, or out of 64-bit range.
Result<std::uint64_t> parse_energy_uj(std::string_view text);

/// Parses the content of a zone's `name` file ("package-0", "dram", "psys", ...): the text with
/// surrounding whitespace removed. Errors: kInvalidArgument when nothing is left.
Result<std::string> parse_zone_name(std::string_view text);

/// A powercap entry name `intel-rapl:N` (sub unset) or `intel-rapl:N:M` (sub = M).
struct ZoneId {
  unsigned zone = 0;
  std::optional<unsigned> sub;
  friend bool operator==(const ZoneId&, const ZoneId&) = default;
};
/// Parses a directory entry name; nullopt for anything else (`intel-rapl`, `intel-rapl-mmio:0`,
/// `intel-rapl:0x`, `intel-rapl:`...).
std::optional<ZoneId> parse_zone_id(std::string_view entry_name);

/// True for top-level zone names that are a CPU package: "package-0", "package-0-die-1".
/// False for "psys" (platform, overlaps every package), "dram", "core", "uncore".
bool is_package_zone_name(std::string_view name);

/// The error for a failed read of `path` with `errno` value `err`, mapped in this one place:
/// ENOENT/ENOTDIR/ENODEV → kNotFound, EACCES/EPERM → kNoPermission (message says how to fix it),
/// ENODATA/EOPNOTSUPP → kNotSupported, anything else → kIo. Every message names the file.
Error read_error(const std::filesystem::path& path, int err);

/// The message for an unreadable `energy_uj` (CVE-2020-8694 made it root-only, mode 0400).
std::string permission_message(const std::filesystem::path& path);

/// An energy attribute kept open for repeated reads (the hot path: one pread(2) per read).
/// Not thread-safe; the owner locks.
class SysfsFile {
 public:
  virtual ~SysfsFile() = default;
  /// Reads and parses the value now. Errors as read_energy_file().
  virtual Result<std::uint64_t> read_energy() = 0;
};

/// Reads small sysfs attribute files. Implementations are thread-safe.
class SysfsReader {
 public:
  virtual ~SysfsReader() = default;
  /// The content of `path` (opened, read and closed). Errors as read_error().
  [[nodiscard]] virtual Result<std::string> read(const std::filesystem::path& path) const = 0;
  /// `path` kept open for repeated reads. The default reads through read(path) each time (so a
  /// test's reader, and its injected faults, apply to every read).
  [[nodiscard]] virtual Result<std::unique_ptr<SysfsFile>> open(const std::filesystem::path& path) const;
};

/// The real thing. read(): open(2), read(2), close(2) — at most 4 KiB (one sysfs page). open():
/// a descriptor kept open and read with pread(2) from offset 0, as sysfs allows: each read is
/// computed by the kernel at read time, so one syscall a read (a few µs on real hardware, mostly
/// the MSR read) instead of three.
class PosixSysfsReader final : public SysfsReader {
 public:
  [[nodiscard]] Result<std::string> read(const std::filesystem::path& path) const override;
  [[nodiscard]] Result<std::unique_ptr<SysfsFile>> open(const std::filesystem::path& path) const override;
};

/// The process-wide PosixSysfsReader.
std::shared_ptr<const SysfsReader> default_reader();

/// Reads and parses an energy file (`energy_uj`, `max_energy_range_uj`). Read errors as
/// read_error(); malformed content → kIo naming the file (the kernel never writes such content,
/// so it means a broken mount or tree, not a caller mistake).
Result<std::uint64_t> read_energy_file(const SysfsReader& reader, const std::filesystem::path& path);

/// Reads and parses a `name` file. Errors as read_energy_file().
Result<std::string> read_name_file(const SysfsReader& reader, const std::filesystem::path& path);

}  // namespace erg::rapl
