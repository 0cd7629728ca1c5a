#include "server.hpp"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <limits>
#include <shared_mutex>
#include <utility>

#include "connection.hpp"
#include "erg/core/socket_peer.hpp"
#include "erg/protocol/bodies.hpp"
#include "erg/protocol/http.hpp"
#include "listeners.hpp"

namespace erg::daemon {
namespace {

using Clock = std::chrono::steady_clock;

std::string errno_text(int err) { return std::strerror(err); }

/// Answers 503 on a connection that is not admitted and closes it, without waiting (the accept
/// loop must stay prompt): the reply fits in the new socket's empty buffer, and input that has
/// already arrived is read first so that closing a TCP connection does not reset it before the
/// peer reads the reply.
void refuse(int fd, std::string_view why) {
  protocol::HttpResponse r{503, "application/json", protocol::error_body(why), {}};
  std::string wire = protocol::serialize_response(r, false);
  [[maybe_unused]] auto n = ::send(fd, wire.data(), wire.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  ::shutdown(fd, SHUT_WR);
  char sink[4096];
  for (int i = 0; i < 16 && ::recv(fd, sink, sizeof sink, MSG_DONTWAIT) > 0; ++i) {
  }
  ::close(fd);
}

}  // namespace

void Server::serve_connection(int fd, const Peer& peer) {
  Deadline deadline{0};
  serve(fd, peer, deadline);
}

bool Server::may_use_reserve(const Peer& peer) const {
  if (!peer.uid) return false;
  if (*peer.uid == 0) return true;
  for (const auto& [group, uids] : config_.allow_uid)
    if (uids.count(*peer.uid) != 0) return true;
  if (peer.gid)
    for (const auto& [group, gids] : config_.allow_gid)
      if (gids.count(*peer.gid) != 0) return true;
  return false;
}

Result<void> Server::start() {
  if (started_) return ok();
  if (config_.socket_path.empty() && !config_.tcp)
    return fail(ErrorCode::kInvalidArgument, "nothing to listen on: give --socket-path or --tcp");
  if (::pipe2(wake_pipe_, O_CLOEXEC) != 0) return fail(ErrorCode::kIo, "pipe: " + errno_text(errno));
  if (::pipe2(refuser_pipe_, O_CLOEXEC | O_NONBLOCK) != 0) return fail(ErrorCode::kIo, "pipe: " + errno_text(errno));
  spare_fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (spare_fd_ < 0) return fail(ErrorCode::kIo, "open /dev/null: " + errno_text(errno));
  warnings_.clear();
  if (!config_.socket_path.empty()) {
    std::optional<std::string> warning;
    auto fd = listen_unix(config_, warning);
    if (!fd) return fail(fd.error());
    unix_fd_ = *fd;
    if (warning) warnings_.push_back(std::move(*warning));
  }
  if (config_.tcp) {
    auto fd = listen_tcp(*config_.tcp, tcp_port_);
    if (!fd) {
      if (unix_fd_ >= 0) {
        ::close(unix_fd_);
        unix_fd_ = -1;
        ::unlink(config_.socket_path.c_str());
      }
      return fail(fd.error());
    }
    tcp_fd_ = *fd;
  }
  started_ = true;
  watchdog_ = std::thread([this] { watchdog_loop(); });
  refuser_ = std::thread([this] { refuser_loop(); });
  // Several acceptors on the Unix socket, so a connect flood from one user's processes meets as
  // many threads draining the backlog (each accept is cheap: a closed or over-rate connection
  // gets no thread).
  if (unix_fd_ >= 0)
    for (int k = 0; k < kUnixAcceptors; ++k) acceptors_.emplace_back([this] { accept_loop(unix_fd_, true); });
  if (tcp_fd_ >= 0) acceptors_.emplace_back([this] { accept_loop(tcp_fd_, false); });
  return ok();
}

void Server::stop() {
  if (!started_) {
    for (int& fd : wake_pipe_)
      if (fd >= 0) ::close(std::exchange(fd, -1));
    for (int& fd : refuser_pipe_)
      if (fd >= 0) ::close(std::exchange(fd, -1));
    if (spare_fd_ >= 0) ::close(std::exchange(spare_fd_, -1));
    return;
  }
  started_ = false;
  stopping_.store(true);
  char b = 1;
  [[maybe_unused]] auto n = ::write(wake_pipe_[1], &b, 1);
  for (auto& t : acceptors_) t.join();
  acceptors_.clear();
  {
    std::unique_lock lock(mutex_);
    for (const auto& [fd, connection] : connections_) ::shutdown(fd, SHUT_RDWR);
    watchdog_cv_.notify_all();
    idle_.wait(lock, [this] { return threads_ == 0; });
  }
  if (watchdog_.joinable()) watchdog_.join();
  {
    refuser_stop_.store(true);  // the acceptors are joined: nothing more can be refused
    char w = 1;
    [[maybe_unused]] auto wrote = ::write(refuser_pipe_[1], &w, 1);
  }
  if (refuser_.joinable()) refuser_.join();
  for (int& fd : refuser_pipe_)
    if (fd >= 0) ::close(std::exchange(fd, -1));
  if (unix_fd_ >= 0) {
    ::close(unix_fd_);
    unix_fd_ = -1;
    ::unlink(config_.socket_path.c_str());
  }
  if (tcp_fd_ >= 0) ::close(std::exchange(tcp_fd_, -1));
  for (int& fd : wake_pipe_)
    if (fd >= 0) ::close(std::exchange(fd, -1));
  if (spare_fd_ >= 0) ::close(std::exchange(spare_fd_, -1));
}

void Server::accept_loop(int listen_fd, bool unix_socket) {
  while (!stopping_.load()) {
    pollfd p[2] = {{listen_fd, POLLIN, 0}, {wake_pipe_[0], POLLIN, 0}};
    int rc = ::poll(p, 2, -1);
    if (rc < 0 && errno != EINTR) return;
    if (p[1].revents != 0 || stopping_.load()) return;
    if ((p[0].revents & POLLIN) == 0) continue;
    // Everything the backlog holds, before polling again: a connect flood must not fill it (a
    // full backlog refuses every user's connect, not the flooder's).
    for (int batch = 0; batch < 1024 && !stopping_.load(); ++batch) {
      int fd = -1;
      {
        // Shared among acceptors; refuse_without_files takes it alone, so no accept can take the
        // descriptor it frees for a moment.
        std::shared_lock accepting(accept_mutex_);
        fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);  // the listener is non-blocking
      }
      if (fd >= 0) {
        admit(fd, unix_socket);
        continue;
      }
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EMFILE || errno == ENFILE) refuse_without_files(listen_fd);
      break;
    }
  }
}

