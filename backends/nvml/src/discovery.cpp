#include "erg/backends/nvml/discovery.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdlib>
#include <string>
#include <utility>

#include "erg/backends/nvml/library.hpp"
#include "erg/backends/nvml/visible_devices.hpp"
#include "nvml_gpu.hpp"

namespace erg::nvml {
namespace {

constexpr std::string_view kSource = "nvml";

std::optional<std::string> env(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

/// NVML index → UUID of every GPU whose handle and UUID can be read ("" otherwise).
Result<std::vector<std::string>> all_uuids(const Library& lib, unsigned count) {
  const Symbols& nvml = lib.sym();
  if (nvml.nvmlDeviceGetUUID == nullptr) {
    return fail(ErrorCode::kNotSupported, "CUDA_VISIBLE_DEVICES lists GPU UUIDs, but the NVML library " + lib.path() +
                                              " does not export nvmlDeviceGetUUID; list GPU indices instead");
  }
  std::vector<std::string> uuids(count);
  for (unsigned i = 0; i < count; ++i) {
    nvmlDevice_t device = nullptr;
    if (nvml.nvmlDeviceGetHandleByIndex_v2(i, &device) != NVML_SUCCESS) continue;
    std::array<char, NVML_DEVICE_UUID_V2_BUFFER_SIZE> buffer{};
    if (nvml.nvmlDeviceGetUUID(device, buffer.data(), buffer.size()) != NVML_SUCCESS) continue;
    buffer.back() = '\0';
    uuids[i] = buffer.data();
  }
  return uuids;
}

/// NVML indices of the visible GPUs, in CUDA_VISIBLE_DEVICES order.
Result<std::vector<unsigned>> resolve(const std::vector<VisibleDevice>& visible, const std::string& value,
                                      const Library& lib, unsigned count) {
  const std::string prefix = "CUDA_VISIBLE_DEVICES=\"" + value + "\": ";
  std::optional<std::vector<std::string>> uuids;  // read once, when a UUID is listed
  std::vector<unsigned> physical;
  for (const auto& device : visible) {
    unsigned index = 0;
    if (device.is_index()) {
      index = device.index();
      if (index >= count) {
        return fail(ErrorCode::kNotFound,
                    prefix + "GPU " + std::to_string(index) + " does not exist; NVML sees " +
                        (count == 0 ? std::string("no GPU")
                                    : std::to_string(count) +
                                          (count == 1 ? " GPU (index 0)"
                                                      : " GPUs (indices 0 to " + std::to_string(count - 1) + ")")));
      }
    } else {
      if (!uuids) {
        auto all = all_uuids(lib, count);
        if (!all) return fail(all.error());
        uuids = std::move(*all);
      }
      const std::string wanted = lower(device.uuid());
      std::optional<unsigned> exact;
      std::vector<unsigned> prefixed;
      for (unsigned i = 0; i < uuids->size(); ++i) {
        const std::string have = lower((*uuids)[i]);
        if (have.empty()) continue;
        if (have == wanted)
          exact = i;
        else if (have.rfind(wanted, 0) == 0)
          prefixed.push_back(i);
      }
      if (exact) {
        index = *exact;
      } else if (prefixed.size() == 1) {
        index = prefixed.front();  // CUDA accepts a unique UUID prefix
      } else if (prefixed.size() > 1) {
        return fail(ErrorCode::kInvalidArgument, prefix + "\"" + device.uuid() + "\" is a prefix of " +
                                                     std::to_string(prefixed.size()) +
                                                     " GPU UUIDs; give more of the UUID");
      } else {
        return fail(ErrorCode::kNotFound, prefix + "no GPU has UUID \"" + device.uuid() + "\" (NVML sees " +
                                              std::to_string(count) + (count == 1 ? " GPU" : " GPUs") +
                                              "; `erg devices` lists their UUIDs)");
      }
    }
    if (std::find(physical.begin(), physical.end(), index) != physical.end()) {
      return fail(ErrorCode::kInvalidArgument, prefix + "\"" + device.to_string() + "\" names GPU " +
                                                   std::to_string(index) + ", which is already listed");
    }
    physical.push_back(index);
  }
  return physical;
}

}  // namespace

std::string_view architecture_name(unsigned nvml_architecture) {
  switch (nvml_architecture) {
    case NVML_DEVICE_ARCH_KEPLER: return "kepler";
    case NVML_DEVICE_ARCH_MAXWELL: return "maxwell";
    case NVML_DEVICE_ARCH_PASCAL: return "pascal";
    case NVML_DEVICE_ARCH_VOLTA: return "volta";
    case NVML_DEVICE_ARCH_TURING: return "turing";
    case NVML_DEVICE_ARCH_AMPERE:
    case NVML_DEVICE_ARCH_T23X:  // Jetson Orin's GPU is an Ampere part
      return "ampere";
    case NVML_DEVICE_ARCH_ADA: return "ada";
    case NVML_DEVICE_ARCH_HOPPER: return "hopper";
    case NVML_DEVICE_ARCH_BLACKWELL: return "blackwell";
    case NVML_DEVICE_ARCH_RUBIN: return "rubin";
    default: return "unknown";
  }
}

Result<Discovery> discover(const DiscoveryOptions& opts) {
  // 1. CUDA_VISIBLE_DEVICES first: a malformed value is an error even without a driver.
  const std::optional<std::string> visible_value =
      opts.cuda_visible_devices ? *opts.cuda_visible_devices : env("CUDA_VISIBLE_DEVICES");
  auto visible = parse_cuda_visible_devices(visible_value ? std::optional<std::string_view>(*visible_value)
                                                          : std::optional<std::string_view>());
  if (!visible) return fail(visible.error());

  // 2. The library. Missing or failing to initialize is reported, not an error.
  Discovery found;
  std::string path = std::string(kDefaultLibrary);
  if (opts.library_path) {
    path = *opts.library_path;
  } else if (auto from_env = env("ERG_NVML_LIBRARY"); from_env && !from_env->empty()) {
    path = *from_env;
  }
  auto library = Library::open(path);
  if (!library) {
    found.unavailable.push_back(Unavailable{std::string(kSource), library.error().code, library.error().message});
    return found;
  }
  const std::shared_ptr<const Library>& lib = *library;

  unsigned count = 0;
  if (const nvmlReturn_t rc = lib->sym().nvmlDeviceGetCount_v2(&count); rc != NVML_SUCCESS) {
    Error e = lib->error(rc, "nvmlDeviceGetCount_v2");
    found.unavailable.push_back(Unavailable{std::string(kSource), e.code, std::move(e.message)});
    return found;
  }

  // 3. Which GPUs, in which order.
  std::vector<unsigned> physical;
  if (*visible) {
    auto resolved = resolve(**visible, *visible_value, *lib, count);
    if (!resolved) return fail(resolved.error());
    physical = std::move(*resolved);
  } else {
    for (unsigned i = 0; i < count; ++i) physical.push_back(i);
  }

  // 4. Open each; one that cannot be opened is reported and the others are still listed.
  for (unsigned k = 0; k < physical.size(); ++k) {
    const ErrorContext context{.index = k, .physical_index = physical[k]};
    nvmlDevice_t device = nullptr;
    if (const nvmlReturn_t rc = lib->sym().nvmlDeviceGetHandleByIndex_v2(physical[k], &device); rc != NVML_SUCCESS) {
      Error e = lib->error(rc, "nvmlDeviceGetHandleByIndex_v2", context);
      found.unavailable.push_back(Unavailable{std::string(kSource), e.code, std::move(e.message)});
      continue;
    }
    auto gpu = NvmlGpu::create(lib, device, k, physical[k]);
    if (!gpu) {
      found.unavailable.push_back(Unavailable{std::string(kSource), gpu.error().code, gpu.error().message});
      continue;
    }
    found.gpus.push_back(std::move(*gpu));
  }
  return found;
}

}  // namespace erg::nvml
