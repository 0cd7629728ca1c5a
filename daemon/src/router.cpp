#include "router.hpp"

#include "cpu_routes.hpp"
#include "discovery_routes.hpp"
#include "gpu_routes.hpp"
#include "metrics_routes.hpp"
#include "replies.hpp"

namespace erg::daemon {

using protocol::ApiGroup;
using protocol::Route;

Reply Router::dispatch(const protocol::HttpRequest& request, const Peer& peer) {
  try {
    const protocol::RouteInfo* route = protocol::find_route(request.path);
    if (route == nullptr) return empty_reply(404);
    // A disabled API group's routes do not exist, whatever the method (zeusd registers none of
    // them); likewise /auth/* on a daemon without tokens. Before the method and before auth.
    if (route->group && config_.enabled.count(*route->group) == 0) return empty_reply(404);
    if (route->route == Route::kWhoami && signing_key_.empty()) return empty_reply(404);
    if (request.method != route->method) {
      Reply r = empty_reply(405);
      r.response.headers.emplace_back("Allow", std::string(route->method));
      return r;
    }
    std::optional<TokenClaims> claims;
    if (auto refused = check_access(*route, request, peer, claims)) return std::move(*refused);
    auto query = protocol::Query::parse(request.query, route->params, route->required);
    if (!query) return text_reply(400, query.error().message);
    return this->route(*route, request, *query, claims, peer);
  } catch (const std::exception& e) {
    return error_reply(500, std::string("internal error: ") + e.what());
  }
}

std::optional<Reply> Router::refuse_group(ApiGroup group, const protocol::HttpRequest& request, const Peer& peer,
                                          std::optional<TokenClaims>& claims) const {
  const bool listed = config_.allow_uid.count(group) != 0 || config_.allow_gid.count(group) != 0;
  // Bearer tokens on TCP when a signing key is configured: the token's scopes decide.
  if (!peer.unix_socket && !signing_key_.empty()) {
    auto unauthorized = [](std::string_view message) {
      Reply r = error_reply(401, message);
      r.response.headers.emplace_back("WWW-Authenticate", "Bearer realm=\"zeusd\"");
      return r;
    };
    auto h = request.header("Authorization");
    if (!h || h->size() < 7 || h->substr(0, 7) != "Bearer ") return unauthorized("missing bearer token");
    auto c = verify_token(std::string(h->substr(7)), signing_key_);
    if (!c) return unauthorized(c.error().message);
    const auto name = protocol::to_string(group);
    bool granted = false;
    for (const auto& s : c->scopes) granted = granted || s == name;
    if (!granted) return error_reply(403, "token lacks scope " + std::string(name));
    claims = std::move(*c);
    return std::nullopt;
  }
  // TCP without tokens (--tcp-insecure): a TCP peer has no uid, so it is admitted only to groups
  // without allow lists (as every Unix-socket peer is to those).
  if (!peer.unix_socket) {
    if (!listed) return std::nullopt;
    return error_reply(403, "API group " + std::string(protocol::to_string(group)) +
                                " is limited to --allow-uid/--allow-gid peers; a TCP peer has no uid (use the Unix "
                                "socket, or TCP with --signing-key-path and a token)");
  }
  // Unix socket: the peer's uid/gid against the group's allow lists (root always passes).
  if (!listed || !peer.uid || *peer.uid == 0) return std::nullopt;
  auto u = config_.allow_uid.find(group);
  auto gg = config_.allow_gid.find(group);
  const bool allowed = (u != config_.allow_uid.end() && u->second.count(*peer.uid)) ||
                       (gg != config_.allow_gid.end() && peer.gid && gg->second.count(*peer.gid));
  if (allowed) return std::nullopt;
  return error_reply(403, "uid " + std::to_string(*peer.uid) + " is not allowed to use API group " +
                              std::string(protocol::to_string(group)) + " (see --allow-uid/--allow-gid)");
}

std::optional<Reply> Router::check_access(const protocol::RouteInfo& route, const protocol::HttpRequest& request,
                                          const Peer& peer, std::optional<TokenClaims>& claims) const {
  if (route.group) return refuse_group(*route.group, request, peer, claims);
  // /auth/whoami: a valid token of any scope.
  if (route.route == Route::kWhoami && !peer.unix_socket && !signing_key_.empty()) {
    auto h = request.header("Authorization");
    if (!h || h->size() < 7 || h->substr(0, 7) != "Bearer ") {
      Reply r = error_reply(401, "missing bearer token");
      r.response.headers.emplace_back("WWW-Authenticate", "Bearer realm=\"zeusd\"");
      return r;
    }
    auto c = verify_token(std::string(h->substr(7)), signing_key_);
    if (!c) {
      Reply r = error_reply(401, c.error().message);
      r.response.headers.emplace_back("WWW-Authenticate", "Bearer realm=\"zeusd\"");
      return r;
    }
    claims = std::move(*c);
  }
  // /metrics: each peer sees the series of the read groups it may use (metrics_view).
  return std::nullopt;
}

Reply Router::metrics_reply(const protocol::HttpRequest& request, const Peer& peer) const {
  const MetricsView view = metrics_view(request, peer);
  if (view.gpu || view.cpu) return metrics(exposition_, view);
  // Neither: the read group's own refusal when it asks for a token (401), else 403.
  for (ApiGroup g : {ApiGroup::kGpuRead, ApiGroup::kCpuRead}) {
    std::optional<TokenClaims> unused;
    if (config_.enabled.count(g) == 0) continue;
    if (auto refused = refuse_group(g, request, peer, unused); refused && refused->response.status == 401)
      return std::move(*refused);
  }
  return error_reply(403,
                     "/metrics shows the series of the gpu-read and cpu-read groups a peer may use; this peer may use "
                     "neither");
}

MetricsView Router::metrics_view(const protocol::HttpRequest& request, const Peer& peer) const {
  auto may = [&](ApiGroup g) {
    if (config_.enabled.count(g) == 0) return false;
    std::optional<TokenClaims> unused;
    return !refuse_group(g, request, peer, unused).has_value();
  };
  return MetricsView{may(ApiGroup::kGpuRead), may(ApiGroup::kCpuRead)};
}

Reply Router::route(const protocol::RouteInfo& route, const protocol::HttpRequest& request, const protocol::Query& q,
                    const std::optional<TokenClaims>& claims, const Peer& peer) {
  // Every route by name, no default: -Wswitch flags a route added to the table without a handler.
  switch (route.route) {
    case Route::kDiscover: return discover(devices_, config_, !signing_key_.empty());
    case Route::kTime: return server_time();
    case Route::kWhoami: return whoami(claims);
    case Route::kMetrics: return metrics_reply(request, peer);
    case Route::kSetPowerLimit: return gpu_set_power_limit(devices_, q, peer, restorer_);
    case Route::kSetPersistenceMode: return gpu_set_persistence_mode(devices_, q);
    case Route::kSetGpuLockedClocks: return gpu_set_gpu_locked_clocks(devices_, q, peer, restorer_);
    case Route::kResetGpuLockedClocks: return gpu_reset_gpu_locked_clocks(devices_, q, restorer_);
    case Route::kSetMemLockedClocks: return gpu_set_mem_locked_clocks(devices_, q, peer, restorer_);
    case Route::kResetMemLockedClocks: return gpu_reset_mem_locked_clocks(devices_, q, restorer_);
    case Route::kResetLockedClocks: return gpu_reset_locked_clocks(devices_, q, restorer_);
    case Route::kGpuGetCumulativeEnergy: return gpu_get_cumulative_energy(devices_, q);
    case Route::kGpuGetPower: return gpu_get_power(devices_, q);
    case Route::kGpuGetPowerLimit: return gpu_get_power_limit(devices_, q);
    case Route::kGpuGetPowerLimitConstraints: return gpu_get_power_limit_constraints(devices_, q);
    case Route::kGpuGetPersistenceMode: return gpu_get_persistence_mode(devices_, q);
    case Route::kGpuStreamPower: return streams_.gpu_stream_power(q);
    case Route::kCpuGetCumulativeEnergy: return cpu_get_cumulative_energy(devices_, q);
    case Route::kCpuGetPower: return cpu_get_power(devices_, q, config_.cpu_power_poll_hz);
    case Route::kCpuStreamPower: return streams_.cpu_stream_power(q);
    case Route::kAttribution:
      if (attribution_ == nullptr)
        return error_reply(503, "per-process attribution is off in this ergd (--attribution-poll-s 0)");
      return attribution(*attribution_, config_, q, peer);
  }
  return error_reply(500, "internal error: route " + std::string(route.path) + " has no handler");
}

}  // namespace erg::daemon
