#include "erg/protocol/status.hpp"

namespace erg::protocol {

int http_status(ErrorCode code) {
  switch (code) {
    case ErrorCode::kNotFound:
    case ErrorCode::kInvalidArgument:
    case ErrorCode::kNotSupported: return 400;
    case ErrorCode::kNoPermission: return 403;
    case ErrorCode::kDriverError:
    case ErrorCode::kGpuLost:
    case ErrorCode::kIo:
    case ErrorCode::kUnavailable:
    case ErrorCode::kTimeout:
    case ErrorCode::kAlreadyExists:
    case ErrorCode::kInternal: return 500;
  }
  return 500;
}

int worst_status(int a, int b) {
  bool a5 = a >= 500, b5 = b >= 500;
  if (a5 != b5) return a5 ? a : b;
  return a > b ? a : b;
}

ErrorCode error_code_for_status(int status) {
  if (status == 400) return ErrorCode::kInvalidArgument;
  if (status == 401 || status == 403) return ErrorCode::kNoPermission;
  if (status == 404) return ErrorCode::kNotFound;
  if (status >= 500) return ErrorCode::kDriverError;
  return ErrorCode::kInternal;
}

}  // namespace erg::protocol
