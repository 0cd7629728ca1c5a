#pragma once
/// The simulated Jetson modules: which INA3221 power monitors each carries, on which I2C
/// address, and what each channel is labelled (as the kernel's `inN_label` shows it).
///
/// Layouts (public sources in backends/jetson/README.md):
///  - orin (Jetson AGX Orin): 1-0040 VDD_GPU_SOC, VDD_CPU_CV, VIN_SYS_5V0;
///    1-0041 channel 2 VDDQ_VDD2_1V8AO (channels 1 and 3 not connected: no label, disabled).
///  - orin-nano (Jetson Orin Nano / NX): 1-0040 VDD_IN, VDD_CPU_GPU_CV, VDD_SOC.
///  - xavier (Jetson AGX Xavier, JetPack 5 hwmon driver): 1-0040 GPU, CPU, SOC;
///    1-0041 CV, VDDRQ, SYS5V.
/// Every shunt is 5 mΩ (the Xavier design guide's sense resistors, 1 % parts).

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace erg::sim {

enum class JetsonLayout { kOrin, kOrinNano, kXavier };

/// "orin", "orin-nano", "xavier".
std::string_view to_string(JetsonLayout layout);
/// Case-insensitive; also "agx-orin", "orin-nx", "agx-xavier". nullopt for anything else.
std::optional<JetsonLayout> parse_jetson_layout(std::string_view name);

/// One connected INA3221 channel of a layout.
struct RailSpec {
  std::string label;        ///< inN_label
  unsigned address = 0x40;  ///< I2C address of its INA3221 (bus 1)
  unsigned channel = 1;     ///< 1..3
  double bus_v = 5.0;       ///< typical bus voltage the channel sees
  double idle_w = 1.0;      ///< the rail's power when nothing runs (its default)
  unsigned shunt_uohm = 5000;
};

/// The rails of a layout, in hwmon order (address, then channel).
std::vector<RailSpec> jetson_rails(JetsonLayout layout);

}  // namespace erg::sim
