// libFuzzer target: ergd's real connection loop over fake devices. Each input is written into
// one end of a socket pair while Server::serve_connection serves the other end on its own
// thread, as it serves an accepted connection: keep-alive, pipelining, the header and body
// limits, errors with a lingering close, SSE streams, write deadlines, and routing with the
// Unix socket's uid checks or the TCP listener's bearer tokens. The replies are drained as they
// come and must parse as HTTP responses.
//
// Input: byte 0 picks the peer and how the bytes arrive (see the corpus README); the rest is
// what the client sends.
//   bits 0-1  peer: 0 Unix uid 1000 (allowed gpu-control), 1 Unix uid 1234 (not allowed),
//             2 Unix root, 3 TCP (needs a token signed with kSigningKey)
//   bit 2     send in pieces of 1 + (byte0 >> 3) bytes (1..32), each a separate send(2)
// An input that names stream_power keeps the client's side open until an event arrives (at
// most 20 ms), so streams write events before the client leaves.

#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include "erg/daemon/daemon.hpp"
#include "erg/protocol/http.hpp"
#include "erg/protocol/query.hpp"
#include "erg/sim/fake_devices.hpp"
#include "server.hpp"

namespace {

using Clock = std::chrono::steady_clock;

/// The corpus's tokens are signed with this key (ergd token issue --signing-key-path ...).
constexpr std::string_view kSigningKey = "erg-fuzz-signing-key-0123456789";

/// The Daemon's routes as the server's RequestHandler (what Daemon::start wires up inside).
class DaemonHandler : public erg::daemon::RequestHandler {
 public:
  explicit DaemonHandler(erg::daemon::Daemon& daemon) : daemon_(daemon) {}
  erg::daemon::Reply dispatch(const erg::protocol::HttpRequest& request, const erg::daemon::Peer& peer) override {
    return daemon_.dispatch(request, peer);
  }
  void run_stream(const erg::daemon::StreamSpec& spec, const std::function<bool(std::string_view)>& write,
                  const std::function<bool()>& closed) override {
    daemon_.run_stream(spec, write, closed);
  }

 private:
  erg::daemon::Daemon& daemon_;
};

/// Serves one connection at a time on a thread of its own, like a connection thread; kept for
/// the whole run because starting a thread per input costs more than most inputs do.
class ConnectionThread {
 public:
  explicit ConnectionThread(erg::daemon::Server& server) : server_(server), thread_([this] { run(); }) {}
  /// Serves `fd` as `peer` and closes it; wait() returns once that is done.
  void serve(int fd, const erg::daemon::Peer& peer) {
    std::lock_guard lock(mutex_);
    fd_ = fd;
    peer_ = peer;
    cv_.notify_all();
  }
  void wait() {
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [this] { return fd_ < 0; });
  }

 private:
  void run() {
    std::unique_lock lock(mutex_);
    for (;;) {
      cv_.wait(lock, [this] { return fd_ >= 0; });
      const int fd = fd_;
      const erg::daemon::Peer peer = peer_;
      lock.unlock();
      server_.serve_connection(fd, peer);
      ::close(fd);
      lock.lock();
      fd_ = -1;
      cv_.notify_all();
    }
  }
  erg::daemon::Server& server_;
  std::mutex mutex_;
  std::condition_variable cv_;
  int fd_ = -1;
  erg::daemon::Peer peer_;
  std::thread thread_;  // last: starts once the members above exist
};

struct Fixture {
  erg::daemon::Config config;
  std::unique_ptr<erg::daemon::Daemon> daemon;
  std::unique_ptr<DaemonHandler> handler;
  std::unique_ptr<erg::daemon::Server> server;
  std::unique_ptr<ConnectionThread> connection;
};

Fixture& fixture() {
  static Fixture* f = [] {
    auto* fx = new Fixture;  // lives for the whole run
    char key_path[] = "/tmp/ergd-fuzz-key-XXXXXX";
    int fd = ::mkstemp(key_path);
    if (fd < 0 || ::write(fd, kSigningKey.data(), kSigningKey.size()) != static_cast<ssize_t>(kSigningKey.size()))
      __builtin_trap();
    ::close(fd);
    erg::Inventory inv;
    for (unsigned i = 0; i < 4; ++i) inv.gpus.push_back(std::make_shared<erg::sim::FakeGpu>(i, i != 3));
    for (unsigned i = 0; i < 2; ++i) inv.cpus.push_back(std::make_shared<erg::sim::FakeCpu>(i, i == 0));
    auto& c = fx->config;
    c.socket_path.clear();
    c.skip_privilege_check = true;
    c.signing_key_path = key_path;
    c.allow_uid[erg::protocol::ApiGroup::kGpuControl] = {1000};
    // Short everything: one input must not take seconds.
    c.gpu_power_poll_hz = 1000;
    c.cpu_power_poll_hz = 1000;  // /cpu/get_power sleeps one period
    c.write_timeout = std::chrono::milliseconds(200);
    c.request_timeout = std::chrono::milliseconds(1000);
    c.idle_timeout = std::chrono::milliseconds(1000);
    c.stream_peer_check = std::chrono::milliseconds(1);
    auto d = erg::daemon::Daemon::create(c, std::move(inv));
    ::unlink(key_path);
    if (!d) __builtin_trap();
    fx->daemon = std::move(*d);
    fx->handler = std::make_unique<DaemonHandler>(*fx->daemon);
    fx->server = std::make_unique<erg::daemon::Server>(*fx->handler, fx->config);
    fx->connection = std::make_unique<ConnectionThread>(*fx->server);
    return fx;
  }();
  return *f;
}

