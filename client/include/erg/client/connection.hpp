#pragma once
/// One keep-alive HTTP/1.1 connection to ergd (or zeusd) over a Unix socket or TCP.

#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>

#include "erg/core/result.hpp"
#include "erg/protocol/http.hpp"

namespace erg::client {

struct Endpoint {
  std::string socket_path;  ///< Unix socket; used when non-empty.
  std::string host = "127.0.0.1";
  std::uint16_t port = 0;
  std::string token;  ///< Bearer token for TCP ("" none).
};

/// Thread-safe (one request at a time per connection). Reconnects once when a kept-alive
/// connection was closed by the daemon. Errors: kUnavailable when the daemon cannot be
/// reached (message names the socket), kIo for a broken exchange.
class Connection {
 public:
  explicit Connection(Endpoint endpoint) : endpoint_(std::move(endpoint)) {}
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  Result<protocol::ParsedResponse> request(std::string_view method, std::string_view target);
  /// Opens a stream (SSE) on a fresh connection and calls `on_event` with each "data:" payload
  /// until it returns false or the daemon closes the stream. Returns the status of the head.
  Result<int> stream(std::string_view target, const std::function<bool(std::string_view)>& on_event);

  [[nodiscard]] const Endpoint& endpoint() const { return endpoint_; }
  [[nodiscard]] std::string describe() const;

 private:
  Result<int> open() const;
  Result<protocol::ParsedResponse> exchange(const std::string& wire);

  Endpoint endpoint_;
  std::mutex mutex_;
  int fd_ = -1;
  std::string buf_;
  std::string wire_;  // the request being sent (reused)
};

}  // namespace erg::client
