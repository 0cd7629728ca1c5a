#include "erg/protocol/http.hpp"

#include <array>
#include <charconv>
#include <cstdint>
#include <cstring>

namespace erg::protocol {
namespace {

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const auto x = static_cast<unsigned char>(a[i]);
    const auto y = static_cast<unsigned char>(b[i]);
    if (x == y) continue;  // names are mostly sent as written: one compare per byte
    const unsigned lower = x | 0x20u;
    if (lower != (y | 0x20u) || lower < 'a' || lower > 'z') return false;
  }
  return true;
}

/// RFC 9110 §5.6.2 tchar, as a table: a header name or method is checked a byte at a time on
/// every request.
constexpr std::array<bool, 256> kTchar = [] {
  std::array<bool, 256> t{};
  for (int c = 'a'; c <= 'z'; ++c) t[static_cast<std::size_t>(c)] = true;
  for (int c = 'A'; c <= 'Z'; ++c) t[static_cast<std::size_t>(c)] = true;
  for (int c = '0'; c <= '9'; ++c) t[static_cast<std::size_t>(c)] = true;
  for (unsigned char c : std::string_view("!#$%&'*+-.^_`|~")) t[c] = true;
  return t;
}();

bool is_token(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!kTchar[static_cast<unsigned char>(c)]) return false;
  return true;
}

std::string_view trim_ows(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Eight bytes at a time (SWAR): exact yes/no answers for a whole word, so a clean word costs a
// few instructions instead of eight compares. Bytes are loaded with memcpy (any alignment).
constexpr std::uint64_t kOnes = 0x0101010101010101ULL;
constexpr std::uint64_t kHighs = 0x8080808080808080ULL;

std::uint64_t load8(const char* p) {
  std::uint64_t w;
  std::memcpy(&w, p, sizeof w);
  return w;
}
/// Some byte of `w` is below `n` (n <= 128).
constexpr bool any_below(std::uint64_t w, std::uint8_t n) { return ((w - kOnes * n) & ~w & kHighs) != 0; }
/// Some byte of `w` is above `n` (n <= 127).
constexpr bool any_above(std::uint64_t w, std::uint8_t n) { return (((w + kOnes * (127 - n)) | w) & kHighs) != 0; }
/// Some byte of `w` equals `c`.
constexpr bool any_equal(std::uint64_t w, std::uint8_t c) {
  const std::uint64_t x = w ^ (kOnes * c);
  return ((x - kOnes) & ~x & kHighs) != 0;
}

/// Field values: visible ASCII, obs-text (0x80-0xFF), SP, HTAB. No other control characters.
bool is_field_value(std::string_view s) {
  std::size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    const std::uint64_t w = load8(s.data() + i);
    if (!any_below(w, 0x20) && !any_equal(w, 0x7f)) continue;
    for (std::size_t k = i; k < i + 8; ++k) {  // a tab, or a byte to refuse
      auto c = static_cast<unsigned char>(s[k]);
      if (c != '\t' && (c < 0x20 || c == 0x7f)) return false;
    }
  }
  for (; i < s.size(); ++i) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c != '\t' && (c < 0x20 || c == 0x7f)) return false;
  }
  return true;
}

/// Request target: origin-form only ("/..."), visible ASCII without spaces.
bool is_origin_target(std::string_view s) {
  if (s.empty() || s.front() != '/') return false;
  std::size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    const std::uint64_t w = load8(s.data() + i);
    if (any_below(w, 0x21) || any_above(w, 0x7e)) return false;
  }
  for (; i < s.size(); ++i) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c <= 0x20 || c >= 0x7f) return false;
  }
  return true;
}

ParseOutcome error(int status, std::string message) {
  ParseOutcome o;
  o.status = ParseStatus::kError;
  o.error_status = status;
  o.error_message = std::move(message);
  return o;
}

/// Finds the end of the next line starting at `pos`: returns the index of '\n', or npos.
/// `line` excludes the line end (and a '\r' before '\n').
std::size_t next_line(std::string_view buf, std::size_t pos, std::string_view& line) {
  if (pos >= buf.size()) return std::string_view::npos;
  const char* start = buf.data() + pos;
  const auto* nl = static_cast<const char*>(std::memchr(start, '\n', buf.size() - pos));
  if (nl == nullptr) return std::string_view::npos;
  const char* end = nl > start && nl[-1] == '\r' ? nl - 1 : nl;
  line = std::string_view(start, static_cast<std::size_t>(end - start));
  return static_cast<std::size_t>(nl - buf.data());
}

