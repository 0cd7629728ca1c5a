#pragma once
/// Finding the AMD GPUs this process may use, through AMD SMI loaded at run time.

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "erg/core/device.hpp"
#include "erg/core/discovery.hpp"
#include "erg/core/result.hpp"

namespace erg::amdsmi {

struct DiscoveryOptions {
  /// AMD SMI library to dlopen; else $ERG_AMDSMI_LIBRARY, else "libamd_smi.so", then
  /// "/opt/rocm/lib/libamd_smi.so".
  std::optional<std::string> library_path;
  /// The visible-devices value to apply. Not set: $HIP_VISIBLE_DEVICES, else
  /// $CUDA_VISIBLE_DEVICES (as ROCm and Zeus read them). Set to nullopt: all GPUs.
  std::optional<std::optional<std::string>> visible_devices;
  /// erg index of the first AMD GPU (the NVIDIA GPUs, when there are any, come first).
  unsigned first_index = 0;
  /// How long the energy counter is checked against power at start (zeusd: 0.5 s); 0 skips
  /// the check (the counter is trusted).
  std::chrono::milliseconds counter_check{500};
};

struct Discovery {
  /// In HIP order (the order of the KFD node ids), filtered and ordered by the visible-devices
  /// variable; gpus[k]->index() is first_index + k.
  std::vector<std::shared_ptr<Gpu>> gpus;
  /// Why AMD SMI, or a GPU, could not be used; also a GPU whose energy counter failed the start
  /// check (energy is then integrated from power: measurements say `integrated`), and the
  /// secondary die of an MI250 (its power is reported on its sibling).
  std::vector<Unavailable> unavailable;
};

/// Parses HIP_VISIBLE_DEVICES / CUDA_VISIBLE_DEVICES for AMD GPUs: comma-separated HIP indices.
/// nullopt → nullopt (all). Errors (kInvalidArgument): empty value, an entry that is not a
/// non-negative integer, a repeated entry. Pure.
Result<std::optional<std::vector<unsigned>>> parse_visible_devices(std::optional<std::string_view> value,
                                                                   std::string_view variable);

/// Loads AMD SMI and opens the visible GPUs; checks each energy counter against power over
/// `counter_check` (all GPUs together). Fails only for a bad visible-devices value (an index
/// past the GPU count → kNotFound). A missing library is reported in `unavailable`. Never prints.
Result<Discovery> discover(const DiscoveryOptions& opts = {});

/// "cdna3" (MI300), "cdna2" (MI200), "cdna" (MI100), or "unknown", from the market name.
std::string_view architecture_from_name(std::string_view market_name);

}  // namespace erg::amdsmi
