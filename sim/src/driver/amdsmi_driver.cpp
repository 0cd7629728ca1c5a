// The simulated libamd_smi.so: exports the AMD SMI C ABI subset erg and Zeus use
// (backends/amdsmi/include/erg/backends/amdsmi/amdsmi_abi.h) over the shared state of a simulated
// machine (ERG_SIM_STATE), listing the machine's AMD GPUs (its NVIDIA ones are the simulated
// libnvidia-ml.so.1's). Units, status codes and buffer protocols follow vendor-abi.md Part 2; the
// ABI (24, 25 or 26: the power-info and version layouts) is the machine's `amdsmi=` option.
//
// Like the NVML driver: nothing throws across the C boundary, no C++ runtime, libc and pthreads
// only; only amdsmi_* symbols are exported (-fvisibility=hidden plus a version script).

#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "erg/backends/amdsmi/amdsmi_abi.h"
#include "erg/sim/sim_call.hpp"
#include "state.hpp"

#define ERG_AMDSMI_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

using erg::sim::Privilege;
using erg::sim::SimCall;
using erg::sim::Sku;
using erg::sim::Vendor;
using erg::sim::detail::GpuState;
using erg::sim::detail::Lock;
using erg::sim::detail::State;
namespace detail = erg::sim::detail;

/// A processor (GPU) or socket handle: the machine's GPU index.
struct Handle {
  unsigned gpu;
};

pthread_rwlock_t g_lib = PTHREAD_RWLOCK_INITIALIZER;
int g_refcount = 0;
int g_fd = -1;
State* g_state = nullptr;
Handle g_procs[detail::kMaxGpus];    // in AMD SMI order: the machine's AMD GPUs
Handle g_sockets[detail::kMaxGpus];  // one socket per GPU, as AMD SMI lists discrete GPUs
unsigned g_count = 0;

class LibLock {
 public:
  explicit LibLock(bool exclusive) {
    if (exclusive)
      ::pthread_rwlock_wrlock(&g_lib);
    else
      ::pthread_rwlock_rdlock(&g_lib);
  }
  ~LibLock() { ::pthread_rwlock_unlock(&g_lib); }
  LibLock(const LibLock&) = delete;
  LibLock& operator=(const LibLock&) = delete;
};

bool privileged(const State& s) {
  switch (static_cast<Privilege>(s.privilege)) {
    case Privilege::kEveryone: return true;
    case Privilege::kNobody: return false;
    case Privilege::kRootOnly:
    default: return ::geteuid() == 0;
  }
}

/// Injected faults carry NVML return codes (one fault vocabulary for the machine): their AMD SMI
/// counterparts.
amdsmi_status_t from_nvml(int nvml) {
  switch (nvml) {
    case 2: return AMDSMI_STATUS_INVAL;
    case 3: return AMDSMI_STATUS_NOT_SUPPORTED;
    case 4: return AMDSMI_STATUS_NO_PERM;
    case 10: return AMDSMI_STATUS_TIMEOUT;
    case 15: return AMDSMI_STATUS_AMDGPU_RESTART_ERR;  // the GPU is gone until the driver restarts
    default: return AMDSMI_STATUS_UNKNOWN_ERROR;
  }
}

const Handle* proc(amdsmi_processor_handle h) {
  auto* p = static_cast<const Handle*>(h);
  if (p == nullptr || p < g_procs || p >= g_procs + g_count) return nullptr;
  return p;
}

