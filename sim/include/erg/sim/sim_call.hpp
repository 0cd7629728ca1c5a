#pragma once
/// What the simulator's control API (machine.hpp) and the simulated driver libraries agree on
/// besides the shared state layout: the driver entry points (for fault injection and call
/// counts) and who may call the setters. Plain enums with no includes, so that the drivers,
/// which depend on libc and pthreads only, can share them.

namespace erg::sim {

/// NVML entry points of the simulated driver, for fault injection and call counts.
enum class SimCall : int {
  kAny = 0,  ///< Matches every call (fault injection only).
  kGetName,
  kGetUuid,
  kGetArchitecture,
  kGetTotalEnergyConsumption,
  kGetFieldValues,
  kGetPowerUsage,
  kGetPowerManagementLimit,
  kGetPowerManagementLimitConstraints,
  kGetPowerManagementDefaultLimit,
  kSetPowerManagementLimit,
  kGetPersistenceMode,
  kSetPersistenceMode,
  kGetSupportedMemoryClocks,
  kGetSupportedGraphicsClocks,
  kGetClockInfo,
  kSetGpuLockedClocks,
  kResetGpuLockedClocks,
  kSetMemoryLockedClocks,
  kResetMemoryLockedClocks,
  kGetTemperature,
  kGetHandle,
  kGetPciInfo,
  kGetComputeRunningProcesses,
  kGetProcessUtilization,
  kGetMigMode,
  kCount
};

/// Who may call the simulated setters (power limit, clocks, persistence).
enum class Privilege {
  kRootOnly,  ///< Callers with euid 0 (default; like the real driver without CAP_SYS_ADMIN).
  kEveryone,
  kNobody,
};

}  // namespace erg::sim