void Server::refuse_without_files(int listen_fd) {
  // The client would wait in the backlog until a descriptor is freed, maybe for ever: give up
  // the spare for a moment to accept it and answer 503.
  std::unique_lock lock(accept_mutex_);
  if (spare_fd_ >= 0) {
    ::close(std::exchange(spare_fd_, -1));
    int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd >= 0) refuse(fd, "too many connections: ergd is out of file descriptors");
  }
  spare_fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  // Another thread took the descriptor: wait for one to be freed rather than spin.
  if (spare_fd_ < 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
}

void Server::admit(int fd, bool unix_socket) {
  // A peer that connected and closed already (a connect flood's connections, mostly) gets no
  // thread and no further syscall: there is nothing to answer. Keeps the accept loop at the
  // speed of accept(2).
  {
    char probe = 0;
    if (::recv(fd, &probe, 1, MSG_PEEK | MSG_DONTWAIT) == 0) {
      ::close(fd);
      return;
    }
  }
  Peer peer;
  peer.unix_socket = unix_socket;
  if (unix_socket) {
    ucred cred{};
    socklen_t len = sizeof cred;
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0) {
      peer.uid = cred.uid;
      peer.gid = cred.gid;
      if (cred.pid > 0) peer.pid = cred.pid;
    }
  }
  // A TCP peer on loopback is a local user (the kernel's socket table says whose socket it is):
  // its TCP connections are counted as that user's, so one local user's TCP connections cannot
  // lock another out. What it may do still goes by its token alone (Peer::uid stays unset).
  std::optional<std::uint32_t> tcp_uid;
  if (!unix_socket) {
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    // Under the acceptors' shared lock: the lookup's netlink socket must not take the descriptor
    // refuse_without_files frees for a moment (it holds the lock alone).
    std::shared_lock lookup(accept_mutex_);
    tcp_uid = loopback_peer_uid(fd);
  }
  const Bucket bucket = peer.uid ? Bucket{*peer.uid} : tcp_uid ? kTcpUser | Bucket{*tcp_uid} : kNoUid;
  const bool tcp_bucket = bucket == kNoUid || (bucket & kTcpUser) != 0;
  const bool reserve = may_use_reserve(peer);
  // A uid connecting faster than kAcceptRate (beyond a burst of as many) is shed: closed at once,
  // with no reply and no thread, so its flood cannot slow the accept loop for others. Root and
  // remote TCP peers (one bucket for all of them) are not.
  if (bucket != kNoUid && (bucket & ~kTcpUser) != 0) {
    std::lock_guard lock(mutex_);
    const auto now = Clock::now();
    auto& r = accept_rate_[bucket];
    if (r.last == Clock::time_point{}) r.tokens = kAcceptRate;
    r.tokens = std::min(kAcceptRate, r.tokens + kAcceptRate * std::chrono::duration<double>(now - r.last).count());
    r.last = now;
    if (r.tokens < 1.0) {
      ++shed_;
      ::close(fd);
      return;
    }
    r.tokens -= 1.0;
    if (accept_rate_.size() > 4096)  // forget uids that have been quiet for a second
      std::erase_if(accept_rate_, [&](const auto& e) { return now - e.second.last > std::chrono::seconds(1); });
  }
  enum class Refusal { kNone, kPerUid, kTotal, kReserved, kNoMemory } why = Refusal::kNone;
  std::shared_ptr<Deadline> deadline;
  {
    std::lock_guard lock(mutex_);
    auto held = [&] {
      auto it = per_bucket_.find(bucket);
      return it == per_bucket_.end() ? std::size_t{0} : it->second;
    };
    // A TCP bucket, full, makes room by closing its longest-idle connection (one waiting for its
    // next request): a TCP client may open a new connection for each request, and the remote
    // peers' shared bucket cannot tell them apart. A uid's Unix-socket bucket holds only that
    // user's connections: over its limit, refused.
    if (held() >= limits_.per_uid && !(tcp_bucket && evict_idle(bucket)))
      why = Refusal::kPerUid;
    else if (open_ >= limits_.total)
      why = Refusal::kTotal;
    else if (!reserve && open_ >= limits_.total - limits_.reserved)
      why = Refusal::kReserved;
    else {
      try {
        deadline = std::make_shared<Deadline>(0);
        connections_.emplace(fd, Connection{deadline, bucket, ++admissions_, true});
        try {
          ++per_bucket_[bucket];
        } catch (const std::bad_alloc&) {
          connections_.erase(fd);
          throw;
        }
        ++open_;
        ++threads_;
      } catch (const std::bad_alloc&) {
        why = Refusal::kNoMemory;
      }
    }
  }
  switch (why) {
    case Refusal::kNone: break;
    case Refusal::kPerUid:
      return refuse_later(fd,
                          (peer.uid  ? "too many connections from uid " + std::to_string(*peer.uid)
                           : tcp_uid ? "too many TCP connections from uid " + std::to_string(*tcp_uid)
                                     : std::string("too many connections from remote TCP peers (counted together)")) +
                              ": at most " + std::to_string(limits_.per_uid) + " per user (--max-connections-per-uid)");
    case Refusal::kTotal:
      return refuse_later(fd, "too many connections: ergd's limit of " + std::to_string(limits_.total) +
                                  " is reached (--max-connections)");
    case Refusal::kReserved:
      return refuse_later(fd, "too many connections: the last " + std::to_string(limits_.reserved) + " of " +
                                  std::to_string(limits_.total) +
                                  " are reserved for root and allowed users (--reserved-connections)");
    case Refusal::kNoMemory: return refuse(fd, "too many connections: out of memory");
  }
  try {
    std::thread([this, fd, peer, deadline] {
      serve(fd, peer, *deadline);
      release(fd);
      ::close(fd);
    }).detach();
  } catch (const std::system_error&) {
    release(fd);
    refuse(fd, "too many connections: cannot start a thread");
  }
}

