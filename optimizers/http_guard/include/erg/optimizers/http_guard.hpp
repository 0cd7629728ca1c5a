#pragma once
// Request-body bounds for erg's servers built on cpp-httplib (`erg bso serve`, `erg perseus
// serve`): what set_payload_max_length leaves open in cpp-httplib 0.11.4 (Debian 12), closed in
// one place (docs/security.md).

#include <cstddef>

namespace httplib {
class Server;
}

namespace erg::http_guard {

/// Answers, before any of the body is read, a request whose body cpp-httplib would read without
/// the `max_body` bound — chunked (Transfer-Encoding: 411), a POST/PUT/PATCH without
/// Content-Length (411), a compressed one (Content-Encoding other than identity: 415) — and
/// ends its connection once the answer is written (the unread body would otherwise be parsed as
/// the connection's next requests). Installs the server's pre-routing handler and logger.
void refuse_unbounded_bodies(httplib::Server& server, std::size_t max_body);

}  // namespace erg::http_guard
