#pragma once
/// The one place where AMD SMI status codes become erg errors.

#include <optional>
#include <string_view>

#include "erg/backends/amdsmi/amdsmi_abi.h"
#include "erg/core/result.hpp"

namespace erg::amdsmi {

/// What a failed call was about, for the message.
struct ErrorContext {
  std::optional<unsigned> index;           ///< erg index of the GPU, if the call was about one.
  std::optional<unsigned> physical_index;  ///< AMD SMI (processor handle) index of the GPU.
  /// The library's amdsmi_status_code_to_string, if exported; else a built-in name is used.
  amdsmi_status_code_to_string_fn to_string = nullptr;
};

/// Maps an AMD SMI status (not SUCCESS) to an erg Error, after Zeus's table (zeus.md §2.2):
/// INVAL, ARG_PTR_NULL, INPUT_OUT_OF_BOUNDS → kInvalidArgument; NOT_SUPPORTED, NOT_YET_IMPLEMENTED,
/// NO_HSMP_SUP, NO_HSMP_MSG_SUP, SETTING_UNAVAILABLE → kNotSupported; NO_PERM → kNoPermission
/// (the message says setters need root or ergd); NOT_FOUND → kNotFound; TIMEOUT, HSMP_TIMEOUT,
/// BUSY, RETRY → kTimeout; DRIVER_NOT_LOADED, NO_ENERGY_DRV, NO_MSR_DRV, NO_HSMP_DRV, NO_DRV,
/// FILE_NOT_FOUND, FAIL_LOAD_MODULE, FAIL_LOAD_SYMBOL → kUnavailable; AMDGPU_RESTART_ERR →
/// kGpuLost; IO, FILE_ERROR → kIo; everything else (NOT_INIT, INIT_ERROR, UNKNOWN_ERROR, ...)
/// → kDriverError. The message names the GPU (when given), the function `what` and the status,
/// e.g. "GPU 1 (AMD SMI index 3): amdsmi_get_energy_count failed: AMDSMI_STATUS_TIMEOUT".
/// Pure and thread-safe.
Error map_error(amdsmi_status_t status, std::string_view what, const ErrorContext& context = {});

/// The ErrorCode alone (the table behind map_error).
ErrorCode map_error_code(amdsmi_status_t status);

/// The enumerator's name ("AMDSMI_STATUS_NO_PERM"); "unrecognized AMD SMI status" otherwise.
std::string_view status_name(amdsmi_status_t status);

}  // namespace erg::amdsmi
