#pragma once
// The devices ergd serves, as every route group sees them: each GPU with its owner thread (which
// runs that GPU's setters in order) and whether its energy counter works, each CPU package.

#include <memory>
#include <vector>

#include "device_worker.hpp"
#include "erg/core/device.hpp"

namespace erg::daemon {

struct GpuSlot {
  std::shared_ptr<Gpu> gpu;
  /// zeusd validates the counter at start-up: NotSupported → cumulative_energy_available=false.
  bool energy_available = false;
  std::unique_ptr<DeviceWorker> worker;
};

struct CpuSlot {
  std::shared_ptr<Cpu> cpu;
};

struct DeviceSlots {
  std::vector<GpuSlot> gpus;
  std::vector<CpuSlot> cpus;
};

}  // namespace erg::daemon
