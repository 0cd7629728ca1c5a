// ergd over a real Unix socket (and loopback TCP) with fake devices: keep-alive, malformed
// input, concurrency, stale sockets, the socket's directory (missing, writable by others,
// sticky), connection limits (per uid, reserve, total, out of file descriptors) and write
// deadlines. SSE and stop: stream_test.cpp; many hostile connections: abuse_test.cpp.

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "erg/client/connection.hpp"
#include "socket_helpers.hpp"
#include "uid_agent.hpp"

namespace erg::daemon {
namespace {

using testing::connect_raw;
using testing::raw_exchange;
using testing::serve;
using testing::status_of;
using testing::temp_socket;

TEST(Server, KeepAliveOverUnixSocketAndTcp) {
  std::string path = temp_socket("ka");
  auto f = serve(path);
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0660u);
  client::Connection c(client::Endpoint{path});
  for (int i = 0; i < 50; ++i) {
    auto r = c.request("GET", "/gpu/get_power_limit?gpu_ids=0");
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->body, R"({"0":{"power_limit_mw":300000}})");
  }
  client::Connection t(client::Endpoint{"", "127.0.0.1", f->daemon->tcp_port(), ""});
  auto r = t.request("POST", "/gpu/set_power_limit?gpu_ids=1&power_limit_mw=150000&block=true");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(f->gpus[1]->power_limit()->value(), 150000.0);
}

TEST(Server, StaleSocketReplacedLiveSocketRefusedAndRemovedOnStop) {
  std::string path = temp_socket("stale");
  {  // A stale socket file: bound, never listened on, closed.
    int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strncpy(a.sun_path, path.c_str(), sizeof a.sun_path - 1);
    ::unlink(path.c_str());
    ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    ::close(fd);
  }
  auto f = serve(path);
  EXPECT_EQ(status_of(raw_exchange(path, "GET /time HTTP/1.1\r\nConnection: close\r\n\r\n")), 200);
  // A second daemon on the same live socket is refused, and the first keeps serving.
  Config c;
  c.socket_path = path;
  c.skip_privilege_check = true;
  auto second = Daemon::create(c, Inventory{});
  ASSERT_TRUE(second);
  auto r = (*second)->start();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kAlreadyExists);
  EXPECT_EQ(status_of(raw_exchange(path, "GET /time HTTP/1.1\r\nConnection: close\r\n\r\n")), 200);
  f->daemon->stop();
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(Server, SocketInAMissingDirectoryIsRefusedAndNothingIsCreated) {
  namespace fs = std::filesystem;
  std::string dir = "/tmp/ergd-test-" + std::to_string(::getpid()) + "-missing";
  fs::remove_all(dir);
  Config c;
  c.socket_path = dir + "/sub/ergd.sock";
  c.skip_privilege_check = true;
  auto d = Daemon::create(c, Inventory{});
  ASSERT_TRUE(d);
  auto r = (*d)->start();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kNotFound);
  EXPECT_NE(r.error().message.find("directory " + dir + "/sub does not exist"), std::string::npos) << r.error().message;
  EXPECT_FALSE(fs::exists(dir)) << "ergd created the socket's directory";

  // A parent that is a file is refused too, naming it.
  std::string file = dir + "-file";
  { std::ofstream(file) << "x"; }
  c.socket_path = file + "/ergd.sock";
  auto f = Daemon::create(c, Inventory{});
  ASSERT_TRUE(f);
  auto rf = (*f)->start();
  ASSERT_FALSE(rf);
  EXPECT_NE(rf.error().message.find(file + " is not a directory"), std::string::npos) << rf.error().message;
  fs::remove(file);
}

