#pragma once
/// Errors as values at hardware boundaries: `Result<T>` is `tl::expected<T, Error>` (a one-line
/// change to `std::expected` once the toolchain has it). Exceptions are only thrown at the edges
/// (CLI `main`, Python bindings).

#include <optional>
#include <string>
#include <string_view>
#include <tl/expected.hpp>
#include <utility>

namespace erg {

/// The one error vocabulary of erg. Backends map vendor codes to it in one function each.
enum class ErrorCode {
  kNotSupported,     ///< The device or driver cannot do this (e.g. energy counter before Volta).
  kNoPermission,     ///< The caller lacks the privilege (root, CAP_SYS_ADMIN, file mode).
  kNotFound,         ///< No such device, file, window or entry.
  kInvalidArgument,  ///< A value out of range or malformed input.
  kDriverError,      ///< The vendor library failed in a way not covered below.
  kGpuLost,          ///< The GPU fell off the bus or needs a reset.
  kIo,               ///< A read or write of a file or socket failed.
  kUnavailable,      ///< The library, driver or service is absent or not running.
  kTimeout,          ///< The device or service did not answer in time.
  kAlreadyExists,    ///< A duplicate name (e.g. a measurement window).
  kInternal,         ///< A bug in erg.
};

/// Stable lower-case name (`not_supported`, `no_permission`, ...) used in JSON and logs.
std::string_view to_string(ErrorCode code);
/// The code a name from to_string() stands for; nullopt for any other text.
std::optional<ErrorCode> parse_error_code(std::string_view name);

/// An error that can pass if the call is made again (a timeout, an unknown driver error, an
/// I/O error); a lost GPU, a missing capability or permission does not.
[[nodiscard]] bool transient(ErrorCode code);

struct Error {
  ErrorCode code = ErrorCode::kInternal;
  std::string message;

  /// "<message>" — the message alone is meant to be read by people; it already names the device.
  [[nodiscard]] const std::string& what() const { return message; }
  friend bool operator==(const Error&, const Error&) = default;
};

template <class T>
using Result = tl::expected<T, Error>;

/// Shorthand for `return fail(ErrorCode::kNotFound, "...")` in functions returning Result<T>.
inline tl::unexpected<Error> fail(ErrorCode code, std::string message) {
  return tl::unexpected<Error>(Error{code, std::move(message)});
}
inline tl::unexpected<Error> fail(Error error) { return tl::unexpected<Error>(std::move(error)); }

/// Result<void> success value.
inline Result<void> ok() { return {}; }

}  // namespace erg
