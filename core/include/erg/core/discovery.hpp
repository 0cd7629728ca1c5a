#pragma once
/// The devices a process can use, gathered from every backend. Backends fill an Inventory; core
/// only defines its shape so nothing in core depends on a vendor.

#include <memory>
#include <string>
#include <vector>

#include "erg/core/device.hpp"

namespace erg {

/// Something that could not be used, and why (no driver, no permission, ...).
struct Unavailable {
  std::string source;  ///< "nvml", "rapl", ...
  ErrorCode code;
  std::string reason;  ///< One line, says how to fix it where possible.
};

struct Inventory {
  std::vector<std::shared_ptr<Gpu>> gpus;  ///< In erg index order.
  std::vector<std::shared_ptr<Cpu>> cpus;  ///< In package index order.
  std::vector<std::shared_ptr<Soc>> socs;  ///< Jetson modules (at most one on real hardware).
  std::vector<Unavailable> unavailable;
  bool simulated = false;  ///< True when every seam points at the simulated machine.
};

}  // namespace erg