TEST(Server, WrongMethodIs405WithAllowOverTheSocket) {
  std::string path = temp_socket("method");
  auto f = serve(path);
  std::string reply = raw_exchange(
      path,
      "DELETE /gpu/set_power_limit?gpu_ids=0&power_limit_mw=150000&block=true HTTP/1.1\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(status_of(reply), 405) << reply;
  EXPECT_NE(reply.find("\r\nAllow: POST\r\n"), std::string::npos) << reply;
  EXPECT_EQ(f->gpus[0]->power_limit()->value(), 300000.0);
}

TEST(Server, MalformedRequestsGet4xxAndDaemonKeepsServing) {
  std::string path = temp_socket("bad");
  auto f = serve(path);
  struct Case {
    std::string bytes;
    int status;
  };
  std::vector<Case> cases = {
      {"GARBAGE\r\n\r\n", 400},
      {"GET / HTTP/9.9\r\n\r\n", 505},
      {std::string("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n", 15), 400},  // TLS hello
      {"GET /time HTTP/1.1\r\nX: " + std::string(64 * 1024, 'a') + "\r\n\r\n", 431},
      {"GET /gpu/get_power?gpu_ids=" + std::string(1 << 20, '1') + " HTTP/1.1\r\n\r\n", 414},
      {"GET /gpu/get_power?gpu_ids=%C0%AF HTTP/1.1\r\nConnection: close\r\n\r\n", 400},
      {"GET /gpu/get_power?gpu_ids=\xff\xfe HTTP/1.1\r\n\r\n", 400},
      {"POST /gpu/set_power_limit HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 501},
      {"POST /time HTTP/1.1\r\nContent-Length: 9999999\r\n\r\n", 413},
  };
  for (const auto& c : cases) {
    std::string reply = raw_exchange(path, c.bytes);
    EXPECT_EQ(status_of(reply), c.status) << c.bytes.substr(0, 60);
  }
  // Half a request then close; an idle connection; the daemon still serves.
  int idle = connect_raw(path);
  EXPECT_EQ(raw_exchange(path, "GET /ti").size(), 0u);
  EXPECT_EQ(status_of(raw_exchange(path, "GET /time HTTP/1.1\r\nConnection: close\r\n\r\n")), 200);
  ::close(idle);
}

TEST(Server, SlowRequestGets408AndIdleConnectionIsClosed) {
  std::string path = temp_socket("slow");
  Config c;
  c.request_timeout = std::chrono::milliseconds(300);
  c.idle_timeout = std::chrono::milliseconds(600);
  auto f = serve(path, c);
  auto read_until_close = [](int fd) {
    timeval tv{5, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    std::string out;
    char buf[4096];
    for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;) out.append(buf, static_cast<std::size_t>(n));
    return out;
  };

  // Half a request, then silence (slowloris): 408 once request_timeout has passed, then close.
  int slow = connect_raw(path);
  ASSERT_GE(slow, 0);
  auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(::send(slow, "GET /time HTTP/1.1\r\nHo", 22, MSG_NOSIGNAL), 22);
  std::string reply = read_until_close(slow);
  auto waited = std::chrono::steady_clock::now() - t0;
  ::close(slow);
  EXPECT_EQ(status_of(reply), 408) << reply;
  EXPECT_GE(waited, std::chrono::milliseconds(300));
  EXPECT_LT(waited, std::chrono::seconds(3));

  // A keep-alive connection that keeps asking stays open past idle_timeout; once silent, it is
  // closed without a reply.
  int fd = connect_raw(path);
  ASSERT_GE(fd, 0);
  const std::string req = "GET /time HTTP/1.1\r\n\r\n";
  for (int i = 0; i < 4; ++i) {
    ASSERT_EQ(::send(fd, req.data(), req.size(), MSG_NOSIGNAL), static_cast<ssize_t>(req.size()));
    char buf[4096];
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    ASSERT_GT(n, 0) << "request " << i;
    EXPECT_EQ(status_of(std::string(buf, static_cast<std::size_t>(n))), 200);
    std::this_thread::sleep_for(std::chrono::milliseconds(250));  // 4 × 250 ms > idle_timeout
  }
  t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(read_until_close(fd), "");
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(3));
  ::close(fd);

  // The daemon still serves.
  EXPECT_EQ(status_of(raw_exchange(path, "GET /time HTTP/1.1\r\nConnection: close\r\n\r\n")), 200);
}

TEST(Server, ManyConcurrentClientsAllSucceed) {
  std::string path = temp_socket("conc");
  auto f = serve(path);
  constexpr int kClients = 256, kRequests = 200;
  std::atomic<int> ok{0}, bad{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i)
    threads.emplace_back([&, i] {
      client::Connection c(client::Endpoint{path});
      for (int k = 0; k < kRequests; ++k) {
        auto r = c.request("GET", i % 2 ? "/gpu/get_cumulative_energy?gpu_ids=0" : "/gpu/get_power_limit");
        (r && r->status == 200 ? ok : bad)++;
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), kClients * kRequests);
  EXPECT_EQ(bad.load(), 0);
}

}  // namespace
}  // namespace erg::daemon

