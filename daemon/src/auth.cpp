#include "erg/daemon/auth.hpp"

#include <jwt.h>

#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>

namespace erg::daemon {
namespace {

struct JwtFree {
  void operator()(jwt_t* j) const { jwt_free(j); }
};
using JwtPtr = std::unique_ptr<jwt_t, JwtFree>;

Error denied(std::string why) { return Error{ErrorCode::kNoPermission, std::move(why)}; }

}  // namespace

Result<TokenClaims> verify_token(const std::string& token, const std::string& key) {
  if (token.empty() || token.size() > 8192) return fail(denied("invalid token"));
  // Reject anything but HS256 before verifying: libjwt would also accept "none" when no key is
  // given and other HMAC sizes with this key.
  std::size_t dot = token.find('.');
  if (dot == std::string::npos) return fail(denied("invalid token"));
  jwt_t* raw = nullptr;
  int rc =
      jwt_decode(&raw, token.c_str(), reinterpret_cast<const unsigned char*>(key.data()), static_cast<int>(key.size()));
  JwtPtr jwt(raw);
  if (rc != 0 || !jwt) return fail(denied("invalid token signature"));
  if (jwt_get_alg(jwt.get()) != JWT_ALG_HS256) return fail(denied("token algorithm must be HS256"));
  char* grants = jwt_get_grants_json(jwt.get(), nullptr);
  if (grants == nullptr) return fail(denied("token has no claims"));
  auto claims = nlohmann::json::parse(grants, nullptr, false);
  std::free(grants);  // libjwt 1.10 returns malloc()ed strings
  if (claims.is_discarded() || !claims.is_object()) return fail(denied("malformed token claims"));
  TokenClaims out;
  auto sub = claims.find("sub");
  if (sub == claims.end() || !sub->is_string()) return fail(denied("token lacks a sub claim"));
  out.sub = sub->get<std::string>();
  auto scopes = claims.find("scopes");
  if (scopes == claims.end() || !scopes->is_array()) return fail(denied("token lacks a scopes claim"));
  for (const auto& s : *scopes) {
    if (!s.is_string()) return fail(denied("token scopes must be strings"));
    out.scopes.push_back(s.get<std::string>());
  }
  auto exp = claims.find("exp");
  if (exp != claims.end() && !exp->is_null()) {
    if (!exp->is_number_integer()) return fail(denied("token exp must be an integer"));
    out.exp = exp->get<std::int64_t>();
    if (*out.exp <= static_cast<std::int64_t>(std::time(nullptr))) return fail(denied("token expired"));
  }
  return out;
}

Result<std::string> read_signing_key(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return fail(ErrorCode::kNotFound, "cannot read signing key file " + path + ": " + std::strerror(errno));
  std::string key(std::istreambuf_iterator<char>(in), {});
  while (!key.empty() && (key.back() == '\n' || key.back() == '\r')) key.pop_back();
  if (key.size() < 16)
    return fail(ErrorCode::kInvalidArgument, "signing key in " + path + " is too short (" + std::to_string(key.size()) +
                                                 " bytes, need at least 16)");
  return key;
}

Result<std::optional<std::int64_t>> parse_token_lifetime(std::string_view text) {
  auto bad = [&] {
    return fail(ErrorCode::kInvalidArgument,
                "invalid token lifetime '" + std::string(text) + "' (expected e.g. 30m, 1h, 7d, 30d, 2w, never or 0)");
  };
  if (text == "never" || text == "0") return std::optional<std::int64_t>{};
  if (text.size() < 2) return bad();
  std::int64_t unit = 0;
  switch (text.back()) {
    case 's': unit = 1; break;
    case 'm': unit = 60; break;
    case 'h': unit = 3600; break;
    case 'd': unit = 86400; break;
    case 'w': unit = 7 * 86400; break;
    default: return bad();
  }
  std::int64_t n = 0;
  auto digits = text.substr(0, text.size() - 1);
  auto r = std::from_chars(digits.data(), digits.data() + digits.size(), n);
  // At most about 100 years: beyond that a lifetime is a typo, and the sum must not overflow.
  if (r.ec != std::errc() || r.ptr != digits.data() + digits.size() || n <= 0 || n > 3'200'000'000 / unit) return bad();
  return std::optional<std::int64_t>{n * unit};
}

Result<std::string> issue_token(const std::string& key, const TokenClaims& claims) {
  jwt_t* raw = nullptr;
  if (jwt_new(&raw) != 0) return fail(ErrorCode::kInternal, "jwt_new failed");
  JwtPtr jwt(raw);
  nlohmann::json j = {{"sub", claims.sub}, {"scopes", claims.scopes}};
  if (claims.exp) j["exp"] = *claims.exp;
  if (jwt_add_grants_json(jwt.get(), j.dump().c_str()) != 0) return fail(ErrorCode::kInternal, "cannot add claims");
  if (jwt_set_alg(jwt.get(), JWT_ALG_HS256, reinterpret_cast<const unsigned char*>(key.data()),
                  static_cast<int>(key.size())) != 0)
    return fail(ErrorCode::kInvalidArgument, "cannot use this signing key");
  char* s = jwt_encode_str(jwt.get());
  if (s == nullptr) return fail(ErrorCode::kInternal, "cannot encode token");
  std::string out(s);
  std::free(s);  // libjwt 1.10 returns malloc()ed strings
  return out;
}

}  // namespace erg::daemon