bool parse_content_length(std::string_view v, std::size_t& out) {
  v = trim_ows(v);
  if (v.empty()) return false;
  for (char c : v)
    if (c < '0' || c > '9') return false;
  std::uint64_t n = 0;
  auto r = std::from_chars(v.data(), v.data() + v.size(), n);
  if (r.ec != std::errc() || r.ptr != v.data() + v.size()) return false;
  out = static_cast<std::size_t>(n);
  return n == out;
}

bool header_has_token(std::string_view value, std::string_view token) {
  while (!value.empty()) {
    std::size_t comma = value.find(',');
    std::string_view part = trim_ows(value.substr(0, comma));
    if (iequals(part, token)) return true;
    if (comma == std::string_view::npos) break;
    value.remove_prefix(comma + 1);
  }
  return false;
}

/// Parses header lines from `pos` until the empty line. On success `pos` is past it.
/// Returns nullopt on success, an error outcome otherwise; sets `incomplete` when more bytes
/// are needed.
template <class OnHeader>
std::optional<ParseOutcome> parse_headers(std::string_view buf, std::size_t& pos, const HttpLimits& limits,
                                          std::size_t head_limit, bool& incomplete, OnHeader on_header) {
  incomplete = false;
  std::size_t count = 0;
  for (;;) {
    std::string_view line;
    std::size_t nl = next_line(buf, pos, line);
    if (nl == std::string_view::npos) {
      if (buf.size() > head_limit) return error(431, "request header fields too large");
      incomplete = true;
      return std::nullopt;
    }
    if (nl + 1 > head_limit) return error(431, "request header fields too large");
    pos = nl + 1;
    if (line.empty()) return std::nullopt;
    if (line.front() == ' ' || line.front() == '\t') return error(400, "obsolete header line folding");
    // The name runs to the first byte that is not a tchar, which must be the colon.
    std::size_t colon = 0;
    while (colon < line.size() && kTchar[static_cast<unsigned char>(line[colon])]) ++colon;
    if (colon == line.size() || (line[colon] != ':' && line.find(':', colon) == std::string_view::npos))
      return error(400, "malformed header line");
    if (colon == 0 || line[colon] != ':') return error(400, "invalid header name");
    std::string_view name = line.substr(0, colon);
    std::string_view value = trim_ows(line.substr(colon + 1));
    if (!is_field_value(value)) return error(400, "invalid character in header value");
    if (count >= limits.max_headers) return error(431, "too many header fields");
    ++count;
    on_header(name, value);
  }
}

std::optional<std::string_view> find_header(const std::vector<std::pair<std::string, std::string>>& headers,
                                            std::string_view name) {
  for (const auto& [k, v] : headers)
    if (iequals(k, name)) return std::string_view(v);
  return std::nullopt;
}

/// The headers the parsers act on, noted while the head is parsed (each the first of its
/// name, as header() finds it; `content_lengths` counts every Content-Length).
struct FramingHeaders {
  std::optional<std::string_view> connection, content_length, transfer_encoding;
  std::size_t content_lengths = 0;

  void note(std::string_view name, std::string_view value) {
    switch (name.size()) {  // the length first: most names are none of these
      case 10:
        if (!connection && iequals(name, "Connection")) connection = value;
        break;
      case 14:
        if (iequals(name, "Content-Length")) {
          if (!content_length) content_length = value;
          ++content_lengths;
        }
        break;
      case 17:
        if (!transfer_encoding && iequals(name, "Transfer-Encoding")) transfer_encoding = value;
        break;
      default: break;
    }
  }
};

/// What a response head may hold (the client's limits).
constexpr std::size_t kMaxResponseHead = 64 * 1024;
HttpLimits response_limits() {
  HttpLimits limits;
  limits.max_headers = 128;
  return limits;
}

}  // namespace

std::optional<std::string_view> HttpRequest::header(std::string_view name) const { return find_header(headers, name); }
std::optional<std::string_view> ParsedResponse::header(std::string_view name) const {
  // `head` passed parse_headers in parse_response; the same scan finds the name here.
  std::optional<std::string_view> found;
  std::size_t pos = 0;
  bool incomplete = false;
  auto match = [&](std::string_view n, std::string_view v) {
    if (!found && iequals(n, name)) found = v;
  };
  (void)parse_headers(head, pos, response_limits(), kMaxResponseHead, incomplete, match);
  return found;
}

