#pragma once
/// HS256 bearer tokens as zeusd has them: claims {sub, scopes: [api groups], exp?}. Verified
/// with libjwt (Debian libjwt-dev).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "erg/core/result.hpp"

namespace erg::daemon {

struct TokenClaims {
  std::string sub;
  std::vector<std::string> scopes;
  std::optional<std::int64_t> exp;  ///< Unix seconds; nullopt: never expires.
};

/// Verifies signature (HS256 only), expiry and claim types. kNoPermission with the reason
/// ("invalid token signature", "token expired", ...).
Result<TokenClaims> verify_token(const std::string& token, const std::string& key);

/// Issues a token (for `ergd token issue` and tests).
Result<std::string> issue_token(const std::string& key, const TokenClaims& claims);

}  // namespace erg::daemon
