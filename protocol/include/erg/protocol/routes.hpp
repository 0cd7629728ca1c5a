#pragma once
/// The routes of ergd (zeusd v0.5 API plus /metrics and /attribution), their methods and API groups.

#include <optional>
#include <span>
#include <string_view>

#include "erg/core/result.hpp"

namespace erg::protocol {

/// zeusd's API groups. A route belongs to at most one; /discover, /time, /auth/whoami and
/// /metrics belong to none.
enum class ApiGroup { kGpuControl, kGpuRead, kCpuRead };
inline constexpr ApiGroup kAllApiGroups[] = {ApiGroup::kGpuControl, ApiGroup::kGpuRead, ApiGroup::kCpuRead};

/// "gpu-control", "gpu-read", "cpu-read".
std::string_view to_string(ApiGroup group);
/// Parses one group name; kInvalidArgument names the valid ones.
Result<ApiGroup> parse_api_group(std::string_view name);

enum class Route {
  kDiscover,
  kTime,
  kWhoami,
  kMetrics,
  kSetPowerLimit,
  kSetPersistenceMode,
  kSetGpuLockedClocks,
  kResetGpuLockedClocks,
  kSetMemLockedClocks,
  kResetMemLockedClocks,
  kResetLockedClocks,
  kGpuGetCumulativeEnergy,
  kGpuGetPower,
  kGpuGetPowerLimit,
  kGpuGetPowerLimitConstraints,
  kGpuGetPersistenceMode,
  kGpuStreamPower,
  kCpuGetCumulativeEnergy,
  kCpuGetPower,
  kCpuStreamPower,
  kAttribution,
};

struct RouteInfo {
  Route route;
  std::string_view method;  ///< "GET" or "POST".
  std::string_view path;
  std::optional<ApiGroup> group;
  /// Query parameters the route accepts; any other → 400.
  std::span<const std::string_view> params;
  /// Of `params`, those that must be present.
  std::span<const std::string_view> required;
};

/// Every route, in a fixed order.
std::span<const RouteInfo> all_routes();
/// The route at `path` (any method), or nullptr.
const RouteInfo* find_route(std::string_view path);
/// The route's info (never null).
const RouteInfo& route_info(Route route);

}  // namespace erg::protocol