ParseOutcome parse_request(std::string_view buf, HttpRequest& req, const HttpLimits& limits) {
  // Reset field by field so a reused request keeps its buffers (no allocation per request on a
  // keep-alive connection).
  req.method.clear();
  req.target.clear();
  req.path.clear();
  req.query.clear();
  req.version_minor = 1;
  req.headers.clear();
  req.body.clear();
  req.keep_alive = true;
  std::size_t pos = 0;
  // RFC 9112 §2.2: ignore at least one empty line before the request line.
  while (pos < buf.size() && pos < 4 && (buf[pos] == '\r' || buf[pos] == '\n')) ++pos;

  std::string_view line;
  std::size_t nl = next_line(buf, pos, line);
  if (nl == std::string_view::npos) {
    if (buf.size() - pos > limits.max_request_line) return error(414, "request line too long");
    return ParseOutcome{};
  }
  if (line.size() > limits.max_request_line) return error(414, "request line too long");
  std::size_t sp1 = line.find(' ');
  std::size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp1 == std::string_view::npos || sp2 == std::string_view::npos ||
      line.find(' ', sp2 + 1) != std::string_view::npos)
    return error(400, "malformed request line");
  std::string_view method = line.substr(0, sp1);
  std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  std::string_view version = line.substr(sp2 + 1);
  if (!is_token(method)) return error(400, "invalid method");
  if (version.size() != 8 || version.substr(0, 5) != "HTTP/" || version[6] != '.' || version[5] < '0' ||
      version[5] > '9' || version[7] < '0' || version[7] > '9')
    return error(400, "malformed HTTP version");
  if (version[5] != '1') return error(505, "HTTP version not supported");
  if (!is_origin_target(target)) return error(400, "invalid request target");
  req.method.assign(method);
  req.target.assign(target);
  std::size_t q = target.find('?');
  req.path.assign(target.substr(0, q));
  if (q != std::string_view::npos) req.query.assign(target.substr(q + 1));
  req.version_minor = version[7] - '0';
  pos = nl + 1;

  bool incomplete = false;
  FramingHeaders framing;
  auto keep = [&](std::string_view name, std::string_view value) {
    req.headers.emplace_back(name, value);
    framing.note(name, value);
  };
  if (auto err = parse_headers(buf, pos, limits, limits.max_header_bytes, incomplete, keep)) return *err;
  if (incomplete) return ParseOutcome{};

  if (framing.transfer_encoding) return error(501, "Transfer-Encoding is not supported");
  std::size_t length = 0;
  bool have_length = false;
  for (std::size_t i = 0; framing.content_lengths > 0 && i < req.headers.size(); ++i) {
    const auto& [k, v] = req.headers[i];
    if (!iequals(k, "Content-Length")) continue;
    std::size_t n = 0;
    if (!parse_content_length(v, n)) return error(400, "invalid Content-Length");
    if (have_length && n != length) return error(400, "conflicting Content-Length");
    length = n;
    have_length = true;
  }
  if (length > limits.max_body) return error(413, "request body too large");
  if (buf.size() - pos < length) return ParseOutcome{};
  req.body.assign(buf.substr(pos, length));
  pos += length;

  const auto& conn = framing.connection;
  if (req.version_minor == 0) {
    req.keep_alive = conn && header_has_token(*conn, "keep-alive");
  } else {
    req.keep_alive = !(conn && header_has_token(*conn, "close"));
  }
  ParseOutcome o;
  o.status = ParseStatus::kComplete;
  o.consumed = pos;
  return o;
}

std::string_view reason_phrase(int status) {
  switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 413: return "Payload Too Large";
    case 414: return "URI Too Long";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Unknown";
  }
}