void Server::release(int fd) {
  std::lock_guard lock(mutex_);
  auto c = connections_.find(fd);
  if (c != connections_.end()) {
    if (c->second.counted) {
      auto held = per_bucket_.find(c->second.bucket);
      if (held != per_bucket_.end() && --held->second == 0) per_bucket_.erase(held);
      --open_;
    }
    connections_.erase(c);
  }
  if (--threads_ == 0) idle_.notify_all();
}

bool Server::evict_idle(Bucket bucket) {
  // The longest idle: the earliest idle deadline; one the watchdog has not stamped yet
  // (kIdleDeadline) became idle last, the latest admitted of those last of all. One with bytes
  // waiting is not idle any more.
  std::vector<std::map<int, Connection>::iterator> idle;
  for (auto it = connections_.begin(); it != connections_.end(); ++it) {
    if (!it->second.counted || it->second.bucket != bucket) continue;
    const std::int64_t d = it->second.deadline->load(std::memory_order_relaxed);
    if (d >= 0 || d == kEvicted) continue;  // receiving a request, or answering one
    idle.push_back(it);
  }
  auto due = [](const std::map<int, Connection>::iterator& it) {
    const std::int64_t d = it->second.deadline->load(std::memory_order_relaxed);
    return d == kIdleDeadline || d >= 0 ? std::numeric_limits<std::int64_t>::max() : -d;
  };
  std::sort(idle.begin(), idle.end(), [&](const auto& a, const auto& b) {
    const auto da = due(a), db = due(b);
    return da != db ? da < db : a->second.admitted < b->second.admitted;
  });
  std::map<int, Connection>::iterator victim = connections_.end();
  for (auto& it : idle) {
    char probe = 0;
    if (::recv(it->first, &probe, 1, MSG_PEEK | MSG_DONTWAIT) > 0) continue;  // a request is arriving
    // Taken only if it is still waiting: its thread swaps the deadline to 0 when its recv returns.
    std::int64_t d = it->second.deadline->load(std::memory_order_relaxed);
    if (d >= 0 || d == kEvicted) continue;
    if (!it->second.deadline->compare_exchange_strong(d, kEvicted, std::memory_order_relaxed)) continue;
    victim = it;
    break;
  }
  if (victim == connections_.end()) return false;
  victim->second.counted = false;
  auto held = per_bucket_.find(bucket);
  if (held != per_bucket_.end() && --held->second == 0) per_bucket_.erase(held);
  --open_;
  // Its thread's recv returns 0 and it leaves quietly, as after an idle timeout.
  ::shutdown(victim->first, SHUT_RDWR);
  return true;
}