template <class F>
amdsmi_status_t device_call(amdsmi_processor_handle h, SimCall call, F&& f, Lock::Kind kind = Lock::kControl) noexcept {
  LibLock lk(false);
  State* s = g_state;
  if (s == nullptr) return AMDSMI_STATUS_NOT_INIT;
  const Handle* p = proc(h);
  if (p == nullptr) return AMDSMI_STATUS_INVAL;
  Lock lock(s, kind);
  GpuState& g = s->gpus[p->gpu];
  std::atomic_ref(g.calls[static_cast<unsigned>(call)]).fetch_add(1, std::memory_order_relaxed);
  std::atomic_ref(g.locked_calls).fetch_add(1, std::memory_order_relaxed);
  if (g.lost) return AMDSMI_STATUS_AMDGPU_RESTART_ERR;
  for (auto& fault : g.faults) {
    if (fault.call < 0 || fault.remaining == 0) continue;
    if (fault.call != static_cast<int>(SimCall::kAny) && fault.call != static_cast<int>(call)) continue;
    if (fault.remaining > 0) --fault.remaining;
    return from_nvml(fault.nvml_return);
  }
  detail::advance_gpu(g, detail::sim_now(*s));
  return f(*s, g, p->gpu);
}

std::uint32_t watts(double w) { return w <= 0.0 ? 0u : static_cast<std::uint32_t>(std::lround(w)); }

/// A dual-die card's first die (the GPU itself otherwise): where the card's cap and sensor live.
unsigned card_die(const State& s, unsigned gpu) {
  return detail::sku_of(s.gpus[gpu]).secondary_die && gpu > 0 ? gpu - 1 : gpu;
}

}  // namespace

// --- init, version, errors -----------------------------------------------------------------

