#pragma once
// Test helper: the simulated libnvidia-ml.so.1 loaded with dlopen (never linked), with the
// symbols the tests call.

#include <dlfcn.h>

#include <string>

#include "erg/backends/nvml/nvml_abi.h"

namespace erg::sim::testing {

struct Nvml {
  void* handle = nullptr;
#define ERG_SIM_SYM(name) name##_fn name = nullptr;
  ERG_SIM_SYM(nvmlInit_v2)
  ERG_SIM_SYM(nvmlInitWithFlags)
  ERG_SIM_SYM(nvmlShutdown)
  ERG_SIM_SYM(nvmlErrorString)
  ERG_SIM_SYM(nvmlSystemGetDriverVersion)
  ERG_SIM_SYM(nvmlDeviceGetCount_v2)
  ERG_SIM_SYM(nvmlDeviceGetHandleByIndex_v2)
  ERG_SIM_SYM(nvmlDeviceGetHandleByUUID)
  ERG_SIM_SYM(nvmlDeviceGetIndex)
  ERG_SIM_SYM(nvmlDeviceGetName)
  ERG_SIM_SYM(nvmlDeviceGetUUID)
  ERG_SIM_SYM(nvmlDeviceGetArchitecture)
  ERG_SIM_SYM(nvmlDeviceGetTotalEnergyConsumption)
  ERG_SIM_SYM(nvmlDeviceGetFieldValues)
  ERG_SIM_SYM(nvmlDeviceGetPowerUsage)
  ERG_SIM_SYM(nvmlDeviceGetPowerManagementLimit)
  ERG_SIM_SYM(nvmlDeviceGetPowerManagementLimitConstraints)
  ERG_SIM_SYM(nvmlDeviceGetPowerManagementDefaultLimit)
  ERG_SIM_SYM(nvmlDeviceSetPowerManagementLimit)
  ERG_SIM_SYM(nvmlDeviceGetPersistenceMode)
  ERG_SIM_SYM(nvmlDeviceSetPersistenceMode)
  ERG_SIM_SYM(nvmlDeviceGetSupportedMemoryClocks)
  ERG_SIM_SYM(nvmlDeviceGetSupportedGraphicsClocks)
  ERG_SIM_SYM(nvmlDeviceGetClockInfo)
  ERG_SIM_SYM(nvmlDeviceSetGpuLockedClocks)
  ERG_SIM_SYM(nvmlDeviceResetGpuLockedClocks)
  ERG_SIM_SYM(nvmlDeviceSetMemoryLockedClocks)
  ERG_SIM_SYM(nvmlDeviceResetMemoryLockedClocks)
  ERG_SIM_SYM(nvmlDeviceGetTemperature)
  ERG_SIM_SYM(nvmlDeviceGetTemperatureV)
#undef ERG_SIM_SYM
  std::string missing;

  /// The process-wide loaded driver (dlopen once; the tests init/shutdown around each use).
  static Nvml& get() {
    static Nvml n = load();
    return n;
  }

 private:
  static Nvml load() {
    Nvml n;
    n.handle = ::dlopen(ERG_SIM_DRIVER, RTLD_NOW | RTLD_LOCAL);
    if (n.handle == nullptr) {
      n.missing = ::dlerror();
      return n;
    }
#define ERG_SIM_SYM(name)                                         \
  n.name = reinterpret_cast<name##_fn>(::dlsym(n.handle, #name)); \
  if (n.name == nullptr) n.missing += #name " ";
    ERG_SIM_SYM(nvmlInit_v2)
    ERG_SIM_SYM(nvmlInitWithFlags)
    ERG_SIM_SYM(nvmlShutdown)
    ERG_SIM_SYM(nvmlErrorString)
    ERG_SIM_SYM(nvmlSystemGetDriverVersion)
    ERG_SIM_SYM(nvmlDeviceGetCount_v2)
    ERG_SIM_SYM(nvmlDeviceGetHandleByIndex_v2)
    ERG_SIM_SYM(nvmlDeviceGetHandleByUUID)
    ERG_SIM_SYM(nvmlDeviceGetIndex)
    ERG_SIM_SYM(nvmlDeviceGetName)
    ERG_SIM_SYM(nvmlDeviceGetUUID)
    ERG_SIM_SYM(nvmlDeviceGetArchitecture)
    ERG_SIM_SYM(nvmlDeviceGetTotalEnergyConsumption)
    ERG_SIM_SYM(nvmlDeviceGetFieldValues)
    ERG_SIM_SYM(nvmlDeviceGetPowerUsage)
    ERG_SIM_SYM(nvmlDeviceGetPowerManagementLimit)
    ERG_SIM_SYM(nvmlDeviceGetPowerManagementLimitConstraints)
    ERG_SIM_SYM(nvmlDeviceGetPowerManagementDefaultLimit)
    ERG_SIM_SYM(nvmlDeviceSetPowerManagementLimit)
    ERG_SIM_SYM(nvmlDeviceGetPersistenceMode)
    ERG_SIM_SYM(nvmlDeviceSetPersistenceMode)
    ERG_SIM_SYM(nvmlDeviceGetSupportedMemoryClocks)
    ERG_SIM_SYM(nvmlDeviceGetSupportedGraphicsClocks)
    ERG_SIM_SYM(nvmlDeviceGetClockInfo)
    ERG_SIM_SYM(nvmlDeviceSetGpuLockedClocks)
    ERG_SIM_SYM(nvmlDeviceResetGpuLockedClocks)
    ERG_SIM_SYM(nvmlDeviceSetMemoryLockedClocks)
    ERG_SIM_SYM(nvmlDeviceResetMemoryLockedClocks)
    ERG_SIM_SYM(nvmlDeviceGetTemperature)
    ERG_SIM_SYM(nvmlDeviceGetTemperatureV)
#undef ERG_SIM_SYM
    return n;
  }
};

}  // namespace erg::sim::testing
