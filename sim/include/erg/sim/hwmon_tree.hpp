#pragma once
/// Writes INA3221 hwmon devices the way the Linux `ina3221` driver lays them out, for the Jetson
/// backend to read. Stateless, like PowercapTree: the simulated machine keeps the values following
/// its rail model; tests use it directly for exact raw values.
///
/// Layout under a sysfs root SYS (root() = SYS/class/hwmon, what ERG_HWMON_ROOT names):
///   SYS/devices/platform/i2c-1/1-00AA/hwmon/hwmonK/   (AA: the address in hex)
///       name                      "ina3221"
///       inN_label                 (connected channels only)
///       inN_enable                1 or 0
///       inN_input                 bus voltage, mV
///       currN_input               current, mA
///       shuntN_resistor           µΩ
///       samples, update_interval  averaging count; update interval, ms
///   SYS/class/hwmon/hwmonK -> ../../devices/platform/i2c-1/1-00AA/hwmon/hwmonK
/// Other hwmon devices (a thermal sensor) can be added with add_other(), as real systems have.
///
/// Values are written in place (one pwrite at offset 0, right-aligned in a fixed width, never a
/// size change), so a reader may keep inN_input / currN_input open and pread them from offset 0.

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "erg/core/result.hpp"

namespace erg::sim {

class HwmonTree {
 public:
  /// Width of every value file (digits right-aligned, then '\n').
  static constexpr std::size_t kValueWidth = 7;

  struct Channel {
    unsigned channel = 1;  ///< 1..3
    std::string label;     ///< empty: not connected (no label file, enable 0, inputs 0)
    unsigned shunt_uohm = 5000;
  };

  explicit HwmonTree(const std::filesystem::path& sysfs_root);
  /// SYS/class/hwmon.
  [[nodiscard]] const std::filesystem::path& root() const { return root_; }
  /// SYS/class/hwmon/hwmonK.
  [[nodiscard]] std::filesystem::path device_dir(unsigned hwmon_index) const;

  /// Creates the class directory (an empty hwmon class: no devices).
  Result<void> create_root() const;
  /// Creates an INA3221 at I2C bus 1, `address`, as hwmonK with the given channels.
  Result<void> add_ina3221(unsigned hwmon_index, unsigned address, const std::vector<Channel>& channels,
                           unsigned samples, unsigned update_interval_ms) const;
  /// Creates a non-INA3221 hwmon device (`name`, one temp1_input), for readers to skip.
  Result<void> add_other(unsigned hwmon_index, const std::string& name) const;
  /// Rewrites one attribute file in place (`file` e.g. "in1_input").
  Result<void> set_value(unsigned hwmon_index, const std::string& file, std::int64_t value) const;

  /// The text of a value in a file of kValueWidth digits.
  static std::string format_value(std::int64_t value);
  /// Writes `value` into an open value file (one pwrite at offset 0).
  static Result<void> write_value(int fd, std::int64_t value);

 private:
  std::filesystem::path sys_;
  std::filesystem::path root_;
};

}  // namespace erg::sim