namespace erg::daemon {
namespace {

using testing::AgentReport;
using testing::connect_raw;
using testing::raw_exchange;
using testing::serve;
using testing::status_of;
using testing::temp_socket;
using testing::UidAgent;
using Clock = std::chrono::steady_clock;

/// A directory other uids can reach (0755), for a socket they may connect to (mode 0666).
struct SharedDir {
  std::string path;
  SharedDir() {
    char t[] = "/tmp/ergd-shared-XXXXXX";
    path = ::mkdtemp(t) != nullptr ? t : "";
    ::chmod(path.c_str(), 0755);
  }
  ~SharedDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(Server, PerUidLimitAndReserveAnswer503NamingWhy) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to connect as other uids (setuid)";
  SharedDir dir;
  std::string path = dir.path + "/limits.sock";
  // Agents first: forked while this process has one thread.
  UidAgent a(65534, path), b(65533, path), allowed(65532, path);
  ASSERT_TRUE(a.running() && b.running() && allowed.running());
  Config c;
  c.socket_mode = 0666;
  c.max_connections = 8;
  c.max_connections_per_uid = 4;
  c.reserved_connections = 2;
  c.allow_uid[protocol::ApiGroup::kGpuRead] = {65532};
  auto f = serve(path, c);

  // uid A: 4 connections, the fifth refused as over the per-uid limit.
  AgentReport ra = a.open(5);
  EXPECT_EQ(ra.ok, 4);
  EXPECT_EQ(ra.refused, 1);
  EXPECT_EQ(ra.other, 0);
  EXPECT_TRUE(contains(ra.last_refusal, "too many connections from uid 65534: at most 4 per user")) << ra.last_refusal;
  // uid B: 2 more (6 open), then the last 2 slots are kept for root and allowed uids.
  AgentReport rb = b.open(3);
  EXPECT_EQ(rb.ok, 2);
  EXPECT_EQ(rb.refused, 1);
  EXPECT_TRUE(contains(rb.last_refusal, "the last 2 of 8 are reserved for root and allowed users")) << rb.last_refusal;
  // An allowed uid takes the reserve; then the total limit holds for everyone, root included.
  AgentReport rc = allowed.open(3);
  EXPECT_EQ(rc.ok, 2);
  EXPECT_EQ(rc.refused, 1);
  EXPECT_TRUE(contains(rc.last_refusal, "limit of 8 is reached")) << rc.last_refusal;
  std::string root = raw_exchange(path, "GET /time HTTP/1.1\r\n\r\n");
  EXPECT_EQ(status_of(root), 503) << root;
  EXPECT_TRUE(contains(root, "limit of 8 is reached")) << root;
  for (double ms : {ra.max_refusal_ms, rb.max_refusal_ms, rc.max_refusal_ms}) EXPECT_LT(ms, 1000.0);

