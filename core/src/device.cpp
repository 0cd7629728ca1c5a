#include "erg/core/device.hpp"

namespace erg {

std::string_view to_string(GpuVendor vendor) {
  switch (vendor) {
    case GpuVendor::kNvidia: return "nvidia";
    case GpuVendor::kAmd: return "amd";
  }
  return "unknown";
}

std::string_view to_string(PowerDomain domain) {
  switch (domain) {
    case PowerDomain::kDeviceInstant: return "device_instant";
    case PowerDomain::kDeviceAverage: return "device_average";
    case PowerDomain::kMemoryAverage: return "memory_average";
  }
  return "unknown";
}

Result<PowerDomain> parse_power_domain(std::string_view name) {
  if (name == "device_instant") return PowerDomain::kDeviceInstant;
  if (name == "device_average") return PowerDomain::kDeviceAverage;
  if (name == "memory_average") return PowerDomain::kMemoryAverage;
  return fail(ErrorCode::kInvalidArgument, "unknown power domain '" + std::string(name) +
                                               "' (expected device_instant, device_average or memory_average)");
}

}  // namespace erg

namespace erg {

std::string_view to_string(RailKind kind) {
  switch (kind) {
    case RailKind::kCpu: return "cpu";
    case RailKind::kGpu: return "gpu";
    case RailKind::kCpuGpu: return "cpu_gpu";
    case RailKind::kTotal: return "total";
    case RailKind::kOther: return "other";
  }
  return "other";
}

}  // namespace erg
