#pragma once
/// Writes a Linux powercap tree like /sys/class/powercap, for the RAPL backend to read.
/// Stateless: used by the simulated machine (which keeps the files following its model) and
/// directly by tests that need exact raw values (wrap sequences, missing files, modes).
///
/// Layout written (as the kernel exposes it under /sys/class/powercap):
///   ROOT/intel-rapl/enabled
///   ROOT/intel-rapl:N/{name,energy_uj,max_energy_range_uj}
///   ROOT/intel-rapl:N/intel-rapl:N:M/{name,energy_uj,max_energy_range_uj}   (dram, core, uncore)
/// Files are replaced atomically (write to a temporary name, then rename), so a reader that
/// opens the file for each read never sees a torn value.

#include <cstdint>
#include <filesystem>
#include <string>

#include "erg/core/result.hpp"

namespace erg::sim {

class PowercapTree {
 public:
  explicit PowercapTree(std::filesystem::path root) : root_(std::move(root)) {}

  [[nodiscard]] const std::filesystem::path& root() const { return root_; }

  /// Path of zone `intel-rapl:N` (sub < 0) or its sub-zone `intel-rapl:N:sub`.
  [[nodiscard]] std::filesystem::path zone_dir(int zone, int sub = -1) const;

  /// Creates a zone (or sub-zone) with `name`, `max_energy_range_uj` and `energy_uj` = 0.
  Result<void> add_zone(int zone, const std::string& name, std::uint64_t max_energy_range_uj, int sub = -1);
  /// Replaces energy_uj of a zone atomically.
  Result<void> set_energy_uj(int zone, std::uint64_t energy_uj, int sub = -1);
  /// Sets the mode of energy_uj (e.g. 0400 as the kernel does since CVE-2020-8694).
  Result<void> set_energy_mode(int zone, unsigned mode, int sub = -1);

 private:
  std::filesystem::path root_;
};

}  // namespace erg::sim
