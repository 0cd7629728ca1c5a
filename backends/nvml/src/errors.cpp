#include "erg/backends/nvml/errors.hpp"

#include <string>

namespace erg::nvml {

ErrorCode map_error_code(nvmlReturn_t code) {
  switch (code) {
    case NVML_ERROR_NOT_SUPPORTED: return ErrorCode::kNotSupported;
    case NVML_ERROR_NO_PERMISSION: return ErrorCode::kNoPermission;
    case NVML_ERROR_INVALID_ARGUMENT: return ErrorCode::kInvalidArgument;
    case NVML_ERROR_NOT_FOUND: return ErrorCode::kNotFound;
    case NVML_ERROR_GPU_IS_LOST:
    case NVML_ERROR_RESET_REQUIRED: return ErrorCode::kGpuLost;
    case NVML_ERROR_DRIVER_NOT_LOADED:
    case NVML_ERROR_LIBRARY_NOT_FOUND: return ErrorCode::kUnavailable;
    case NVML_ERROR_TIMEOUT: return ErrorCode::kTimeout;
    default:  // UNINITIALIZED, UNKNOWN and everything without a closer erg meaning.
      return ErrorCode::kDriverError;
  }
}

std::string_view return_code_name(nvmlReturn_t code) {
  switch (code) {
    case NVML_SUCCESS: return "NVML_SUCCESS";
    case NVML_ERROR_UNINITIALIZED: return "NVML_ERROR_UNINITIALIZED";
    case NVML_ERROR_INVALID_ARGUMENT: return "NVML_ERROR_INVALID_ARGUMENT";
    case NVML_ERROR_NOT_SUPPORTED: return "NVML_ERROR_NOT_SUPPORTED";
    case NVML_ERROR_NO_PERMISSION: return "NVML_ERROR_NO_PERMISSION";
    case NVML_ERROR_ALREADY_INITIALIZED: return "NVML_ERROR_ALREADY_INITIALIZED";
    case NVML_ERROR_NOT_FOUND: return "NVML_ERROR_NOT_FOUND";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "NVML_ERROR_INSUFFICIENT_SIZE";
    case NVML_ERROR_INSUFFICIENT_POWER: return "NVML_ERROR_INSUFFICIENT_POWER";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "NVML_ERROR_DRIVER_NOT_LOADED";
    case NVML_ERROR_TIMEOUT: return "NVML_ERROR_TIMEOUT";
    case NVML_ERROR_IRQ_ISSUE: return "NVML_ERROR_IRQ_ISSUE";
    case NVML_ERROR_LIBRARY_NOT_FOUND: return "NVML_ERROR_LIBRARY_NOT_FOUND";
    case NVML_ERROR_FUNCTION_NOT_FOUND: return "NVML_ERROR_FUNCTION_NOT_FOUND";
    case NVML_ERROR_CORRUPTED_INFOROM: return "NVML_ERROR_CORRUPTED_INFOROM";
    case NVML_ERROR_GPU_IS_LOST: return "NVML_ERROR_GPU_IS_LOST";
    case NVML_ERROR_RESET_REQUIRED: return "NVML_ERROR_RESET_REQUIRED";
    case NVML_ERROR_OPERATING_SYSTEM: return "NVML_ERROR_OPERATING_SYSTEM";
    case NVML_ERROR_LIB_RM_VERSION_MISMATCH: return "NVML_ERROR_LIB_RM_VERSION_MISMATCH";
    case NVML_ERROR_IN_USE: return "NVML_ERROR_IN_USE";
    case NVML_ERROR_MEMORY: return "NVML_ERROR_MEMORY";
    case NVML_ERROR_NO_DATA: return "NVML_ERROR_NO_DATA";
    case NVML_ERROR_VGPU_ECC_NOT_SUPPORTED: return "NVML_ERROR_VGPU_ECC_NOT_SUPPORTED";
    case NVML_ERROR_INSUFFICIENT_RESOURCES: return "NVML_ERROR_INSUFFICIENT_RESOURCES";
    case NVML_ERROR_FREQ_NOT_SUPPORTED: return "NVML_ERROR_FREQ_NOT_SUPPORTED";
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH: return "NVML_ERROR_ARGUMENT_VERSION_MISMATCH";
    case NVML_ERROR_DEPRECATED: return "NVML_ERROR_DEPRECATED";
    case NVML_ERROR_NOT_READY: return "NVML_ERROR_NOT_READY";
    case NVML_ERROR_GPU_NOT_FOUND: return "NVML_ERROR_GPU_NOT_FOUND";
    case NVML_ERROR_INVALID_STATE: return "NVML_ERROR_INVALID_STATE";
    case NVML_ERROR_RESET_TYPE_NOT_SUPPORTED: return "NVML_ERROR_RESET_TYPE_NOT_SUPPORTED";
    case NVML_ERROR_UNKNOWN: return "NVML_ERROR_UNKNOWN";
  }
  return "unrecognized NVML return code";
}

// Texts as nvidia-smi and DCGM print them (vendor-abi.md §1.4).
std::string_view builtin_error_string(nvmlReturn_t code) {
  switch (code) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_NO_PERMISSION: return "Insufficient Permissions";
    case NVML_ERROR_ALREADY_INITIALIZED: return "Already Initialized";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_INSUFFICIENT_POWER: return "Insufficient External Power";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case NVML_ERROR_TIMEOUT: return "Timeout";
    case NVML_ERROR_IRQ_ISSUE: return "Interrupt Request Issue";
    case NVML_ERROR_LIBRARY_NOT_FOUND: return "NVML Shared Library Not Found";
    case NVML_ERROR_FUNCTION_NOT_FOUND: return "Function Not Found";
    case NVML_ERROR_CORRUPTED_INFOROM: return "Corrupted infoROM";
    case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
    case NVML_ERROR_RESET_REQUIRED: return "GPU requires reset";
    case NVML_ERROR_OPERATING_SYSTEM: return "GPU access blocked by the operating system";
    case NVML_ERROR_LIB_RM_VERSION_MISMATCH: return "Driver/library version mismatch";
    case NVML_ERROR_IN_USE: return "In use by another client";
    case NVML_ERROR_MEMORY: return "Insufficient Memory";
    case NVML_ERROR_INSUFFICIENT_RESOURCES: return "Insufficient Resources";
    default: return "Unknown Error";  // NVML_ERROR_UNKNOWN and codes without a text
  }
}

