#pragma once
/// The hwmon seam of the Jetson backend: pure parsers and the classification of rails by label,
/// and the scan of a hwmon class directory for INA3221 channels.
///
/// Files used (Linux `ina3221` driver; see backends/jetson/README.md), under ROOT/hwmonK/:
///   name                 "ina3221" for the power monitors (other hwmon devices are skipped)
///   inN_label            the rail's name (N = 1..3); a channel without one is not connected
///   inN_enable           "0": the channel is disabled (skipped)
///   inN_input            bus voltage, mV
///   currN_input          current, mA
///   powerN_input         power, µW (hwmon's unit), used instead of V × I where a driver has it
///   update_interval      ms between readings of the chip (optional)

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "erg/core/device.hpp"
#include "erg/core/result.hpp"

namespace erg::jetson {

/// Environment variable naming the hwmon class directory (like /sys/class/hwmon).
inline constexpr const char* kHwmonRootEnv = "ERG_HWMON_ROOT";
inline constexpr const char* kDefaultHwmonRoot = "/sys/class/hwmon";

/// A decimal integer (sign allowed), surrounded by optional ASCII whitespace (sysfs ends values
/// with '\n'). kInvalidArgument for anything else.
Result<std::int64_t> parse_value(std::string_view text);
/// A label with surrounding whitespace removed (may be empty).
std::string parse_label(std::string_view text);

/// The kind of a rail from its label, case-insensitively:
///  - total: the module input, "VDD_IN" or a label ending in "_IN" (POM_5V_IN on older modules);
///  - cpu_gpu: names both CPU and GPU (VDD_CPU_GPU_CV);
///  - gpu: names GPU (VDD_GPU_SOC, GPU); cpu: names CPU (VDD_CPU_CV, CPU);
///  - other: everything else (SOC, CV, VDDRQ, SYS5V, VIN_SYS_5V0, VDDQ_VDD2_1V8AO).
RailKind classify_rail(std::string_view label);

/// One connected INA3221 channel.
struct RailFiles {
  std::string label;
  RailKind kind = RailKind::kOther;
  std::filesystem::path voltage_mv;                          ///< inN_input
  std::filesystem::path current_ma;                          ///< currN_input
  std::filesystem::path power_uw;                            ///< powerN_input, empty when absent
  std::optional<std::chrono::milliseconds> update_interval;  ///< the chip's, when it says
};

/// The connected channels of every INA3221 under `root` (hwmonK in numeric order of K, channels
/// 1..3). Never fails: an unreadable device is skipped and described in `problems`
/// (one line each, naming the file).
std::vector<RailFiles> scan_rails(const std::filesystem::path& root, std::vector<Error>* problems = nullptr);

}  // namespace erg::jetson
