#include "replies.hpp"

#include <chrono>
#include <cmath>

#include "erg/protocol/bodies.hpp"
#include "erg/protocol/status.hpp"

namespace erg::daemon {

std::uint64_t unix_ms() {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count());
}

std::uint64_t to_u64(double v) { return v <= 0 ? 0 : static_cast<std::uint64_t>(std::llround(v)); }

std::uint32_t to_u32(double v) {
  if (v <= 0) return 0;
  if (v >= 4294967295.0) return 4294967295u;
  return static_cast<std::uint32_t>(std::lround(v));
}

Reply json_reply(int status, const nlohmann::json& body) {
  return Reply{{status, "application/json", body.dump(), {}}, std::nullopt};
}

Reply error_reply(int status, std::string_view message) {
  return Reply{{status, "application/json", protocol::error_body(message), {}}, std::nullopt};
}

Reply text_reply(int status, std::string body) {
  return Reply{{status, "text/plain; charset=utf-8", std::move(body), {}}, std::nullopt};
}

Reply empty_reply(int status) { return Reply{{status, "", "", {}}, std::nullopt}; }

namespace {

void fill_all(std::vector<unsigned>& ids, std::size_t count) {
  ids.resize(count);
  for (unsigned i = 0; i < count; ++i) ids[i] = i;
}

std::string lower(std::string_view kind) {
  std::string s(kind);
  for (char& c : s) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return s;
}

}  // namespace

std::optional<Reply> select_ids(const protocol::Query& query, std::string_view field, std::size_t count,
                                std::string_view kind, std::vector<unsigned>& ids) {
  auto raw = query.get(field);
  if (!raw) {
    fill_all(ids, count);
    return std::nullopt;
  }
  ids = protocol::parse_ids(*raw);
  if (ids.empty())
    return error_reply(400, lower(kind) + "_ids must contain at least one " + std::string(kind) + " index");
  for (unsigned id : ids)
    if (id >= count) return text_reply(400, std::string(kind) + " index " + std::to_string(id) + " does not exist.");
  return std::nullopt;
}

std::optional<Reply> select_ids_listing_unknown(const protocol::Query& query, std::string_view field, std::size_t count,
                                                std::string_view kind, std::vector<unsigned>& ids) {
  auto raw = query.get(field);
  if (!raw) {
    fill_all(ids, count);
    return std::nullopt;
  }
  ids = protocol::parse_ids(*raw);
  std::vector<unsigned> unknown;
  for (unsigned id : ids)
    if (id >= count) unknown.push_back(id);
  if (unknown.empty()) return std::nullopt;
  std::vector<unsigned> valid;
  fill_all(valid, count);
  return error_reply(400, "Unknown " + std::string(kind) + " indices: " + protocol::format_ids(unknown) +
                              ". Available: " + protocol::format_ids(valid));
}

Reply aggregate(const std::map<unsigned, Error>& errors, const std::optional<nlohmann::json>& ok_body,
                const std::vector<unsigned>& applied) {
  if (errors.empty()) return ok_body ? json_reply(200, *ok_body) : empty_reply(200);
  int status = 0;
  nlohmann::json messages = nlohmann::json::object(), codes = nlohmann::json::object();
  for (const auto& [id, e] : errors) {
    int s = protocol::http_status(e.code);
    status = status == 0 ? s : protocol::worst_status(status, s);
    messages[std::to_string(id)] = e.message;
    codes[std::to_string(id)] = to_string(e.code);
  }
  nlohmann::json body{{"errors", std::move(messages)}, {"error_codes", std::move(codes)}};
  if (ok_body) body["partial"] = *ok_body;
  if (!ok_body) body["applied"] = applied;
  return json_reply(status, body);
}

}  // namespace erg::daemon
