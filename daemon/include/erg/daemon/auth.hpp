#pragma once
/// HS256 bearer tokens as zeusd has them: claims {sub, scopes: [api groups], exp?}. Verified
/// with libjwt (Debian libjwt-dev).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
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

/// Reads an HS256 signing key file: its bytes less trailing newlines, at least 16 bytes.
Result<std::string> read_signing_key(const std::string& path);

/// A token lifetime as `ergd token issue --expires` takes it: "<n>s|m|h|d|w" (e.g. 1h, 7d, 30d)
/// → seconds; "never" or "0" → nullopt (no exp claim).
Result<std::optional<std::int64_t>> parse_token_lifetime(std::string_view text);

}  // namespace erg::daemon
