#include "erg/daemon/auth.hpp"

#include <jwt.h>

#include <cerrno>
#include <cstdlib>
#include <ctime>
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
