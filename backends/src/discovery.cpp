#include "erg/backends/discovery.hpp"

#include <utility>

namespace erg::backends {

namespace {

/// A vendor library that is simply not installed: worth saying only when no GPU was found at all
/// (an NVIDIA host has no AMD SMI, and the reverse).
bool library_absent(const Unavailable& u) {
  return u.code == ErrorCode::kUnavailable &&
         (u.reason.rfind("no NVIDIA driver found", 0) == 0 || u.reason.rfind("no AMD SMI library found", 0) == 0);
}

}  // namespace

Result<Inventory> discover(const DiscoveryOptions& options) {
  Inventory inventory;
  auto gpus = nvml::discover(options.nvml);
  if (!gpus) return fail(gpus.error());
  inventory.gpus = std::move(gpus->gpus);
  std::vector<Unavailable> gpu_notes = std::move(gpus->unavailable);

  // AMD GPUs after the NVIDIA ones (a mixed machine: erg indices continue).
  amdsmi::DiscoveryOptions amd = options.amdsmi;
  amd.first_index = static_cast<unsigned>(inventory.gpus.size());
  auto amd_gpus = amdsmi::discover(amd);
  if (!amd_gpus) return fail(amd_gpus.error());
  for (auto& g : amd_gpus->gpus) inventory.gpus.push_back(std::move(g));
  for (auto& u : amd_gpus->unavailable) gpu_notes.push_back(std::move(u));
  for (auto& u : gpu_notes)
    if (inventory.gpus.empty() || !library_absent(u)) inventory.unavailable.push_back(std::move(u));

  auto cpus = rapl::discover(options.rapl);
  inventory.cpus = std::move(cpus.cpus);
  for (auto& u : cpus.unavailable) inventory.unavailable.push_back(std::move(u));

  auto socs = jetson::discover(options.jetson);
  inventory.socs = std::move(socs.socs);
  for (auto& u : socs.unavailable) inventory.unavailable.push_back(std::move(u));
  return inventory;
}

}  // namespace erg::backends
