#include "erg/protocol/routes.hpp"

#include <array>
#include <string>

namespace erg::protocol {
namespace {

using P = std::string_view;
constexpr P kNone[] = {""};
constexpr P kGpuIds[] = {"gpu_ids"};
constexpr P kCpuIds[] = {"cpu_ids"};
constexpr P kSetPowerLimit[] = {"gpu_ids", "power_limit_mw", "block"};
constexpr P kSetPersistence[] = {"gpu_ids", "enabled", "block"};
constexpr P kSetClocks[] = {"gpu_ids", "min_clock_mhz", "max_clock_mhz", "block"};
constexpr P kReset[] = {"gpu_ids", "block"};
constexpr P kCpuEnergy[] = {"cpu_ids", "cpu", "dram"};
constexpr P kCpuEnergyRequired[] = {"cpu", "dram"};
constexpr P kAttribution[] = {"gpu_ids", "since_ms"};

constexpr std::span<const P> none() { return std::span<const P>(kNone, 0); }

constexpr std::array<RouteInfo, 21> kRoutes = {{
    {Route::kDiscover, "GET", "/discover", std::nullopt, none(), none()},
    {Route::kTime, "GET", "/time", std::nullopt, none(), none()},
    {Route::kWhoami, "GET", "/auth/whoami", std::nullopt, none(), none()},
    {Route::kMetrics, "GET", "/metrics", std::nullopt, none(), none()},
    {Route::kSetPowerLimit, "POST", "/gpu/set_power_limit", ApiGroup::kGpuControl, kSetPowerLimit, kSetPowerLimit},
    {Route::kSetPersistenceMode, "POST", "/gpu/set_persistence_mode", ApiGroup::kGpuControl, kSetPersistence,
     kSetPersistence},
    {Route::kSetGpuLockedClocks, "POST", "/gpu/set_gpu_locked_clocks", ApiGroup::kGpuControl, kSetClocks, kSetClocks},
    {Route::kResetGpuLockedClocks, "POST", "/gpu/reset_gpu_locked_clocks", ApiGroup::kGpuControl, kReset, kReset},
    {Route::kSetMemLockedClocks, "POST", "/gpu/set_mem_locked_clocks", ApiGroup::kGpuControl, kSetClocks, kSetClocks},
    {Route::kResetMemLockedClocks, "POST", "/gpu/reset_mem_locked_clocks", ApiGroup::kGpuControl, kReset, kReset},
    {Route::kResetLockedClocks, "POST", "/gpu/reset_locked_clocks", ApiGroup::kGpuControl, kReset, kReset},
    {Route::kGpuGetCumulativeEnergy, "GET", "/gpu/get_cumulative_energy", ApiGroup::kGpuRead, kGpuIds, none()},
    {Route::kGpuGetPower, "GET", "/gpu/get_power", ApiGroup::kGpuRead, kGpuIds, none()},
    {Route::kGpuGetPowerLimit, "GET", "/gpu/get_power_limit", ApiGroup::kGpuRead, kGpuIds, none()},
    {Route::kGpuGetPowerLimitConstraints, "GET", "/gpu/get_power_limit_constraints", ApiGroup::kGpuRead, kGpuIds,
     none()},
    {Route::kGpuGetPersistenceMode, "GET", "/gpu/get_persistence_mode", ApiGroup::kGpuRead, kGpuIds, none()},
    {Route::kGpuStreamPower, "GET", "/gpu/stream_power", ApiGroup::kGpuRead, kGpuIds, none()},
    {Route::kCpuGetCumulativeEnergy, "GET", "/cpu/get_cumulative_energy", ApiGroup::kCpuRead, kCpuEnergy,
     kCpuEnergyRequired},
    {Route::kCpuGetPower, "GET", "/cpu/get_power", ApiGroup::kCpuRead, kCpuIds, none()},
    {Route::kCpuStreamPower, "GET", "/cpu/stream_power", ApiGroup::kCpuRead, kCpuIds, none()},
    {Route::kAttribution, "GET", "/attribution", ApiGroup::kGpuRead, kAttribution, none()},
}};

}  // namespace

std::string_view to_string(ApiGroup group) {
  switch (group) {
    case ApiGroup::kGpuControl: return "gpu-control";
    case ApiGroup::kGpuRead: return "gpu-read";
    case ApiGroup::kCpuRead: return "cpu-read";
  }
  return "unknown";
}

Result<ApiGroup> parse_api_group(std::string_view name) {
  for (ApiGroup g : kAllApiGroups)
    if (to_string(g) == name) return g;
  return fail(ErrorCode::kInvalidArgument,
              "unknown API group '" + std::string(name) + "' (expected gpu-control, gpu-read or cpu-read)");
}

std::span<const RouteInfo> all_routes() { return kRoutes; }

const RouteInfo* find_route(std::string_view path) {
  for (const auto& r : kRoutes)
    if (r.path == path) return &r;
  return nullptr;
}

const RouteInfo& route_info(Route route) { return kRoutes[static_cast<std::size_t>(route)]; }

}  // namespace erg::protocol
