#pragma once
/// CUDA_VISIBLE_DEVICES: which GPUs a process may use, and in which order.

#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "erg/core/result.hpp"

namespace erg::nvml {

/// One entry of CUDA_VISIBLE_DEVICES: an NVML index or a GPU UUID (or a prefix of one).
struct VisibleDevice {
  std::variant<unsigned, std::string> id;

  static VisibleDevice by_index(unsigned index) { return VisibleDevice{index}; }
  static VisibleDevice by_uuid(std::string uuid) { return VisibleDevice{std::move(uuid)}; }
  [[nodiscard]] bool is_index() const { return std::holds_alternative<unsigned>(id); }
  [[nodiscard]] unsigned index() const { return std::get<unsigned>(id); }
  [[nodiscard]] const std::string& uuid() const { return std::get<std::string>(id); }
  /// As written in the variable ("2", "GPU-8a1b...").
  [[nodiscard]] std::string to_string() const;
  friend bool operator==(const VisibleDevice&, const VisibleDevice&) = default;
};

/// Parses the value of CUDA_VISIBLE_DEVICES. Pure.
/// - nullopt (unset) → nullopt: every GPU, in NVML order.
/// - "2,0" → indices; "GPU-8a1b...,GPU-..." → UUIDs (full, or a unique prefix of at least
///   "GPU-" plus one hex digit); the two kinds may be mixed. Spaces around entries are ignored.
/// Errors: empty or blank value → kInvalidArgument ("... set but empty, so no GPU is visible;
/// unset it to use all GPUs"); a "MIG-..." entry → kNotSupported; an empty entry, a negative
/// number or anything else → kInvalidArgument; the same entry twice → kInvalidArgument.
/// Range and existence are checked later, against the driver (kNotFound).
Result<std::optional<std::vector<VisibleDevice>>> parse_cuda_visible_devices(std::optional<std::string_view> value);

}  // namespace erg::nvml