ERG_AMDSMI_EXPORT amdsmi_status_t amdsmi_init(uint64_t init_flags) {
  LibLock lk(true);
  if (g_refcount > 0) {
    ++g_refcount;
    return AMDSMI_STATUS_SUCCESS;
  }
  const char* path = std::getenv("ERG_SIM_STATE");
  if (path == nullptr || *path == '\0') return AMDSMI_STATUS_DRIVER_NOT_LOADED;
  int fd = ::open(path, O_RDWR | O_CLOEXEC);
  if (fd < 0) return errno == EACCES ? AMDSMI_STATUS_NO_PERM : AMDSMI_STATUS_DRIVER_NOT_LOADED;
  struct stat st {};
  if (::fstat(fd, &st) != 0 || static_cast<std::size_t>(st.st_size) < sizeof(State)) {
    ::close(fd);
    return AMDSMI_STATUS_DRIVER_NOT_LOADED;
  }
  void* addr = ::mmap(nullptr, sizeof(State), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (addr == MAP_FAILED) {
    ::close(fd);
    return AMDSMI_STATUS_DRIVER_NOT_LOADED;
  }
  auto* s = static_cast<State*>(addr);
  if (s->magic != detail::kMagic || s->version != detail::kVersion || s->size != sizeof(State) ||
      s->gpu_count > detail::kMaxGpus) {
    ::munmap(addr, sizeof(State));
    ::close(fd);
    return AMDSMI_STATUS_DRIVER_NOT_LOADED;
  }
  g_count = 0;
  if ((init_flags & AMDSMI_INIT_AMD_GPUS) != 0)
    for (unsigned i = 0; i < s->gpu_count; ++i)
      if (detail::sku_of(s->gpus[i]).vendor == Vendor::kAmd) {
        g_procs[g_count] = Handle{i};
        g_sockets[g_count] = Handle{i};
        ++g_count;
      }
  g_fd = fd;
  g_state = s;
  g_refcount = 1;
  return AMDSMI_STATUS_SUCCESS;
}

ERG_AMDSMI_EXPORT amdsmi_status_t amdsmi_shut_down(void) {
  LibLock lk(true);
  if (g_refcount == 0) return AMDSMI_STATUS_SUCCESS;  // 24.7: SUCCESS when not initialized
  if (--g_refcount == 0) {
    ::munmap(g_state, sizeof(State));
    ::close(g_fd);
    g_state = nullptr;
    g_fd = -1;
    g_count = 0;
  }
  return AMDSMI_STATUS_SUCCESS;
}

ERG_AMDSMI_EXPORT amdsmi_status_t amdsmi_get_lib_version(void* version) {
  LibLock lk(false);
  if (g_state == nullptr) return AMDSMI_STATUS_NOT_INIT;  // 24.7 implementation
  if (version == nullptr) return AMDSMI_STATUS_INVAL;
  switch (g_state->amdsmi_abi) {
    case 24: {
      erg_amdsmi_version_v24_t v{24, 7, 0, 0, "24.7.0-sim"};
      std::memcpy(version, &v, sizeof v);
      break;
    }
    case 25: {
      erg_amdsmi_version_v24_t v{25, 25, 3, 0, "25.3.0-sim"};  // year and major both 25 (zeusd)
      std::memcpy(version, &v, sizeof v);
      break;
    }
    default: {
      erg_amdsmi_version_v26_t v{26, 1, 0, "26.1.0-sim"};
      std::memcpy(version, &v, sizeof v);
      break;
    }
  }
  return AMDSMI_STATUS_SUCCESS;
}

ERG_AMDSMI_EXPORT amdsmi_status_t amdsmi_status_code_to_string(amdsmi_status_t status, const char** text) {
  if (text == nullptr) return AMDSMI_STATUS_INVAL;
  switch (status) {
    case AMDSMI_STATUS_SUCCESS: *text = "SUCCESS: Call succeeded."; break;
    case AMDSMI_STATUS_INVAL: *text = "INVAL: Invalid parameters."; break;
    case AMDSMI_STATUS_NOT_SUPPORTED: *text = "NOT_SUPPORTED: Command not supported."; break;
    case AMDSMI_STATUS_TIMEOUT: *text = "TIMEOUT: Timeout in API call."; break;
    case AMDSMI_STATUS_NO_PERM: *text = "NO_PERM: Permission Denied."; break;
    case AMDSMI_STATUS_NOT_INIT: *text = "NOT_INIT: Device not initialized."; break;
    case AMDSMI_STATUS_DRIVER_NOT_LOADED: *text = "DRIVER_NOT_LOADED: Driver not loaded."; break;
    case AMDSMI_STATUS_AMDGPU_RESTART_ERR: *text = "AMDGPU_RESTART_ERR: AMDGPU restart failed."; break;
    default: *text = "UNKNOWN_ERROR: An unknown error occurred."; break;
  }
  return AMDSMI_STATUS_SUCCESS;
}

// --- enumeration ---------------------------------------------------------------------------

ERG_AMDSMI_EXPORT amdsmi_status_t amdsmi_get_socket_handles(uint32_t* socket_count,
                                                            amdsmi_socket_handle* socket_handles) {
  LibLock lk(false);
  if (g_state == nullptr) return AMDSMI_STATUS_NOT_INIT;
  if (socket_count == nullptr) return AMDSMI_STATUS_INVAL;
  if (socket_handles == nullptr) {
    *socket_count = g_count;
    return AMDSMI_STATUS_SUCCESS;
  }
  // A too-small buffer is filled up to its size, still SUCCESS (24.7 implementation).
  const uint32_t n = *socket_count < g_count ? *socket_count : g_count;
  for (uint32_t i = 0; i < n; ++i) socket_handles[i] = &g_sockets[i];
  *socket_count = n;
  return AMDSMI_STATUS_SUCCESS;
}

ERG_AMDSMI_EXPORT amdsmi_status_t amdsmi_get_processor_handles(amdsmi_socket_handle socket, uint32_t* count,
                                                               amdsmi_processor_handle* handles) {
  LibLock lk(false);
  if (g_state == nullptr) return AMDSMI_STATUS_NOT_INIT;
  auto* sock = static_cast<Handle*>(socket);
  if (count == nullptr || sock == nullptr || sock < g_sockets || sock >= g_sockets + g_count)
    return AMDSMI_STATUS_INVAL;
  if (handles == nullptr) {
    *count = 1;
    return AMDSMI_STATUS_SUCCESS;
  }
  if (*count >= 1) {
    handles[0] = &g_procs[sock - g_sockets];
    *count = 1;
  }
  return AMDSMI_STATUS_SUCCESS;
}

ERG_AMDSMI_EXPORT amdsmi_status_t amdsmi_get_gpu_asic_info(amdsmi_processor_handle h, void* info) {
  return device_call(h, SimCall::kGetName, [&](State& s, GpuState& g, unsigned) {
    if (info == nullptr) return AMDSMI_STATUS_INVAL;
    const Sku& sku = detail::sku_of(g);
    // 456 bytes on ABI 24, 896 on 25/26 (vendor-abi.md §2.3): exactly those are written.
    const std::size_t size = s.amdsmi_abi == 24 ? 456 : 896;
    auto* bytes = static_cast<unsigned char*>(info);
    std::memset(bytes, 0, size);
    std::memcpy(bytes, sku.name.data(), sku.name.size() < 255 ? sku.name.size() : 255);
    const std::uint32_t vendor = 0x1002;
    std::memcpy(bytes + 256, &vendor, sizeof vendor);
    const std::uint64_t device = sku.pci_device_id;
    std::memcpy(bytes + (s.amdsmi_abi == 24 ? 328 : 520), &device, sizeof device);
    return AMDSMI_STATUS_SUCCESS;
  });
}

ERG_AMDSMI_EXPORT amdsmi_status_t amdsmi_get_gpu_kfd_info(amdsmi_processor_handle h, amdsmi_kfd_info_t* info) {
  return device_call(h, SimCall::kGetHandle, [&](State&, GpuState&, unsigned) {
    if (info == nullptr) return AMDSMI_STATUS_INVAL;
    *info = amdsmi_kfd_info_t{};
    const auto position = static_cast<unsigned>(static_cast<const Handle*>(h) - g_procs);
    info->kfd_id = 0x1000u + position;
    info->node_id = 2 + position;  // KFD nodes 0 and 1 are the host CPUs
    info->current_partition_id = 0;
    return AMDSMI_STATUS_SUCCESS;
  });
}

ERG_AMDSMI_EXPORT amdsmi_status_t amdsmi_get_gpu_device_bdf(amdsmi_processor_handle h, amdsmi_bdf_t* bdf) {
  return device_call(h, SimCall::kGetPciInfo, [&](State&, GpuState&, unsigned gpu) {
    if (bdf == nullptr) return AMDSMI_STATUS_INVAL;
    // The bus numbers of an eight-GPU MI300X platform, then the same in the next PCI domain.
    static constexpr std::uint64_t kBus[8] = {0x0c, 0x22, 0x38, 0x5c, 0x9f, 0xaf, 0xbf, 0xdf};
    bdf->as_uint = (static_cast<std::uint64_t>(gpu / 8) << 16) | (kBus[gpu % 8] << 8);
    return AMDSMI_STATUS_SUCCESS;
  });
}

// --- power ---------------------------------------------------------------------------------

ERG_AMDSMI_EXPORT amdsmi_status_t amdsmi_get_power_cap_info(amdsmi_processor_handle h, uint32_t sensor_ind,
                                                            amdsmi_power_cap_info_t* info) {
  return device_call(
      h, SimCall::kGetPowerManagementLimit,
      [&](State& s, GpuState& g, unsigned gpu) {
        if (info == nullptr) return AMDSMI_STATUS_INVAL;
        if (sensor_ind != 0) return AMDSMI_STATUS_NOT_SUPPORTED;
        const Sku& sku = detail::sku_of(g);
        *info = amdsmi_power_cap_info_t{};
        info->power_cap = static_cast<std::uint64_t>(s.gpus[card_die(s, gpu)].limit_mw) * 1000u;  // µW
        info->default_power_cap = static_cast<std::uint64_t>(sku.default_limit_w) * 1'000'000u;
        info->min_power_cap = static_cast<std::uint64_t>(sku.min_limit_w) * 1'000'000u;
        info->max_power_cap = static_cast<std::uint64_t>(sku.max_limit_w) * 1'000'000u;
        info->dpm_cap = sku.max_sm_mhz;
        return AMDSMI_STATUS_SUCCESS;
      },
      Lock::kRead);
}

ERG_AMDSMI_EXPORT amdsmi_status_t amdsmi_set_power_cap(amdsmi_processor_handle h, uint32_t sensor_ind, uint64_t cap) {
  return device_call(h, SimCall::kSetPowerManagementLimit, [&](State& s, GpuState& g, unsigned gpu) {
    const Sku& sku = detail::sku_of(g);
    const auto mw = static_cast<std::uint32_t>(cap / 1000u);
    auto answer = [&](amdsmi_status_t rc) {
      auto& e = s.limit_log[s.limit_log_count++ % detail::kLimitLogSize];
      e = detail::LimitLogEntry{detail::sim_now(s), gpu, mw, static_cast<std::int32_t>(rc), 0};
      return rc;
    };
    if (sensor_ind != 0) return answer(AMDSMI_STATUS_NOT_SUPPORTED);
    if (cap < static_cast<std::uint64_t>(sku.min_limit_w) * 1'000'000u ||
        cap > static_cast<std::uint64_t>(sku.max_limit_w) * 1'000'000u)
      return answer(AMDSMI_STATUS_INVAL);
    if (!privileged(s)) return answer(AMDSMI_STATUS_NO_PERM);  // REQUIRE_ROOT_ACCESS
    // The cap is the card's: both dies of a dual-die card report it.
    const unsigned first = card_die(s, gpu);
    GpuState& card = s.gpus[first];
    detail::advance_gpu(card, detail::sim_now(s));
    card.limit_mw = mw;
    if (!detail::sku_of(card).second_die.empty()) s.gpus[first + 1].limit_mw = mw;
    detail::controls_changed(card);
    return answer(AMDSMI_STATUS_SUCCESS);
  });
}

ERG_AMDSMI_EXPORT amdsmi_status_t amdsmi_get_power_info(amdsmi_processor_handle h, void* info) {
  return device_call(
      h, SimCall::kGetPowerUsage,
      [&](State& s, GpuState& g, unsigned) {
        if (info == nullptr) return AMDSMI_STATUS_INVAL;
        const Sku& sku = detail::sku_of(g);
        // N/A: 24.7 pre-fills the u16 gpu_metrics sentinel, 25/26 UINT32_MAX (vendor-abi.md §2.5).
        const std::uint32_t na = s.amdsmi_abi == 24 ? ERG_AMDSMI_NA_U16 : ERG_AMDSMI_NA_U32;
        std::uint32_t current = na, average = na;
        if (!sku.secondary_die) {  // the second die: "N/A (Secondary die)"
          if (sku.amd_current_power)
            current = watts(detail::reading_instant_w(g));
          else
            average = watts(detail::reading_average_w(g));
        }
        const std::uint32_t gfx_mv = 750, soc_mv = 800, mem_mv = 1100;
        switch (s.amdsmi_abi) {
          case 24: {
            erg_amdsmi_power_info_v24_t v{};
            v.current_socket_power = current, v.average_socket_power = average;
            v.gfx_voltage = gfx_mv, v.soc_voltage = soc_mv, v.mem_voltage = mem_mv;
            v.power_limit = g.limit_mw * 1000u;  // hwmon power1_cap: µW despite the "W" comment
            std::memcpy(info, &v, sizeof v);
            break;
          }
          case 25: {
            erg_amdsmi_power_info_v25_t v{};
            v.socket_power = na;
            v.current_socket_power = current, v.average_socket_power = average;
            v.gfx_voltage = gfx_mv, v.soc_voltage = soc_mv, v.mem_voltage = mem_mv;
            v.power_limit = g.limit_mw / 1000u;
            std::memcpy(info, &v, sizeof v);
            break;
          }
          default: {
            erg_amdsmi_power_info_v26_t v{};
            v.socket_power = na;
            v.current_socket_power = current, v.average_socket_power = average;
            v.gfx_voltage = gfx_mv, v.soc_voltage = soc_mv, v.mem_voltage = mem_mv;
            v.power_limit = g.limit_mw / 1000u;
            std::memcpy(info, &v, sizeof v);
            break;
          }
        }
        return AMDSMI_STATUS_SUCCESS;
      },
      Lock::kRead);
}

ERG_AMDSMI_EXPORT amdsmi_status_t amdsmi_get_energy_count(amdsmi_processor_handle h, uint64_t* energy_accumulator,
                                                          float* counter_resolution, uint64_t* timestamp) {
  return device_call(
      h, SimCall::kGetTotalEnergyConsumption,
      [&](State& s, GpuState& g, unsigned) {
        if (energy_accumulator == nullptr || timestamp == nullptr) return AMDSMI_STATUS_INVAL;
        *energy_accumulator = detail::reported_amd_count(g);
        if (counter_resolution != nullptr) *counter_resolution = 15.3f;  // hard-coded by the library
        // gpu_metrics system_clock_counter: the GPU's own ns clock, here the sim time of the update
        // (from creation), or what the GPU's `stamps` (sensor zoo) say.
        *timestamp = static_cast<std::uint64_t>(detail::amd_energy_stamp_ns(s, g, detail::sim_now(s)));
        return AMDSMI_STATUS_SUCCESS;
      },
      Lock::kRead);
}

// --- clocks --------------------------------------------------------------------------------

ERG_AMDSMI_EXPORT amdsmi_status_t amdsmi_get_clock_info(amdsmi_processor_handle h, amdsmi_clk_type_t clk_type,
                                                        amdsmi_clk_info_t* info) {
  return device_call(
      h, SimCall::kGetClockInfo,
      [&](State&, GpuState& g, unsigned) {
        if (info == nullptr) return AMDSMI_STATUS_INVAL;
        const Sku& sku = detail::sku_of(g);
        *info = amdsmi_clk_info_t{};
        if (clk_type == AMDSMI_CLK_TYPE_SYS) {
          info->clk = detail::reported_clock_mhz(g);
          info->min_clk = g.locked_max_mhz != 0 ? g.locked_min_mhz : sku.min_sm_mhz;
          info->max_clk = g.locked_max_mhz != 0 ? g.locked_max_mhz : sku.max_sm_mhz;
          info->clk_locked = g.locked_max_mhz != 0 ? 1 : 0;
        } else if (clk_type == AMDSMI_CLK_TYPE_MEM) {
          info->clk = static_cast<std::uint32_t>(std::lround(g.mem_ratio * sku.mem_clocks_mhz[0]));
          info->min_clk = g.mem_locked_max_mhz != 0 ? g.mem_locked_min_mhz : sku.mem_clocks_mhz[0] / 4;
          info->max_clk = g.mem_locked_max_mhz != 0 ? g.mem_locked_max_mhz : sku.mem_clocks_mhz[0];
        } else {
          return AMDSMI_STATUS_NOT_SUPPORTED;
        }
        return AMDSMI_STATUS_SUCCESS;
      },
      Lock::kRead);
}

ERG_AMDSMI_EXPORT amdsmi_status_t amdsmi_set_gpu_clk_limit(amdsmi_processor_handle h, amdsmi_clk_type_t clk_type,
                                                           amdsmi_clk_limit_type_t limit_type, uint64_t clk_value) {
  return device_call(h, SimCall::kSetGpuLockedClocks, [&](State& s, GpuState& g, unsigned) {
    if ((clk_type != AMDSMI_CLK_TYPE_SYS && clk_type != AMDSMI_CLK_TYPE_MEM) ||
        (limit_type != CLK_LIMIT_MIN && limit_type != CLK_LIMIT_MAX))
      return AMDSMI_STATUS_INVAL;
    if (!privileged(s)) return AMDSMI_STATUS_NO_PERM;  // sets perf level MANUAL first: root
    const Sku& sku = detail::sku_of(g);
    const bool sys = clk_type == AMDSMI_CLK_TYPE_SYS;
    std::uint32_t lo = sys ? (g.locked_max_mhz != 0 ? g.locked_min_mhz : sku.min_sm_mhz)
                           : (g.mem_locked_max_mhz != 0 ? g.mem_locked_min_mhz : sku.mem_clocks_mhz[0] / 4);
    std::uint32_t hi = sys ? (g.locked_max_mhz != 0 ? g.locked_max_mhz : sku.max_sm_mhz)
                           : (g.mem_locked_max_mhz != 0 ? g.mem_locked_max_mhz : sku.mem_clocks_mhz[0]);
    (limit_type == CLK_LIMIT_MIN ? lo : hi) = static_cast<std::uint32_t>(clk_value);
    if (lo >= hi) return AMDSMI_STATUS_INVAL;  // rsmi rejects min >= max
    if (sys) {
      g.locked_min_mhz = lo, g.locked_max_mhz = hi;
    } else {
      g.mem_locked_min_mhz = lo, g.mem_locked_max_mhz = hi;
    }
    detail::controls_changed(g);
    return AMDSMI_STATUS_SUCCESS;
  });
}

ERG_AMDSMI_EXPORT amdsmi_status_t amdsmi_set_gpu_perf_level(amdsmi_processor_handle h, amdsmi_dev_perf_level_t level) {
  return device_call(h, SimCall::kResetGpuLockedClocks, [&](State& s, GpuState& g, unsigned) {
    if (level != AMDSMI_DEV_PERF_LEVEL_AUTO && level != AMDSMI_DEV_PERF_LEVEL_MANUAL)
      return AMDSMI_STATUS_NOT_SUPPORTED;
    if (!privileged(s)) return AMDSMI_STATUS_NO_PERM;
    if (level == AMDSMI_DEV_PERF_LEVEL_AUTO) {  // every domain back to automatic
      g.locked_min_mhz = g.locked_max_mhz = 0;
      g.mem_locked_min_mhz = g.mem_locked_max_mhz = 0;
      detail::controls_changed(g);
    }
    return AMDSMI_STATUS_SUCCESS;
  });
}

ERG_AMDSMI_EXPORT amdsmi_status_t amdsmi_get_temp_metric(amdsmi_processor_handle h,
                                                         amdsmi_temperature_type_t sensor_type,
                                                         amdsmi_temperature_metric_t metric, int64_t* temperature) {
  return device_call(
      h, SimCall::kGetTemperature,
      [&](State& s, GpuState&, unsigned gpu) {
        if (temperature == nullptr) return AMDSMI_STATUS_INVAL;
        if (metric != AMDSMI_TEMP_CURRENT) return AMDSMI_STATUS_NOT_SUPPORTED;
        const int base = detail::reading_temperature_c(s.gpus[card_die(s, gpu)]);
        switch (sensor_type) {
          case AMDSMI_TEMPERATURE_TYPE_EDGE: *temperature = base - 8; break;
          case AMDSMI_TEMPERATURE_TYPE_HOTSPOT: *temperature = base; break;
          case AMDSMI_TEMPERATURE_TYPE_VRAM: *temperature = base - 4; break;
          default: return AMDSMI_STATUS_NOT_SUPPORTED;
        }
        return AMDSMI_STATUS_SUCCESS;  // °C, as the implementation returns it (vendor-abi.md §2.5)
      },
      Lock::kRead);
}
