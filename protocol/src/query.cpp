#include "erg/protocol/query.hpp"

#include <algorithm>
#include <charconv>

#include "erg/protocol/http.hpp"

namespace erg::protocol {
namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

Result<std::string> decode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c == '+') {
      out += ' ';
    } else if (c == '%') {
      if (i + 2 >= s.size()) return fail(ErrorCode::kInvalidArgument, "invalid percent-encoding");
      int hi = hex_value(s[i + 1]);
      int lo = hex_value(s[i + 2]);
      if (hi < 0 || lo < 0) return fail(ErrorCode::kInvalidArgument, "invalid percent-encoding");
      out += static_cast<char>(hi * 16 + lo);
      i += 2;
    } else {
      out += c;
    }
  }
  if (!is_valid_utf8(out)) return fail(ErrorCode::kInvalidArgument, "invalid UTF-8 in query string");
  return out;
}

constexpr std::string_view kPrefix = "Query deserialize error: ";

}  // namespace

Result<std::vector<std::pair<std::string, std::string>>> parse_query(std::string_view query) {
  std::vector<std::pair<std::string, std::string>> out;
  while (!query.empty()) {
    std::size_t amp = query.find('&');
    std::string_view part = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (part.empty()) continue;
    std::size_t eq = part.find('=');
    auto name = decode(part.substr(0, eq));
    if (!name) return fail(name.error());
    auto value = decode(eq == std::string_view::npos ? std::string_view() : part.substr(eq + 1));
    if (!value) return fail(value.error());
    out.emplace_back(std::move(*name), std::move(*value));
  }
  return out;
}

Result<Query> Query::parse(std::string_view query, std::span<const std::string_view> allowed,
                           std::span<const std::string_view> required) {
  auto fields = parse_query(query);
  if (!fields) return fail(ErrorCode::kInvalidArgument, std::string(kPrefix) + fields.error().message);
  for (std::size_t i = 0; i < fields->size(); ++i) {
    const std::string& name = (*fields)[i].first;
    if (std::find(allowed.begin(), allowed.end(), name) == allowed.end()) {
      std::string msg = std::string(kPrefix) + "unknown field `" + name + "`";
      if (allowed.empty()) {
        msg += ", there are no fields";
      } else {
        msg += ", expected ";
        if (allowed.size() > 1) msg += "one of ";
        for (std::size_t k = 0; k < allowed.size(); ++k) {
          if (k > 0) msg += ", ";
          msg += "`" + std::string(allowed[k]) + "`";
        }
      }
      return fail(ErrorCode::kInvalidArgument, msg);
    }
    for (std::size_t j = 0; j < i; ++j)
      if ((*fields)[j].first == name)
        return fail(ErrorCode::kInvalidArgument, std::string(kPrefix) + "duplicate field `" + name + "`");
  }
  for (auto r : required) {
    bool present = std::any_of(fields->begin(), fields->end(), [&](const auto& f) { return f.first == r; });
    if (!present)
      return fail(ErrorCode::kInvalidArgument, std::string(kPrefix) + "missing field `" + std::string(r) + "`");
  }
  Query q;
  q.fields_ = std::move(*fields);
  return q;
}

std::optional<std::string_view> Query::get(std::string_view name) const {
  for (const auto& [k, v] : fields_)
    if (k == name) return std::string_view(v);
  return std::nullopt;
}

Result<std::optional<std::uint32_t>> Query::get_u32(std::string_view name) const {
  auto v = get(name);
  if (!v) return std::optional<std::uint32_t>();
  std::string_view s = *v;
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  if (s.empty())
    return fail(ErrorCode::kInvalidArgument, std::string(kPrefix) + "cannot parse integer from empty string");
  for (char c : s)
    if (c < '0' || c > '9')
      return fail(ErrorCode::kInvalidArgument, std::string(kPrefix) + "invalid digit found in string");
  std::uint32_t n = 0;
  auto r = std::from_chars(s.data(), s.data() + s.size(), n);
  if (r.ec != std::errc() || r.ptr != s.data() + s.size())
    return fail(ErrorCode::kInvalidArgument, std::string(kPrefix) + "number too large to fit in target type");
  return std::optional<std::uint32_t>(n);
}

Result<std::optional<bool>> Query::get_bool(std::string_view name) const {
  auto v = get(name);
  if (!v) return std::optional<bool>();
  if (*v == "true") return std::optional<bool>(true);
  if (*v == "false") return std::optional<bool>(false);
  return fail(ErrorCode::kInvalidArgument, std::string(kPrefix) + "provided string was not `true` or `false`");
}

std::vector<unsigned> parse_ids(std::string_view raw) {
  std::vector<unsigned> ids;
  while (true) {
    std::size_t comma = raw.find(',');
    std::string_view part = raw.substr(0, comma);
    while (!part.empty() && (part.front() == ' ' || part.front() == '\t')) part.remove_prefix(1);
    while (!part.empty() && (part.back() == ' ' || part.back() == '\t')) part.remove_suffix(1);
    if (!part.empty() && part.front() == '+') part.remove_prefix(1);
    unsigned n = 0;
    bool digits = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (digits) {
      auto r = std::from_chars(part.data(), part.data() + part.size(), n);
      if (r.ec == std::errc() && r.ptr == part.data() + part.size()) ids.push_back(n);
    }
    if (comma == std::string_view::npos) break;
    raw.remove_prefix(comma + 1);
  }
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

std::string format_ids(std::span<const unsigned> ids) {
  std::string out = "[";
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(ids[i]);
  }
  out += "]";
  return out;
}

}  // namespace erg::protocol
