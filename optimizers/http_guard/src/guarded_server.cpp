#include "erg/optimizers/guarded_server.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>
#include <thread>
#include <utility>

#include "erg/core/socket_peer.hpp"

namespace erg::http_guard {

/// One open connection. `state` is kIdle while it waits for its next request (evictable), kBusy
/// while a request arrives or is answered, kEvicted once evict_idle_locked took it.
struct GuardedServer::Connection {
  enum State : int { kIdle, kBusy, kEvicted };
  int fd = -1;
  Peer peer;
  std::atomic<int> state{kBusy};
  /// steady_clock ticks since it last began waiting; written by its thread, read by evictors.
  std::atomic<std::int64_t> idle_since{0};
  std::uint64_t order = 0;
  bool end_after_reply = false;
};

namespace {

using Clock = std::chrono::steady_clock;

thread_local GuardedServer::Connection* current = nullptr;
thread_local const std::atomic<bool>* current_shutting = nullptr;

std::string numeric(const sockaddr_storage& a) {
  char text[INET6_ADDRSTRLEN] = {};
  if (a.ss_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&a)->sin_addr, text, sizeof text);
  } else if (a.ss_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&a)->sin6_addr, text, sizeof text);
  }
  return text;
}

Peer identify(int fd) {
  Peer peer;
  sockaddr_storage remote{};
  socklen_t remote_n = sizeof remote;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&remote), &remote_n) != 0) return peer;
  if (remote.ss_family == AF_UNIX) {
    peer.address = "unix";
    peer.local = true;
    ucred cred{};
    socklen_t n = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &n) == 0) peer.uid = cred.uid;
    return peer;
  }
  peer.address = numeric(remote);
  peer.local = is_loopback(remote);
  if (peer.local) peer.uid = loopback_peer_uid(fd);
  return peer;
}

/// poll(2) for `events` until `until`; false on timeout or when the descriptor failed.
bool wait_for(int fd, short events, Clock::time_point until) {
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()).count();
    if (left <= 0) return false;
    pollfd p{fd, events, 0};
    const int r = poll(&p, 1, static_cast<int>(std::min<long long>(left, 60'000)));
    if (r > 0) return true;  // readable, or hung up/failed: the next recv/send says which
    if (r < 0 && errno != EINTR) return false;
  }
}

/// httplib's Stream over a guarded connection: every read is bounded by the request's deadline
/// and the request's bytes by the head and body bounds; every write by the write timeout.
/// Reads are buffered: httplib reads a request's head a byte at a time, which unbuffered would
/// cost a poll and a recv per byte a client sends. What is buffered past the current request
/// (a pipelined next one) is the next request's.
class GuardedStream final : public httplib::Stream {
 public:
  GuardedStream(int fd, const Limits& limits, std::size_t max_body, std::uint64_t& timed_out)
      : fd_(fd),
        limits_(limits),
        // Saturating: a server with no body limit (httplib's default is SIZE_MAX) has none here.
        max_bytes_(max_body > SIZE_MAX - limits.max_head_bytes ? SIZE_MAX : limits.max_head_bytes + max_body),
        timed_out_(timed_out) {}

  void start_request() {
    deadline_ = Clock::now() + limits_.request_deadline;
    consumed_ = 0;
    over_ = false;
  }
  [[nodiscard]] bool over() const { return over_; }
  /// Bytes received and not yet read: the start of the next request.
  [[nodiscard]] bool buffered() const { return pos_ < len_; }

  bool is_readable() const override { return buffered() || wait_for(fd_, POLLIN, deadline_); }
  bool is_writable() const override { return wait_for(fd_, POLLOUT, Clock::now() + limits_.write_timeout); }
  ssize_t read(char* ptr, size_t size) override {
    if (consumed_ >= max_bytes_ || (!buffered() && !wait_for(fd_, POLLIN, deadline_))) {
      if (!over_) ++timed_out_;
      over_ = true;
      return -1;
    }
    if (!buffered()) {
      ssize_t n;
      do {
        n = recv(fd_, buffer_, sizeof buffer_, 0);
      } while (n < 0 && errno == EINTR);
      if (n <= 0) return n;
      pos_ = 0;
      len_ = static_cast<std::size_t>(n);
    }
    const std::size_t take = std::min({size, len_ - pos_, max_bytes_ - consumed_});
    std::memcpy(ptr, buffer_ + pos_, take);
    pos_ += take;
    consumed_ += take;
    return static_cast<ssize_t>(take);
  }
  ssize_t write(const char* ptr, size_t size) override {
    std::size_t sent = 0;
    const auto until = Clock::now() + limits_.write_timeout;
    while (sent < size) {
      if (!wait_for(fd_, POLLOUT, until)) return -1;
      const ssize_t n = send(fd_, ptr + sent, size - sent, MSG_NOSIGNAL);
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (n <= 0) return -1;
      sent += static_cast<std::size_t>(n);
    }
    return static_cast<ssize_t>(sent);
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override { address(true, ip, port); }
  void get_local_ip_and_port(std::string& ip, int& port) const override { address(false, ip, port); }
  socket_t socket() const override { return fd_; }

 private:
  void address(bool remote, std::string& ip, int& port) const {
    sockaddr_storage a{};
    socklen_t n = sizeof a;
    const int r = remote ? getpeername(fd_, reinterpret_cast<sockaddr*>(&a), &n)
                         : getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &n);
    if (r != 0) return;
    ip = numeric(a);
    if (a.ss_family == AF_INET) port = ntohs(reinterpret_cast<const sockaddr_in*>(&a)->sin_port);
    if (a.ss_family == AF_INET6) port = ntohs(reinterpret_cast<const sockaddr_in6*>(&a)->sin6_port);
  }

  int fd_;
  const Limits& limits_;
  std::size_t max_bytes_;
  std::uint64_t& timed_out_;
  Clock::time_point deadline_{};
  std::size_t consumed_ = 0;  // bytes of the current request read
  bool over_ = false;
  char buffer_[16384];
  std::size_t pos_ = 0, len_ = 0;
};

}  // namespace

