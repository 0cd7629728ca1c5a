#pragma once
// Reply building blocks shared by the route groups: bodies and statuses as zeusd writes them,
// id-list validation, aggregation of per-device errors.

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "erg/core/result.hpp"
#include "erg/daemon/request_handler.hpp"
#include "erg/protocol/query.hpp"

namespace erg::daemon {

/// Milliseconds since the Unix epoch (zeusd's `timestamp_ms`).
std::uint64_t unix_ms();
/// Rounded, clamped to the wire types (negative → 0).
std::uint64_t to_u64(double v);
std::uint32_t to_u32(double v);

Reply json_reply(int status, const nlohmann::json& body);
/// `{"error": message}`: zeusd's validation errors.
Reply error_reply(int status, std::string_view message);
/// A plain-text body: actix-web's query errors ("Query deserialize error: ...").
Reply text_reply(int status, std::string body);
Reply empty_reply(int status);

/// The ids a request names in `field` ("gpu_ids", "cpu_ids"), or every id when it names none.
/// zeusd's strict check: an empty list is a `{"error"}` 400, an id past `count` a text 400
/// ("GPU index 7 does not exist."). `kind` is "GPU" or "CPU".
std::optional<Reply> select_ids(const protocol::Query& query, std::string_view field, std::size_t count,
                                std::string_view kind, std::vector<unsigned>& ids);
/// get_power and stream_power's check: unknown ids are listed with the available ones.
std::optional<Reply> select_ids_listing_unknown(const protocol::Query& query, std::string_view field, std::size_t count,
                                                std::string_view kind, std::vector<unsigned>& ids);

/// Per-device results: 200 with `ok_body` (nullopt → no body) when `errors` is empty. Else zeusd's
/// reply — `{"errors": {"<id>": message}}` with the worst status, which zeusd's clients turn into
/// their error as before — plus what the devices that answered gave, for a client that looks:
/// `"error_codes": {"<id>": "gpu_lost"}` (erg's ErrorCode names) and `"partial"`, the 200 body
/// for the devices that answered (`ok_body`, built from those alone), or for a setter
/// `"applied": [ids]`, the devices it was applied to.
Reply aggregate(const std::map<unsigned, Error>& errors, const std::optional<nlohmann::json>& ok_body,
                const std::vector<unsigned>& applied = {});

/// Attempts of a device read that fails with an error that can pass (a timeout, an unknown
/// driver error, I/O): tried again at once, as erg's monitors do; a lost GPU is not retried.
inline constexpr int kReadAttempts = 5;

/// `read()` (returning a Result), tried again at once while it fails with a transient error.
template <class Read>
auto read_retrying(Read&& read) {
  auto r = read();
  for (int attempt = 1; !r && attempt < kReadAttempts && transient(r.error().code); ++attempt) r = read();
  return r;
}

}  // namespace erg::daemon