erg::daemon::Peer peer_for(std::uint8_t mode) {
  erg::daemon::Peer p;
  switch (mode & 3) {
    case 0: p = {true, 1000u, 1000u}; break;
    case 1: p = {true, 1234u, 1234u}; break;
    case 2: p = {true, 0u, 0u}; break;
    default: p = {false, std::nullopt, std::nullopt}; break;
  }
  return p;
}

/// Writes `input` into `fd` (in pieces of `piece` bytes) while reading everything the server
/// sends, until the server closes its end. Shuts the write side once the input is sent (after
/// an event arrived or 20 ms when `hold`).
std::string exchange(int fd, std::string_view input, std::size_t piece, bool hold) {
  std::string out;
  std::size_t sent = 0;
  bool shut = false;
  std::optional<Clock::time_point> hold_until;
  char buf[16384];
  for (;;) {
    if (!shut && sent == input.size()) {
      if (hold && !hold_until) hold_until = Clock::now() + std::chrono::milliseconds(20);
      if (!hold || out.find("data:") != std::string::npos || Clock::now() >= *hold_until) {
        ::shutdown(fd, SHUT_WR);
        shut = true;
      }
    }
    pollfd p{fd, static_cast<short>(POLLIN | (sent < input.size() ? POLLOUT : 0)), 0};
    ::poll(&p, 1, !shut && sent == input.size() ? 1 : -1);
    if ((p.revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
      ssize_t n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
      if (n == 0) {  // the server is done writing; it may still drain input (lingering close) until we shut ours
        if (!shut) ::shutdown(fd, SHUT_WR);
        break;
      }
      if (n > 0) out.append(buf, static_cast<std::size_t>(n));
      if (n < 0 && errno != EAGAIN && errno != EINTR) break;
    }
    if ((p.revents & POLLOUT) != 0 && sent < input.size()) {
      ssize_t n = ::send(fd, input.data() + sent, std::min(piece, input.size() - sent), MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) sent += static_cast<std::size_t>(n);
      if (n < 0 && errno != EAGAIN && errno != EINTR) sent = input.size();  // the server stopped reading
      if (piece < input.size()) std::this_thread::yield();                  // let the server see a partial request
    }
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::uint8_t mode = data[0];
  std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
  // The query helpers on their own.
  (void)erg::protocol::parse_ids(input);
  (void)erg::protocol::parse_query(input);
  (void)erg::protocol::is_valid_utf8(input);

  Fixture& f = fixture();
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return 0;
  ::fcntl(sv[0], F_SETFL, O_NONBLOCK);
  const erg::daemon::Peer peer = peer_for(mode);
  f.connection->serve(sv[1], peer);
  const std::size_t piece = (mode & 4) != 0 ? 1u + (mode >> 3) : input.size() + 1;
  std::string out = exchange(sv[0], input, piece, input.find("stream_power") != std::string_view::npos);
  f.connection->wait();
  ::close(sv[0]);

  static const bool print = std::getenv("ERGD_FUZZ_PRINT") != nullptr;  // to look at a corpus's replies
  if (print) std::fprintf(stderr, "--- %zu bytes in, %zu out:\n%s\n", input.size(), out.size(), out.c_str());

  // Everything ergd wrote is a sequence of well-formed responses (a stream's body runs to the end).
  std::string_view rest = out;
  while (!rest.empty()) {
    erg::protocol::ParsedResponse r;
    auto o = erg::protocol::parse_response(rest, r);
    if (o.status == erg::protocol::ParseStatus::kError) __builtin_trap();
    if (o.status != erg::protocol::ParseStatus::kComplete || r.streaming) break;
    if (o.consumed == 0 || o.consumed > rest.size()) __builtin_trap();
    rest.remove_prefix(o.consumed);
  }
  return 0;
}