  // A's connections were held open all along; once A leaves, its slots are free again, for B
  // too. Each slot comes back when its connection's thread has seen the close, so B retries for
  // up to 2 s (root's request below could pass earlier: root may use the reserve).
  EXPECT_EQ(a.close_all().still_open, 4);
  int opened = 0;
  for (int i = 0; i < 200 && opened == 0; ++i) {
    opened = b.open(1).ok;
    if (opened == 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(opened, 1);
  EXPECT_EQ(status_of(raw_exchange(path, "GET /time HTTP/1.1\r\nConnection: close\r\n\r\n")), 200);
}

TEST(Server, LoopbackTcpPeersAreCountedAsTheirUser) {
  std::string path = temp_socket("tcpbucket");
  Config c;
  c.max_connections = 16;
  c.max_connections_per_uid = 3;
  auto f = serve(path, c);
  auto connect_tcp = [&] {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(f->daemon->tcp_port());
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    return fd;
  };
  // Three connections each in the middle of a request (its first line sent): busy, not idle.
  std::vector<int> held;
  for (int i = 0; i < 3; ++i) {
    held.push_back(connect_tcp());
    ASSERT_GT(::send(held.back(), "GET /time HTTP/1.1\r\n", 20, MSG_NOSIGNAL), 0);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // each connection's thread has read it
  client::Connection t(client::Endpoint{"", "127.0.0.1", f->daemon->tcp_port(), ""});
  auto r = t.request("GET", "/time");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->status, 503);
  // Over loopback the peer is a local user (root here): its TCP connections are counted as its.
  EXPECT_TRUE(contains(r->body, "too many TCP connections from uid " + std::to_string(::geteuid()) + ": at most 3"))
      << r->body;
  // The Unix socket's root peer is another bucket.
  EXPECT_EQ(status_of(raw_exchange(path, "GET /time HTTP/1.1\r\nConnection: close\r\n\r\n")), 200);
  for (int fd : held) ::close(fd);
}

// A refused connection's 503 comes after its request has arrived (issue 31 item 10): a client
// that writes its request in pieces after connecting reads the 503 instead of a reset.
TEST(Server, RefusalWaitsForTheRequestBeforeAnswering) {
  std::string path = temp_socket("refuselate");
  Config c;
  c.max_connections = 16;
  c.max_connections_per_uid = 1;
  auto f = serve(path, c);
  auto connect_tcp = [&] {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(f->daemon->tcp_port());
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    return fd;
  };
  int busy = connect_tcp();  // the bucket's one slot, in the middle of a request
  ASSERT_GT(::send(busy, "GET /time HTTP/1.1\r\n", 20, MSG_NOSIGNAL), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  for (int k = 0; k < 5; ++k) {
    int fd = connect_tcp();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // ergd has accepted (and refused) it
    ASSERT_EQ(::send(fd, "GET /time HTTP/1.1\r\n", 20, MSG_NOSIGNAL), 20) << std::strerror(errno);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ASSERT_EQ(::send(fd, "Host: x\r\n\r\n", 11, MSG_NOSIGNAL), 11) << std::strerror(errno);
    std::string reply;
    char chunk[4096];
    timeval tv{2, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    for (ssize_t n; (n = ::recv(fd, chunk, sizeof chunk, 0)) > 0;) reply.append(chunk, static_cast<std::size_t>(n));
    EXPECT_EQ(status_of(reply), 503) << "attempt " << k << ": '" << reply << "' " << std::strerror(errno);
    EXPECT_TRUE(contains(reply, "too many TCP connections from uid " + std::to_string(::geteuid()))) << reply;
    ::close(fd);
  }
  ::close(busy);
}

// A TCP client may open a connection per request: idle connections (waiting for their next
// request) must not lock out its new ones, nor, in the remote peers' shared bucket, other
// peers'. A full TCP bucket closes its longest-idle connection to admit a new one (issue 31
// item 7: 256 idle connections from one user served 0 of 50 requests).
TEST(Server, IdleTcpConnectionsGiveWayToNewOnes) {
  std::string path = temp_socket("tcpidle");
  Config c;
  c.max_connections = 16;
  c.max_connections_per_uid = 3;
  auto f = serve(path, c);
  std::vector<int> idle;
  for (int i = 0; i < 3; ++i) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(f->daemon->tcp_port());
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    idle.push_back(fd);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // admitted in this order
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  auto closed = [](int fd, int wait_ms) {
    pollfd p{fd, POLLIN | POLLRDHUP, 0};
    char b;
    return ::poll(&p, 1, wait_ms) == 1 && ::recv(fd, &b, 1, MSG_DONTWAIT) == 0;
  };
  {
    client::Connection t(client::Endpoint{"", "127.0.0.1", f->daemon->tcp_port(), ""});
    auto r = t.request("GET", "/time");
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_EQ(r->status, 200) << r->body;
  }
  // One connection made room: the oldest idle one, the others are untouched.
  EXPECT_TRUE(closed(idle[0], 1000));
  EXPECT_FALSE(closed(idle[1], 50));
  EXPECT_FALSE(closed(idle[2], 50));
  for (int k = 0; k < 4; ++k) {
    client::Connection t(client::Endpoint{"", "127.0.0.1", f->daemon->tcp_port(), ""});
    auto r = t.request("GET", "/time");
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_EQ(r->status, 200) << r->body;
  }
  for (int fd : idle) ::close(fd);
}

TEST(Server, OutOfFileDescriptorsAnswers503AndRecovers) {
  std::string path = temp_socket("emfile");
  UidAgent clients(0, path);  // another process: its sockets do not count against our limit
  ASSERT_TRUE(clients.running());
  auto f = serve(path);
  EXPECT_EQ(clients.open(1).ok, 1);

  // Fill this process's descriptor table up to a low soft limit, as a busy ergd would.
  rlimit saved{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &saved), 0);
  int highest = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd"))
    highest = std::max(highest, std::stoi(e.path().filename().string()));
  rlimit low = saved;
  low.rlim_cur = static_cast<rlim_t>(highest) + 1;
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &low), 0);
  std::vector<int> fillers;
  for (int fd; (fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0;) fillers.push_back(fd);
  AgentReport r = clients.open(5);
  for (int fd : fillers) ::close(fd);
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &saved), 0);

