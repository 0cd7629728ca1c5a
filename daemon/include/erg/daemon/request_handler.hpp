#pragma once
/// The contract between ergd's server (listeners, connections, HTTP keep-alive, the SSE
/// transport) and what answers its requests. The server knows nothing of devices or routes: it
/// parses a request, asks a RequestHandler for the reply, and, when the reply asks for a
/// stream, lets the handler write events until the peer leaves.

#include <sys/types.h>

#include <functional>
#include <optional>
#include <string_view>
#include <vector>

#include "erg/protocol/http.hpp"

namespace erg::daemon {

/// Who sent a request.
struct Peer {
  bool unix_socket = false;
  std::optional<uid_t> uid;  ///< SO_PEERCRED on the Unix socket.
  std::optional<gid_t> gid;
  /// SO_PEERCRED: the process that connected (unset over TCP, or when it lives in a pid
  /// namespace ergd cannot see).
  std::optional<pid_t> pid;
  /// The connection's socket while its request is dispatched (-1: none, e.g. tests calling
  /// dispatch()); the gpu-control group asks it for the peer's pidfd (SO_PEERPIDFD).
  int socket_fd = -1;
};

/// An SSE stream a reply asks the connection to run. Opaque to the server: it hands the spec
/// back to RequestHandler::run_stream.
struct StreamSpec {
  bool gpu = true;
  std::vector<unsigned> ids;
};

struct Reply {
  protocol::HttpResponse response;
  std::optional<StreamSpec> stream;  ///< Set: send a stream head and run_stream().
};

class RequestHandler {
 public:
  virtual ~RequestHandler() = default;

  /// Answers one parsed request. Called concurrently from connection threads; must not throw.
  virtual Reply dispatch(const protocol::HttpRequest& request, const Peer& peer) = 0;

  /// Runs an SSE stream a reply asked for: calls `write` with each event (a complete
  /// "data: ...\n\n" block) until it returns false, `closed()` returns true, or the handler
  /// stops. Blocks the calling connection thread meanwhile.
  virtual void run_stream(const StreamSpec& spec, const std::function<bool(std::string_view)>& write,
                          const std::function<bool()>& closed) = 0;
};

}  // namespace erg::daemon
