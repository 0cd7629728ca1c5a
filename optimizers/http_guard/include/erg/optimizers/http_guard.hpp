#pragma once
// Request bounds for erg's servers built on cpp-httplib (`erg bso serve`, `erg perseus serve`,
// `erg exporter --listen`): what cpp-httplib 0.11.4 (Debian 12) leaves open, closed in one place
// (docs/security.md): the connection Limits a GuardedServer keeps (guarded_server.hpp) and the
// request bodies set_payload_max_length does not bound.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace httplib {
class Server;
}

namespace erg::http_guard {

/// The connection bounds of a GuardedServer (guarded_server.hpp).
struct Limits {
  std::size_t max_connections = 1024;  ///< Open connections in all.
  std::size_t max_per_peer = 64;       ///< Open connections of one peer (a local uid or an address).
  /// From a request's first byte to the last byte of its body.
  std::chrono::milliseconds request_deadline{10'000};
  /// A kept-alive connection waiting for its next request is closed after this.
  std::chrono::milliseconds idle_timeout{5'000};
  std::chrono::milliseconds write_timeout{5'000};
  std::size_t max_head_bytes = 64 * 1024;  ///< Request line and headers.
  /// A connection of a peer at its cap, none of its connections idle, waits this long for one to
  /// end before it is refused (503).
  std::chrono::milliseconds admission_wait{2'000};
  int backlog = 4096;
};

/// Who made a request, as a server's service sees it when it decides who may write a job
/// (docs/security.md). The default is a call from within the process (tests, tools): no check.
struct Caller {
  bool in_process = true;
  std::optional<std::uint32_t> uid;  ///< The local user (over loopback or a Unix socket), when known.
  std::string token;                 ///< The X-Erg-Job-Token the request presented (empty: none).
};

/// The header a job's secret travels in: answered when a job is registered, presented by writes.
inline constexpr const char* kJobTokenHeader = "X-Erg-Job-Token";

/// `bytes` random bytes from the kernel (getrandom(2)) as lowercase hex.
std::string random_hex(std::size_t bytes);
/// SHA-256 of `text`, lowercase hex (how a job's secret is stored).
std::string sha256_hex(std::string_view text);
/// Compares two strings in time that depends on their lengths only.
bool same_secret(std::string_view a, std::string_view b);

/// Answers, before any of the body is read, a request whose body cpp-httplib would read without
/// the `max_body` bound — chunked (Transfer-Encoding: 411), a POST/PUT/PATCH without
/// Content-Length (411), a compressed one (Content-Encoding other than identity: 415) — and
/// ends its connection once the answer is written (the unread body would otherwise be parsed as
/// the connection's next requests). Installs the server's pre-routing handler and logger.
void refuse_unbounded_bodies(httplib::Server& server, std::size_t max_body);

}  // namespace erg::http_guard