Error map_error(nvmlReturn_t code, std::string_view what, const ErrorContext& context) {
  std::string message;
  if (context.index) {
    message += "GPU " + std::to_string(*context.index);
    if (context.physical_index) message += " (NVML index " + std::to_string(*context.physical_index) + ")";
    message += ": ";
  } else if (context.physical_index) {
    message += "NVML GPU " + std::to_string(*context.physical_index) + ": ";
  }
  message += what;
  message += " failed: ";
  const char* text = context.error_string != nullptr ? context.error_string(code) : nullptr;
  message += (text != nullptr && *text != '\0') ? std::string_view(text) : builtin_error_string(code);
  message += " (";
  message += return_code_name(code);
  if (return_code_name(code) == "unrecognized NVML return code")
    message += " " + std::to_string(static_cast<int>(code));
  message += ")";
  switch (code) {
    case NVML_ERROR_NO_PERMISSION:
      message += "; setting power limits, clocks or persistence mode needs root or CAP_SYS_ADMIN (or go through ergd)";
      break;
    case NVML_ERROR_GPU_IS_LOST:
    case NVML_ERROR_RESET_REQUIRED:
      message += "; the GPU fell off the bus or needs a reset (see nvidia-smi and the kernel log)";
      break;
    case NVML_ERROR_DRIVER_NOT_LOADED: message += "; the NVIDIA kernel driver is not loaded"; break;
    case NVML_ERROR_LIB_RM_VERSION_MISMATCH:
      message += "; libnvidia-ml and the kernel driver differ in version (reboot or reload the driver)";
      break;
    default: break;
  }
  return Error{map_error_code(code), std::move(message)};
}

}  // namespace erg::nvml
