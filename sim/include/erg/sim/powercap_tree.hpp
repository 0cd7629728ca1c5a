#pragma once
/// Writes a Linux powercap tree like /sys/class/powercap, for the RAPL backend (and any other
/// tool that reads sysfs) to read. Stateless: used by the simulated machine (which keeps the
/// files following its model) and directly by tests that need exact raw values.
///
/// Two layouts:
///  - plain (`PowercapTree(root)`): real directories under `root`:
///      ROOT/intel-rapl/enabled
///      ROOT/intel-rapl:N/{name,energy_uj,max_energy_range_uj}
///      ROOT/intel-rapl:N/intel-rapl:N:M/{...}
///  - sysfs (`PowercapTree::sysfs(sys)`): as the kernel lays it out, with `root` =
///    SYS/class/powercap holding only symlinks:
///      SYS/devices/virtual/powercap/intel-rapl/intel-rapl:N/intel-rapl:N:M/{...}   (the zones)
///      SYS/class/powercap/intel-rapl      -> ../../devices/virtual/powercap/intel-rapl
///      SYS/class/powercap/intel-rapl:N    -> ../../devices/virtual/powercap/intel-rapl/intel-rapl:N
///      SYS/class/powercap/intel-rapl:N:M  -> ../../devices/virtual/powercap/intel-rapl/intel-rapl:N/intel-rapl:N:M
///    so a tool pointed at SYS (node-exporter's --path.sysfs) or at SYS/class/powercap finds
///    every zone, nested or flat.
///
/// Values are written in place (pwrite at offset 0), so a reader may keep `energy_uj` open and
/// pread it from offset 0, as sysfs allows. Each value is right-aligned in a fixed width (the
/// digits of max_energy_range_uj) so the file never changes size: no truncation for a reader to
/// see half of. The kernel differs: it prints "%lld\n" (no padding, variable width: a digit more
/// past each power of ten, fewer after the wrap), computes the value at each read, and stat()
/// reports st_size 4096 for every attribute — readers must read to the newline or EOF and make
/// no assumption on st_size; every parser that skips leading blanks reads the same number from
/// both. `energy_uj` is mode 0400 (the kernel's since CVE-2020-8694); name and
/// max_energy_range_uj are 0444.
///
/// The simulated machine (machine.hpp) keeps its tree following the model: on the real clock only
/// the process holding the tree's lease refreshes it, once per RAPL period (~1,024 wake-ups/s);
/// every other attached process looks at the lease every 100 ms (10/s) and takes it over when the
/// holder is gone or silent for 200 ms. Each refresh records every file's value with the simulated
/// time it was computed for, before writing the file (Machine::powercap_as_of: the last 128 per
/// file). For the kernel's exact format there is an opt-in FUSE server, erg-sim-powercapfs
/// (sim/tools/powercapfs.cpp: values computed at read time, "%lld\n", st_size 4096, this sysfs
/// layout). sim/README.md ("RAPL and the powercap tree") has the details and the tests.

#include <cstdint>
#include <filesystem>
#include <string>

#include "erg/core/result.hpp"

namespace erg::sim {

class PowercapTree {
 public:
  /// The plain layout under `root`.
  explicit PowercapTree(std::filesystem::path root) : root_(std::move(root)) {}
  /// The sysfs layout under `sysfs_root` (root() is sysfs_root/class/powercap).
  static PowercapTree sysfs(const std::filesystem::path& sysfs_root);

  /// The powercap class directory (what ERG_POWERCAP_ROOT names).
  [[nodiscard]] const std::filesystem::path& root() const { return root_; }

  /// Path of zone `intel-rapl:N` (sub < 0) or its sub-zone `intel-rapl:N:sub`, through root().
  [[nodiscard]] std::filesystem::path zone_dir(int zone, int sub = -1) const;

  /// Creates a zone (or sub-zone) with `name`, `max_energy_range_uj` and `energy_uj` =
  /// `energy_uj` (mode `energy_mode`).
  Result<void> add_zone(int zone, const std::string& name, std::uint64_t max_energy_range_uj, int sub = -1,
                        std::uint64_t energy_uj = 0, unsigned energy_mode = 0400);
  /// Rewrites energy_uj of a zone in place.
  Result<void> set_energy_uj(int zone, std::uint64_t energy_uj, int sub = -1) const;
  /// Sets the mode of energy_uj (e.g. 0444 to let unprivileged tests read it).
  Result<void> set_energy_mode(int zone, unsigned mode, int sub = -1) const;

  /// The text of an energy value in a file of width `width` (digits, then '\n').
  static std::string format_energy(std::uint64_t energy_uj, std::size_t width);
  /// Writes `energy_uj` into an open energy file of `width` digits (one pwrite at offset 0).
  static Result<void> write_energy(int fd, std::uint64_t energy_uj, std::size_t width);
  /// The width an energy file of a zone with this range uses.
  static std::size_t width_for(std::uint64_t max_energy_range_uj);

 private:
  PowercapTree(std::filesystem::path root, std::filesystem::path devices)
      : root_(std::move(root)), devices_(std::move(devices)) {}
  /// Where the zone directories really are (devices_ in the sysfs layout, else root_).
  [[nodiscard]] std::filesystem::path real_zone_dir(int zone, int sub) const;

  std::filesystem::path root_;
  std::filesystem::path devices_;  // empty: plain layout
};

}  // namespace erg::sim
