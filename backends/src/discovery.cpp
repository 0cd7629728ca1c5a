#include "erg/backends/discovery.hpp"

#include <utility>

namespace erg::backends {

Result<Inventory> discover(const DiscoveryOptions& options) {
  Inventory inventory;
  auto gpus = nvml::discover(options.nvml);
  if (!gpus) return fail(gpus.error());
  inventory.gpus = std::move(gpus->gpus);
  for (auto& u : gpus->unavailable) inventory.unavailable.push_back(std::move(u));

  auto cpus = rapl::discover(options.rapl);
  inventory.cpus = std::move(cpus.cpus);
  for (auto& u : cpus.unavailable) inventory.unavailable.push_back(std::move(u));
  return inventory;
}

}  // namespace erg::backends
