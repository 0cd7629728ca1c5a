#pragma once
// A child process that talks to ergd as another uid, driven over pipes: ergd tells peers apart
// by SO_PEERCRED, so per-uid limits need processes of other uids (and a client holding
// thousands of sockets is better off in its own descriptor table). Needs root to change uid.
// Create agents before the daemon starts: forked from a process with one thread, the child may
// allocate freely.

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "erg/protocol/http.hpp"

namespace erg::daemon::testing {

/// What an agent reports (plain data: it crosses a pipe).
struct AgentReport {
  int ok = 0;                   ///< Connections answered 200 (then held open).
  int refused = 0;              ///< Connections answered 503 (then closed).
  int other = 0;                ///< No whole reply within 2 s, another status, or connect failed.
  double max_ok_ms = 0;         ///< connect → whole 200 reply.
  double max_refusal_ms = 0;    ///< connect → whole 503 reply.
  int still_open = 0;           ///< Held connections ergd has not closed (kPipeline's last report).
  int dropped = 0;              ///< Pipelining connections ergd closed.
  double max_drop_ms = 0;       ///< A pipelining socket found full → ergd closed it.
  long requests_sent = 0;       ///< By the pipelining connections.
  char last_refusal[240] = {};  ///< Body of the last 503.
};

class UidAgent {
 public:
  /// Forks the agent; it runs as `uid` (gid the same number) unless `uid` is 0.
  UidAgent(uid_t uid, std::string socket_path) : path_(std::move(socket_path)) {
    int to[2], from[2];
    if (::pipe2(to, O_CLOEXEC) != 0 || ::pipe2(from, O_CLOEXEC) != 0) return;
    pid_ = ::fork();
    if (pid_ == 0) {
      ::close(to[1]);
      ::close(from[0]);
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (uid != 0 && (::setgroups(0, nullptr) != 0 || ::setgid(uid) != 0 || ::setuid(uid) != 0)) ::_exit(3);
      ::signal(SIGPIPE, SIG_IGN);
      run(to[0], from[1]);
      ::_exit(0);  // no atexit handlers, no leak check in the child
    }
    ::close(to[0]);
    ::close(from[1]);
    cmd_ = to[1];
    report_ = from[0];
  }
  ~UidAgent() {
    if (pid_ <= 0) return;
    send_command({kExit, 0, 0, 0});
    ::close(cmd_);
    ::close(report_);
    ::waitpid(pid_, nullptr, 0);
  }
  UidAgent(const UidAgent&) = delete;
  UidAgent& operator=(const UidAgent&) = delete;

  [[nodiscard]] bool running() const { return pid_ > 0; }

  /// Opens `n` connections one after another; each asks GET /time once and is held open when
  /// answered 200.
  AgentReport open(int n) {
    send_command({kOpen, n, 0, 0});
    return receive();
  }
  /// Closes the held connections; reports how many ergd had not closed.
  AgentReport close_all() {
    send_command({kCloseAll, 0, 0, 0});
    return receive();
  }
  /// Starts `clients` connections that send requests and never read the replies (reconnecting
  /// when ergd drops one), then `probes` connections like open()'s but not held. Reports twice:
  /// once the probes are done (receive()), and after `ms` of pipelining (receive() again), then
  /// with the count of held connections still open.
  void pipeline(int clients, int probes, int ms) { send_command({kPipeline, clients, probes, ms}); }
  AgentReport receive() {
    AgentReport r{};
    r.other = -1;
    read_exact(report_, &r, sizeof r);
    return r;
  }

 private:
  enum Op { kOpen, kCloseAll, kPipeline, kExit };
  struct Command {
    int op;
    int n;
    int probes;
    int ms;
  };
  using Clock = std::chrono::steady_clock;

  static double ms_since(Clock::time_point t) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
  }
  static bool read_exact(int fd, void* p, std::size_t n) {
    auto* c = static_cast<char*>(p);
    while (n > 0) {
      ssize_t k = ::read(fd, c, n);
      if (k < 0 && errno == EINTR) continue;
      if (k <= 0) return false;
      c += k;
      n -= static_cast<std::size_t>(k);
    }
    return true;
  }
  static void write_exact(int fd, const void* p, std::size_t n) {
    const auto* c = static_cast<const char*>(p);
    while (n > 0) {
      ssize_t k = ::write(fd, c, n);
      if (k < 0 && errno == EINTR) continue;
      if (k <= 0) return;
      c += k;
      n -= static_cast<std::size_t>(k);
    }
  }
  void send_command(Command c) { write_exact(cmd_, &c, sizeof c); }

