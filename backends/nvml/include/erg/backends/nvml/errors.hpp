#pragma once
/// The one place where NVML return codes become erg errors.

#include <optional>
#include <string_view>

#include "erg/backends/nvml/nvml_abi.h"
#include "erg/core/result.hpp"

namespace erg::nvml {

/// What a failed call was about, for the message.
struct ErrorContext {
  std::optional<unsigned> index;           ///< erg index of the GPU, if the call was about one.
  std::optional<unsigned> physical_index;  ///< NVML index of the GPU.
  /// The library's nvmlErrorString, if exported; otherwise a built-in text is used.
  nvmlErrorString_fn error_string = nullptr;
};

/// Maps an NVML return code (not NVML_SUCCESS) to an erg Error:
/// NOT_SUPPORTED → kNotSupported; NO_PERMISSION → kNoPermission (the message says setters need
/// root/CAP_SYS_ADMIN or ergd); INVALID_ARGUMENT → kInvalidArgument; NOT_FOUND → kNotFound;
/// GPU_IS_LOST, RESET_REQUIRED → kGpuLost; DRIVER_NOT_LOADED, LIBRARY_NOT_FOUND → kUnavailable;
/// TIMEOUT → kTimeout; UNINITIALIZED and everything else → kDriverError.
/// The message names the GPU (when given), the NVML function `what` and the driver's text, e.g.
/// "GPU 1 (NVML index 3): nvmlDeviceGetTotalEnergyConsumption failed: Timeout (NVML_ERROR_TIMEOUT)".
/// Pure and thread-safe.
Error map_error(nvmlReturn_t code, std::string_view what, const ErrorContext& context = {});

/// The ErrorCode alone (the table behind map_error).
ErrorCode map_error_code(nvmlReturn_t code);

/// The enumerator's name: "NVML_SUCCESS", "NVML_ERROR_TIMEOUT", ...; a value NVML does not define
/// gives "unrecognized NVML return code".
std::string_view return_code_name(nvmlReturn_t code);

/// NVIDIA's text for a code ("Insufficient Permissions"), used when the library has no
/// nvmlErrorString.
std::string_view builtin_error_string(nvmlReturn_t code);

}  // namespace erg::nvml
