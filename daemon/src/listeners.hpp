#pragma once
// ergd's listening sockets.

#include <cstdint>
#include <optional>
#include <string>

#include "erg/core/result.hpp"
#include "erg/daemon/config.hpp"

namespace erg::daemon {

/// Binds and listens on config.socket_path with config.socket_mode and socket_group. The
/// parent directory must exist (kNotFound naming it: ergd creates no directories, least of all
/// as root). The directory and those above it must be owned by root or ergd's euid and not
/// writable by other users (sticky ancestors such as /tmp are fine); else kNoPermission naming
/// the directory and the fix. A sticky directory others may write to (the socket's own) is
/// accepted only with config.allow_insecure_socket_dir, and `warning` says so. A stale socket
/// (nobody accepts on it) is replaced; a live one is kAlreadyExists; any other file there is
/// kAlreadyExists. Returns the listening fd.
Result<int> listen_unix(const Config& config, std::optional<std::string>& warning);

/// Binds and listens on "IPv4:port" (port 0 picks one). Returns the fd; `port` is the bound port.
Result<int> listen_tcp(const std::string& spec, std::uint16_t& port);

}  // namespace erg::daemon