void Server::refuse_later(int fd, std::string why) {
  constexpr std::size_t kMaxWaiting = 256;
  {
    std::lock_guard lock(refused_mutex_);
    if (refused_.size() < kMaxWaiting) {
      try {
        refused_.push_back(Refused{fd, std::move(why), Clock::now() + std::chrono::milliseconds(200)});
        char w = 1;
        [[maybe_unused]] auto n = ::write(refuser_pipe_[1], &w, 1);
        return;
      } catch (const std::bad_alloc&) {
      }
    }
  }
  refuse(fd, why);  // too many waiting already: at once
}

void Server::refuser_loop() {
  pthread_setname_np(pthread_self(), "ergd-refuse");
  std::vector<Refused> waiting;
  std::vector<pollfd> polls;
  std::vector<std::string> heads;  // what each waiting connection has sent so far
  while (true) {
    {
      std::lock_guard lock(refused_mutex_);
      for (auto& r : refused_) waiting.push_back(std::move(r)), heads.emplace_back();
      refused_.clear();
    }
    const auto now = Clock::now();
    // Answer each whose request head has arrived, whose peer left or sent too much, or whose wait
    // is over.
    for (std::size_t i = 0; i < waiting.size();) {
      const bool done =
          heads[i].find("\r\n\r\n") != std::string::npos || heads[i].size() > 16384 || now >= waiting[i].until;
      if (done || refuser_stop_.load()) {
        refuse(waiting[i].fd, waiting[i].why);
        waiting[i] = std::move(waiting.back());
        waiting.pop_back();
        heads[i] = std::move(heads.back());
        heads.pop_back();
        continue;
      }
      ++i;
    }
    if (refuser_stop_.load() && waiting.empty()) {
      std::lock_guard lock(refused_mutex_);
      if (refused_.empty()) return;
      continue;
    }
    polls.assign(1, pollfd{refuser_pipe_[0], POLLIN, 0});
    for (const auto& r : waiting) polls.push_back(pollfd{r.fd, POLLIN, 0});
    int timeout = -1;
    if (!waiting.empty()) {
      auto first = std::min_element(waiting.begin(), waiting.end(), [](const Refused& a, const Refused& b) {
                     return a.until < b.until;
                   })->until;
      timeout = static_cast<int>(
          std::max<std::int64_t>(1, std::chrono::ceil<std::chrono::milliseconds>(first - now).count()));
    }
    if (::poll(polls.data(), polls.size(), timeout) < 0 && errno != EINTR) continue;
    if (polls[0].revents != 0) {
      char sink[64];
      while (::read(refuser_pipe_[0], sink, sizeof sink) > 0) {
      }
    }
    for (std::size_t i = 0; i < waiting.size(); ++i) {
      if (polls[i + 1].revents == 0) continue;
      char chunk[4096];
      const ssize_t n = ::recv(waiting[i].fd, chunk, sizeof chunk, MSG_DONTWAIT);
      if (n > 0)
        heads[i].append(chunk, static_cast<std::size_t>(n));
      else if (n == 0 || (errno != EAGAIN && errno != EINTR))
        waiting[i].until = now;  // the peer left: answer (and close) now
    }
  }
}

