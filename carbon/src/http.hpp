#pragma once
// A bounded HTTP GET over libcurl: the one place carbon/ touches the network.

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "erg/core/result.hpp"

namespace erg::carbon::detail {

struct HttpResponse {
  long status = 0;
  std::string body;
};

/// GET `url` with `headers` ("Name: value"). The whole exchange is bounded by `timeout`.
/// Errors: Timeout; Unavailable when the host cannot be reached; Io for other transport
/// failures or an answer over 16 MiB. Any HTTP status is a success here (callers check it).
Result<HttpResponse> http_get(const std::string& url, const std::vector<std::string>& headers,
                              std::chrono::milliseconds timeout);

/// `s` percent-encoded for a query string.
std::string url_encode(const std::string& s);

/// "HTTP 404 from <what>: <message from the body, if any>", mapped to an ErrorCode: 401/403 ->
/// NoPermission, 404 -> NotFound, 400/422 -> InvalidArgument, 429 and 5xx -> Unavailable.
Error http_status_error(const HttpResponse& response, const std::string& what);

}  // namespace erg::carbon::detail
