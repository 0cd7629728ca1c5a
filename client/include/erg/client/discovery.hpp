#pragma once
/// Discovery that uses ergd when ERG_DAEMON_SOCK (or zeusd's ZEUSD_SOCK_PATH) is set: a drop-in
/// for erg::backends::discover.

#include "erg/backends/discovery.hpp"

namespace erg::client {

/// erg::backends::discover(options), then, when ERG_DAEMON_SOCK or ZEUSD_SOCK_PATH is set,
/// with_daemon() over it: reads stay local where permitted, privileged calls go through ergd.
Result<Inventory> discover(const backends::DiscoveryOptions& options = {});

}  // namespace erg::client
