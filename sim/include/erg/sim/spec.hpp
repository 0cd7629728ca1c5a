#pragma once
/// What a simulated machine contains: parsed from `4xA100`, `2xH100,1xV100,cpus=2`, or a JSON
/// file (path ending in .json, or starting with '{').

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "erg/core/result.hpp"
#include "erg/sim/sku.hpp"

namespace erg::sim {

struct GpuSpec {
  std::string sku;                  ///< Key into the SKU table ("A100", "V100", ...).
  std::optional<std::string> uuid;  ///< Default: derived from the position.
};

struct CpuSpec {
  bool dram = true;
  double idle_package_w = 20.0;
  double idle_dram_w = 4.0;
  /// Raw counter range before energy_uj wraps (µJ). Default like a current Intel part.
  std::uint64_t max_energy_range_uj = 262143328850ULL;
};

struct MachineSpec {
  std::string text;  ///< The spec as given (for ERG_SIMULATE).
  std::vector<GpuSpec> gpus;
  std::vector<CpuSpec> cpus;  ///< Default: one package with DRAM.
  bool psys = false;          ///< Add a psys zone (never summed into packages).
};

/// Parses a spec string or JSON file. Errors name the bad token.
Result<MachineSpec> parse_spec(std::string_view text);

}  // namespace erg::sim
