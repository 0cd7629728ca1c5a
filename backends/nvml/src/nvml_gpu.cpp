#include "nvml_gpu.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "erg/backends/nvml/discovery.hpp"

namespace erg::nvml {
namespace {

constexpr std::size_t domain_slot(PowerDomain domain) { return static_cast<std::size_t>(domain); }

struct PowerField {
  PowerDomain domain;
  unsigned field_id;
  std::string_view field_name;
  std::array<std::optional<unsigned>, 2> scopes;  // tried in order
};

// zeus.md §2.1: instant and average power probe the GPU scope first and fall back to the module
// scope (Grace Hopper reports the whole CPU+GPU module); memory power is POWER_AVERAGE with the
// memory scope (works on H100, not on A40).
constexpr std::array kPowerFields{
    PowerField{PowerDomain::kDeviceInstant,
               NVML_FI_DEV_POWER_INSTANT,
               "NVML_FI_DEV_POWER_INSTANT",
               {NVML_POWER_SCOPE_GPU, NVML_POWER_SCOPE_MODULE}},
    PowerField{PowerDomain::kDeviceAverage,
               NVML_FI_DEV_POWER_AVERAGE,
               "NVML_FI_DEV_POWER_AVERAGE",
               {NVML_POWER_SCOPE_GPU, NVML_POWER_SCOPE_MODULE}},
    PowerField{PowerDomain::kMemoryAverage,
               NVML_FI_DEV_POWER_AVERAGE,
               "NVML_FI_DEV_POWER_AVERAGE",
               {NVML_POWER_SCOPE_MEMORY, std::nullopt}},
};

const PowerField& power_field(PowerDomain domain) {
  for (const auto& f : kPowerFields)
    if (f.domain == domain) return f;
  return kPowerFields.front();  // unreachable: every domain has a row
}

/// Reads an nvmlFieldValue_t's value of any numeric type into `out`; false for an unknown type.
/// (A bool and an out-parameter rather than std::optional<double>: on the window path the
/// optional's flag byte went through memory and stalled store forwarding.)
inline bool field_number(const nvmlFieldValue_t& v, double& out) {
  switch (v.valueType) {
    case NVML_VALUE_TYPE_DOUBLE: out = v.value.dVal; return true;
    case NVML_VALUE_TYPE_UNSIGNED_INT: out = static_cast<double>(v.value.uiVal); return true;
    case NVML_VALUE_TYPE_UNSIGNED_LONG: out = static_cast<double>(v.value.ulVal); return true;
    case NVML_VALUE_TYPE_UNSIGNED_LONG_LONG: out = static_cast<double>(v.value.ullVal); return true;
    case NVML_VALUE_TYPE_SIGNED_LONG_LONG: out = static_cast<double>(v.value.sllVal); return true;
    case NVML_VALUE_TYPE_SIGNED_INT: out = static_cast<double>(v.value.siVal); return true;
    case NVML_VALUE_TYPE_UNSIGNED_SHORT: out = static_cast<double>(v.value.usVal); return true;
    default: return false;
  }
}

Result<unsigned> to_uint(double value, std::string_view unit, std::string_view what, const std::string& label) {
  if (!std::isfinite(value) || value < 0.0 || value > static_cast<double>(std::numeric_limits<unsigned>::max())) {
    return fail(ErrorCode::kInvalidArgument, label + ": " + std::string(what) + " " + std::to_string(value) + " " +
                                                 std::string(unit) + " is not a value NVML can take");
  }
  return static_cast<unsigned>(std::llround(value));
}

}  // namespace

NvmlGpu::NvmlGpu(std::shared_ptr<const Library> library, nvmlDevice_t device, unsigned index, unsigned physical_index)
    : library_(std::move(library)),
      nvml_(library_->sym()),
      device_(device),
      index_(index),
      physical_index_(physical_index) {}

Result<std::shared_ptr<NvmlGpu>> NvmlGpu::create(std::shared_ptr<const Library> library, nvmlDevice_t device,
                                                 unsigned index, unsigned physical_index) {
  std::shared_ptr<NvmlGpu> gpu(new NvmlGpu(std::move(library), device, index, physical_index));
  const Symbols& nvml = gpu->nvml_;

  if (nvml.nvmlDeviceGetName != nullptr) {
    std::array<char, NVML_DEVICE_NAME_V2_BUFFER_SIZE> buffer{};
    const nvmlReturn_t rc = nvml.nvmlDeviceGetName(device, buffer.data(), buffer.size());
    if (rc == NVML_SUCCESS) {
      buffer.back() = '\0';
      gpu->name_ = buffer.data();
    } else if (rc != NVML_ERROR_NOT_SUPPORTED) {
      return fail(gpu->error(rc, "nvmlDeviceGetName"));
    }
  }
  if (gpu->name_.empty()) gpu->name_ = "NVIDIA GPU";  // name unknown to this library

  if (nvml.nvmlDeviceGetUUID != nullptr) {
    std::array<char, NVML_DEVICE_UUID_V2_BUFFER_SIZE> buffer{};
    const nvmlReturn_t rc = nvml.nvmlDeviceGetUUID(device, buffer.data(), buffer.size());
    if (rc == NVML_SUCCESS) {
      buffer.back() = '\0';
      gpu->uuid_ = buffer.data();
    } else if (rc != NVML_ERROR_NOT_SUPPORTED) {
      return fail(gpu->error(rc, "nvmlDeviceGetUUID"));
    }
  }  // else the UUID stays empty: unknown

  if (nvml.nvmlDeviceGetPciInfo_v3 != nullptr) {
    nvmlPciInfo_t pci{};
    if (nvml.nvmlDeviceGetPciInfo_v3(device, &pci) == NVML_SUCCESS) {
      // zeusd's form (lowercase domain:bus:device.function), what Linux sysfs names the device.
      std::array<char, 32> buffer{};
      std::snprintf(buffer.data(), buffer.size(), "%04x:%02x:%02x.0", pci.domain, pci.bus & 0xffu, pci.device & 0x1fu);
      gpu->pci_address_ = buffer.data();
    }
  }  // else unknown (empty)

  if (nvml.nvmlDeviceGetArchitecture != nullptr) {
    nvmlDeviceArchitecture_t arch = NVML_DEVICE_ARCH_UNKNOWN;
    if (nvml.nvmlDeviceGetArchitecture(device, &arch) == NVML_SUCCESS) {
      gpu->architecture_id_ = arch;
      gpu->architecture_ = std::string(architecture_name(arch));
    }
  }

  gpu->probe();
  return gpu;
}

void NvmlGpu::probe() {
  GpuCapabilities& caps = capabilities_;

  // Energy counter: Volta and newer (Zeus: arch >= NVML_DEVICE_ARCH_VOLTA; pre-Volta answers
  // NOT_SUPPORTED), the symbol exported, and one read that succeeds. An unknown architecture is
  // left to the probe read.
  unsigned long long energy_mj = 0;
  caps.energy_counter = (architecture_id_ == NVML_DEVICE_ARCH_UNKNOWN || architecture_id_ >= NVML_DEVICE_ARCH_VOLTA) &&
                        nvml_.nvmlDeviceGetTotalEnergyConsumption != nullptr &&
                        nvml_.nvmlDeviceGetTotalEnergyConsumption(device_, &energy_mj) == NVML_SUCCESS;
  // Nominal update periods per architecture (NVML documents none; hardware.md §4.1 has the
  // sources): the energy counter about every 100 ms on every architecture (ml.energy; Zeus "as
  // slow as 10 Hz"); instant power every ~100 ms on Ampere and newer (Yang et al., A100/H100),
  // every ~20 ms on the older ones studied (Lang & Rünger). They are priors: a device's real
  // periods drift and jitter, and measure/ learns them from the readings (CounterHistory,
  // infer_update_period).
  if (caps.energy_counter) caps.energy_update_period = std::chrono::milliseconds(100);
  if (architecture_id_ != NVML_DEVICE_ARCH_UNKNOWN)
    caps.power_update_period = std::chrono::milliseconds(architecture_id_ >= NVML_DEVICE_ARCH_AMPERE ? 100 : 20);

  // Readings carry the field values' timestamps when every field they read (the counter's, each
  // domain's) answered with one at discovery; else no reading carries one, so that
  // `reading_timestamps` describes every reading (energy_reading falls back to the plain counter
  // call on a driver without the counter field).
  bool stamped = nvml_.nvmlDeviceGetFieldValues != nullptr;
  bool any_stamped = false;
  if (stamped && caps.energy_counter) {
    nvmlFieldValue_t value{};
    value.fieldId = NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION;
    value.scopeId = NVML_POWER_SCOPE_GPU;
    double number = 0.0;
    stamped = nvml_.nvmlDeviceGetFieldValues(device_, 1, &value) == NVML_SUCCESS && value.nvmlReturn == NVML_SUCCESS &&
              field_number(value, number) && value.timestamp > 0;
    any_stamped = stamped;
  }

  // Power domains: once per domain, the first scope that answers SUCCESS wins.
  if (nvml_.nvmlDeviceGetFieldValues != nullptr) {
    for (const auto& field : kPowerFields) {
      for (const auto& scope : field.scopes) {
        if (!scope) continue;
        nvmlFieldValue_t value{};
        value.fieldId = field.field_id;
        value.scopeId = *scope;
        double number = 0.0;
        if (nvml_.nvmlDeviceGetFieldValues(device_, 1, &value) == NVML_SUCCESS && value.nvmlReturn == NVML_SUCCESS &&
            field_number(value, number)) {
          power_scope_[domain_slot(field.domain)] = *scope;
          caps.power_domains.push_back(field.domain);
          stamped = stamped && value.timestamp > 0;
          any_stamped = any_stamped || value.timestamp > 0;
          break;
        }
      }
    }
  }

  unsigned limit_mw = 0;
  caps.power_limit = nvml_.nvmlDeviceGetPowerManagementLimit != nullptr &&
                     nvml_.nvmlDeviceGetPowerManagementLimit(device_, &limit_mw) == NVML_SUCCESS;
  auto memory_clocks = supported_memory_clocks();
  caps.clocks = memory_clocks.has_value() && !memory_clocks->empty();
  nvmlEnableState_t mode = NVML_FEATURE_DISABLED;
  caps.persistence_mode = nvml_.nvmlDeviceGetPersistenceMode != nullptr &&
                          nvml_.nvmlDeviceGetPersistenceMode(device_, &mode) == NVML_SUCCESS;
  caps.default_power_limit = default_power_limit().has_value();
  caps.temperature = temperature().has_value();
  caps.reading_timestamps = stamped && any_stamped;
  caps.running_processes = running_processes().has_value();
  // Process utilization: NOT_FOUND (nothing newer than now) and INSUFFICIENT_SIZE both mean the
  // call works; NOT_SUPPORTED (MIG enabled, before Maxwell) does not.
  caps.process_utilization = process_utilization(std::chrono::microseconds(0)).has_value();
  // NVML's setters need root or CAP_SYS_ADMIN (vendor-abi.md §1.6).
  caps.setters_need_privilege = true;
}

std::string NvmlGpu::label() const {
  return "GPU " + std::to_string(index_) + " (NVML index " + std::to_string(physical_index_) + ")";
}

Error NvmlGpu::error(nvmlReturn_t code, std::string_view what) const {
  return library_->error(code, what, ErrorContext{.index = index_, .physical_index = physical_index_});
}

Error NvmlGpu::not_exported(std::string_view symbol) const {
  return Error{ErrorCode::kNotSupported, label() + ": not supported: the NVML library " + library_->path() +
                                             " does not export " + std::string(symbol)};
}

Result<unsigned> NvmlGpu::to_mw(MilliWatts value, std::string_view what) const {
  return to_uint(value.value(), "mW", what, label());
}
Result<unsigned> NvmlGpu::to_mhz(Megahertz value, std::string_view what) const {
  return to_uint(value.value(), "MHz", what, label());
}

Result<MilliJoules> NvmlGpu::total_energy() {
  if (!capabilities_.energy_counter) {
    return fail(ErrorCode::kNotSupported,
                label() + " (" + name_ + ", " + architecture_ +
                    "): no energy counter; NVML has one on Volta and newer GPUs (read power instead)");
  }
  unsigned long long energy_mj = 0;
  const nvmlReturn_t rc = nvml_.nvmlDeviceGetTotalEnergyConsumption(device_, &energy_mj);
  if (rc != NVML_SUCCESS) return fail(error(rc, "nvmlDeviceGetTotalEnergyConsumption"));
  return MilliJoules(static_cast<double>(energy_mj));
}

Result<EnergyReading> NvmlGpu::energy_reading() {
  // One result object, returned from every path (NRVO): it is built in the caller's slot
  // instead of being assembled on the stack and copied, which stalled store forwarding on this
  // hot path (a window edge reads every GPU).
  Result<EnergyReading> out(tl::in_place);
  if (!capabilities_.energy_counter || nvml_.nvmlDeviceGetFieldValues == nullptr) {
    counter_reading(out);
    return out;
  }
  // One driver call for the counter, the time the driver last updated it (the field's
  // timestamp), and instant power, so a window edge can account for the counter's age.
  nvmlFieldValue_t values[2]{};
  values[0].fieldId = NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION;
  values[0].scopeId = NVML_POWER_SCOPE_GPU;
  const auto& instant_scope = power_scope_[domain_slot(PowerDomain::kDeviceInstant)];
  const int count = instant_scope ? 2 : 1;
  if (instant_scope) {
    values[1].fieldId = NVML_FI_DEV_POWER_INSTANT;
    values[1].scopeId = *instant_scope;
  }
  const nvmlReturn_t rc = nvml_.nvmlDeviceGetFieldValues(device_, count, values);
  double energy_mj = 0.0;
  if (rc != NVML_SUCCESS || values[0].nvmlReturn != NVML_SUCCESS || !field_number(values[0], energy_mj)) {
    // The field is not there on this driver: the plain counter call. Any other failure (a
    // timeout, an unknown error, a lost GPU) is the GPU's, and is reported as such: a second
    // call that happens to succeed would hide it from the caller, who counts and retries them.
    const nvmlReturn_t why = rc != NVML_SUCCESS ? rc : values[0].nvmlReturn;
    const bool absent = why == NVML_SUCCESS || why == NVML_ERROR_NOT_SUPPORTED || why == NVML_ERROR_INVALID_ARGUMENT ||
                        why == NVML_ERROR_FUNCTION_NOT_FOUND;
    if (!absent) {
      out = fail(error(why, "nvmlDeviceGetFieldValues(TOTAL_ENERGY_CONSUMPTION)"));
      return out;
    }
    counter_reading(out);
    return out;
  }
  out->energy = MilliJoules(energy_mj);
  if (capabilities_.reading_timestamps && values[0].timestamp > 0)
    out->updated_at.emplace(std::chrono::microseconds(values[0].timestamp));
  double mw = 0.0;
  if (count == 2 && values[1].nvmlReturn == NVML_SUCCESS && field_number(values[1], mw)) out->power.emplace(mw);
  return out;
}

void NvmlGpu::counter_reading(Result<EnergyReading>& out) {
  auto e = total_energy();
  if (e)
    out->energy = *e;
  else
    out = fail(e.error());
}

Result<PowerReading> NvmlGpu::read_power_field(unsigned field_id, unsigned scope, std::string_view field_name) {
  nvmlFieldValue_t value{};
  value.fieldId = field_id;
  value.scopeId = scope;
  const nvmlReturn_t rc = nvml_.nvmlDeviceGetFieldValues(device_, 1, &value);
  // Named only on error: the hot path (the power sampler) allocates nothing.
  auto what = [&] {
    return "nvmlDeviceGetFieldValues(" + std::string(field_name) + ", scope " + std::to_string(scope) + ")";
  };
  if (rc != NVML_SUCCESS) return fail(error(rc, what()));
  // The call succeeds when any field was filled; each field carries its own status.
  if (value.nvmlReturn != NVML_SUCCESS) return fail(error(value.nvmlReturn, what()));
  double mw = 0.0;
  if (!field_number(value, mw)) {
    return fail(ErrorCode::kDriverError, label() + ": " + what() + " returned a value of unknown type " +
                                             std::to_string(static_cast<int>(value.valueType)));
  }
  PowerReading reading{MilliWatts(mw), std::nullopt};
  if (capabilities_.reading_timestamps && value.timestamp > 0)
    reading.updated_at = std::chrono::microseconds(value.timestamp);
  return reading;
}

Result<MilliWatts> NvmlGpu::power(PowerDomain domain) {
  auto r = power_reading(domain);
  if (!r) return fail(r.error());
  return r->power;
}

Result<PowerReading> NvmlGpu::power_reading(PowerDomain domain) {
  const auto& field = power_field(domain);
  const auto& scope = power_scope_[domain_slot(domain)];
  if (!scope) {
    return fail(ErrorCode::kNotSupported, label() + " (" + name_ + "): " + std::string(to_string(domain)) +
                                              " power is not readable (nvmlDeviceGetFieldValues " +
                                              std::string(field.field_name) + " answered no scope at discovery)");
  }
  return read_power_field(field.field_id, *scope, field.field_name);
}

Result<MilliWatts> NvmlGpu::power_limit() {
  if (nvml_.nvmlDeviceGetPowerManagementLimit == nullptr)
    return fail(not_exported("nvmlDeviceGetPowerManagementLimit"));
  unsigned limit_mw = 0;
  const nvmlReturn_t rc = nvml_.nvmlDeviceGetPowerManagementLimit(device_, &limit_mw);
  if (rc != NVML_SUCCESS) return fail(error(rc, "nvmlDeviceGetPowerManagementLimit"));
  return MilliWatts(static_cast<double>(limit_mw));
}

Result<PowerLimitConstraints> NvmlGpu::power_limit_constraints() {
  if (nvml_.nvmlDeviceGetPowerManagementLimitConstraints == nullptr) {
    return fail(not_exported("nvmlDeviceGetPowerManagementLimitConstraints"));
  }
  unsigned min_mw = 0;
  unsigned max_mw = 0;
  const nvmlReturn_t rc = nvml_.nvmlDeviceGetPowerManagementLimitConstraints(device_, &min_mw, &max_mw);
  if (rc != NVML_SUCCESS) return fail(error(rc, "nvmlDeviceGetPowerManagementLimitConstraints"));
  return PowerLimitConstraints{MilliWatts(static_cast<double>(min_mw)), MilliWatts(static_cast<double>(max_mw))};
}

Result<MilliWatts> NvmlGpu::default_power_limit() {
  if (nvml_.nvmlDeviceGetPowerManagementDefaultLimit == nullptr) {
    return fail(not_exported("nvmlDeviceGetPowerManagementDefaultLimit"));
  }
  unsigned limit_mw = 0;
  const nvmlReturn_t rc = nvml_.nvmlDeviceGetPowerManagementDefaultLimit(device_, &limit_mw);
  if (rc != NVML_SUCCESS) return fail(error(rc, "nvmlDeviceGetPowerManagementDefaultLimit"));
  return MilliWatts(static_cast<double>(limit_mw));
}

Result<void> NvmlGpu::set_power_limit(MilliWatts limit) {
  if (nvml_.nvmlDeviceSetPowerManagementLimit == nullptr)
    return fail(not_exported("nvmlDeviceSetPowerManagementLimit"));
  auto limit_mw = to_mw(limit, "power limit");
  if (!limit_mw) return fail(limit_mw.error());
  // Like Zeus: no driver call (and no privilege needed) when the limit is already in place.
  unsigned current_mw = 0;
  if (nvml_.nvmlDeviceGetPowerManagementLimit != nullptr &&
      nvml_.nvmlDeviceGetPowerManagementLimit(device_, &current_mw) == NVML_SUCCESS && current_mw == *limit_mw) {
    return ok();
  }
  // Out of range is left to the driver, which answers INVALID_ARGUMENT and changes nothing.
  const nvmlReturn_t rc = nvml_.nvmlDeviceSetPowerManagementLimit(device_, *limit_mw);
  if (rc != NVML_SUCCESS) {
    Error e = error(rc, "nvmlDeviceSetPowerManagementLimit(" + std::to_string(*limit_mw) + " mW)");
    if (rc == NVML_ERROR_INVALID_ARGUMENT) e.message += "; see power_limit_constraints() for the settable range";
    return fail(std::move(e));
  }
  return ok();
}

Result<void> NvmlGpu::reset_power_limit() {
  auto def = default_power_limit();
  if (!def) return fail(def.error());
  return set_power_limit(*def);
}

Result<bool> NvmlGpu::persistence_mode() {
  if (nvml_.nvmlDeviceGetPersistenceMode == nullptr) return fail(not_exported("nvmlDeviceGetPersistenceMode"));
  nvmlEnableState_t mode = NVML_FEATURE_DISABLED;
  const nvmlReturn_t rc = nvml_.nvmlDeviceGetPersistenceMode(device_, &mode);
  if (rc != NVML_SUCCESS) return fail(error(rc, "nvmlDeviceGetPersistenceMode"));
  return mode == NVML_FEATURE_ENABLED;
}

Result<void> NvmlGpu::set_persistence_mode(bool enabled) {
  if (nvml_.nvmlDeviceSetPersistenceMode == nullptr) return fail(not_exported("nvmlDeviceSetPersistenceMode"));
  const nvmlEnableState_t wanted = enabled ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
  // Like Zeus: skip the privileged call when the mode is already set.
  nvmlEnableState_t current = NVML_FEATURE_DISABLED;
  if (nvml_.nvmlDeviceGetPersistenceMode != nullptr &&
      nvml_.nvmlDeviceGetPersistenceMode(device_, &current) == NVML_SUCCESS && current == wanted) {
    return ok();
  }
  const nvmlReturn_t rc = nvml_.nvmlDeviceSetPersistenceMode(device_, wanted);
  if (rc != NVML_SUCCESS) return fail(error(rc, "nvmlDeviceSetPersistenceMode"));
  return ok();
}

namespace {

/// Runs an NVML list query, growing the buffer on INSUFFICIENT_SIZE (the driver then reports the
/// count it needs in *count).
template <class Query>
nvmlReturn_t query_list(Query&& query, std::vector<unsigned>& out) {
  std::vector<unsigned> buffer(64);
  for (int attempt = 0; attempt < 8; ++attempt) {
    unsigned count = static_cast<unsigned>(buffer.size());
    const nvmlReturn_t rc = query(&count, buffer.data());
    if (rc == NVML_SUCCESS) {
      buffer.resize(std::min<std::size_t>(count, buffer.size()));
      out = std::move(buffer);
      return NVML_SUCCESS;
    }
    if (rc != NVML_ERROR_INSUFFICIENT_SIZE) return rc;
    buffer.resize(std::max<std::size_t>(count, buffer.size() * 2));
  }
  return NVML_ERROR_INSUFFICIENT_SIZE;
}

std::vector<Megahertz> to_megahertz(const std::vector<unsigned>& mhz) {
  std::vector<Megahertz> out;
  out.reserve(mhz.size());
  for (unsigned v : mhz) out.emplace_back(static_cast<double>(v));
  return out;
}

}  // namespace

Result<std::vector<Megahertz>> NvmlGpu::supported_memory_clocks() {
  if (nvml_.nvmlDeviceGetSupportedMemoryClocks == nullptr) {
    return fail(not_exported("nvmlDeviceGetSupportedMemoryClocks"));
  }
  std::vector<unsigned> mhz;
  const nvmlReturn_t rc =
      query_list([&](unsigned* count,
                     unsigned* clocks) { return nvml_.nvmlDeviceGetSupportedMemoryClocks(device_, count, clocks); },
                 mhz);
  if (rc != NVML_SUCCESS) return fail(error(rc, "nvmlDeviceGetSupportedMemoryClocks"));
  return to_megahertz(mhz);
}

Result<std::vector<Megahertz>> NvmlGpu::supported_graphics_clocks(Megahertz memory_clock) {
  if (nvml_.nvmlDeviceGetSupportedGraphicsClocks == nullptr) {
    return fail(not_exported("nvmlDeviceGetSupportedGraphicsClocks"));
  }
  auto memory_mhz = to_mhz(memory_clock, "memory clock");
  if (!memory_mhz) return fail(memory_mhz.error());
  std::vector<unsigned> mhz;
  const nvmlReturn_t rc = query_list(
      [&](unsigned* count, unsigned* clocks) {
        return nvml_.nvmlDeviceGetSupportedGraphicsClocks(device_, *memory_mhz, count, clocks);
      },
      mhz);
  if (rc != NVML_SUCCESS) {
    Error e = error(rc, "nvmlDeviceGetSupportedGraphicsClocks(" + std::to_string(*memory_mhz) + " MHz)");
    if (rc == NVML_ERROR_NOT_FOUND) e.message += "; that memory clock is not one of supported_memory_clocks()";
    return fail(std::move(e));
  }
  return to_megahertz(mhz);
}

Result<void> NvmlGpu::set_gpu_locked_clocks(Megahertz min, Megahertz max) {
  if (nvml_.nvmlDeviceSetGpuLockedClocks == nullptr) return fail(not_exported("nvmlDeviceSetGpuLockedClocks"));
  auto min_mhz = to_mhz(min, "minimum GPU clock");
  if (!min_mhz) return fail(min_mhz.error());
  auto max_mhz = to_mhz(max, "maximum GPU clock");
  if (!max_mhz) return fail(max_mhz.error());
  const nvmlReturn_t rc = nvml_.nvmlDeviceSetGpuLockedClocks(device_, *min_mhz, *max_mhz);
  if (rc != NVML_SUCCESS) return fail(error(rc, "nvmlDeviceSetGpuLockedClocks"));
  return ok();
}

Result<void> NvmlGpu::reset_gpu_locked_clocks() {
  if (nvml_.nvmlDeviceResetGpuLockedClocks == nullptr) return fail(not_exported("nvmlDeviceResetGpuLockedClocks"));
  const nvmlReturn_t rc = nvml_.nvmlDeviceResetGpuLockedClocks(device_);
  if (rc != NVML_SUCCESS) return fail(error(rc, "nvmlDeviceResetGpuLockedClocks"));
  return ok();
}

Result<void> NvmlGpu::set_memory_locked_clocks(Megahertz min, Megahertz max) {
  if (nvml_.nvmlDeviceSetMemoryLockedClocks == nullptr) return fail(not_exported("nvmlDeviceSetMemoryLockedClocks"));
  auto min_mhz = to_mhz(min, "minimum memory clock");
  if (!min_mhz) return fail(min_mhz.error());
  auto max_mhz = to_mhz(max, "maximum memory clock");
  if (!max_mhz) return fail(max_mhz.error());
  const nvmlReturn_t rc = nvml_.nvmlDeviceSetMemoryLockedClocks(device_, *min_mhz, *max_mhz);
  if (rc != NVML_SUCCESS) return fail(error(rc, "nvmlDeviceSetMemoryLockedClocks"));
  return ok();
}

Result<void> NvmlGpu::reset_memory_locked_clocks() {
  if (nvml_.nvmlDeviceResetMemoryLockedClocks == nullptr) {
    return fail(not_exported("nvmlDeviceResetMemoryLockedClocks"));
  }
  const nvmlReturn_t rc = nvml_.nvmlDeviceResetMemoryLockedClocks(device_);
  if (rc != NVML_SUCCESS) return fail(error(rc, "nvmlDeviceResetMemoryLockedClocks"));
  return ok();
}

Result<int> NvmlGpu::temperature() {
  if (nvml_.nvmlDeviceGetTemperatureV != nullptr) {
    nvmlTemperature_t reading{};
    reading.version = nvmlTemperature_v1;
    reading.sensorType = NVML_TEMPERATURE_GPU;
    const nvmlReturn_t rc = nvml_.nvmlDeviceGetTemperatureV(device_, &reading);
    if (rc == NVML_SUCCESS) return reading.temperature;
    // A driver that exports the symbol but not our struct version falls back to the old call.
    if (rc != NVML_ERROR_ARGUMENT_VERSION_MISMATCH || nvml_.nvmlDeviceGetTemperature == nullptr) {
      return fail(error(rc, "nvmlDeviceGetTemperatureV"));
    }
  }
  if (nvml_.nvmlDeviceGetTemperature == nullptr) return fail(not_exported("nvmlDeviceGetTemperature"));
  unsigned celsius = 0;
  const nvmlReturn_t rc = nvml_.nvmlDeviceGetTemperature(device_, NVML_TEMPERATURE_GPU, &celsius);
  if (rc != NVML_SUCCESS) return fail(error(rc, "nvmlDeviceGetTemperature"));
  return static_cast<int>(celsius);
}

std::optional<bool> NvmlGpu::mig_enabled() const {
  if (nvml_.nvmlDeviceGetMigMode == nullptr) return std::nullopt;
  unsigned current = 0, pending = 0;
  if (nvml_.nvmlDeviceGetMigMode(device_, &current, &pending) != NVML_SUCCESS) return std::nullopt;
  return current == NVML_DEVICE_MIG_ENABLE;
}

Result<std::vector<GpuProcess>> NvmlGpu::running_processes() {
  if (nvml_.nvmlDeviceGetComputeRunningProcesses_v3 == nullptr)
    return fail(not_exported("nvmlDeviceGetComputeRunningProcesses_v3"));
  // The count protocol (vendor-abi.md §1.5): ask with 0; INSUFFICIENT_SIZE gives the count. The
  // list is dynamic, so allocate slack and retry if it grew in between.
  // The stride hazard (vendor-abi.md §1.3): drivers 535.43-535.86 write 32-byte entries into what
  // the header calls 24-byte ones. The buffer has room for 32-byte entries and is filled with
  // 0xAA first; bytes written past n·24 tell a 32-byte stride (nvitop's probe).
  constexpr std::size_t kWide = 32;
  constexpr unsigned char kFill = 0xAA;
  unsigned count = 0;
  nvmlReturn_t rc = nvml_.nvmlDeviceGetComputeRunningProcesses_v3(device_, &count, nullptr);
  std::vector<unsigned char> buf;
  unsigned capacity = 0;
  for (int attempt = 0; rc == NVML_ERROR_INSUFFICIENT_SIZE && attempt < 4; ++attempt) {
    capacity = count + 4;
    buf.assign(static_cast<std::size_t>(capacity) * kWide, kFill);
    count = capacity;
    rc = nvml_.nvmlDeviceGetComputeRunningProcesses_v3(device_, &count,
                                                       reinterpret_cast<nvmlProcessInfo_t*>(buf.data()));
  }
  if (rc != NVML_SUCCESS) return fail(error(rc, "nvmlDeviceGetComputeRunningProcesses_v3"));
  std::vector<GpuProcess> out;
  if (buf.empty() || count == 0) return out;
  count = std::min(count, capacity);
  std::size_t written = buf.size();
  while (written > 0 && buf[written - 1] == kFill) --written;
  const std::size_t stride = written > count * sizeof(nvmlProcessInfo_t) ? kWide : sizeof(nvmlProcessInfo_t);
  for (unsigned i = 0; i < count; ++i) {
    nvmlProcessInfo_t p;
    std::memcpy(&p, buf.data() + i * stride, sizeof p);
    GpuProcess g;
    g.pid = p.pid;
    if (p.usedGpuMemory != NVML_VALUE_NOT_AVAILABLE_ULL) g.used_memory_bytes = p.usedGpuMemory;
    if (p.gpuInstanceId != NVML_INSTANCE_ID_NONE) g.gpu_instance = p.gpuInstanceId;
    if (p.computeInstanceId != NVML_INSTANCE_ID_NONE) g.compute_instance = p.computeInstanceId;
    out.push_back(g);
  }
  return out;
}

Result<std::vector<ProcessUtilizationSample>> NvmlGpu::process_utilization(std::chrono::microseconds since) {
  if (nvml_.nvmlDeviceGetProcessUtilization == nullptr) return fail(not_exported("nvmlDeviceGetProcessUtilization"));
  if (since.count() < 0) return fail(ErrorCode::kInvalidArgument, label() + ": process_utilization: since < 0");
  const auto last_seen = static_cast<unsigned long long>(since.count());
  auto mig_error = [&](nvmlReturn_t rc) -> Error {
    if (rc == NVML_ERROR_NOT_SUPPORTED && mig_enabled().value_or(false))
      return Error{ErrorCode::kNotSupported,
                   label() +
                       ": per-process utilization is not available: MIG is enabled on this GPU (NVML does not "
                       "report it on MIG-enabled GPUs), so its energy cannot be attributed to processes"};
    return error(rc, "nvmlDeviceGetProcessUtilization");
  };
  // First call with no buffer learns the count (INSUFFICIENT_SIZE); NOT_FOUND: nothing newer.
  unsigned count = 0;
  nvmlReturn_t rc = nvml_.nvmlDeviceGetProcessUtilization(device_, nullptr, &count, last_seen);
  std::vector<nvmlProcessUtilizationSample_t> samples;
  for (int attempt = 0; rc == NVML_ERROR_INSUFFICIENT_SIZE && attempt < 4; ++attempt) {
    samples.assign(count + 8, nvmlProcessUtilizationSample_t{});
    count = static_cast<unsigned>(samples.size());
    rc = nvml_.nvmlDeviceGetProcessUtilization(device_, samples.data(), &count, last_seen);
  }
  if (rc == NVML_ERROR_NOT_FOUND) return std::vector<ProcessUtilizationSample>{};
  if (rc == NVML_SUCCESS && samples.empty()) return std::vector<ProcessUtilizationSample>{};  // count 0
  if (rc != NVML_SUCCESS) return fail(mig_error(rc));
  std::vector<ProcessUtilizationSample> out;
  for (unsigned i = 0; i < count && i < samples.size(); ++i) {
    const auto& s = samples[i];
    out.push_back({s.pid, std::chrono::microseconds(static_cast<std::int64_t>(s.timeStamp)), s.smUtil, s.memUtil,
                   s.encUtil, s.decUtil});
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.timestamp < b.timestamp; });
  return out;
}

}  // namespace erg::nvml
