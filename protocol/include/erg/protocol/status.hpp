#pragma once
/// ErrorCode → HTTP status, in exactly one place (zeusd's ResponseError::status_code).

#include "erg/core/result.hpp"

namespace erg::protocol {

/// kNotFound (no such GPU/CPU), kInvalidArgument, kNotSupported → 400; kNoPermission → 403;
/// everything else → 500.
int http_status(ErrorCode code);

/// The "worst" of two statuses for aggregated per-device errors: 5xx over 4xx, then the larger.
int worst_status(int a, int b);

/// The ErrorCode a client reports for a daemon status (400 → kInvalidArgument, 401/403 →
/// kNoPermission, 404 → kNotFound, 5xx → kDriverError, anything else → kInternal).
ErrorCode error_code_for_status(int status);

}  // namespace erg::protocol
