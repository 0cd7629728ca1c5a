#include "erg/sim/jetson.hpp"

#include <cctype>

namespace erg::sim {

std::string_view to_string(JetsonLayout layout) {
  switch (layout) {
    case JetsonLayout::kOrin: return "orin";
    case JetsonLayout::kOrinNano: return "orin-nano";
    case JetsonLayout::kXavier: return "xavier";
  }
  return "unknown";
}

std::optional<JetsonLayout> parse_jetson_layout(std::string_view name) {
  std::string n;
  for (char c : name) n += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (n == "orin" || n == "agx-orin") return JetsonLayout::kOrin;
  if (n == "orin-nano" || n == "orin-nx") return JetsonLayout::kOrinNano;
  if (n == "xavier" || n == "agx-xavier") return JetsonLayout::kXavier;
  return std::nullopt;
}

std::vector<RailSpec> jetson_rails(JetsonLayout layout) {
  // Bus voltages: what the supply in front of each shunt typically is on a developer kit (the AGX
  // modules take their high-voltage input on the CPU/GPU/SoC monitors, the 5 V input on the
  // system one); idle powers are a plausible idle module, not a measured figure.
  switch (layout) {
    case JetsonLayout::kOrin:
      return {{"VDD_GPU_SOC", 0x40, 1, 19.0, 3.2},
              {"VDD_CPU_CV", 0x40, 2, 19.0, 1.1},
              {"VIN_SYS_5V0", 0x40, 3, 5.0, 3.6},
              {"VDDQ_VDD2_1V8AO", 0x41, 2, 5.0, 0.8}};
    case JetsonLayout::kOrinNano:
      // VDD_IN is the module input: it carries the other two rails and the rest of the module.
      return {{"VDD_IN", 0x40, 1, 5.0, 2.6}, {"VDD_CPU_GPU_CV", 0x40, 2, 5.0, 0.7}, {"VDD_SOC", 0x40, 3, 5.0, 1.2}};
    case JetsonLayout::kXavier:
      return {{"GPU", 0x40, 1, 19.0, 0.5}, {"CPU", 0x40, 2, 19.0, 0.9},   {"SOC", 0x40, 3, 19.0, 1.7},
              {"CV", 0x41, 1, 19.0, 0.3},  {"VDDRQ", 0x41, 2, 19.0, 0.6}, {"SYS5V", 0x41, 3, 5.0, 2.4}};
  }
  return {};
}

}  // namespace erg::sim
