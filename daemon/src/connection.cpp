// One connection's life: read requests (HTTP/1.1 keep-alive), hand each to the RequestHandler,
// write the reply, or hand the socket to the handler's SSE stream.

#include "connection.hpp"

#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <optional>

#include "erg/protocol/bodies.hpp"
#include "erg/protocol/http.hpp"
#include "reply_bodies.hpp"
#include "server.hpp"

namespace erg::daemon {
namespace {

using Clock = std::chrono::steady_clock;

/// Sends the error, stops writing, and discards input for a moment so the peer reads the
/// response instead of a reset (closing with unread input sends RST).
void error_and_linger(int fd, int status, const std::string& message, std::chrono::milliseconds write_timeout) {
  protocol::HttpResponse r{status, "application/json", protocol::error_body(message), {}};
  write_all(fd, protocol::serialize_response(r, false), write_timeout);
  ::shutdown(fd, SHUT_WR);
  char sink[16384];
  auto deadline = Clock::now() + std::chrono::milliseconds(500);
  std::size_t drained = 0;
  while (Clock::now() < deadline && drained < (4u << 20)) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    ssize_t n = ::recv(fd, sink, sizeof sink, 0);
    if (n <= 0) break;
    drained += static_cast<std::size_t>(n);
  }
}

/// True once the peer hung up or sent anything (an SSE client sends nothing while it listens).
bool peer_left(int fd) {
  pollfd p{fd, POLLIN | POLLRDHUP, 0};
  return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLIN)) != 0;
}

}  // namespace

bool write_all(int fd, std::string_view data, std::chrono::milliseconds timeout) {
  // MSG_DONTWAIT: a client that never reads must not hold the thread in send(2); the deadline
  // starts when the socket is first found full, so the fast path reads no clock.
  std::optional<Clock::time_point> deadline;
  while (!data.empty()) {
    ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      data.remove_prefix(static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) return false;
    auto now = Clock::now();
    if (!deadline) deadline = now + timeout;
    if (now >= *deadline) return false;
    auto left = std::chrono::ceil<std::chrono::milliseconds>(*deadline - now);
    pollfd p{fd, POLLOUT, 0};
    int rc = ::poll(&p, 1, static_cast<int>(left.count()));
    if (rc < 0 && errno != EINTR) return false;
    // rc == 0: the time ran out, checked at the top; POLLHUP/POLLERR: send reports it.
  }
  return true;
}

void Server::serve(int fd, const Peer& connected, Deadline& deadline) {
  Peer peer = connected;
  peer.socket_fd = peer.unix_socket ? fd : -1;
  const auto write_timeout = config_.write_timeout;
  pthread_setname_np(pthread_self(), "ergd-conn");  // for top -H, perf and debuggers
  std::string buf;
  buf.reserve(4096);
  std::string out;  // the response being sent (reused across the connection's requests)
  out.reserve(1024);
  char chunk[16384];
  protocol::HttpRequest request;
  protocol::HttpLimits limits;
  // No clock read per request: an idle wait (the connection between requests) gets its deadline
  // from the watchdog; only a request that arrives in pieces reads the clock, once, for its
  // request_timeout.
  Clock::time_point request_since{};  // when the first bytes of a partial request were seen
  bool partial = false;               // request_since is set
  while (!stopping_.load()) {
    auto outcome = protocol::parse_request(buf, request, limits);
    if (outcome.status == protocol::ParseStatus::kError) {
      error_and_linger(fd, outcome.error_status, outcome.error_message, write_timeout);
      return;
    }
    if (outcome.status == protocol::ParseStatus::kIncomplete) {
      if (!buf.empty() && !partial) {
        request_since = Clock::now();
        partial = true;
      }
      // Blocking recv without a kernel timer: one syscall per request. The watchdog enforces
      // the deadline and stop() wakes the wait, both with shutdown(2).
      deadline.store(partial ? (request_since + config_.request_timeout).time_since_epoch().count() : kIdleDeadline,
                     std::memory_order_relaxed);
      ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
      // Evicted while it waited (Server::evict_idle): its slot went to another connection, so
      // whatever arrived is not served.
      if (deadline.exchange(0, std::memory_order_relaxed) == kEvicted) return;
      if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
      if (n == 0 && partial && Clock::now() >= request_since + config_.request_timeout && !stopping_.load()) {
        error_and_linger(fd, 408, "request timeout", write_timeout);
        return;
      }
      if (n <= 0) return;
      buf.append(chunk, static_cast<std::size_t>(n));
      continue;
    }
    buf.erase(0, outcome.consumed);
    partial = false;
    Reply reply = handler_.dispatch(request, peer);
    if (reply.stream) {
      if (!write_all(fd, protocol::serialize_stream_head(200, "text/event-stream"), write_timeout)) return;
      handler_.run_stream(
          *reply.stream, [fd, write_timeout](std::string_view event) { return write_all(fd, event, write_timeout); },
          [fd] { return peer_left(fd); });
      return;
    }
    bool keep = request.keep_alive && !stopping_.load();
    protocol::serialize_response_to(out, reply.response, keep);
    give_back_reply_body(std::move(reply.response.body));
    if (!write_all(fd, out, write_timeout) || !keep) return;
  }
}

}  // namespace erg::daemon
