#pragma once
/// The loaded AMD SMI library: one dlopen handle, one declarative symbol table, no global state.
/// Every AMD GPU holds a shared_ptr to the Library it came from, so the library stays loaded
/// and initialized while any GPU is alive.

#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "erg/backends/amdsmi/amdsmi_abi.h"
#include "erg/backends/amdsmi/errors.hpp"
#include "erg/core/result.hpp"

namespace erg::amdsmi {

/// Tried in order when neither the options nor ERG_AMDSMI_LIBRARY name a library: the loader
/// path, then ROCm's default prefix (ROCm does not put its lib directory on the loader path).
inline constexpr std::string_view kDefaultLibraries[] = {"libamd_smi.so", "/opt/rocm/lib/libamd_smi.so"};

/// Every AMD SMI entry point erg resolves, named exactly like the exported symbols; a member is
/// null when the library does not export it (then the feature is NotSupported).
struct Symbols {
  amdsmi_init_fn amdsmi_init = nullptr;
  amdsmi_shut_down_fn amdsmi_shut_down = nullptr;
  amdsmi_get_lib_version_fn amdsmi_get_lib_version = nullptr;
  amdsmi_status_code_to_string_fn amdsmi_status_code_to_string = nullptr;
  amdsmi_get_socket_handles_fn amdsmi_get_socket_handles = nullptr;
  amdsmi_get_processor_handles_fn amdsmi_get_processor_handles = nullptr;
  amdsmi_get_gpu_asic_info_fn amdsmi_get_gpu_asic_info = nullptr;
  amdsmi_get_gpu_kfd_info_fn amdsmi_get_gpu_kfd_info = nullptr;
  amdsmi_get_gpu_device_bdf_fn amdsmi_get_gpu_device_bdf = nullptr;
  amdsmi_get_power_cap_info_fn amdsmi_get_power_cap_info = nullptr;
  amdsmi_set_power_cap_fn amdsmi_set_power_cap = nullptr;
  amdsmi_get_power_info_fn amdsmi_get_power_info = nullptr;
  amdsmi_get_energy_count_fn amdsmi_get_energy_count = nullptr;
  amdsmi_get_clock_info_fn amdsmi_get_clock_info = nullptr;
  amdsmi_set_gpu_clk_limit_fn amdsmi_set_gpu_clk_limit = nullptr;
  amdsmi_set_gpu_perf_level_fn amdsmi_set_gpu_perf_level = nullptr;
  amdsmi_get_temp_metric_fn amdsmi_get_temp_metric = nullptr;
};

struct SymbolEntry {
  std::string_view name;
  bool required;
  void (*bind)(Symbols& symbols, void* address);
};

/// The symbol table. Required: amdsmi_init, amdsmi_shut_down, amdsmi_get_lib_version,
/// amdsmi_get_socket_handles, amdsmi_get_processor_handles; everything else is optional.
std::span<const SymbolEntry> symbol_table();

/// A dlopen'ed (RTLD_NOW | RTLD_LOCAL), initialized AMD SMI of a supported ABI (24 with library
/// version ≥ 24.7, i.e. ROCm ≥ 6.3; 25; 26).
///
/// Thread-safety: libamd_smi is not reliably thread-safe on these ABIs (zeusd serializes every
/// call: ABI 24 can crash, 25/26.1 scramble values across GPUs), so every call goes through
/// call(), which holds one mutex per library.
class Library {
 public:
  /// Loads `path`, resolves the symbol table, calls amdsmi_init(AMDSMI_INIT_AMD_GPUS) and reads
  /// the library version. Errors: cannot load, or a required symbol is missing → kUnavailable;
  /// init fails → the mapped status; an unsupported version (ROCm 6.2, ABI ≥ 27) → kUnavailable.
  static Result<std::shared_ptr<Library>> open(const std::string& path);

  ~Library();
  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;

  [[nodiscard]] const Symbols& sym() const { return symbols_; }
  [[nodiscard]] const std::string& path() const { return path_; }
  /// 24, 25 or 26: decides the layout of amdsmi_power_info_t.
  [[nodiscard]] unsigned abi() const { return abi_; }
  /// "24.7.0" etc.
  [[nodiscard]] const std::string& version() const { return version_; }

  /// Runs `f()` (a call into the library) under the library's mutex.
  template <class F>
  auto call(F&& f) const {
    std::lock_guard lock(mutex_);
    return f();
  }

  /// map_error with this library's amdsmi_status_code_to_string.
  [[nodiscard]] Error error(amdsmi_status_t status, std::string_view what, ErrorContext context = {}) const;

 private:
  Library(void* handle, std::string path, Symbols symbols);
  void* handle_;
  std::string path_;
  Symbols symbols_;
  unsigned abi_ = 0;
  std::string version_;
  mutable std::mutex mutex_;
};

/// Socket power fields of an amdsmi_power_info_t of the given ABI, in W; nullopt for N/A
/// (0xFFFF or UINT32_MAX). Pure.
struct SocketPower {
  std::optional<unsigned> current_w;
  std::optional<unsigned> average_w;
};
SocketPower read_socket_power(const erg_amdsmi_power_info_any_t& info, unsigned abi);

}  // namespace erg::amdsmi
