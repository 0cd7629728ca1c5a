// The simulated libnvidia-ml.so.1: exports the NVML C ABI subset erg and Zeus use
// (backends/nvml/include/erg/backends/nvml/nvml_abi.h) over the shared state of a simulated
// machine (ERG_SIM_STATE). Units, error codes and buffer protocols follow vendor-abi.md Part 1.
//
// Nothing may throw across the C boundary, and the library depends on libc and pthreads only
// (sim/tests/check_driver_needed.cmake): it is built with -fno-exceptions and uses no part of the
// C++ runtime (no std::mutex, no guarded statics, no operator new), so nothing can throw.
// It includes the shared state (state.hpp), the call ids (erg/sim/sim_call.hpp) and the NVML ABI
// (nvml_abi.h), never the control API or erg/core. Only nvml* symbols are exported
// (-fvisibility=hidden plus a version script).

#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "erg/backends/nvml/nvml_abi.h"
#include "erg/sim/sim_call.hpp"
#include "state.hpp"

#define ERG_NVML_EXPORT extern "C" __attribute__((visibility("default")))

struct nvmlDevice_st {
  unsigned index;
};

namespace {

using erg::sim::Privilege;
using erg::sim::SimCall;
using erg::sim::Sku;
using erg::sim::detail::GpuState;
using erg::sim::detail::Lock;
using erg::sim::detail::State;
namespace detail = erg::sim::detail;

constexpr const char* kDriverVersion = "550.127.08";
constexpr const char* kNvmlVersion = "12.550.127.08";
constexpr unsigned kClockLimitIdRangeStart = 0xffffff00u;

// Library-wide state: the mapping and the init refcount. Calls hold `g_lib` shared; init and
// shutdown hold it exclusively, so a mapping is never removed under a running call.
pthread_rwlock_t g_lib = PTHREAD_RWLOCK_INITIALIZER;

/// Holds `g_lib` shared (calls) or exclusively (init, shutdown) for a scope.
class LibLock {
 public:
  enum Kind { kShared, kExclusive };
  explicit LibLock(Kind kind) {
    if (kind == kShared) {
      ::pthread_rwlock_rdlock(&g_lib);
    } else {
      ::pthread_rwlock_wrlock(&g_lib);
    }
  }
  ~LibLock() { ::pthread_rwlock_unlock(&g_lib); }
  LibLock(const LibLock&) = delete;
  LibLock& operator=(const LibLock&) = delete;
};
int g_refcount = 0;
int g_fd = -1;
State* g_state = nullptr;
nvmlDevice_st g_handles[detail::kMaxGpus];
// The machine's NVIDIA GPUs in NVML index order (a mixed machine's AMD GPUs are listed by the
// simulated libamd_smi.so instead): NVML index → machine GPU index.
unsigned g_nvml_to_gpu[detail::kMaxGpus];
unsigned g_nvml_count = 0;

nvmlReturn_t do_init() {
  LibLock lk(LibLock::kExclusive);
  if (g_refcount > 0) {
    ++g_refcount;
    return NVML_SUCCESS;
  }
  const char* path = std::getenv("ERG_SIM_STATE");
  if (path == nullptr || *path == '\0') return NVML_ERROR_DRIVER_NOT_LOADED;
  int fd = ::open(path, O_RDWR | O_CLOEXEC);
  if (fd < 0) return errno == EACCES ? NVML_ERROR_NO_PERMISSION : NVML_ERROR_DRIVER_NOT_LOADED;
  struct stat st {};
  if (::fstat(fd, &st) != 0 || static_cast<std::size_t>(st.st_size) < sizeof(State)) {
    ::close(fd);
    return NVML_ERROR_DRIVER_NOT_LOADED;
  }
  void* addr = ::mmap(nullptr, sizeof(State), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (addr == MAP_FAILED) {
    ::close(fd);
    return NVML_ERROR_DRIVER_NOT_LOADED;
  }
  auto* s = static_cast<State*>(addr);
  if (s->magic != detail::kMagic || s->version != detail::kVersion || s->size != sizeof(State) ||
      s->gpu_count > detail::kMaxGpus) {
    ::munmap(addr, sizeof(State));
    ::close(fd);
    return NVML_ERROR_DRIVER_NOT_LOADED;
  }
  for (unsigned i = 0; i < detail::kMaxGpus; ++i) g_handles[i].index = i;
  g_nvml_count = 0;
  for (unsigned i = 0; i < s->gpu_count; ++i)
    if (erg::sim::all_skus()[static_cast<std::size_t>(s->gpus[i].sku_index)].vendor == erg::sim::Vendor::kNvidia)
      g_nvml_to_gpu[g_nvml_count++] = i;
  g_fd = fd;
  g_state = s;
  g_refcount = 1;
  return NVML_SUCCESS;
}

nvmlReturn_t do_shutdown() {
  LibLock lk(LibLock::kExclusive);
  // "no error is reported if nvmlShutdown() is called more times than nvmlInit()" (header).
  if (g_refcount == 0) return NVML_SUCCESS;
  if (--g_refcount == 0) {
    ::munmap(g_state, sizeof(State));
    ::close(g_fd);
    g_state = nullptr;
    g_fd = -1;
  }
  return NVML_SUCCESS;
}

bool privileged(const State& s) {
  switch (static_cast<Privilege>(s.privilege)) {
    case Privilege::kEveryone: return true;
    case Privilege::kNobody: return false;
    case Privilege::kRootOnly:
    default: return ::geteuid() == 0;
  }
}

void count_call(GpuState& g, SimCall call) {
  std::atomic_ref(g.calls[static_cast<unsigned>(call)]).fetch_add(1, std::memory_order_relaxed);
}

/// Runs `f(state, gpu)` for a device call: checks init and the handle, counts the call, applies
/// a lost GPU and injected faults, and brings the model up to now. Never throws. Getters pass
/// Lock::kRead (and publish the GPU's readings for the lock-free path); anything that may change
/// what the sensors report keeps the default.
template <class F>
nvmlReturn_t device_call(nvmlDevice_t device, SimCall call, F&& f, Lock::Kind kind = Lock::kControl) noexcept {
  LibLock lk(LibLock::kShared);
  State* s = g_state;
  if (s == nullptr) return NVML_ERROR_UNINITIALIZED;
  if (device == nullptr || device < g_handles || device >= g_handles + detail::kMaxGpus ||
      device->index >= s->gpu_count || detail::sku_of(s->gpus[device->index]).vendor != erg::sim::Vendor::kNvidia)
    return NVML_ERROR_INVALID_ARGUMENT;
  Lock lock(s, kind);
  GpuState& g = s->gpus[device->index];
  count_call(g, call);
  // Counted here, not on the lock-free path (one atomic fewer there): lock_free_reads() is
  // every call less these.
  std::atomic_ref(g.locked_calls).fetch_add(1, std::memory_order_relaxed);
  if (g.lost) return NVML_ERROR_GPU_IS_LOST;
  for (auto& fault : g.faults) {
    if (fault.call < 0 || fault.remaining == 0) continue;
    if (fault.call != static_cast<int>(SimCall::kAny) && fault.call != static_cast<int>(call)) continue;
    if (fault.remaining > 0) --fault.remaining;
    return static_cast<nvmlReturn_t>(fault.nvml_return);
  }
  detail::advance_gpu(g, detail::sim_now(*s));
  if (kind == Lock::kRead) detail::publish_snapshot(*s, g);
  return f(*s, g);
}

/// A sensor read: first without the lock from the GPU's published readings, when they are
/// still what the driver reports now (`fast(snapshot, rc)` returns false to decline, e.g. for
/// fields the snapshot does not hold); else device_call with `f`. Same counts, same results.
template <class Fast, class F>
nvmlReturn_t sensor_call(nvmlDevice_t device, SimCall call, Fast&& fast, F&& f) noexcept {
  {
    LibLock lk(LibLock::kShared);
    State* s = g_state;
    if (s != nullptr && device != nullptr && device >= g_handles && device < g_handles + detail::kMaxGpus &&
        device->index < s->gpu_count && detail::sku_of(s->gpus[device->index]).vendor == erg::sim::Vendor::kNvidia) {
      GpuState& g = s->gpus[device->index];
      detail::Snapshot snap;
      nvmlReturn_t rc = NVML_SUCCESS;
      if (detail::load_snapshot(*s, g, snap) && fast(snap, rc)) {
        count_call(g, call);
        return rc;
      }
    }
  }
  return device_call(device, call, std::forward<F>(f), Lock::kRead);
}

nvmlReturn_t copy_string(const char* text, char* out, unsigned int length) {
  if (out == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  const std::size_t n = std::strlen(text);
  if (length < n + 1) return NVML_ERROR_INSUFFICIENT_SIZE;
  std::memcpy(out, text, n + 1);
  return NVML_SUCCESS;
}

unsigned to_mw(double w) { return detail::watts_to_mw(w); }

void set_uint(nvmlFieldValue_t& v, unsigned value) {
  v.valueType = NVML_VALUE_TYPE_UNSIGNED_INT;
  v.value.ullVal = 0;
  v.value.uiVal = value;
  v.nvmlReturn = NVML_SUCCESS;
}

/// One field of nvmlDeviceGetFieldValues (per-field status, vendor-abi.md §1.3/§1.4).
void fill_field(const State& s, const GpuState& g, nvmlFieldValue_t& v) {
  const Sku& sku = detail::sku_of(g);
  const std::int64_t now = detail::sim_now(s);
  const long long now_us = (now + s.wall_offset_ns) / 1000;
  // A field's timestamp: the read time, or (model option, per GPU: the sensor zoo) when the
  // sensor produced the value, the start of what it covers, that floored, or an unrelated clock.
  auto stamp = [&](detail::StampField field) { return detail::field_stamp_us(s, g, field, now); };
  v.timestamp = now_us;  // for fields without a sensor time of their own
  v.latencyUsec = 0;
  v.nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
  const unsigned scope = v.scopeId;
  switch (v.fieldId) {
    case NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION:
    case NVML_FI_DEV_ENERGY:
      if (scope != NVML_POWER_SCOPE_GPU || !sku.has_energy_counter) return;
      v.valueType = NVML_VALUE_TYPE_UNSIGNED_LONG_LONG;
      v.value.ullVal = detail::reported_energy_mj(g);
      v.nvmlReturn = NVML_SUCCESS;
      v.timestamp = stamp(detail::StampField::kEnergy);
      return;
    case NVML_FI_DEV_POWER_INSTANT:
      if (scope != NVML_POWER_SCOPE_GPU) return;  // no MODULE (Grace) or MEMORY scope here
      set_uint(v, to_mw(detail::reading_instant_w(g)));
      v.timestamp = stamp(detail::StampField::kPowerInstant);
      return;
    case NVML_FI_DEV_POWER_AVERAGE:
      // Ampere except GA100, and newer; MEMORY scope only on H100 (Zeus: works on H100, not A40).
      if (!sku.has_average_power) return;
      if (scope == NVML_POWER_SCOPE_GPU) {
        set_uint(v, to_mw(detail::reading_average_w(g)));
      } else if (scope == NVML_POWER_SCOPE_MEMORY && sku.has_memory_power) {
        set_uint(v, to_mw(detail::reading_average_w(g) * sku.memory_power_share));
      }
      v.timestamp = stamp(detail::StampField::kPowerAverage);  // averages update with the energy counter
      return;
    case NVML_FI_DEV_POWER_MIN_LIMIT:
    case NVML_FI_DEV_POWER_MAX_LIMIT:
    case NVML_FI_DEV_POWER_DEFAULT_LIMIT:
    case NVML_FI_DEV_POWER_CURRENT_LIMIT:
      if (scope != NVML_POWER_SCOPE_GPU) return;
      set_uint(v, v.fieldId == NVML_FI_DEV_POWER_MIN_LIMIT       ? sku.min_limit_w * 1000u
                  : v.fieldId == NVML_FI_DEV_POWER_MAX_LIMIT     ? sku.max_limit_w * 1000u
                  : v.fieldId == NVML_FI_DEV_POWER_DEFAULT_LIMIT ? sku.default_limit_w * 1000u
                                                                 : g.limit_mw);
      return;
    default: return;
  }
}

nvmlReturn_t list_clocks(unsigned n, unsigned* count, unsigned* out, unsigned (*at)(const Sku&, unsigned),
                         const Sku& sku) {
  if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (*count < n) {
    *count = n;  // "count is set to the number of required elements"
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  if (out == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  for (unsigned i = 0; i < n; ++i) out[i] = at(sku, i);
  *count = n;
  return NVML_SUCCESS;
}

unsigned mem_clock_at(const Sku& sku, unsigned i) { return sku.mem_clocks_mhz[i]; }

}  // namespace

// --- init, errors, system ------------------------------------------------------------------

ERG_NVML_EXPORT nvmlReturn_t nvmlInit_v2(void) { return do_init(); }

ERG_NVML_EXPORT nvmlReturn_t nvmlInitWithFlags(unsigned int /*flags*/) { return nvmlInit_v2(); }

/// The unversioned v1 name, still exported by the real library for old binaries.
ERG_NVML_EXPORT nvmlReturn_t nvmlInit(void) { return nvmlInit_v2(); }

ERG_NVML_EXPORT nvmlReturn_t nvmlShutdown(void) { return do_shutdown(); }

ERG_NVML_EXPORT const char* nvmlErrorString(nvmlReturn_t result) {
  // DCGM's table (vendor-abi.md §1.4); codes without an entry there read "Unknown Error".
  switch (static_cast<int>(result)) {
    case 0: return "Success";
    case 1: return "Uninitialized";
    case 2: return "Invalid Argument";
    case 3: return "Not Supported";
    case 4: return "Insufficient Permissions";
    case 5: return "Already Initialized";
    case 6: return "Not Found";
    case 7: return "Insufficient Size";
    case 8: return "Insufficient External Power";
    case 9: return "Driver Not Loaded";
    case 10: return "Timeout";
    case 11: return "Interrupt Request Issue";
    case 12: return "NVML Shared Library Not Found";
    case 13: return "Function Not Found";
    case 14: return "Corrupted infoROM";
    case 15: return "GPU is lost";
    case 16: return "GPU requires reset";
    case 17: return "GPU access blocked by the operating system";
    case 18: return "Driver/library version mismatch";
    case 19: return "In use by another client";
    case 20: return "Insufficient Memory";
    case 23: return "Insufficient Resources";
    default: return "Unknown Error";
  }
}

ERG_NVML_EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char* version, unsigned int length) {
  LibLock lk(LibLock::kShared);
  if (g_state == nullptr) return NVML_ERROR_UNINITIALIZED;
  return copy_string(kDriverVersion, version, length);
}

ERG_NVML_EXPORT nvmlReturn_t nvmlSystemGetNVMLVersion(char* version, unsigned int length) {
  return copy_string(kNvmlVersion, version, length);  // needs no init (header)
}

// --- devices -------------------------------------------------------------------------------

ERG_NVML_EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* deviceCount) {
  LibLock lk(LibLock::kShared);
  if (g_state == nullptr) return NVML_ERROR_UNINITIALIZED;
  if (deviceCount == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *deviceCount = g_nvml_count;
  return NVML_SUCCESS;
}

ERG_NVML_EXPORT nvmlReturn_t nvmlDeviceGetCount(unsigned int* deviceCount) {
  return nvmlDeviceGetCount_v2(deviceCount);
}

ERG_NVML_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device) {
  {
    LibLock lk(LibLock::kShared);
    if (g_state == nullptr) return NVML_ERROR_UNINITIALIZED;
    if (index >= g_nvml_count || device == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  }
  nvmlDevice_t handle = &g_handles[g_nvml_to_gpu[index]];
  return device_call(handle, SimCall::kGetHandle, [&](State&, GpuState&) {
    *device = handle;
    return NVML_SUCCESS;
  });
}

ERG_NVML_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t* device) {
  return nvmlDeviceGetHandleByIndex_v2(index, device);
}

ERG_NVML_EXPORT nvmlReturn_t nvmlDeviceGetHandleByUUID(const char* uuid, nvmlDevice_t* device) {
  unsigned index = 0;
  {
    LibLock lk(LibLock::kShared);
    if (g_state == nullptr) return NVML_ERROR_UNINITIALIZED;
    if (uuid == nullptr || device == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    Lock lock(g_state);
    for (index = 0; index < g_state->gpu_count; ++index)
      if (detail::sku_of(g_state->gpus[index]).vendor == erg::sim::Vendor::kNvidia &&
          std::strncmp(g_state->gpus[index].uuid, uuid, sizeof g_state->gpus[index].uuid) == 0)
        break;
    if (index >= g_state->gpu_count) return NVML_ERROR_NOT_FOUND;
  }
  nvmlDevice_t handle = &g_handles[index];
  return device_call(handle, SimCall::kGetHandle, [&](State&, GpuState&) {
    *device = handle;
    return NVML_SUCCESS;
  });
}

ERG_NVML_EXPORT nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int* index) {
  return device_call(device, SimCall::kGetHandle, [&](State&, GpuState&) {
    if (index == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    for (unsigned k = 0; k < g_nvml_count; ++k)
      if (g_nvml_to_gpu[k] == device->index) *index = k;
    return NVML_SUCCESS;
  });
}

ERG_NVML_EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char* name, unsigned int length) {
  return device_call(device, SimCall::kGetName, [&](State&, GpuState& g) {
    const std::string_view n = detail::sku_of(g).name;
    char buf[NVML_DEVICE_NAME_V2_BUFFER_SIZE] = {};
    std::memcpy(buf, n.data(), std::min(n.size(), sizeof buf - 1));
    return copy_string(buf, name, length);
  });
}

ERG_NVML_EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char* uuid, unsigned int length) {
  return device_call(device, SimCall::kGetUuid, [&](State&, GpuState& g) {
    char buf[sizeof g.uuid + 1] = {};
    std::memcpy(buf, g.uuid, sizeof g.uuid);
    return copy_string(buf, uuid, length);
  });
}

ERG_NVML_EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t* pci) {
  return device_call(device, SimCall::kGetPciInfo, [&](State&, GpuState& g) {
    if (pci == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    // The bus numbers of a DGX A100's eight GPUs, then the same again in the next PCI domain.
    static constexpr unsigned kBus[8] = {0x07, 0x0f, 0x47, 0x4e, 0x87, 0x90, 0xb7, 0xbd};
    *pci = nvmlPciInfo_t{};
    pci->domain = device->index / 8;
    pci->bus = kBus[device->index % 8];
    pci->device = 0;
    pci->pciDeviceId = (detail::sku_of(g).pci_device_id << 16) | 0x10deu;
    pci->pciSubSystemId = 0x134f10deu;
    std::snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "%04X:%02X:%02X.0", pci->domain, pci->bus, pci->device);
    std::snprintf(pci->busId, sizeof pci->busId, "%08X:%02X:%02X.0", pci->domain, pci->bus, pci->device);
    return NVML_SUCCESS;
  });
}

