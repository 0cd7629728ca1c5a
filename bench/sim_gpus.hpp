#pragma once
// Benchmarks over the simulated machine, opened as every erg face opens devices
// (erg::devices::open_devices with --simulate SPEC): the real NVML backend over the simulated
// driver, RAPL over the simulated powercap tree.

#include <memory>
#include <string>
#include <vector>

#include "erg/devices/devices.hpp"
#include "erg/sim/machine.hpp"

namespace erg::bench {

struct SimGpus {
  std::shared_ptr<sim::Machine> machine;
  std::vector<std::shared_ptr<Gpu>> gpus;
  std::vector<std::shared_ptr<Cpu>> cpus;
};

/// The simulated machine for `spec` and its devices; the error says what failed.
inline Result<SimGpus> sim_gpus(const std::string& spec, std::size_t expected_gpus) {
  devices::DeviceOptions o;
  o.simulate = spec;
  o.daemon = devices::DaemonUse::kNever;
  o.cuda_visible_devices = std::optional<std::string>();  // every simulated GPU
  auto opened = devices::open_devices(o);
  if (!opened) return fail(opened.error());
  if (opened->inventory.gpus.size() != expected_gpus) return fail(ErrorCode::kNotFound, "simulated GPUs not found");
  return SimGpus{std::move(opened->machine), std::move(opened->inventory.gpus), std::move(opened->inventory.cpus)};
}

}  // namespace erg::bench
