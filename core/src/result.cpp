#include "erg/core/result.hpp"

namespace erg {

std::string_view to_string(ErrorCode code) {
  switch (code) {
    case ErrorCode::kNotSupported: return "not_supported";
    case ErrorCode::kNoPermission: return "no_permission";
    case ErrorCode::kNotFound: return "not_found";
    case ErrorCode::kInvalidArgument: return "invalid_argument";
    case ErrorCode::kDriverError: return "driver_error";
    case ErrorCode::kGpuLost: return "gpu_lost";
    case ErrorCode::kIo: return "io";
    case ErrorCode::kUnavailable: return "unavailable";
    case ErrorCode::kTimeout: return "timeout";
    case ErrorCode::kAlreadyExists: return "already_exists";
    case ErrorCode::kInternal: return "internal";
  }
  return "internal";
}

std::optional<ErrorCode> parse_error_code(std::string_view name) {
  for (int c = 0; c <= static_cast<int>(ErrorCode::kInternal); ++c)
    if (to_string(static_cast<ErrorCode>(c)) == name) return static_cast<ErrorCode>(c);
  return std::nullopt;
}

bool transient(ErrorCode code) {
  return code == ErrorCode::kTimeout || code == ErrorCode::kDriverError || code == ErrorCode::kIo;
}

}  // namespace erg
