#pragma once
// The routes outside every API group that describe the daemon: /discover, /time, /auth/whoami.

#include <optional>

#include "device_slots.hpp"
#include "erg/daemon/auth.hpp"
#include "erg/daemon/config.hpp"
#include "erg/daemon/request_handler.hpp"

namespace erg::daemon {

/// The devices, the enabled API groups and whether TCP requests need a token.
Reply discover(const DeviceSlots& devices, const Config& config, bool auth_required);
/// The daemon's wall clock, `{"timestamp_ms": ...}`.
Reply server_time();
/// The verified token's claims (empty `sub` and `scopes` for a request that needed none).
Reply whoami(const std::optional<TokenClaims>& claims);

}  // namespace erg::daemon
