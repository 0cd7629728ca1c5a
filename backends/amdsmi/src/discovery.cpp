#include "erg/backends/amdsmi/discovery.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <thread>
#include <utility>

#include "amd_gpu.hpp"
#include "erg/backends/amdsmi/library.hpp"

namespace erg::amdsmi {
namespace {

constexpr std::string_view kSource = "amdsmi";

std::optional<std::string> env(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

struct Handle {
  amdsmi_processor_handle handle = nullptr;
  std::uint32_t node_id = 0;
};

/// Every GPU processor handle of every socket, in HIP order: by KFD node id (ROCm 6.3; what
/// Zeus does), else the library's order.
Result<std::vector<Handle>> all_handles(const Library& lib) {
  const Symbols& smi = lib.sym();
  std::uint32_t sockets = 0;
  if (auto rc = lib.call([&] { return smi.amdsmi_get_socket_handles(&sockets, nullptr); }); rc != AMDSMI_STATUS_SUCCESS)
    return fail(lib.error(rc, "amdsmi_get_socket_handles"));
  std::vector<amdsmi_socket_handle> socket_handles(sockets);
  if (sockets > 0) {
    if (auto rc = lib.call([&] { return smi.amdsmi_get_socket_handles(&sockets, socket_handles.data()); });
        rc != AMDSMI_STATUS_SUCCESS)
      return fail(lib.error(rc, "amdsmi_get_socket_handles"));
    socket_handles.resize(std::min<std::size_t>(sockets, socket_handles.size()));
  }
  std::vector<Handle> out;
  for (auto socket : socket_handles) {
    std::uint32_t n = 0;
    if (auto rc = lib.call([&] { return smi.amdsmi_get_processor_handles(socket, &n, nullptr); });
        rc != AMDSMI_STATUS_SUCCESS)
      return fail(lib.error(rc, "amdsmi_get_processor_handles"));
    std::vector<amdsmi_processor_handle> handles(n);
    if (n > 0) {
      if (auto rc = lib.call([&] { return smi.amdsmi_get_processor_handles(socket, &n, handles.data()); });
          rc != AMDSMI_STATUS_SUCCESS)
        return fail(lib.error(rc, "amdsmi_get_processor_handles"));
      handles.resize(std::min<std::size_t>(n, handles.size()));
    }
    for (auto h : handles) out.push_back(Handle{h, static_cast<std::uint32_t>(out.size())});
  }
  if (smi.amdsmi_get_gpu_kfd_info != nullptr) {
    bool all = true;
    for (auto& h : out) {
      amdsmi_kfd_info_t kfd{};
      if (lib.call([&] { return smi.amdsmi_get_gpu_kfd_info(h.handle, &kfd); }) != AMDSMI_STATUS_SUCCESS) {
        all = false;
        break;
      }
      h.node_id = kfd.node_id;
    }
    if (all)
      std::stable_sort(out.begin(), out.end(), [](const Handle& a, const Handle& b) { return a.node_id < b.node_id; });
  }
  return out;
}

/// zeusd's start check (zeus.md §3): over `period`, the counter must move between 0.1× and 10×
/// of power × time. Checks every GPU in one period. A counter that fails (frozen, as on MI100,
/// amdsmi #38/#22; or wildly off) is turned off with a note in `unavailable`.
void check_counters(const std::vector<std::shared_ptr<AmdGpu>>& gpus, std::chrono::milliseconds period,
                    std::vector<Unavailable>& unavailable) {
  struct Probe {
    AmdGpu* gpu;
    double power_w;
    double energy_uj;
  };
  std::vector<Probe> probes;
  for (const auto& g : gpus) {
    if (!g->capabilities().energy_counter) continue;
    auto e = g->raw_energy_uj();
    auto p = g->check_power_w();
    if (!e) continue;
    probes.push_back(Probe{g.get(), p.value_or(-1.0), *e});
  }
  if (probes.empty()) return;
  const auto t0 = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(period);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (auto& p : probes) {
    auto e = p.gpu->raw_energy_uj();
    if (p.power_w < 0.0) p.power_w = p.gpu->check_power_w().value_or(-1.0);
    if (!e || p.power_w < 0.0) continue;  // nothing to check against: trusted, as zeusd does
    const double measured_uj = *e - p.energy_uj;
    const double expected_uj = p.power_w * seconds * 1e6;
    if (expected_uj <= 0.0) continue;
    const double ratio = measured_uj / expected_uj;
    if (ratio > 0.1 && ratio < 10.0) continue;
    p.gpu->disable_energy_counter();
    char text[160];
    std::snprintf(text, sizeof text, "its energy counter moved %.1f J in %.2f s while power read %.0f W (%.2fx)",
                  measured_uj * 1e-6, seconds, p.power_w, ratio);
    unavailable.push_back(Unavailable{std::string(kSource), ErrorCode::kDriverError,
                                      p.gpu->label() + ": energy counter disabled: " + text +
                                          "; energy is integrated from power instead (measurements say `integrated`)"});
  }
}

}  // namespace

std::string_view architecture_from_name(std::string_view name) {
  auto has = [&](std::string_view s) { return name.find(s) != std::string_view::npos; };
  if (has("MI300") || has("MI325")) return "cdna3";
  if (has("MI350") || has("MI355")) return "cdna4";
  if (has("MI200") || has("MI210") || has("MI250")) return "cdna2";
  if (has("MI100")) return "cdna";
  return "unknown";
}

Result<std::optional<std::vector<unsigned>>> parse_visible_devices(std::optional<std::string_view> value,
                                                                   std::string_view variable) {
  if (!value) return std::optional<std::vector<unsigned>>();
  const std::string prefix = std::string(variable) + "=\"" + std::string(*value) + "\": ";
  if (trim(*value).empty())
    return fail(ErrorCode::kInvalidArgument, prefix + "set but empty, so no GPU is visible; unset it to use all GPUs");
  std::vector<unsigned> out;
  std::string_view rest = *value;
  for (;;) {
    const std::size_t comma = rest.find(',');
    const std::string_view item = trim(rest.substr(0, comma));
    unsigned index = 0;
    auto [p, ec] = std::from_chars(item.data(), item.data() + item.size(), index);
    if (item.empty() || ec != std::errc() || p != item.data() + item.size())
      return fail(ErrorCode::kInvalidArgument,
                  prefix + "\"" + std::string(item) + "\" is not a GPU index (AMD GPUs are listed by HIP index)");
    if (std::find(out.begin(), out.end(), index) != out.end())
      return fail(ErrorCode::kInvalidArgument, prefix + "GPU " + std::to_string(index) + " is listed twice");
    out.push_back(index);
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return std::optional<std::vector<unsigned>>(std::move(out));
}

Result<Discovery> discover(const DiscoveryOptions& opts) {
  // 1. The visible devices first: a malformed value is an error even without a driver.
  std::optional<std::string> visible_value;
  std::string variable = "HIP_VISIBLE_DEVICES";
  if (opts.visible_devices) {
    visible_value = *opts.visible_devices;
  } else if (auto hip = env("HIP_VISIBLE_DEVICES")) {
    visible_value = hip;
  } else if (auto cuda = env("CUDA_VISIBLE_DEVICES")) {
    visible_value = cuda;
    variable = "CUDA_VISIBLE_DEVICES";
  }

  // 2. The library. Missing or failing to initialize is reported, not an error.
  Discovery found;
  std::vector<std::string> paths;
  if (opts.library_path) {
    paths.push_back(*opts.library_path);
  } else if (auto from_env = env("ERG_AMDSMI_LIBRARY"); from_env && !from_env->empty()) {
    paths.push_back(*from_env);
  } else {
    for (auto p : kDefaultLibraries) paths.emplace_back(p);
  }
  Result<std::shared_ptr<Library>> library = fail(ErrorCode::kUnavailable, "no AMD SMI library");
  for (const auto& p : paths) {
    library = Library::open(p);
    if (library || library.error().code != ErrorCode::kUnavailable ||
        library.error().message.rfind("no AMD SMI library found", 0) != 0)
      break;  // found one (usable or not): stop probing
  }
  if (!library) {
    found.unavailable.push_back(Unavailable{std::string(kSource), library.error().code, library.error().message});
    return found;
  }
  std::shared_ptr<const Library> lib = std::move(*library);
  auto handles = all_handles(*lib);
  if (!handles) {
    found.unavailable.push_back(Unavailable{std::string(kSource), handles.error().code, handles.error().message});
    return found;
  }

  // 3. Which GPUs, in which order. CUDA_VISIBLE_DEVICES that only a mixed machine's NVIDIA GPUs
  // could satisfy is not an error here unless HIP_VISIBLE_DEVICES said so.
  if (handles->empty()) return found;  // no AMD GPU: nothing for the variables to select
  auto visible = parse_visible_devices(
      visible_value ? std::optional<std::string_view>(*visible_value) : std::optional<std::string_view>(), variable);
  if (!visible) {
    // CUDA_VISIBLE_DEVICES naming GPUs by UUID (or MIG) speaks of NVIDIA GPUs only: on a mixed
    // machine it leaves no AMD GPU visible. HIP_VISIBLE_DEVICES must be indices.
    if (variable != "CUDA_VISIBLE_DEVICES") return fail(visible.error());
    visible = std::optional<std::vector<unsigned>>(std::vector<unsigned>{});
  }
  std::vector<unsigned> physical;
  if (*visible) {
    for (unsigned i : **visible) {
      if (i >= handles->size()) {
        if (variable == "CUDA_VISIBLE_DEVICES") continue;  // may name NVIDIA GPUs of a mixed machine
        return fail(ErrorCode::kNotFound, variable + "=\"" + *visible_value + "\": GPU " + std::to_string(i) +
                                              " does not exist; AMD SMI sees " + std::to_string(handles->size()) +
                                              " GPU(s)");
      }
      physical.push_back(i);
    }
  } else {
    for (unsigned i = 0; i < handles->size(); ++i) physical.push_back(i);
  }

  // 4. Open each.
  std::vector<std::shared_ptr<AmdGpu>> gpus;
  for (unsigned k = 0; k < physical.size(); ++k) {
    auto gpu = AmdGpu::create(lib, (*handles)[physical[k]].handle, opts.first_index + k, physical[k]);
    if (!gpu) {
      found.unavailable.push_back(Unavailable{std::string(kSource), gpu.error().code, gpu.error().message});
      continue;
    }
    if ((*gpu)->secondary_die())
      found.unavailable.push_back(Unavailable{
          std::string(kSource), ErrorCode::kNotSupported,
          (*gpu)->label() + ": secondary die of a dual-die card: it reports no power of its own (0 W here); " +
              "the card's power and energy are reported on its sibling die"});
    gpus.push_back(std::move(*gpu));
  }
  if (opts.counter_check.count() > 0) check_counters(gpus, opts.counter_check, found.unavailable);
  found.gpus.assign(gpus.begin(), gpus.end());
  return found;
}

}  // namespace erg::amdsmi
