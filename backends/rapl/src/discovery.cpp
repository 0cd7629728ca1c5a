#include "erg/backends/rapl/discovery.hpp"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <string>
#include <system_error>
#include <utility>

#include "erg/backends/rapl/keepalive.hpp"
#include "erg/backends/rapl/rapl_cpu.hpp"

namespace erg::rapl {
namespace fs = std::filesystem;
namespace {

constexpr const char* kSource = "rapl";

// Zone directories `intel-rapl:N` (sub unset) or `intel-rapl:N:M` directly inside `dir`, keyed by
// the number that varies (N, or M when `parent` is given and the entry belongs to it).
std::map<unsigned, fs::path> list_zones(const fs::path& dir, std::optional<unsigned> parent) {
  std::map<unsigned, fs::path> zones;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const auto id = parse_zone_id(it->path().filename().string());
    if (!id) continue;
    if (!parent && !id->sub) zones.emplace(id->zone, it->path());
    if (parent && id->sub && id->zone == *parent) zones.emplace(*id->sub, it->path());
  }
  return zones;
}

bool has_zone_dir(const fs::path& root) {
  for (const auto& [n, dir] : list_zones(root, std::nullopt)) {
    std::error_code ec;
    if (fs::is_directory(dir, ec)) return true;  // Follows the sysfs symlink; a masked one fails.
  }
  return false;
}

void add_unavailable(Discovery& out, const Error& error) {
  out.unavailable.push_back(Unavailable{kSource, error.code, error.message});
}

std::string root_origin(const DiscoveryOptions& opts) {
  if (opts.root) return "DiscoveryOptions::root";
  return kPowercapRootEnv;
}

std::optional<fs::path> explicit_root(const DiscoveryOptions& opts) {
  if (opts.root) return *opts.root;
  const char* env = std::getenv(kPowercapRootEnv);
  if (env != nullptr && *env != '\0') return fs::path(env);
  return std::nullopt;
}

// Finds the package's dram sub-zone: nested sub-zones first (real sysfs has them inside the zone
// directory), else the top-level `intel-rapl:N:M` entries; the two views of one sub-zone are never
// both used. Returns nullopt if there is none; an error if it exists but is unusable.
Result<std::optional<RaplDomain>> find_dram(const SysfsReader& reader, const fs::path& root, unsigned zone,
                                            const fs::path& zone_dir) {
  auto subs = list_zones(zone_dir, zone);
  if (subs.empty()) subs = list_zones(root, zone);
  for (const auto& [m, dir] : subs) {
    auto name = read_name_file(reader, dir / "name");
    if (!name || *name != "dram") continue;  // core/uncore (or an unnamed sub-zone) are not used.
    auto range = read_energy_file(reader, dir / "max_energy_range_uj");
    if (!range) return fail(range.error());
    return std::optional<RaplDomain>(RaplDomain{dir, *range});
  }
  return std::optional<RaplDomain>();
}

}  // namespace

std::optional<fs::path> find_powercap_root(const DiscoveryOptions& opts) {
  if (auto root = explicit_root(opts)) {
    if (has_zone_dir(*root)) return root;
    return std::nullopt;
  }
  for (const char* candidate : {kDefaultPowercapRoot, kContainerPowercapRoot}) {
    if (has_zone_dir(candidate)) return fs::path(candidate);
  }
  return std::nullopt;
}

Discovery discover(const DiscoveryOptions& opts) { return discover(opts, DiscoverySeams{}); }

Discovery discover(const DiscoveryOptions& opts, const DiscoverySeams& seams) {
  Discovery out;
  const auto root = find_powercap_root(opts);
  if (!root) {
    std::string reason;
    if (auto given = explicit_root(opts)) {
      reason = "no RAPL powercap tree at " + given->string() + " (from " + root_origin(opts) +
               "; expected intel-rapl:N zone directories)";
    } else {
      reason = std::string("no RAPL powercap tree at ") + kDefaultPowercapRoot + " (nor " + kContainerPowercapRoot +
               "; RAPL needs an Intel CPU or an AMD CPU with Linux >= 5.8 on bare metal, and in a container the "
               "host's /sys/class/powercap mounted at " +
               kContainerPowercapRoot + "; or set " + kPowercapRootEnv + ")";
    }
    out.unavailable.push_back(Unavailable{kSource, ErrorCode::kUnavailable, std::move(reason)});
    return out;
  }

  const auto reader = seams.reader ? seams.reader : default_reader();
  RaplCpuOptions cpu_options{reader, seams.clock, seams.max_power};
  std::vector<std::shared_ptr<RaplCpu>> cpus;
  std::uint64_t min_range_uj = 0;

  for (const auto& [n, zone_dir] : list_zones(*root, std::nullopt)) {  // std::map: sorted by N.
    auto name = read_name_file(*reader, zone_dir / "name");
    if (!name) {
      add_unavailable(out, name.error());
      continue;
    }
    if (!is_package_zone_name(*name)) continue;  // psys (platform) overlaps the packages: never summed.
    auto range = read_energy_file(*reader, zone_dir / "max_energy_range_uj");
    if (!range) {
      add_unavailable(out, range.error());
      continue;
    }
    RaplDomain package{zone_dir, *range};
    // An unreadable package counter makes the package unusable; report that alone (its DRAM
    // counter has the same mode, so listing it too would say the same thing twice).
    if (auto probe = read_energy_file(*reader, zone_dir / "energy_uj"); !probe) {
      add_unavailable(out, probe.error());
      continue;
    }

    auto dram = find_dram(*reader, *root, n, zone_dir);
    std::optional<RaplDomain> dram_domain;
    if (!dram) {
      add_unavailable(out, Error{dram.error().code, "CPU " + std::to_string(n) + " (" + *name +
                                                        ") DRAM domain unusable: " + dram.error().message});
    } else if (*dram) {
      // Probe it so an unreadable DRAM counter costs only the DRAM, not the package.
      if (auto probe = read_energy_file(*reader, (*dram)->dir / "energy_uj"); !probe) {
        add_unavailable(out, Error{probe.error().code, "CPU " + std::to_string(n) + " (" + *name +
                                                           ") DRAM domain unusable: " + probe.error().message});
      } else {
        dram_domain = std::move(*dram);
      }
    }

    auto cpu = RaplCpu::create(n, *name, package, dram_domain, cpu_options);
    if (!cpu) {
      add_unavailable(out, cpu.error());
      continue;
    }
    for (std::uint64_t r : {package.max_energy_range_uj, dram_domain ? dram_domain->max_energy_range_uj : 0}) {
      if (r > 0 && (min_range_uj == 0 || r < min_range_uj)) min_range_uj = r;
    }
    cpus.push_back(std::move(*cpu));
  }

  if (opts.keepalive && !cpus.empty()) {
    std::vector<Keepalive::Task> tasks;
    tasks.reserve(cpus.size());
    for (const auto& cpu : cpus) tasks.push_back(cpu->keepalive_task());
    auto keepalive =
        std::make_shared<const Keepalive>(std::move(tasks), keepalive_period(min_range_uj, seams.max_power));
    for (const auto& cpu : cpus) cpu->set_keepalive(keepalive);
  }
  out.cpus.assign(cpus.begin(), cpus.end());
  return out;
}

}  // namespace erg::rapl
