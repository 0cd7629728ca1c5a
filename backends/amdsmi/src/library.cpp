#include "erg/backends/amdsmi/library.hpp"

#include <dlfcn.h>

#include <array>
#include <cstring>
#include <type_traits>
#include <utility>

namespace erg::amdsmi {
namespace {

template <auto Member>
void bind(Symbols& symbols, void* address) {
  using Fn = std::remove_reference_t<decltype(symbols.*Member)>;
  symbols.*Member = reinterpret_cast<Fn>(address);
}

constexpr bool kRequired = true;
constexpr bool kOptional = false;

// The one symbol table (vendor-abi.md §2.2). Plain names: AMD SMI versions by SONAME, not symbol.
constexpr std::array kSymbolTable{
    SymbolEntry{"amdsmi_init", kRequired, &bind<&Symbols::amdsmi_init>},
    SymbolEntry{"amdsmi_shut_down", kRequired, &bind<&Symbols::amdsmi_shut_down>},
    SymbolEntry{"amdsmi_get_lib_version", kRequired, &bind<&Symbols::amdsmi_get_lib_version>},
    SymbolEntry{"amdsmi_status_code_to_string", kOptional, &bind<&Symbols::amdsmi_status_code_to_string>},
    SymbolEntry{"amdsmi_get_socket_handles", kRequired, &bind<&Symbols::amdsmi_get_socket_handles>},
    SymbolEntry{"amdsmi_get_processor_handles", kRequired, &bind<&Symbols::amdsmi_get_processor_handles>},
    SymbolEntry{"amdsmi_get_gpu_asic_info", kOptional, &bind<&Symbols::amdsmi_get_gpu_asic_info>},
    SymbolEntry{"amdsmi_get_gpu_kfd_info", kOptional, &bind<&Symbols::amdsmi_get_gpu_kfd_info>},
    SymbolEntry{"amdsmi_get_gpu_device_bdf", kOptional, &bind<&Symbols::amdsmi_get_gpu_device_bdf>},
    SymbolEntry{"amdsmi_get_power_cap_info", kOptional, &bind<&Symbols::amdsmi_get_power_cap_info>},
    SymbolEntry{"amdsmi_set_power_cap", kOptional, &bind<&Symbols::amdsmi_set_power_cap>},
    SymbolEntry{"amdsmi_get_power_info", kOptional, &bind<&Symbols::amdsmi_get_power_info>},
    SymbolEntry{"amdsmi_get_energy_count", kOptional, &bind<&Symbols::amdsmi_get_energy_count>},
    SymbolEntry{"amdsmi_get_clock_info", kOptional, &bind<&Symbols::amdsmi_get_clock_info>},
    SymbolEntry{"amdsmi_set_gpu_clk_limit", kOptional, &bind<&Symbols::amdsmi_set_gpu_clk_limit>},
    SymbolEntry{"amdsmi_set_gpu_perf_level", kOptional, &bind<&Symbols::amdsmi_set_gpu_perf_level>},
    SymbolEntry{"amdsmi_get_temp_metric", kOptional, &bind<&Symbols::amdsmi_get_temp_metric>},
};

std::optional<unsigned> socket_watts(std::uint32_t w) {
  if (w == ERG_AMDSMI_NA_U16 || w == ERG_AMDSMI_NA_U32) return std::nullopt;
  return w;
}

}  // namespace

std::span<const SymbolEntry> symbol_table() { return kSymbolTable; }

SocketPower read_socket_power(const erg_amdsmi_power_info_any_t& info, unsigned abi) {
  switch (abi) {
    case 24: return {socket_watts(info.v24.current_socket_power), socket_watts(info.v24.average_socket_power)};
    case 25: return {socket_watts(info.v25.current_socket_power), socket_watts(info.v25.average_socket_power)};
    default: return {socket_watts(info.v26.current_socket_power), socket_watts(info.v26.average_socket_power)};
  }
}

Library::Library(void* handle, std::string path, Symbols symbols)
    : handle_(handle), path_(std::move(path)), symbols_(symbols) {}

Library::~Library() {
  (void)symbols_.amdsmi_shut_down();  // of no use to anyone at this point
  dlclose(handle_);
}

Result<std::shared_ptr<Library>> Library::open(const std::string& path) {
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return fail(ErrorCode::kUnavailable, "no AMD SMI library found: cannot load " + path + " (" +
                                             (why != nullptr ? std::string(why) : std::string("unknown reason")) + ")");
  }
  Symbols symbols;
  for (const auto& entry : kSymbolTable) {
    dlerror();
    void* address = dlsym(handle, std::string(entry.name).c_str());
    if (address == nullptr && entry.required) {
      dlclose(handle);
      return fail(ErrorCode::kUnavailable,
                  path + " is not a usable AMD SMI library: it does not export " + std::string(entry.name));
    }
    if (address != nullptr) entry.bind(symbols, address);
  }
  if (const amdsmi_status_t rc = symbols.amdsmi_init(AMDSMI_INIT_AMD_GPUS); rc != AMDSMI_STATUS_SUCCESS) {
    Error e = map_error(rc, "amdsmi_init(AMDSMI_INIT_AMD_GPUS)",
                        ErrorContext{.to_string = symbols.amdsmi_status_code_to_string});
    e.message = "AMD SMI could not be initialized: " + e.message;
    dlclose(handle);
    return fail(std::move(e));
  }
  std::shared_ptr<Library> lib(new Library(handle, path, symbols));  // shuts down from here on

  // The ABI: the version struct's first word is the year (24, 25) or, on ABI 26, the major.
  union {
    erg_amdsmi_version_v24_t v24;
    erg_amdsmi_version_v26_t v26;
    unsigned char bytes[64];
  } version{};
  if (const amdsmi_status_t rc = symbols.amdsmi_get_lib_version(&version); rc != AMDSMI_STATUS_SUCCESS)
    return fail(lib->error(rc, "amdsmi_get_lib_version"));
  const unsigned first = version.v24.year;
  if (first == 24 || first == 25) {
    lib->abi_ = first;
    lib->version_ = std::to_string(version.v24.year) + "." + std::to_string(version.v24.major) + "." +
                    std::to_string(version.v24.minor);
    // ROCm 6.2 ships 24.6, without amdsmi_set_gpu_clk_limit and amdsmi_get_gpu_kfd_info (zeusd
    // rejects it too).
    if (first == 24 && version.v24.major < 7)
      return fail(ErrorCode::kUnavailable, path + " is AMD SMI " + lib->version_ + " (ROCm 6.2 or older); erg needs " +
                                               "ROCm 6.3 or newer (AMD SMI 24.7+)");
  } else if (first == 26) {
    lib->abi_ = 26;
    lib->version_ = std::to_string(version.v26.major) + "." + std::to_string(version.v26.minor) + "." +
                    std::to_string(version.v26.release);
  } else {
    return fail(ErrorCode::kUnavailable, path + " reports AMD SMI version word " + std::to_string(first) +
                                             "; erg knows the layouts of ABI 24 (ROCm 6.3), 25 (6.4) and 26 (7.x)");
  }
  return lib;
}

Error Library::error(amdsmi_status_t status, std::string_view what, ErrorContext context) const {
  context.to_string = symbols_.amdsmi_status_code_to_string;
  return map_error(status, what, context);
}

}  // namespace erg::amdsmi