void Server::watchdog_loop() {
  // Checks twice per shortest timeout (at most every 500 ms): a deadline is enforced late by at
  // most that period. An idle wait gets its deadline here, at the first check that sees it, so
  // idle connections are closed between idle_timeout and idle_timeout + period after their last
  // reply, never early.
  auto period = std::clamp(std::min(config_.idle_timeout, config_.request_timeout) / 2, std::chrono::milliseconds(10),
                           std::chrono::milliseconds(500));
  const auto idle_ticks = std::chrono::duration_cast<Clock::duration>(config_.idle_timeout).count();
  std::unique_lock lock(mutex_);
  while (!stopping_.load()) {
    watchdog_cv_.wait_for(lock, period);
    auto now = Clock::now().time_since_epoch().count();
    for (const auto& [fd, connection] : connections_) {
      Deadline* deadline = connection.deadline.get();
      auto d = deadline->load(std::memory_order_relaxed);
      if (d == kIdleDeadline) {
        // The connection may have received its request meanwhile (and stored 0): only an idle
        // wait that is still one gets the deadline, stored negated (idle: evict_idle may take it).
        deadline->compare_exchange_strong(d, -(now + idle_ticks), std::memory_order_relaxed);
        continue;
      }
      // SHUT_RD: the blocked recv returns 0; the thread can still answer 408.
      if (d != 0 && d != kEvicted && now >= (d < 0 ? -d : d)) ::shutdown(fd, SHUT_RD);
    }
  }
}

}  // namespace erg::daemon