/// httplib's task queue for a GuardedServer: a thread per connection; shutdown() waits for all.
class ConnectionThreads final : public httplib::TaskQueue {
 public:
  void enqueue(std::function<void()> fn) override {
    {
      std::lock_guard lock(mu_);
      ++live_;
    }
    try {
      std::thread([this, fn = std::move(fn)] {
        fn();
        std::lock_guard lock(mu_);
        if (--live_ == 0) done_.notify_all();
      }).detach();
    } catch (const std::system_error&) {
      // No thread: the connection's descriptor is lost to it, as with httplib's own queue
      // when it cannot start one; the process is out of threads.
      std::lock_guard lock(mu_);
      if (--live_ == 0) done_.notify_all();
    }
  }
  void shutdown() override {
    std::unique_lock lock(mu_);
    done_.wait(lock, [this] { return live_ == 0; });
  }

 private:
  std::mutex mu_;
  std::condition_variable done_;
  std::size_t live_ = 0;
};

std::string Peer::key() const { return uid ? "uid:" + std::to_string(*uid) : "addr:" + address; }

const Peer* current_peer() { return current ? &current->peer : nullptr; }

bool client_gone() {
  if (!current) return false;
  if (current_shutting && current_shutting->load()) return true;
  pollfd p{current->fd, POLLIN | POLLRDHUP, 0};
  if (poll(&p, 1, 0) <= 0) return false;
  if (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) return true;
  char byte;
  return recv(current->fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

Caller caller_of(const httplib::Request& req) {
  Caller c;
  c.in_process = false;
  if (const Peer* peer = current_peer(); peer && peer->local && peer->uid) c.uid = *peer->uid;
  c.token = req.get_header_value(kJobTokenHeader);
  return c;
}

void end_connection_after_reply() {
  if (current) current->end_after_reply = true;
}

GuardedServer::GuardedServer(Limits limits) : limits_(limits) {
  new_task_queue = [] { return new ConnectionThreads(); };
  // What httplib's Keep-Alive answer header says (the idle wait itself is this class's).
  set_keep_alive_timeout(std::max<time_t>(1, static_cast<time_t>(limits_.idle_timeout.count() / 1000)));
}

GuardedServer::~GuardedServer() { shut(); }

int GuardedServer::bind(const std::string& host, int port) {
  const int bound = port == 0 ? bind_to_any_port(host) : (bind_to_port(host, port) ? port : -1);
  // httplib listens with a backlog of 5; listen(2) again sets the backlog of a listening socket.
  if (bound >= 0) ::listen(svr_sock_, limits_.backlog);
  return bound;
}

void GuardedServer::shut() {
  shutting_ = true;
  {
    std::lock_guard lock(mu_);
    for (auto& [fd, c] : connections_) ::shutdown(fd, SHUT_RDWR);
  }
  slot_freed_.notify_all();
  stop();
}

GuardStats GuardedServer::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

bool GuardedServer::evict_idle_locked(const std::string& key) {
  Connection* oldest = nullptr;
  for (auto& [fd, c] : connections_) {
    if (!key.empty() && c->peer.key() != key) continue;
    if (c->state.load() != Connection::kIdle) continue;
    if (!oldest || c->idle_since.load() < oldest->idle_since.load() ||
        (c->idle_since.load() == oldest->idle_since.load() && c->order < oldest->order))
      oldest = c.get();
  }
  if (!oldest) return false;
  int expected = Connection::kIdle;
  if (!oldest->state.compare_exchange_strong(expected, Connection::kEvicted)) return false;
  ::shutdown(oldest->fd, SHUT_RDWR);  // its thread wakes, sees kEvicted and leaves
  if (--per_peer_[oldest->peer.key()] == 0) per_peer_.erase(oldest->peer.key());
  --open_;
  ++stats_.evicted;
  return true;
}

void GuardedServer::refuse(int fd, const char* why) {
  static constexpr char kHead[] =
      "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nConnection: close\r\n"
      "Retry-After: 1\r\nContent-Length: ";
  const std::string body = std::string(R"({"message":")") + why + "\"}";
  const std::string reply = kHead + std::to_string(body.size()) + "\r\n\r\n" + body;
  // Read the request first (briefly) so the client reads the answer instead of a reset; when
  // many refusals are pending (a flood), answer at once.
  if (refusing_.fetch_add(1) < 64) wait_for(fd, POLLIN, Clock::now() + std::chrono::milliseconds(200));
  char sink[4096];
  while (recv(fd, sink, sizeof sink, MSG_DONTWAIT) > 0) {
  }
  (void)!send(fd, reply.data(), reply.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  ::shutdown(fd, SHUT_WR);
  --refusing_;
}

bool GuardedServer::process_and_close_socket(socket_t sock) {
  auto c = std::make_shared<Connection>();
  c->fd = sock;
  c->peer = identify(sock);
  const std::string key = c->peer.key();
  const char* refused = nullptr;
  {
    std::unique_lock lock(mu_);
    ++stats_.accepted;
    c->order = stats_.accepted;
    // A peer at its cap with none of its connections idle waits a moment for one of them to
    // end (a burst of short requests is served, not refused); at most max_connections wait in
    // all (each a thread that sleeps, for admission_wait at most).
    const auto full = [&] { return per_peer_[key] >= limits_.max_per_peer && !evict_idle_locked(key); };
    if (!shutting_ && full() && waiting_total_ < limits_.max_connections) {
      ++waiting_[key];
      ++waiting_total_;
      slot_freed_.wait_for(lock, limits_.admission_wait, [&] { return shutting_.load() || !full(); });
      ++stats_.waited;
      --waiting_total_;
      if (--waiting_[key] == 0) waiting_.erase(key);
    }
    if (shutting_) {
      refused = "the server is stopping";
    } else if (full()) {
      refused = "too many connections from this peer";
    } else if (open_ >= limits_.max_connections && !evict_idle_locked(key) && !evict_idle_locked("")) {
      refused = "too many connections";
    }
    if (refused) {
      ++stats_.refused;
      if (per_peer_[key] == 0) per_peer_.erase(key);
    } else {
      ++per_peer_[key];
      ++open_;
      connections_[sock] = c;
    }
  }
  if (refused) {
    refuse(sock, refused);
    close(sock);
    return false;
  }

  std::uint64_t timed_out = 0;
  GuardedStream stream(sock, limits_, payload_max_length_, timed_out);
  current = c.get();
  current_shutting = &shutting_;
  bool ok = true;
  for (std::size_t left = keep_alive_max_count_; left > 0 && !shutting_; --left) {
    if (!stream.buffered()) {  // else the next request has begun arriving already
      // Wait for the next request: idle, so evictable.
      c->idle_since = Clock::now().time_since_epoch().count();
      c->state = Connection::kIdle;
      const bool arrived = wait_for(sock, POLLIN, Clock::now() + limits_.idle_timeout);
      int expected = Connection::kIdle;
      if (!c->state.compare_exchange_strong(expected, Connection::kBusy)) break;  // evicted
      if (!arrived) break;
      char byte;
      if (recv(sock, &byte, 1, MSG_PEEK | MSG_DONTWAIT) <= 0) break;  // the client left
    }
    stream.start_request();
    bool closed = false;
    ok = process_request(stream, left == 1 || shutting_, closed, nullptr);
    if (!ok || closed || stream.over() || c->end_after_reply) break;
  }
  current = nullptr;
  current_shutting = nullptr;
  if ((c->end_after_reply || stream.over()) && !shutting_) {
    // Lingering close: the client may still be sending what was refused; closing with unread
    // bytes resets the connection, which can destroy the answer before the client reads it.
    ::shutdown(sock, SHUT_WR);
    const auto until = Clock::now() + std::chrono::seconds(1);
    char sink[16384];
    std::size_t drained = 0;
    while (drained < (std::size_t{8} << 20) && wait_for(sock, POLLIN, until)) {
      const ssize_t n = recv(sock, sink, sizeof sink, MSG_DONTWAIT);
      if (n <= 0 && !(n < 0 && (errno == EINTR || errno == EAGAIN))) break;
      if (n > 0) drained += static_cast<std::size_t>(n);
    }
  }
  ::shutdown(sock, SHUT_RDWR);
  {
    std::lock_guard lock(mu_);
    stats_.timed_out += timed_out;
    connections_.erase(sock);
    if (c->state.load() != Connection::kEvicted) {
      if (--per_peer_[key] == 0) per_peer_.erase(key);
      --open_;
    }
    slot_freed_.notify_all();
    close(sock);  // under mu_: shut() never shuts a descriptor number already reused
  }
  return ok;
}

}  // namespace erg::http_guard