  int connect_socket(bool nonblocking) const {
    int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | (nonblocking ? SOCK_NONBLOCK : 0), 0);
    if (fd < 0) return -1;
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strncpy(a.sun_path, path_.c_str(), sizeof a.sun_path - 1);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      ::close(fd);
      return -1;
    }
    return fd;
  }

  /// One connection asking GET /time: held when answered 200.
  void one_request(AgentReport& r, bool hold) {
    auto t0 = Clock::now();
    int fd = connect_socket(false);
    if (fd < 0) {
      ++r.other;
      return;
    }
    timeval tv{2, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    static const char kRequest[] = "GET /time HTTP/1.1\r\n\r\n";
    [[maybe_unused]] auto sent = ::send(fd, kRequest, sizeof kRequest - 1, MSG_NOSIGNAL);
    std::string buf;
    protocol::ParsedResponse resp;
    protocol::ParseStatus status = protocol::ParseStatus::kIncomplete;
    char chunk[4096];
    while (status == protocol::ParseStatus::kIncomplete) {
      ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
      if (n <= 0) break;
      buf.append(chunk, static_cast<std::size_t>(n));
      status = protocol::parse_response(buf, resp).status;
    }
    double ms = ms_since(t0);
    if (status == protocol::ParseStatus::kComplete && resp.status == 200) {
      ++r.ok;
      r.max_ok_ms = std::max(r.max_ok_ms, ms);
      if (hold) {
        held_.push_back(fd);
        return;
      }
    } else if (status == protocol::ParseStatus::kComplete && resp.status == 503) {
      ++r.refused;
      r.max_refusal_ms = std::max(r.max_refusal_ms, ms);
      std::snprintf(r.last_refusal, sizeof r.last_refusal, "%s", resp.body.c_str());
    } else {
      ++r.other;
    }
    ::close(fd);
  }

  int still_open() const {
    int open = 0;
    for (int fd : held_) {
      pollfd p{fd, POLLIN | POLLRDHUP, 0};
      if (::poll(&p, 1, 0) == 0) ++open;
    }
    return open;
  }

  struct Pipeliner {
    int fd = -1;
    Clock::time_point full_since{};
    bool full = false;
  };

  /// Sends requests until the socket is full; false when ergd closed the connection.
  static bool fill(Pipeliner& p, AgentReport& r) {
    static const std::string kBatch = [] {
      std::string s;
      for (int i = 0; i < 64; ++i) s += "GET /time HTTP/1.1\r\n\r\n";
      return s;
    }();
    for (;;) {
      ssize_t n = ::send(p.fd, kBatch.data(), kBatch.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        r.requests_sent += n / 22;
        p.full = false;
        continue;
      }
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        if (!p.full) p.full_since = Clock::now();
        p.full = true;
        return true;
      }
      if (n < 0 && errno == EINTR) continue;
      return false;
    }
  }

  void pipeline(const Command& c, int report) {
    AgentReport r{};
    std::vector<Pipeliner> ps(static_cast<std::size_t>(c.n));
    auto reconnect = [&](Pipeliner& p) {
      p.fd = connect_socket(true);
      p.full = false;
      if (p.fd >= 0 && !fill(p, r)) {
        ::close(p.fd);
        p.fd = -1;
      }
    };
    for (auto& p : ps) reconnect(p);
    for (int i = 0; i < c.probes; ++i) one_request(r, false);
    write_exact(report, &r, sizeof r);
    auto end = Clock::now() + std::chrono::milliseconds(c.ms);
    std::vector<pollfd> pfds;
    while (Clock::now() < end) {
      pfds.clear();
      for (auto& p : ps) {
        if (p.fd < 0) reconnect(p);
        pfds.push_back({p.fd, POLLOUT, 0});
      }
      ::poll(pfds.data(), pfds.size(), 10);
      for (std::size_t k = 0; k < ps.size(); ++k) {
        auto& p = ps[k];
        if (p.fd < 0) continue;
        bool gone = (pfds[k].revents & (POLLHUP | POLLERR)) != 0;
        if (!gone && (pfds[k].revents & POLLOUT) != 0) gone = !fill(p, r);
        if (gone) {
          ++r.dropped;
          if (p.full) r.max_drop_ms = std::max(r.max_drop_ms, ms_since(p.full_since));
          ::close(p.fd);
          p.fd = -1;
        }
      }
    }
    for (auto& p : ps)
      if (p.fd >= 0) ::close(p.fd);
    r.still_open = still_open();
    write_exact(report, &r, sizeof r);
  }

  void run(int commands, int report) {
    Command c{};
    while (read_exact(commands, &c, sizeof c)) {
      if (c.op == kExit) return;
      if (c.op == kPipeline) {
        pipeline(c, report);
        continue;
      }
      AgentReport r{};
      if (c.op == kOpen)
        for (int i = 0; i < c.n; ++i) one_request(r, true);
      if (c.op == kCloseAll) {
        r.still_open = still_open();
        for (int fd : held_) ::close(fd);
        held_.clear();
      }
      write_exact(report, &r, sizeof r);
    }
  }

  std::string path_;
  pid_t pid_ = -1;
  int cmd_ = -1;
  int report_ = -1;
  std::vector<int> held_;  // in the child
};

}  // namespace erg::daemon::testing
