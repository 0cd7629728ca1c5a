#include "erg/backends/discovery.hpp"

#include <cstdlib>
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

  const char* simulate = std::getenv("ERG_SIMULATE");
  const char* state = std::getenv("ERG_SIM_STATE");
  inventory.simulated = simulate != nullptr && *simulate != '\0' && state != nullptr && *state != '\0';
  return inventory;
}

}  // namespace erg::backends
