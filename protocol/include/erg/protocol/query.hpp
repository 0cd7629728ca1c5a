#pragma once
/// Query strings: percent-decoding, strict field sets (unknown → 400), typed fields and the
/// `gpu_ids`/`cpu_ids` lists. Error messages follow actix-web/serde as zeusd returns them.

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "erg/core/result.hpp"

namespace erg::protocol {

/// Decoded `name=value` pairs in order. '+' is a space; `%XY` a byte. Errors
/// (kInvalidArgument): a bad escape, or a name or value that is not UTF-8.
Result<std::vector<std::pair<std::string, std::string>>> parse_query(std::string_view query);

/// A parsed query checked against a route's fields.
class Query {
 public:
  /// Parses and checks: every name must be in `allowed` (else "unknown field `x`, expected one
  /// of `a`, `b`"), no name twice ("duplicate field `x`"), every `required` present ("missing
  /// field `x`"). Messages are prefixed "Query deserialize error: " like actix-web's.
  static Result<Query> parse(std::string_view query, std::span<const std::string_view> allowed,
                             std::span<const std::string_view> required);

  [[nodiscard]] std::optional<std::string_view> get(std::string_view name) const;
  /// A u32 field ("invalid digit found in string", "number too large to fit in target type").
  [[nodiscard]] Result<std::optional<std::uint32_t>> get_u32(std::string_view name) const;
  /// A bool field: exactly "true" or "false".
  [[nodiscard]] Result<std::optional<bool>> get_bool(std::string_view name) const;

 private:
  std::vector<std::pair<std::string, std::string>> fields_;
};

/// zeusd's id lists: comma-separated, entries trimmed, entries that are not unsigned integers
/// ignored (zeusd's parse_gpu_ids filters them), then sorted and deduplicated. May be empty.
std::vector<unsigned> parse_ids(std::string_view raw);

/// Formats ids like Rust's `{:?}` of a Vec: "[0, 1, 2]".
std::string format_ids(std::span<const unsigned> ids);

}  // namespace erg::protocol
