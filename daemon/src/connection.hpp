#pragma once
// Writing to a connection's socket (shared by the accept loop and the connection threads).

#include <string_view>

namespace erg::daemon {

/// Sends all of `data` (MSG_NOSIGNAL; waits up to 10 s for room on a non-blocking socket).
/// False when the peer is gone or the wait timed out.
bool write_all(int fd, std::string_view data);

}  // namespace erg::daemon
