#include "erg/backends/amdsmi/errors.hpp"

#include <string>

namespace erg::amdsmi {

ErrorCode map_error_code(amdsmi_status_t status) {
  switch (status) {
    case AMDSMI_STATUS_INVAL:
    case AMDSMI_STATUS_ARG_PTR_NULL:
    case AMDSMI_STATUS_INPUT_OUT_OF_BOUNDS: return ErrorCode::kInvalidArgument;
    case AMDSMI_STATUS_NOT_SUPPORTED:
    case AMDSMI_STATUS_NOT_YET_IMPLEMENTED:
    case AMDSMI_STATUS_NO_HSMP_SUP:
    case AMDSMI_STATUS_NO_HSMP_MSG_SUP:
    case AMDSMI_STATUS_SETTING_UNAVAILABLE: return ErrorCode::kNotSupported;
    case AMDSMI_STATUS_NO_PERM: return ErrorCode::kNoPermission;
    case AMDSMI_STATUS_NOT_FOUND: return ErrorCode::kNotFound;
    case AMDSMI_STATUS_TIMEOUT:
    case AMDSMI_STATUS_HSMP_TIMEOUT:
    case AMDSMI_STATUS_BUSY:
    case AMDSMI_STATUS_RETRY: return ErrorCode::kTimeout;
    case AMDSMI_STATUS_DRIVER_NOT_LOADED:
    case AMDSMI_STATUS_NO_ENERGY_DRV:
    case AMDSMI_STATUS_NO_MSR_DRV:
    case AMDSMI_STATUS_NO_HSMP_DRV:
    case AMDSMI_STATUS_NO_DRV:
    case AMDSMI_STATUS_FILE_NOT_FOUND:
    case AMDSMI_STATUS_FAIL_LOAD_MODULE:
    case AMDSMI_STATUS_FAIL_LOAD_SYMBOL: return ErrorCode::kUnavailable;
    case AMDSMI_STATUS_AMDGPU_RESTART_ERR: return ErrorCode::kGpuLost;
    case AMDSMI_STATUS_IO:
    case AMDSMI_STATUS_FILE_ERROR: return ErrorCode::kIo;
    default: return ErrorCode::kDriverError;
  }
}

std::string_view status_name(amdsmi_status_t status) {
  switch (status) {
    case AMDSMI_STATUS_SUCCESS: return "AMDSMI_STATUS_SUCCESS";
    case AMDSMI_STATUS_INVAL: return "AMDSMI_STATUS_INVAL";
    case AMDSMI_STATUS_NOT_SUPPORTED: return "AMDSMI_STATUS_NOT_SUPPORTED";
    case AMDSMI_STATUS_NOT_YET_IMPLEMENTED: return "AMDSMI_STATUS_NOT_YET_IMPLEMENTED";
    case AMDSMI_STATUS_FAIL_LOAD_MODULE: return "AMDSMI_STATUS_FAIL_LOAD_MODULE";
    case AMDSMI_STATUS_FAIL_LOAD_SYMBOL: return "AMDSMI_STATUS_FAIL_LOAD_SYMBOL";
    case AMDSMI_STATUS_DRM_ERROR: return "AMDSMI_STATUS_DRM_ERROR";
    case AMDSMI_STATUS_API_FAILED: return "AMDSMI_STATUS_API_FAILED";
    case AMDSMI_STATUS_TIMEOUT: return "AMDSMI_STATUS_TIMEOUT";
    case AMDSMI_STATUS_RETRY: return "AMDSMI_STATUS_RETRY";
    case AMDSMI_STATUS_NO_PERM: return "AMDSMI_STATUS_NO_PERM";
    case AMDSMI_STATUS_INTERRUPT: return "AMDSMI_STATUS_INTERRUPT";
    case AMDSMI_STATUS_IO: return "AMDSMI_STATUS_IO";
    case AMDSMI_STATUS_ADDRESS_FAULT: return "AMDSMI_STATUS_ADDRESS_FAULT";
    case AMDSMI_STATUS_FILE_ERROR: return "AMDSMI_STATUS_FILE_ERROR";
    case AMDSMI_STATUS_OUT_OF_RESOURCES: return "AMDSMI_STATUS_OUT_OF_RESOURCES";
    case AMDSMI_STATUS_INTERNAL_EXCEPTION: return "AMDSMI_STATUS_INTERNAL_EXCEPTION";
    case AMDSMI_STATUS_INPUT_OUT_OF_BOUNDS: return "AMDSMI_STATUS_INPUT_OUT_OF_BOUNDS";
    case AMDSMI_STATUS_INIT_ERROR: return "AMDSMI_STATUS_INIT_ERROR";
    case AMDSMI_STATUS_REFCOUNT_OVERFLOW: return "AMDSMI_STATUS_REFCOUNT_OVERFLOW";
    case AMDSMI_STATUS_DIRECTORY_NOT_FOUND: return "AMDSMI_STATUS_DIRECTORY_NOT_FOUND";
    case AMDSMI_STATUS_BUSY: return "AMDSMI_STATUS_BUSY";
    case AMDSMI_STATUS_NOT_FOUND: return "AMDSMI_STATUS_NOT_FOUND";
    case AMDSMI_STATUS_NOT_INIT: return "AMDSMI_STATUS_NOT_INIT";
    case AMDSMI_STATUS_NO_SLOT: return "AMDSMI_STATUS_NO_SLOT";
    case AMDSMI_STATUS_DRIVER_NOT_LOADED: return "AMDSMI_STATUS_DRIVER_NOT_LOADED";
    case AMDSMI_STATUS_MORE_DATA: return "AMDSMI_STATUS_MORE_DATA";
    case AMDSMI_STATUS_NO_DATA: return "AMDSMI_STATUS_NO_DATA";
    case AMDSMI_STATUS_INSUFFICIENT_SIZE: return "AMDSMI_STATUS_INSUFFICIENT_SIZE";
    case AMDSMI_STATUS_UNEXPECTED_SIZE: return "AMDSMI_STATUS_UNEXPECTED_SIZE";
    case AMDSMI_STATUS_UNEXPECTED_DATA: return "AMDSMI_STATUS_UNEXPECTED_DATA";
    case AMDSMI_STATUS_NON_AMD_CPU: return "AMDSMI_STATUS_NON_AMD_CPU";
    case AMDSMI_STATUS_NO_ENERGY_DRV: return "AMDSMI_STATUS_NO_ENERGY_DRV";
    case AMDSMI_STATUS_NO_MSR_DRV: return "AMDSMI_STATUS_NO_MSR_DRV";
    case AMDSMI_STATUS_NO_HSMP_DRV: return "AMDSMI_STATUS_NO_HSMP_DRV";
    case AMDSMI_STATUS_NO_HSMP_SUP: return "AMDSMI_STATUS_NO_HSMP_SUP";
    case AMDSMI_STATUS_NO_HSMP_MSG_SUP: return "AMDSMI_STATUS_NO_HSMP_MSG_SUP";
    case AMDSMI_STATUS_HSMP_TIMEOUT: return "AMDSMI_STATUS_HSMP_TIMEOUT";
    case AMDSMI_STATUS_NO_DRV: return "AMDSMI_STATUS_NO_DRV";
    case AMDSMI_STATUS_FILE_NOT_FOUND: return "AMDSMI_STATUS_FILE_NOT_FOUND";
    case AMDSMI_STATUS_ARG_PTR_NULL: return "AMDSMI_STATUS_ARG_PTR_NULL";
    case AMDSMI_STATUS_AMDGPU_RESTART_ERR: return "AMDSMI_STATUS_AMDGPU_RESTART_ERR";
    case AMDSMI_STATUS_SETTING_UNAVAILABLE: return "AMDSMI_STATUS_SETTING_UNAVAILABLE";
    case AMDSMI_STATUS_CORRUPTED_EEPROM: return "AMDSMI_STATUS_CORRUPTED_EEPROM";
    case AMDSMI_STATUS_MAP_ERROR: return "AMDSMI_STATUS_MAP_ERROR";
    case AMDSMI_STATUS_UNKNOWN_ERROR: return "AMDSMI_STATUS_UNKNOWN_ERROR";
  }
  return "unrecognized AMD SMI status";
}

Error map_error(amdsmi_status_t status, std::string_view what, const ErrorContext& context) {
  std::string message;
  if (context.index) {
    message = "GPU " + std::to_string(*context.index);
    if (context.physical_index) message += " (AMD SMI index " + std::to_string(*context.physical_index) + ")";
    message += ": ";
  }
  message += std::string(what) + " failed: ";
  const char* text = nullptr;
  if (context.to_string != nullptr && context.to_string(status, &text) == AMDSMI_STATUS_SUCCESS && text != nullptr &&
      *text != '\0') {
    message += text;
    message += " (" + std::string(status_name(status)) + ")";
  } else {
    message += std::string(status_name(status)) + " (" + std::to_string(static_cast<unsigned>(status)) + ")";
  }
  const ErrorCode code = map_error_code(status);
  if (code == ErrorCode::kNoPermission)
    message += "; setting power caps and clocks needs root, or run ergd and set ERG_DAEMON_SOCK";
  return Error{code, std::move(message)};
}

}  // namespace erg::amdsmi