ERG_NVML_EXPORT nvmlReturn_t nvmlDeviceGetArchitecture(nvmlDevice_t device, nvmlDeviceArchitecture_t* arch) {
  return device_call(device, SimCall::kGetArchitecture, [&](State&, GpuState& g) {
    if (arch == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *arch = detail::sku_of(g).arch;
    return NVML_SUCCESS;
  });
}

ERG_NVML_EXPORT nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t device, unsigned long long* energy) {
  return sensor_call(
      device, SimCall::kGetTotalEnergyConsumption,
      [&](const detail::Snapshot& snap, nvmlReturn_t& rc) {
        if ((snap.flags & detail::kSnapEnergy) == 0 || energy == nullptr) return false;
        *energy = snap.energy_mj;
        rc = NVML_SUCCESS;
        return true;
      },
      [&](State&, GpuState& g) {
        if (!detail::sku_of(g).has_energy_counter) return NVML_ERROR_NOT_SUPPORTED;  // Volta+ only
        if (energy == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
        *energy = detail::reported_energy_mj(g);
        return NVML_SUCCESS;
      });
}

/// One field from the snapshot, exactly as fill_field would write it; false for fields it does
/// not hold (the caller takes the locked path).
bool snapshot_field(const detail::Snapshot& snap, nvmlFieldValue_t& v) {
  if (v.scopeId != NVML_POWER_SCOPE_GPU) return false;
  switch (v.fieldId) {
    case NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION:
    case NVML_FI_DEV_ENERGY:
      if ((snap.flags & detail::kSnapEnergy) == 0) return false;
      v.latencyUsec = 0;
      v.valueType = NVML_VALUE_TYPE_UNSIGNED_LONG_LONG;
      v.value.ullVal = snap.energy_mj;
      v.nvmlReturn = NVML_SUCCESS;
      v.timestamp = (snap.flags & detail::kSnapStampRead) != 0 ? snap.now_wall_us : snap.energy_wall_us;
      return true;
    case NVML_FI_DEV_POWER_INSTANT:
      v.latencyUsec = 0;
      set_uint(v, snap.power_mw);
      v.timestamp = (snap.flags & detail::kSnapStampRead) != 0 ? snap.now_wall_us : snap.power_wall_us;
      return true;
    default: return false;
  }
}

ERG_NVML_EXPORT nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t device, int valuesCount, nvmlFieldValue_t* values) {
  return sensor_call(
      device, SimCall::kGetFieldValues,
      [&](const detail::Snapshot& snap, nvmlReturn_t& rc) {
        if (valuesCount <= 0 || values == nullptr) return false;
        // A field the snapshot does not hold declines the call; the locked path then writes
        // every field again, so fields written before it are not left behind.
        for (int i = 0; i < valuesCount; ++i)
          if (!snapshot_field(snap, values[i])) return false;
        rc = NVML_SUCCESS;
        return true;
      },
      [&](State& s, GpuState& g) {
        if (valuesCount < 0 || (valuesCount > 0 && values == nullptr)) return NVML_ERROR_INVALID_ARGUMENT;
        for (int i = 0; i < valuesCount; ++i) fill_field(s, g, values[i]);
        return NVML_SUCCESS;
      });
}

