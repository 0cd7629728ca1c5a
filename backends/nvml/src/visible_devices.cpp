#include "erg/backends/nvml/visible_devices.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <string>

namespace erg::nvml {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front())) != 0) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back())) != 0) s.remove_suffix(1);
  return s;
}

bool is_uuid_body(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isxdigit(static_cast<unsigned char>(c)) != 0 || c == '-';
  });
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string quoted(std::string_view s) { return "\"" + std::string(s) + "\""; }

}  // namespace

std::string VisibleDevice::to_string() const { return is_index() ? std::to_string(index()) : uuid(); }

Result<std::optional<std::vector<VisibleDevice>>> parse_cuda_visible_devices(std::optional<std::string_view> value) {
  if (!value) return std::optional<std::vector<VisibleDevice>>();
  const std::string_view whole = trim(*value);
  if (whole.empty()) {
    return fail(ErrorCode::kInvalidArgument,
                "CUDA_VISIBLE_DEVICES is set but empty, so no GPU is visible; unset it to use all GPUs");
  }
  const std::string prefix = "CUDA_VISIBLE_DEVICES=" + quoted(*value) + ": ";

  std::vector<VisibleDevice> devices;
  std::size_t position = 0;
  std::string_view rest = whole;
  while (true) {
    ++position;
    const auto comma = rest.find(',');
    const std::string_view entry = trim(rest.substr(0, comma));

    if (entry.empty()) {
      return fail(ErrorCode::kInvalidArgument, prefix + "entry " + std::to_string(position) +
                                                   " is empty; list GPU indices or UUIDs separated by commas");
    }
    VisibleDevice device;
    if (entry.rfind("MIG", 0) == 0) {
      // Zeus rejects MIG too (zeus #109): per-instance energy is not readable through NVML.
      return fail(ErrorCode::kNotSupported, "MIG devices in CUDA_VISIBLE_DEVICES are not supported: " + quoted(entry) +
                                                "; list whole GPUs by index or by GPU UUID (GPU-...)");
    }
    if (entry.rfind("GPU-", 0) == 0) {
      if (!is_uuid_body(entry.substr(4))) {
        return fail(ErrorCode::kInvalidArgument,
                    prefix + quoted(entry) + " is not a GPU UUID (GPU- followed by hexadecimal digits and dashes)");
      }
      device = VisibleDevice::by_uuid(std::string(entry));
    } else {
      unsigned index = 0;
      const auto [end, ec] = std::from_chars(entry.data(), entry.data() + entry.size(), index);
      if (ec == std::errc::result_out_of_range) {
        return fail(ErrorCode::kInvalidArgument, prefix + "GPU index " + quoted(entry) + " is too large");
      }
      if (ec != std::errc() || end != entry.data() + entry.size()) {
        std::string hint = entry.front() == '-' ? " (a negative index is CUDA's way to hide every GPU; unset the "
                                                  "variable to use all GPUs, or list the GPUs to use)"
                                                : "";
        return fail(ErrorCode::kInvalidArgument,
                    prefix + "entry " + quoted(entry) + " is neither a GPU index nor a GPU UUID (GPU-...)" + hint);
      }
      device = VisibleDevice::by_index(index);
    }

    for (const auto& seen : devices) {
      const bool same = seen.is_index() == device.is_index() &&
                        (seen.is_index() ? seen.index() == device.index() : lower(seen.uuid()) == lower(device.uuid()));
      if (same) {
        return fail(ErrorCode::kInvalidArgument, prefix + "GPU " + quoted(entry) + " is listed twice");
      }
    }
    devices.push_back(std::move(device));

    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return std::optional<std::vector<VisibleDevice>>(std::move(devices));
}

}  // namespace erg::nvml