  // Every client got an answer, promptly: none was left waiting in the backlog.
  EXPECT_EQ(r.refused, 5) << "ok " << r.ok << " other " << r.other;
  EXPECT_EQ(r.other, 0);
  EXPECT_TRUE(contains(r.last_refusal, "out of file descriptors")) << r.last_refusal;
  EXPECT_LT(r.max_refusal_ms, 1000.0);
  std::printf("503 when out of file descriptors: slowest %.2f ms\n", r.max_refusal_ms);
  // And ergd serves again once descriptors are free.
  EXPECT_EQ(clients.open(1).ok, 1);
}

TEST(Server, ClientThatNeverReadsIsDroppedAfterTheWriteTimeout) {
  std::string path = temp_socket("noread");
  Config c;
  c.write_timeout = std::chrono::milliseconds(300);
  auto f = serve(path, c);
  int fd = connect_raw(path);
  ASSERT_GE(fd, 0);
  ::fcntl(fd, F_SETFL, O_NONBLOCK);
  std::string batch;
  for (int i = 0; i < 64; ++i) batch += "GET /gpu/get_power_limit HTTP/1.1\r\n\r\n";
  // Pipeline requests and never read: soon both directions are full and ergd's write waits.
  Clock::time_point full_since{};
  bool full = false, dropped = false;
  auto give_up = Clock::now() + std::chrono::seconds(5);
  while (!dropped && Clock::now() < give_up) {
    ssize_t n = ::send(fd, batch.data(), batch.size(), MSG_NOSIGNAL);
    if (n > 0) {
      full = false;
      continue;
    }
    if (errno == EAGAIN) {
      if (!full) full_since = Clock::now();
      full = true;
      pollfd p{fd, POLLOUT, 0};
      ::poll(&p, 1, 10);
      dropped = (p.revents & (POLLHUP | POLLERR)) != 0;
      continue;
    }
    dropped = true;  // EPIPE or ECONNRESET: ergd closed it
  }
  auto waited = Clock::now() - full_since;
  ::close(fd);
  ASSERT_TRUE(full);
  ASSERT_TRUE(dropped) << "ergd held a connection that never reads for 5 s";
  EXPECT_LT(waited, std::chrono::milliseconds(300 + 1500));
  std::printf("client that never reads dropped %.0f ms after its socket filled (write timeout 300 ms)\n",
              std::chrono::duration<double, std::milli>(waited).count());
  EXPECT_EQ(status_of(raw_exchange(path, "GET /time HTTP/1.1\r\nConnection: close\r\n\r\n")), 200);
}

Result<void> start_in(const std::string& dir, bool allow_insecure, std::vector<std::string>* warnings = nullptr) {
  Config c;
  c.socket_path = dir + "/ergd.sock";
  c.skip_privilege_check = true;
  c.allow_insecure_socket_dir = allow_insecure;
  auto d = Daemon::create(c, Inventory{});
  if (!d) return fail(d.error());
  auto r = (*d)->start();
  if (r && warnings) *warnings = (*d)->warnings();
  if (r && status_of(raw_exchange(c.socket_path, "GET /time HTTP/1.1\r\nConnection: close\r\n\r\n")) != 200)
    return fail(ErrorCode::kIo, "started but does not serve");
  return r;
}

TEST(Server, SocketDirectoryWritableByOthersIsRefusedNamingIt) {
  SharedDir d;
  ASSERT_FALSE(d.path.empty());
  ASSERT_TRUE(start_in(d.path, false));  // 0755, ours: fine
  for (mode_t mode : {0777, 0775, 0757}) {
    ::chmod(d.path.c_str(), mode);
    auto r = start_in(d.path, true);  // the flag does not cover a directory without the sticky bit
    ASSERT_FALSE(r) << std::oct << mode;
    EXPECT_EQ(r.error().code, ErrorCode::kNoPermission);
    EXPECT_TRUE(contains(r.error().message, "socket directory " + d.path)) << r.error().message;
    EXPECT_TRUE(contains(r.error().message, "is writable by other users")) << r.error().message;
    EXPECT_TRUE(contains(r.error().message, "chmod go-w " + d.path)) << r.error().message;
    EXPECT_FALSE(std::filesystem::exists(d.path + "/ergd.sock"));
  }
  // A private directory inside one others may write to: they could rename it and put theirs.
  ::chmod(d.path.c_str(), 0777);
  std::string inner = d.path + "/inner";
  ASSERT_EQ(::mkdir(inner.c_str(), 0700), 0);
  auto r = start_in(inner, false);
  ASSERT_FALSE(r);
  EXPECT_TRUE(contains(r.error().message, d.path + " (above socket directory " + inner + ")")) << r.error().message;

  if (::geteuid() == 0) {  // owned by another user: they can chmod it at will
    ::chmod(d.path.c_str(), 0755);
    ASSERT_EQ(::chown(inner.c_str(), 65534, 65534), 0);
    auto o = start_in(inner, true);
    ASSERT_FALSE(o);
    EXPECT_TRUE(contains(o.error().message, "socket directory " + inner + " is owned by uid 65534"))
        << o.error().message;
  }
}

TEST(Server, StickySharedDirectoryNeedsTheFlagAndWarns) {
  SharedDir d;
  ASSERT_FALSE(d.path.empty());
  ::chmod(d.path.c_str(), 01777);  // like /tmp
  auto r = start_in(d.path, false);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kNoPermission);
  EXPECT_TRUE(contains(r.error().message, "socket directory " + d.path + " (mode 1777) is writable by other users"))
      << r.error().message;
  EXPECT_TRUE(contains(r.error().message, "--allow-insecure-socket-dir")) << r.error().message;
  std::vector<std::string> warnings;
  auto ok = start_in(d.path, true, &warnings);
  ASSERT_TRUE(ok) << ok.error().message;
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_TRUE(contains(warnings[0], "socket directory " + d.path + " (mode 1777)")) << warnings[0];
  // A private directory below a sticky one (the usual mkdtemp under /tmp) needs nothing.
  std::vector<std::string> none;
  ASSERT_TRUE(start_in(testing::socket_dir(), false, &none));
  EXPECT_TRUE(none.empty());
}

}  // namespace
}  // namespace erg::daemon
