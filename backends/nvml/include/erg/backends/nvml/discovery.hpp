#pragma once
/// Finding the NVIDIA GPUs this process may use, through NVML loaded at run time.

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "erg/core/device.hpp"
#include "erg/core/discovery.hpp"
#include "erg/core/result.hpp"

namespace erg::nvml {

struct DiscoveryOptions {
  /// NVML library to dlopen; else $ERG_NVML_LIBRARY, else "libnvidia-ml.so.1".
  std::optional<std::string> library_path;
  /// CUDA_VISIBLE_DEVICES to apply. Not set: read the environment. Set to nullopt: treat the
  /// variable as unset (all GPUs). Set to a string: that value.
  std::optional<std::optional<std::string>> cuda_visible_devices;
};

struct Discovery {
  /// In erg index order; gpus[k]->index() is the GPU's position in CUDA_VISIBLE_DEVICES (so a
  /// listed GPU that is unavailable leaves a gap in the indices, as frameworks count it).
  std::vector<std::shared_ptr<Gpu>> gpus;
  /// Why NVML, or a listed GPU, could not be used.
  std::vector<Unavailable> unavailable;
};

/// Loads NVML and opens the visible GPUs.
///
/// Fails only for a bad CUDA_VISIBLE_DEVICES: malformed, empty or duplicate entries →
/// kInvalidArgument; MIG entries → kNotSupported; an index past the GPU count or an unknown
/// UUID → kNotFound. A missing library is not an error: `gpus` is empty and `unavailable` holds
/// {"nvml", kUnavailable, "no NVIDIA driver found: cannot load libnvidia-ml.so.1 (...)"}. A
/// failing nvmlInit gives one Unavailable with the mapped code; a GPU whose handle cannot be
/// obtained (e.g. NO_PERMISSION) gives one Unavailable for that GPU and the others are listed.
/// Never prints. Thread-safe (reads the environment).
Result<Discovery> discover(const DiscoveryOptions& opts = {});

/// Architecture name for an NVML_DEVICE_ARCH_* value: "kepler", "maxwell", "pascal", "volta",
/// "turing", "ampere", "ada", "hopper", "blackwell", "rubin", or "unknown".
std::string_view architecture_name(unsigned nvml_architecture);

}  // namespace erg::nvml