void serialize_response_to(std::string& out, const HttpResponse& r, bool keep_alive) {
  // Sized once, then written through a pointer: the parts are a handful of short strings, and
  // an append per part (an out-of-line call with a length check each) cost more than the bytes.
  const std::string_view reason = reason_phrase(r.status);
  std::size_t size = 9 + 11 + 1 + reason.size() + 2;  // "HTTP/1.1 " status ' ' reason CRLF
  if (!r.content_type.empty()) size += 14 + r.content_type.size() + 2;
  for (const auto& [k, v] : r.headers) size += k.size() + 2 + v.size() + 2;
  size += 16 + 20 + 2 + 19 + 2 + r.body.size();  // Content-Length, Connection: close, CRLF, body
  out.resize(size);
  char* p = out.data();
  auto put = [&p](std::string_view part) {
    std::memcpy(p, part.data(), part.size());
    p += part.size();
  };
  put("HTTP/1.1 ");
  p = std::to_chars(p, p + 11, r.status).ptr;
  *p++ = ' ';
  put(reason);
  put("\r\n");
  if (!r.content_type.empty()) {
    put("Content-Type: ");
    put(r.content_type);
    put("\r\n");
  }
  for (const auto& [k, v] : r.headers) {
    put(k);
    put(": ");
    put(v);
    put("\r\n");
  }
  put("Content-Length: ");
  p = std::to_chars(p, p + 20, r.body.size()).ptr;
  put("\r\n");
  if (!keep_alive) put("Connection: close\r\n");
  put("\r\n");
  put(r.body);
  out.resize(static_cast<std::size_t>(p - out.data()));
}

std::string serialize_response(const HttpResponse& r, bool keep_alive) {
  std::string out;
  serialize_response_to(out, r, keep_alive);
  return out;
}

std::string serialize_stream_head(int status, std::string_view content_type) {
  std::string out = "HTTP/1.1 " + std::to_string(status) + " " + std::string(reason_phrase(status)) + "\r\n";
  out += "Content-Type: ";
  out += content_type;
  out += "\r\nCache-Control: no-cache\r\nConnection: close\r\n\r\n";
  return out;
}

ParseOutcome parse_response(std::string_view buf, ParsedResponse& resp, std::size_t max_body) {
  resp = ParsedResponse{};
  std::string_view line;
  std::size_t nl = next_line(buf, 0, line);
  if (nl == std::string_view::npos) {
    if (buf.size() > 8192) return error(400, "status line too long");
    return ParseOutcome{};
  }
  // "HTTP/1.x SSS reason"
  if (line.size() < 12 || line.substr(0, 7) != "HTTP/1." || line[8] != ' ') return error(400, "malformed status line");
  int status = 0;
  auto r = std::from_chars(line.data() + 9, line.data() + 12, status);
  if (r.ec != std::errc() || r.ptr != line.data() + 12 || status < 100) return error(400, "malformed status code");
  resp.status = status;
  const std::size_t head_start = nl + 1;
  std::size_t pos = head_start;
  bool incomplete = false;
  FramingHeaders framing;  // views into `buf`, used before this returns
  auto note = [&framing](std::string_view name, std::string_view value) { framing.note(name, value); };
  if (auto err = parse_headers(buf, pos, response_limits(), kMaxResponseHead, incomplete, note)) return *err;
  if (incomplete) return ParseOutcome{};
  const std::string_view head = buf.substr(head_start, pos - head_start);  // kept once complete
  const auto& conn = framing.connection;
  resp.keep_alive = !(conn && header_has_token(*conn, "close")) && line[7] == '1';
  const auto& cl = framing.content_length;
  if (!cl) {
    if (framing.transfer_encoding) return error(501, "chunked responses are not supported");
    resp.head.assign(head);
    resp.streaming = true;
    resp.keep_alive = false;
    ParseOutcome o;
    o.status = ParseStatus::kComplete;
    o.consumed = pos;
    return o;
  }
  std::size_t length = 0;
  if (!parse_content_length(*cl, length)) return error(400, "invalid Content-Length");
  if (length > max_body) return error(413, "response body too large");
  if (buf.size() - pos < length) return ParseOutcome{};
  resp.head.assign(head);
  resp.body = std::string(buf.substr(pos, length));
  ParseOutcome o;
  o.status = ParseStatus::kComplete;
  o.consumed = pos + length;
  return o;
}

bool is_valid_utf8(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    std::size_t n = 0;
    std::uint32_t cp = 0;
    if ((c & 0xE0) == 0xC0) {
      n = 1;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      n = 2;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      n = 3;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (i + n >= s.size()) return false;
    for (std::size_t k = 1; k <= n; ++k) {
      auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    if ((n == 1 && cp < 0x80) || (n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000)) return false;  // overlong
    if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += n + 1;
  }
  return true;
}

}  // namespace erg::protocol
