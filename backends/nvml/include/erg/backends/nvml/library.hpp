#pragma once
/// The loaded NVML library: one dlopen handle, one declarative symbol table, no global state.
/// Every NVML GPU holds a shared_ptr to the Library it came from, so the library stays loaded
/// and initialized while any GPU is alive.

#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "erg/backends/nvml/errors.hpp"
#include "erg/backends/nvml/nvml_abi.h"
#include "erg/core/result.hpp"

namespace erg::nvml {

/// Default library name (the SONAME; the unversioned libnvidia-ml.so is often absent).
inline constexpr std::string_view kDefaultLibrary = "libnvidia-ml.so.1";

/// Every NVML entry point erg resolves. Members are named exactly like the exported symbols;
/// a member is null when the library does not export it (then the feature is NotSupported).
struct Symbols {
  nvmlInit_v2_fn nvmlInit_v2 = nullptr;
  nvmlInitWithFlags_fn nvmlInitWithFlags = nullptr;
  nvmlShutdown_fn nvmlShutdown = nullptr;
  nvmlErrorString_fn nvmlErrorString = nullptr;
  nvmlSystemGetDriverVersion_fn nvmlSystemGetDriverVersion = nullptr;
  nvmlDeviceGetCount_v2_fn nvmlDeviceGetCount_v2 = nullptr;
  nvmlDeviceGetHandleByIndex_v2_fn nvmlDeviceGetHandleByIndex_v2 = nullptr;
  nvmlDeviceGetHandleByUUID_fn nvmlDeviceGetHandleByUUID = nullptr;
  nvmlDeviceGetIndex_fn nvmlDeviceGetIndex = nullptr;
  nvmlDeviceGetName_fn nvmlDeviceGetName = nullptr;
  nvmlDeviceGetUUID_fn nvmlDeviceGetUUID = nullptr;
  nvmlDeviceGetPciInfo_v3_fn nvmlDeviceGetPciInfo_v3 = nullptr;
  nvmlDeviceGetArchitecture_fn nvmlDeviceGetArchitecture = nullptr;
  nvmlDeviceGetTotalEnergyConsumption_fn nvmlDeviceGetTotalEnergyConsumption = nullptr;
  nvmlDeviceGetFieldValues_fn nvmlDeviceGetFieldValues = nullptr;
  nvmlDeviceGetPowerManagementLimit_fn nvmlDeviceGetPowerManagementLimit = nullptr;
  nvmlDeviceGetPowerManagementLimitConstraints_fn nvmlDeviceGetPowerManagementLimitConstraints = nullptr;
  nvmlDeviceGetPowerManagementDefaultLimit_fn nvmlDeviceGetPowerManagementDefaultLimit = nullptr;
  nvmlDeviceSetPowerManagementLimit_fn nvmlDeviceSetPowerManagementLimit = nullptr;
  nvmlDeviceGetPersistenceMode_fn nvmlDeviceGetPersistenceMode = nullptr;
  nvmlDeviceSetPersistenceMode_fn nvmlDeviceSetPersistenceMode = nullptr;
  nvmlDeviceGetSupportedMemoryClocks_fn nvmlDeviceGetSupportedMemoryClocks = nullptr;
  nvmlDeviceGetSupportedGraphicsClocks_fn nvmlDeviceGetSupportedGraphicsClocks = nullptr;
  nvmlDeviceSetGpuLockedClocks_fn nvmlDeviceSetGpuLockedClocks = nullptr;
  nvmlDeviceResetGpuLockedClocks_fn nvmlDeviceResetGpuLockedClocks = nullptr;
  nvmlDeviceSetMemoryLockedClocks_fn nvmlDeviceSetMemoryLockedClocks = nullptr;
  nvmlDeviceResetMemoryLockedClocks_fn nvmlDeviceResetMemoryLockedClocks = nullptr;
  nvmlDeviceGetTemperature_fn nvmlDeviceGetTemperature = nullptr;
  nvmlDeviceGetTemperatureV_fn nvmlDeviceGetTemperatureV = nullptr;
  nvmlDeviceGetComputeRunningProcesses_v3_fn nvmlDeviceGetComputeRunningProcesses_v3 = nullptr;
  nvmlDeviceGetProcessUtilization_fn nvmlDeviceGetProcessUtilization = nullptr;
  nvmlDeviceGetMigMode_fn nvmlDeviceGetMigMode = nullptr;
};

/// One row of the symbol table: the exported name, whether loading fails without it, and how
/// to store the resolved address into Symbols.
struct SymbolEntry {
  std::string_view name;
  bool required;
  void (*bind)(Symbols& symbols, void* address);
};

/// The symbol table (for tests and documentation). Required: nvmlShutdown,
/// nvmlDeviceGetCount_v2, nvmlDeviceGetHandleByIndex_v2, and one of nvmlInit_v2 /
/// nvmlInitWithFlags (checked separately); everything else is optional.
std::span<const SymbolEntry> symbol_table();

/// A dlopen'ed (RTLD_NOW | RTLD_LOCAL), initialized NVML. Immutable after open(), so it can be
/// shared between threads; NVML itself is thread-safe. The destructor calls nvmlShutdown and
/// dlclose (NVML reference-counts init, so several Library objects may coexist).
class Library {
 public:
  /// Loads `path`, resolves the symbol table and calls nvmlInit_v2 (or nvmlInitWithFlags(0)).
  /// Errors: the library cannot be loaded or lacks a required symbol → kUnavailable (message
  /// includes dlerror's text); init fails → the mapped NVML error (e.g. DRIVER_NOT_LOADED →
  /// kUnavailable, NO_PERMISSION → kNoPermission).
  static Result<std::shared_ptr<const Library>> open(const std::string& path);

  ~Library();
  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;

  /// The resolved entry points; optional ones may be null.
  [[nodiscard]] const Symbols& sym() const { return symbols_; }
  /// The path it was loaded from, as given.
  [[nodiscard]] const std::string& path() const { return path_; }
  /// map_error with this library's nvmlErrorString.
  [[nodiscard]] Error error(nvmlReturn_t code, std::string_view what, ErrorContext context = {}) const;

 private:
  Library(void* handle, std::string path, Symbols symbols);
  void* handle_;
  std::string path_;
  Symbols symbols_;
};

}  // namespace erg::nvml
