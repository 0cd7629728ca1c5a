#pragma once
/// A small, strict HTTP/1.1 message layer: pure functions over bytes, shared by ergd and its
/// client. No I/O here, so the parser is unit-tested and fuzzed on plain buffers.
///
/// Why not cpp-httplib: Debian's 0.11.4 serves AF_UNIX sockets, but its handlers never see the
/// accepted socket, so the peer's uid/gid (SO_PEERCRED, needed for --allow-uid/--allow-gid) are
/// not available; its parser lives in a prebuilt shared library that libFuzzer cannot
/// instrument; and it matches routes with std::regex on every request. See docs/ergd.md.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace erg::protocol {

/// Limits applied while parsing a request (bytes).
struct HttpLimits {
  std::size_t max_request_line = 8 * 1024;   ///< Longer → 414 URI Too Long.
  std::size_t max_header_bytes = 16 * 1024;  ///< Request line + headers; larger → 431.
  std::size_t max_headers = 64;              ///< More header fields → 431.
  std::size_t max_body = 64 * 1024;          ///< Larger Content-Length → 413.
};

struct HttpRequest {
  std::string method;     ///< "GET", "POST", ...
  std::string target;     ///< As sent: "/gpu/get_power?gpu_ids=0".
  std::string path;       ///< Target before '?'.
  std::string query;      ///< Target after '?', still percent-encoded ("" when none).
  int version_minor = 1;  ///< HTTP/1.<minor>; 0 or 1.
  std::vector<std::pair<std::string, std::string>> headers;  ///< Names as sent.
  std::string body;
  bool keep_alive = true;  ///< From the version and the Connection header.

  /// The first header with this name (case-insensitive), or nullopt.
  [[nodiscard]] std::optional<std::string_view> header(std::string_view name) const;
};

enum class ParseStatus {
  kComplete,    ///< `request` is filled; `consumed` bytes belong to it.
  kIncomplete,  ///< Need more bytes (none of the limits is exceeded yet).
  kError,       ///< Malformed or over a limit: answer `error_status` and close.
};

struct ParseOutcome {
  ParseStatus status = ParseStatus::kIncomplete;
  std::size_t consumed = 0;
  int error_status = 0;       ///< 400, 413, 414, 431, 501, 505 when kError.
  std::string error_message;  ///< One line for the response body.
};

/// Parses one request from the start of `buffer`. Accepts CRLF line ends (and bare LF, as
/// RFC 9112 §2.2 allows), rejects obsolete line folding, control characters, non-token
/// methods and header names, Transfer-Encoding (501: bodies are not used by this API), and
/// conflicting Content-Length values. Never throws; allocation only for the parsed fields.
ParseOutcome parse_request(std::string_view buffer, HttpRequest& request, const HttpLimits& limits = {});

/// The standard reason phrase for a status code ("OK", "Bad Request", ...).
std::string_view reason_phrase(int status);

struct HttpResponse {
  int status = 200;
  /// Empty: no Content-Type header (e.g. an empty 200). A view: content types are string
  /// literals (static storage), so a response allocates nothing for its header.
  std::string_view content_type;
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  ///< Extra headers.
};

/// "HTTP/1.1 <status> <reason>\r\n" + headers + Content-Length + body. `keep_alive` false adds
/// "Connection: close".
std::string serialize_response(const HttpResponse& response, bool keep_alive);
/// The same into `out` (replacing its contents, keeping its capacity).
void serialize_response_to(std::string& out, const HttpResponse& response, bool keep_alive);

/// The head of a streamed (Server-Sent Events) response: no Content-Length; the connection
/// closes when the stream ends.
std::string serialize_stream_head(int status, std::string_view content_type);

/// A parsed response (client side). `body` is complete for Content-Length responses.
struct ParsedResponse {
  int status = 0;
  /// The header lines as received, through the empty line that ends them (validated by
  /// parse_response; header() looks names up in them). Kept whole rather than split into
  /// name/value strings: a reply on a client's hot path then allocates once for its head.
  std::string head;
  std::string body;
  bool keep_alive = true;
  bool streaming = false;  ///< No Content-Length: the body runs until the connection closes.
  [[nodiscard]] std::optional<std::string_view> header(std::string_view name) const;
};

/// Parses a response head and, when it has a Content-Length, its body. For a streaming
/// response, `consumed` covers the head only and the body is read by the caller.
ParseOutcome parse_response(std::string_view buffer, ParsedResponse& response, std::size_t max_body = 16u << 20);

/// True when the bytes are well-formed UTF-8 (no overlongs, no surrogates, ≤ U+10FFFF).
bool is_valid_utf8(std::string_view text);

}  // namespace erg::protocol
