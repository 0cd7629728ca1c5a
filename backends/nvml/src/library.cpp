#include "erg/backends/nvml/library.hpp"

#include <dlfcn.h>

#include <array>
#include <type_traits>
#include <utility>

namespace erg::nvml {
namespace {

/// Stores a dlsym address into one Symbols member, typed by that member.
template <auto Member>
void bind(Symbols& symbols, void* address) {
  using Fn = std::remove_reference_t<decltype(symbols.*Member)>;
  symbols.*Member = reinterpret_cast<Fn>(address);
}

constexpr bool kRequired = true;
constexpr bool kOptional = false;

// The one symbol table. Versioned names where nvml.h maps the unversioned ones (vendor-abi.md
// §1.1: the unversioned symbols are still exported, with older semantics).
constexpr std::array kSymbolTable{
    SymbolEntry{"nvmlInit_v2", kOptional, &bind<&Symbols::nvmlInit_v2>},  // one of the two inits is required
    SymbolEntry{"nvmlInitWithFlags", kOptional, &bind<&Symbols::nvmlInitWithFlags>},
    SymbolEntry{"nvmlShutdown", kRequired, &bind<&Symbols::nvmlShutdown>},
    SymbolEntry{"nvmlErrorString", kOptional, &bind<&Symbols::nvmlErrorString>},
    SymbolEntry{"nvmlSystemGetDriverVersion", kOptional, &bind<&Symbols::nvmlSystemGetDriverVersion>},
    SymbolEntry{"nvmlDeviceGetCount_v2", kRequired, &bind<&Symbols::nvmlDeviceGetCount_v2>},
    SymbolEntry{"nvmlDeviceGetHandleByIndex_v2", kRequired, &bind<&Symbols::nvmlDeviceGetHandleByIndex_v2>},
    SymbolEntry{"nvmlDeviceGetHandleByUUID", kOptional, &bind<&Symbols::nvmlDeviceGetHandleByUUID>},
    SymbolEntry{"nvmlDeviceGetIndex", kOptional, &bind<&Symbols::nvmlDeviceGetIndex>},
    SymbolEntry{"nvmlDeviceGetName", kOptional, &bind<&Symbols::nvmlDeviceGetName>},
    SymbolEntry{"nvmlDeviceGetUUID", kOptional, &bind<&Symbols::nvmlDeviceGetUUID>},
    SymbolEntry{"nvmlDeviceGetPciInfo_v3", kOptional, &bind<&Symbols::nvmlDeviceGetPciInfo_v3>},
    SymbolEntry{"nvmlDeviceGetArchitecture", kOptional, &bind<&Symbols::nvmlDeviceGetArchitecture>},
    SymbolEntry{"nvmlDeviceGetTotalEnergyConsumption", kOptional, &bind<&Symbols::nvmlDeviceGetTotalEnergyConsumption>},
    SymbolEntry{"nvmlDeviceGetFieldValues", kOptional, &bind<&Symbols::nvmlDeviceGetFieldValues>},
    SymbolEntry{"nvmlDeviceGetPowerManagementLimit", kOptional, &bind<&Symbols::nvmlDeviceGetPowerManagementLimit>},
    SymbolEntry{"nvmlDeviceGetPowerManagementLimitConstraints", kOptional,
                &bind<&Symbols::nvmlDeviceGetPowerManagementLimitConstraints>},
    SymbolEntry{"nvmlDeviceGetPowerManagementDefaultLimit", kOptional,
                &bind<&Symbols::nvmlDeviceGetPowerManagementDefaultLimit>},
    SymbolEntry{"nvmlDeviceSetPowerManagementLimit", kOptional, &bind<&Symbols::nvmlDeviceSetPowerManagementLimit>},
    SymbolEntry{"nvmlDeviceGetPersistenceMode", kOptional, &bind<&Symbols::nvmlDeviceGetPersistenceMode>},
    SymbolEntry{"nvmlDeviceSetPersistenceMode", kOptional, &bind<&Symbols::nvmlDeviceSetPersistenceMode>},
    SymbolEntry{"nvmlDeviceGetSupportedMemoryClocks", kOptional, &bind<&Symbols::nvmlDeviceGetSupportedMemoryClocks>},
    SymbolEntry{"nvmlDeviceGetSupportedGraphicsClocks", kOptional,
                &bind<&Symbols::nvmlDeviceGetSupportedGraphicsClocks>},
    SymbolEntry{"nvmlDeviceSetGpuLockedClocks", kOptional, &bind<&Symbols::nvmlDeviceSetGpuLockedClocks>},
    SymbolEntry{"nvmlDeviceResetGpuLockedClocks", kOptional, &bind<&Symbols::nvmlDeviceResetGpuLockedClocks>},
    SymbolEntry{"nvmlDeviceSetMemoryLockedClocks", kOptional, &bind<&Symbols::nvmlDeviceSetMemoryLockedClocks>},
    SymbolEntry{"nvmlDeviceResetMemoryLockedClocks", kOptional, &bind<&Symbols::nvmlDeviceResetMemoryLockedClocks>},
    SymbolEntry{"nvmlDeviceGetTemperature", kOptional, &bind<&Symbols::nvmlDeviceGetTemperature>},
    // Only drivers from the CUDA 12.8 era on export it (vendor-abi.md §1.2); GetTemperature is the fallback.
    SymbolEntry{"nvmlDeviceGetTemperatureV", kOptional, &bind<&Symbols::nvmlDeviceGetTemperatureV>},
    SymbolEntry{"nvmlDeviceGetComputeRunningProcesses_v3", kOptional,
                &bind<&Symbols::nvmlDeviceGetComputeRunningProcesses_v3>},
    SymbolEntry{"nvmlDeviceGetProcessUtilization", kOptional, &bind<&Symbols::nvmlDeviceGetProcessUtilization>},
    SymbolEntry{"nvmlDeviceGetMigMode", kOptional, &bind<&Symbols::nvmlDeviceGetMigMode>},
};

}  // namespace

std::span<const SymbolEntry> symbol_table() { return kSymbolTable; }

Library::Library(void* handle, std::string path, Symbols symbols)
    : handle_(handle), path_(std::move(path)), symbols_(symbols) {}

Library::~Library() {
  // Shutdown errors are of no use to anyone at this point (Zeus suppresses them too).
  (void)symbols_.nvmlShutdown();
  dlclose(handle_);
}

Result<std::shared_ptr<const Library>> Library::open(const std::string& path) {
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return fail(ErrorCode::kUnavailable, "no NVIDIA driver found: cannot load " + path + " (" +
                                             (why != nullptr ? std::string(why) : std::string("unknown reason")) + ")");
  }
  Symbols symbols;
  for (const auto& entry : kSymbolTable) {
    dlerror();  // clear
    void* address = dlsym(handle, std::string(entry.name).c_str());
    if (address == nullptr && entry.required) {
      dlclose(handle);
      return fail(ErrorCode::kUnavailable,
                  path + " is not a usable NVML library: it does not export " + std::string(entry.name));
    }
    if (address != nullptr) entry.bind(symbols, address);
  }
  if (symbols.nvmlInit_v2 == nullptr && symbols.nvmlInitWithFlags == nullptr) {
    dlclose(handle);
    return fail(ErrorCode::kUnavailable,
                path + " is not a usable NVML library: it exports neither nvmlInit_v2 nor nvmlInitWithFlags");
  }

  const bool v2 = symbols.nvmlInit_v2 != nullptr;
  const nvmlReturn_t rc = v2 ? symbols.nvmlInit_v2() : symbols.nvmlInitWithFlags(0);
  if (rc != NVML_SUCCESS) {
    Error error = map_error(rc, v2 ? "nvmlInit_v2" : "nvmlInitWithFlags(0)",
                            ErrorContext{.error_string = symbols.nvmlErrorString});
    error.message = "NVML could not be initialized: " + error.message;
    dlclose(handle);
    return fail(std::move(error));
  }
  return std::shared_ptr<const Library>(new Library(handle, path, symbols));
}

Error Library::error(nvmlReturn_t code, std::string_view what, ErrorContext context) const {
  context.error_string = symbols_.nvmlErrorString;
  return map_error(code, what, context);
}

}  // namespace erg::nvml