ERG_NVML_EXPORT nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int* power) {
  return sensor_call(
      device, SimCall::kGetPowerUsage,
      [&](const detail::Snapshot& snap, nvmlReturn_t& rc) {
        if ((snap.flags & detail::kSnapUsageIsInstant) == 0 || power == nullptr) return false;
        *power = snap.power_mw;
        rc = NVML_SUCCESS;
        return true;
      },
      [&](State&, GpuState& g) {
        if (power == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
        // "On Ampere (except GA100) or newer GPUs, the API returns power averaged over 1 sec
        // interval. On GA100 and older architectures, instantaneous power is returned."
        const bool instant = detail::sku_of(g).ga100_or_older;
        *power = to_mw(instant ? detail::reading_instant_w(g) : detail::reading_average_w(g));
        return NVML_SUCCESS;
      });
}

ERG_NVML_EXPORT nvmlReturn_t nvmlDeviceGetPowerManagementLimit(nvmlDevice_t device, unsigned int* limit) {
  return device_call(device, SimCall::kGetPowerManagementLimit, [&](State&, GpuState& g) {
    if (limit == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *limit = g.limit_mw;
    return NVML_SUCCESS;
  });
}

ERG_NVML_EXPORT nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t device, unsigned int* limit) {
  return device_call(device, SimCall::kGetPowerManagementLimit, [&](State&, GpuState& g) {
    if (limit == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *limit = g.limit_mw;
    return NVML_SUCCESS;
  });
}

ERG_NVML_EXPORT nvmlReturn_t nvmlDeviceGetPowerManagementLimitConstraints(nvmlDevice_t device, unsigned int* minLimit,
                                                                          unsigned int* maxLimit) {
  return device_call(device, SimCall::kGetPowerManagementLimitConstraints, [&](State&, GpuState& g) {
    if (minLimit == nullptr || maxLimit == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *minLimit = detail::sku_of(g).min_limit_w * 1000u;
    *maxLimit = detail::sku_of(g).max_limit_w * 1000u;
    return NVML_SUCCESS;
  });
}

ERG_NVML_EXPORT nvmlReturn_t nvmlDeviceGetPowerManagementDefaultLimit(nvmlDevice_t device, unsigned int* defaultLimit) {
  return device_call(device, SimCall::kGetPowerManagementDefaultLimit, [&](State&, GpuState& g) {
    if (defaultLimit == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *defaultLimit = detail::sku_of(g).default_limit_w * 1000u;
    return NVML_SUCCESS;
  });
}

ERG_NVML_EXPORT nvmlReturn_t nvmlDeviceSetPowerManagementLimit(nvmlDevice_t device, unsigned int limit) {
  return device_call(device, SimCall::kSetPowerManagementLimit, [&](State& s, GpuState& g) {
    const Sku& sku = detail::sku_of(g);
    auto answer = [&](nvmlReturn_t rc) {  // into the machine's ordered log of limit calls
      auto& e = s.limit_log[s.limit_log_count++ % detail::kLimitLogSize];
      e = detail::LimitLogEntry{detail::sim_now(s), static_cast<std::uint32_t>(&g - s.gpus), limit,
                                static_cast<std::int32_t>(rc), 0};
      return rc;
    };
    // Arguments are checked before privilege (as the client library validates first).
    if (limit < sku.min_limit_w * 1000u || limit > sku.max_limit_w * 1000u) return answer(NVML_ERROR_INVALID_ARGUMENT);
    if (!privileged(s)) return answer(NVML_ERROR_NO_PERMISSION);
    g.limit_mw = limit;
    detail::controls_changed(g);  // the control loop moves the clock from here on
    return answer(NVML_SUCCESS);
  });
}

ERG_NVML_EXPORT nvmlReturn_t nvmlDeviceGetPersistenceMode(nvmlDevice_t device, nvmlEnableState_t* mode) {
  return device_call(device, SimCall::kGetPersistenceMode, [&](State&, GpuState& g) {
    if (mode == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *mode = g.persistence ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
    return NVML_SUCCESS;
  });
}

ERG_NVML_EXPORT nvmlReturn_t nvmlDeviceSetPersistenceMode(nvmlDevice_t device, nvmlEnableState_t mode) {
  return device_call(device, SimCall::kSetPersistenceMode, [&](State& s, GpuState& g) {
    if (mode != NVML_FEATURE_DISABLED && mode != NVML_FEATURE_ENABLED) return NVML_ERROR_INVALID_ARGUMENT;
    if (!privileged(s)) return NVML_ERROR_NO_PERMISSION;
    g.persistence = mode == NVML_FEATURE_ENABLED ? 1 : 0;
    return NVML_SUCCESS;
  });
}

ERG_NVML_EXPORT nvmlReturn_t nvmlDeviceGetSupportedMemoryClocks(nvmlDevice_t device, unsigned int* count,
                                                                unsigned int* clocksMHz) {
  return device_call(device, SimCall::kGetSupportedMemoryClocks, [&](State&, GpuState& g) {
    const Sku& sku = detail::sku_of(g);
    return list_clocks(erg::sim::mem_clock_count(sku), count, clocksMHz, &mem_clock_at, sku);
  });
}

ERG_NVML_EXPORT nvmlReturn_t nvmlDeviceGetSupportedGraphicsClocks(nvmlDevice_t device, unsigned int memoryClockMHz,
                                                                  unsigned int* count, unsigned int* clocksMHz) {
  return device_call(device, SimCall::kGetSupportedGraphicsClocks, [&](State&, GpuState& g) {
    const Sku& sku = detail::sku_of(g);
    const unsigned n = erg::sim::sm_clock_count_at(sku, memoryClockMHz);
    if (n == 0) return NVML_ERROR_NOT_FOUND;
    // At the idle memory clock only the low end of the table (sim/README.md): its last n entries.
    const unsigned skip = erg::sim::sm_clock_count(sku) - n;
    if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (*count < n) {
      *count = n;
      return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    if (clocksMHz == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    for (unsigned i = 0; i < n; ++i) clocksMHz[i] = erg::sim::sm_clock_mhz(sku, skip + i);
    *count = n;
    return NVML_SUCCESS;
  });
}

ERG_NVML_EXPORT nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device, nvmlClockType_t type, unsigned int* clock) {
  return device_call(device, SimCall::kGetClockInfo, [&](State&, GpuState& g) {
    if (clock == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    const Sku& sku = detail::sku_of(g);
    switch (type) {
      case NVML_CLOCK_GRAPHICS:
      case NVML_CLOCK_SM: *clock = detail::reported_clock_mhz(g); return NVML_SUCCESS;
      case NVML_CLOCK_MEM:
        *clock = static_cast<unsigned>(std::lround(g.mem_ratio * sku.mem_clocks_mhz[0]));
        return NVML_SUCCESS;
      case NVML_CLOCK_VIDEO: *clock = static_cast<unsigned>(detail::reported_clock_mhz(g) * 0.9); return NVML_SUCCESS;
      default: return NVML_ERROR_INVALID_ARGUMENT;
    }
  });
}

ERG_NVML_EXPORT nvmlReturn_t nvmlDeviceSetGpuLockedClocks(nvmlDevice_t device, unsigned int minGpuClockMHz,
                                                          unsigned int maxGpuClockMHz) {
  return device_call(device, SimCall::kSetGpuLockedClocks, [&](State& s, GpuState& g) {
    const Sku& sku = detail::sku_of(g);
    if (!sku.gpu_locked_clocks) return NVML_ERROR_NOT_SUPPORTED;  // Volta+
    const bool sym_min = minGpuClockMHz >= kClockLimitIdRangeStart;
    const bool sym_max = maxGpuClockMHz >= kClockLimitIdRangeStart;
    if (sym_min != sym_max) return NVML_ERROR_INVALID_ARGUMENT;  // mixed numeric/symbolic
    if (!sym_min && minGpuClockMHz > maxGpuClockMHz) return NVML_ERROR_INVALID_ARGUMENT;
    if (!privileged(s)) return NVML_ERROR_NO_PERMISSION;
    // Symbolic limits (TDP, UNLIMITED) leave the full range; numeric ones cap the model's clock.
    g.locked_min_mhz = sym_min ? 0 : minGpuClockMHz;
    g.locked_max_mhz = sym_max ? 0 : maxGpuClockMHz;
    detail::controls_changed(g);
    return NVML_SUCCESS;
  });
}

ERG_NVML_EXPORT nvmlReturn_t nvmlDeviceResetGpuLockedClocks(nvmlDevice_t device) {
  return device_call(device, SimCall::kResetGpuLockedClocks, [&](State& s, GpuState& g) {
    if (!detail::sku_of(g).gpu_locked_clocks) return NVML_ERROR_NOT_SUPPORTED;
    if (!privileged(s)) return NVML_ERROR_NO_PERMISSION;
    g.locked_min_mhz = g.locked_max_mhz = 0;
    detail::controls_changed(g);
    return NVML_SUCCESS;
  });
}

ERG_NVML_EXPORT nvmlReturn_t nvmlDeviceSetMemoryLockedClocks(nvmlDevice_t device, unsigned int minMemClockMHz,
                                                             unsigned int maxMemClockMHz) {
  return device_call(device, SimCall::kSetMemoryLockedClocks, [&](State& s, GpuState& g) {
    if (!detail::sku_of(g).memory_locked_clocks) return NVML_ERROR_NOT_SUPPORTED;  // Ampere+
    if (minMemClockMHz > maxMemClockMHz) return NVML_ERROR_INVALID_ARGUMENT;
    if (!privileged(s)) return NVML_ERROR_NO_PERMISSION;
    g.mem_locked_min_mhz = minMemClockMHz;
    g.mem_locked_max_mhz = maxMemClockMHz;
    detail::controls_changed(g);  // memory-bound work slows, memory power follows the clock
    return NVML_SUCCESS;
  });
}

ERG_NVML_EXPORT nvmlReturn_t nvmlDeviceResetMemoryLockedClocks(nvmlDevice_t device) {
  return device_call(device, SimCall::kResetMemoryLockedClocks, [&](State& s, GpuState& g) {
    if (!detail::sku_of(g).memory_locked_clocks) return NVML_ERROR_NOT_SUPPORTED;
    if (!privileged(s)) return NVML_ERROR_NO_PERMISSION;
    g.mem_locked_min_mhz = g.mem_locked_max_mhz = 0;
    detail::controls_changed(g);
    return NVML_SUCCESS;
  });
}

ERG_NVML_EXPORT nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, nvmlTemperatureSensors_t sensorType,
                                                      unsigned int* temp) {
  return device_call(device, SimCall::kGetTemperature, [&](State&, GpuState& g) {
    if (temp == nullptr || sensorType != NVML_TEMPERATURE_GPU) return NVML_ERROR_INVALID_ARGUMENT;
    *temp = static_cast<unsigned>(detail::reading_temperature_c(g));
    return NVML_SUCCESS;
  });
}

ERG_NVML_EXPORT nvmlReturn_t nvmlDeviceGetTemperatureV(nvmlDevice_t device, nvmlTemperature_t* temperature) {
  return device_call(device, SimCall::kGetTemperature, [&](State&, GpuState& g) {
    if (temperature == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (temperature->version != nvmlTemperature_v1) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    if (temperature->sensorType != NVML_TEMPERATURE_GPU) return NVML_ERROR_NOT_SUPPORTED;  // no such sensor
    temperature->temperature = detail::reading_temperature_c(g);
    return NVML_SUCCESS;
  });
}

// --- processes ---------------------------------------------------------------------------------
// vendor-abi.md §1.5: the running-process list answers a short buffer with INSUFFICIENT_SIZE and
// the count needed; process utilization answers a NULL buffer the same way, NOT_FOUND when no
// sample is newer than lastSeenTimeStamp, and NOT_SUPPORTED on a MIG-enabled GPU.

ERG_NVML_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int* infoCount,
                                                                     nvmlProcessInfo_t* infos) {
  return device_call(
      device, SimCall::kGetComputeRunningProcesses,
      [&](State& s, GpuState& g) {
        if (infoCount == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
        if (detail::reap_exited(g)) {
          // A process that exited has no context any more: its load goes with it (a control event:
          // the published readings are void).
          std::atomic_ref(s.control_epoch).fetch_add(1, std::memory_order_acq_rel);
          const double before = detail::mean_power_w(g);
          g.utilization = detail::process_activity(g);
          g.load_origin_ns = detail::sim_now(s);
          detail::controls_changed(g, before);
        }
        unsigned n = 0;
        for (const auto& p : g.procs.slots)
          if (p.pid != 0) ++n;
        if (*infoCount < n) {
          *infoCount = n;
          return NVML_ERROR_INSUFFICIENT_SIZE;
        }
        if (n > 0 && infos == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
        // 24 bytes per entry, or 32 as drivers 535.43-535.86 wrote them (v2 + usedGpuCcProtectedMemory).
        const std::size_t stride = s.process_info_stride == 32 ? 32 : sizeof(nvmlProcessInfo_t);
        auto* bytes = reinterpret_cast<unsigned char*>(infos);
        unsigned k = 0;
        for (const auto& p : g.procs.slots) {
          if (p.pid == 0) continue;
          nvmlProcessInfo_t out;
          std::memset(&out, 0, sizeof out);
          out.pid = static_cast<unsigned>(p.pid);
          out.usedGpuMemory = p.used_memory;
          const bool mig = g.procs.mig != 0 && p.gpu_instance >= 0;
          out.gpuInstanceId = mig ? static_cast<unsigned>(p.gpu_instance) : NVML_INSTANCE_ID_NONE;
          out.computeInstanceId = mig ? 0u : NVML_INSTANCE_ID_NONE;
          std::memset(bytes + k * stride, 0, stride);
          std::memcpy(bytes + k * stride, &out, sizeof out);
          ++k;
        }
        *infoCount = n;
        return NVML_SUCCESS;
      },
      Lock::kRead);
}

ERG_NVML_EXPORT nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t device,
                                                             nvmlProcessUtilizationSample_t* utilization,
                                                             unsigned int* processSamplesCount,
                                                             unsigned long long lastSeenTimeStamp) {
  return device_call(
      device, SimCall::kGetProcessUtilization,
      [&](State& s, GpuState& g) {
        if (g.procs.mig != 0) return NVML_ERROR_NOT_SUPPORTED;  // not supported on MIG-enabled GPUs
        if (processSamplesCount == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
        const std::uint64_t total = g.procs.ring_count;
        const std::uint64_t first = total > detail::kUtilRing ? total - detail::kUtilRing : 0;
        auto stamp = [&](const detail::UtilSample& u) {
          return static_cast<unsigned long long>((u.time_ns + s.wall_offset_ns) / 1000);
        };
        unsigned n = 0;
        for (std::uint64_t k = first; k < total; ++k)
          if (stamp(g.procs.ring[k % detail::kUtilRing]) > lastSeenTimeStamp) ++n;
        if (n == 0) return NVML_ERROR_NOT_FOUND;
        if (utilization == nullptr || *processSamplesCount < n) {
          *processSamplesCount = n;
          return NVML_ERROR_INSUFFICIENT_SIZE;
        }
        unsigned k = 0;
        for (std::uint64_t i = first; i < total; ++i) {
          const detail::UtilSample& u = g.procs.ring[i % detail::kUtilRing];
          if (stamp(u) <= lastSeenTimeStamp) continue;
          nvmlProcessUtilizationSample_t& out = utilization[k++];
          std::memset(&out, 0, sizeof out);
          out.pid = static_cast<unsigned>(u.pid);
          out.timeStamp = stamp(u);
          out.smUtil = u.sm;
          out.memUtil = u.mem;
        }
        *processSamplesCount = n;
        return NVML_SUCCESS;
      },
      Lock::kRead);
}

ERG_NVML_EXPORT nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int* currentMode,
                                                  unsigned int* pendingMode) {
  return device_call(
      device, SimCall::kGetMigMode,
      [&](State&, GpuState& g) {
        if (currentMode == nullptr || pendingMode == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
        if (detail::sku_of(g).arch < NVML_DEVICE_ARCH_AMPERE) return NVML_ERROR_NOT_SUPPORTED;  // MIG: Ampere+
        *currentMode = *pendingMode = g.procs.mig != 0 ? NVML_DEVICE_MIG_ENABLE : NVML_DEVICE_MIG_DISABLE;
        return NVML_SUCCESS;
      },
      Lock::kRead);
}
