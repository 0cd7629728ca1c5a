#pragma once
// Writing to a connection's socket (shared by the accept loop and the connection threads).

#include <chrono>
#include <string_view>

namespace erg::daemon {

/// Sends all of `data` (MSG_NOSIGNAL). When the socket is full, waits for room until `timeout`
/// after it first found it full, then gives up. False when the peer is gone or the time ran out.
/// The usual case (the data fits) is one send(2) and reads no clock.
bool write_all(int fd, std::string_view data, std::chrono::milliseconds timeout);

}  // namespace erg::daemon
