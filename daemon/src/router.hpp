#pragma once
// ergd's RequestHandler: finds a request's route, applies the checks every route shares (API
// group enabled, method, Unix-socket allow lists, bearer tokens, the query's field set), then
// calls the route's group (discovery, GPU, CPU, streaming, metrics).

#include <optional>
#include <string>

#include "attribution.hpp"
#include "device_slots.hpp"
#include "erg/daemon/auth.hpp"
#include "erg/daemon/config.hpp"
#include "erg/daemon/request_handler.hpp"
#include "erg/exporters/prometheus/collector.hpp"
#include "erg/protocol/query.hpp"
#include "erg/protocol/routes.hpp"
#include "limit_restorer.hpp"
#include "metrics_routes.hpp"
#include "streaming.hpp"

namespace erg::daemon {

class Router final : public RequestHandler {
 public:
  /// Every reference must outlive the router. `signing_key` empty: no tokens.
  /// `restorer` may be null (limits are not restored when their setter exits).
  Router(const Config& config, std::string signing_key, const DeviceSlots& devices, PowerStreams& streams,
         const prom::Collector& exposition, LimitRestorer* restorer = nullptr,
         const AttributionSampler* attribution = nullptr)
      : config_(config),
        signing_key_(std::move(signing_key)),
        devices_(devices),
        streams_(streams),
        exposition_(exposition),
        restorer_(restorer),
        attribution_(attribution) {}

  /// Never throws: a route's exception becomes 500.
  Reply dispatch(const protocol::HttpRequest& request, const Peer& peer) override;
  void run_stream(const StreamSpec& spec, const std::function<bool(std::string_view)>& write,
                  const std::function<bool()>& closed) override {
    streams_.run(spec, write, closed);
  }

 private:
  /// The unix-socket allow lists and bearer tokens: a reply refusing the request, or nullopt
  /// (with `claims` set when a token was verified).
  std::optional<Reply> check_access(const protocol::RouteInfo& route, const protocol::HttpRequest& request,
                                    const Peer& peer, std::optional<TokenClaims>& claims) const;
  /// Whether `peer` may use `group`: nullopt, or the reply refusing it (401/403). One rule for
  /// every transport: the allow lists on the Unix socket; on TCP with a signing key the token's
  /// scopes; on TCP without one (--tcp-insecure) only groups without allow lists. Sets `claims`
  /// when a token was verified.
  std::optional<Reply> refuse_group(protocol::ApiGroup group, const protocol::HttpRequest& request, const Peer& peer,
                                    std::optional<TokenClaims>& claims) const;
  /// What /metrics shows `peer`: the series of the enabled read groups it may use.
  MetricsView metrics_view(const protocol::HttpRequest& request, const Peer& peer) const;
  /// /metrics for `peer`: its view, or the refusal when it may see nothing.
  Reply metrics_reply(const protocol::HttpRequest& request, const Peer& peer) const;
  /// Calls the route's handler.
  Reply route(const protocol::RouteInfo& route, const protocol::HttpRequest& request, const protocol::Query& query,
              const std::optional<TokenClaims>& claims, const Peer& peer);

  const Config& config_;
  const std::string signing_key_;
  const DeviceSlots& devices_;
  PowerStreams& streams_;
  const prom::Collector& exposition_;
  LimitRestorer* restorer_;
  const AttributionSampler* attribution_;  ///< nullptr: /attribution answers 503
};

}  // namespace erg::daemon
