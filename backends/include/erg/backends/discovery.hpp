#pragma once
/// Discovery across every backend that is built: NVML and AMD SMI GPUs, RAPL CPU packages and
/// Jetson SoC rails. Returns what
/// could be used and, for what could not, why (no driver, no permission).

#include "erg/backends/amdsmi/discovery.hpp"
#include "erg/backends/jetson/jetson_soc.hpp"
#include "erg/backends/nvml/discovery.hpp"
#include "erg/backends/rapl/discovery.hpp"
#include "erg/core/discovery.hpp"

namespace erg::backends {

struct DiscoveryOptions {
  nvml::DiscoveryOptions nvml;
  /// AMD GPUs follow the NVIDIA ones in erg index order (`first_index` is set by discover()).
  amdsmi::DiscoveryOptions amdsmi;
  rapl::DiscoveryOptions rapl;
  jetson::DiscoveryOptions jetson;  ///< Jetson INA3221 rails (Inventory::socs).
};

/// Fails only on invalid configuration (e.g. a malformed CUDA_VISIBLE_DEVICES); missing
/// hardware or drivers are reported in Inventory::unavailable. Leaves `simulated` false: only
/// erg::devices knows whether the seams point at the simulated machine.
Result<Inventory> discover(const DiscoveryOptions& options = {});

}  // namespace erg::backends
