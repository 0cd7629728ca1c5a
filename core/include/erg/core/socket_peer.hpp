#pragma once
// Who is on the other end of a local TCP connection: a loopback peer is a process of this
// machine, and the kernel's socket table says which user owns its socket (the uid column of
// /proc/net/tcp and `ss -e`, readable by any user). erg's servers count such peers per user
// (docs/security.md) and the batch-size and Perseus servers let a job's owner write it.

#include <sys/socket.h>

#include <cstdint>
#include <optional>

namespace erg {

/// True for 127.0.0.0/8, ::1 and IPv4-mapped 127.x addresses.
bool is_loopback(const sockaddr_storage& address);

/// The uid owning the client end of the connected TCP socket `fd` when its peer is on loopback
/// (sock_diag lookup by the connection's four-tuple); nullopt for any other peer, when the
/// client has closed its socket already (the kernel then keeps it without an owner), or when the
/// kernel's table cannot be read (no inet_diag).
std::optional<std::uint32_t> loopback_peer_uid(int fd);

}  // namespace erg
