#pragma once
/// RAPL discovery: the CPU packages of the powercap tree, and what could not be used and why.

#include <filesystem>
#include <memory>
#include <optional>
#include <vector>

#include "erg/backends/rapl/powercap.hpp"
#include "erg/backends/rapl/wrap_accumulator.hpp"
#include "erg/core/clock.hpp"
#include "erg/core/device.hpp"
#include "erg/core/discovery.hpp"

namespace erg::rapl {

/// Environment variable naming the powercap root (a directory like /sys/class/powercap).
inline constexpr const char* kPowercapRootEnv = "ERG_POWERCAP_ROOT";
inline constexpr const char* kDefaultPowercapRoot = "/sys/class/powercap";
/// Where a container sees the host's tree when it is bind-mounted (Docker masks the real one).
inline constexpr const char* kContainerPowercapRoot = "/host/sys/class/powercap";

struct DiscoveryOptions {
  /// The powercap root; else $ERG_POWERCAP_ROOT, else /sys/class/powercap, else
  /// /host/sys/class/powercap. An explicit root (option or variable) has no fallback.
  std::optional<std::filesystem::path> root;
  /// Start one keepalive thread for the discovered packages (see keepalive.hpp).
  bool keepalive = true;
};

struct Discovery {
  std::vector<std::shared_ptr<erg::Cpu>> cpus;  ///< RaplCpu objects sorted by zone number N.
  std::vector<erg::Unavailable> unavailable;    ///< source "rapl".
};

/// Test and simulation seams; production uses the defaults.
struct DiscoverySeams {
  std::shared_ptr<const SysfsReader> reader;  ///< nullptr → default_reader().
  std::shared_ptr<const Clock> clock;         ///< nullptr → SteadyClock.
  Watts max_power = kDefaultMaxPower;         ///< Per domain: wrap inference and keepalive period.
};

/// The root discovery would use: options.root or $ERG_POWERCAP_ROOT as given, else the first of
/// /sys/class/powercap and /host/sys/class/powercap holding an `intel-rapl:N` zone directory;
/// nullopt when neither does.
std::optional<std::filesystem::path> find_powercap_root(const DiscoveryOptions& opts = {});

/// Finds the CPU packages: top-level zones `intel-rapl:N` whose name starts with "package"
/// (CPU index N, name e.g. "package-0" or "package-0-die-1"), each with its `dram` sub-zone if it
/// has one (nested `intel-rapl:N/intel-rapl:N:M`, or the top-level `intel-rapl:N:M` links when the
/// nested ones are absent; never both). psys/core/uncore zones are never used: they overlap the
/// packages. Reads each domain once (the baseline). Never fails and never prints:
///  - no tree → no cpus and one Unavailable{"rapl", kUnavailable, "no RAPL powercap tree at ..."};
///  - a package whose name/energy_uj/max_energy_range_uj is missing → Unavailable kNotFound
///    naming the file; unreadable energy_uj → kNoPermission with how to fix it;
///  - an unusable dram sub-zone → the package without DRAM, plus an Unavailable for the DRAM.
/// Privilege: reading energy_uj needs root (mode 0400 since CVE-2020-8694).
Discovery discover(const DiscoveryOptions& opts = {});
Discovery discover(const DiscoveryOptions& opts, const DiscoverySeams& seams);

}  // namespace erg::rapl
