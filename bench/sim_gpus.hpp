#pragma once
// Benchmarks over the simulated machine: a machine exported to this process's environment and
// its GPUs found through the real NVML backend (dlopen of the simulated driver).

#include <memory>
#include <string>
#include <vector>

#include "erg/backends/nvml/discovery.hpp"
#include "erg/sim/machine.hpp"
#include "erg/sim/spec.hpp"

namespace erg::bench {

struct SimGpus {
  std::unique_ptr<sim::Machine> machine;
  std::vector<std::shared_ptr<Gpu>> gpus;
};

/// The simulated machine for `spec` and its GPUs; the error says what failed.
inline Result<SimGpus> sim_gpus(const std::string& spec, std::size_t expected_gpus) {
  auto parsed = sim::parse_spec(spec);
  if (!parsed) return fail(parsed.error());
  auto machine = sim::Machine::create_temp(*parsed);
  if (!machine) return fail(machine.error());
  if (auto r = (*machine)->export_env(); !r) return fail(r.error());
  nvml::DiscoveryOptions opts;
  opts.cuda_visible_devices = std::optional<std::string>();
  auto found = nvml::discover(opts);
  if (!found) return fail(found.error());
  if (found->gpus.size() != expected_gpus) return fail(ErrorCode::kNotFound, "simulated GPUs not found");
  return SimGpus{std::move(*machine), std::move(found->gpus)};
}

}  // namespace erg::bench
