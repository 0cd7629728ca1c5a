#include "erg/client/discovery.hpp"

#include "erg/client/remote.hpp"

namespace erg::client {

Result<Inventory> discover(const backends::DiscoveryOptions& options) {
  auto local = backends::discover(options);
  if (!local) return local;
  auto endpoint = DaemonClient::endpoint_from_env();
  if (!endpoint) return fail(endpoint.error());
  if (!*endpoint) return local;
  return with_daemon(std::move(*local), **endpoint);
}

}  // namespace erg::client
