// ergd over a real Unix socket (and loopback TCP) with fake devices: keep-alive, malformed
// input, concurrency, SSE with demand-driven polling, stale sockets, clean stop.

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <thread>

#include "erg/client/connection.hpp"
#include "fixture.hpp"

namespace erg::daemon {
namespace {

std::string temp_socket(const char* tag) {
  return "/tmp/ergd-test-" + std::to_string(::getpid()) + "-" + tag + ".sock";
}

struct Served : testing::FakeDaemon {
  std::string path;
  explicit Served(const char* tag, Config c = {}) : testing::FakeDaemon(with_socket(c, tag)) {
    path = temp_socket(tag);
    auto r = daemon->start();
    if (!r) throw std::runtime_error(r.error().message);
  }
  static Config with_socket(Config c, const char* tag) {
    c.tcp = "127.0.0.1:0";
    c.gpu_power_poll_hz = 100;
    (void)tag;
    return c;
  }
};

// FakeDaemon clears socket_path; start a daemon on a socket explicitly.
std::unique_ptr<testing::FakeDaemon> serve(const std::string& path, Config c = {}) {
  c.tcp = "127.0.0.1:0";
  c.gpu_power_poll_hz = 100;
  auto f = std::make_unique<testing::FakeDaemon>(c);
  // FakeDaemon's config has no socket; rebuild with one.
  Inventory inv;
  for (auto& g : f->gpus) inv.gpus.push_back(g);
  for (auto& cpu : f->cpus) inv.cpus.push_back(cpu);
  c.socket_path = path;
  c.skip_privilege_check = true;
  auto d = Daemon::create(c, std::move(inv));
  EXPECT_TRUE(d) << d.error().message;
  f->daemon = std::move(*d);
  auto r = f->daemon->start();
  EXPECT_TRUE(r) << (r ? "" : r.error().message);
  return f;
}

int connect_raw(const std::string& path) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::strncpy(a.sun_path, path.c_str(), sizeof a.sun_path - 1);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

/// Sends raw bytes, returns everything read until the daemon closes (or 3 s pass).
std::string raw_exchange(const std::string& path, const std::string& bytes) {
  int fd = connect_raw(path);
  if (fd < 0) return "";
  timeval tv{3, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  std::size_t off = 0;
  while (off < bytes.size()) {
    ssize_t n = ::send(fd, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
    if (n <= 0) break;
    off += static_cast<std::size_t>(n);
  }
  ::shutdown(fd, SHUT_WR);  // the daemon sees EOF after our bytes
  std::string out;
  char buf[4096];
  for (;;) {
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return out;
}

int status_of(const std::string& wire) { return wire.size() >= 12 ? std::stoi(wire.substr(9, 3)) : 0; }

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

TEST(Server, SseDeliversEventsAndPollsOnlyWhileSubscribed) {
  std::string path = temp_socket("sse");
  auto f = serve(path);
  EXPECT_EQ(f->daemon->subscribers(true, 1), 0u);
  client::Connection c(client::Endpoint{path});
  std::vector<nlohmann::json> events;
  std::thread changer([&] {
    for (int i = 0; i < 20; ++i) {
      f->gpus[1]->set_power_mw(100000.0 + 1000.0 * i);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  auto st = c.stream("/gpu/stream_power?gpu_ids=1", [&](std::string_view data) {
    events.push_back(nlohmann::json::parse(data));
    return events.size() < 3;
  });
  changer.join();
  ASSERT_TRUE(st) << st.error().message;
  EXPECT_EQ(*st, 200);
  ASSERT_EQ(events.size(), 3u);
  for (auto& e : events) {
    EXPECT_EQ(e["gpu_id"], 1);
    EXPECT_TRUE(e.contains("timestamp_ms"));
    EXPECT_GE(e["power_mw"].get<unsigned>(), 100000u);
  }
  EXPECT_NE(events[0]["power_mw"], events[1]["power_mw"]);  // only changed samples
  // The subscriber left: the poller goes idle.
  for (int i = 0; i < 100 && f->daemon->subscribers(true, 1) != 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(f->daemon->subscribers(true, 1), 0u);

  std::vector<nlohmann::json> cpu_events;
  f->cpus[0]->set_energy_uj(0, 0);
  std::atomic<bool> done{false};
  std::thread cpu_changer([&] {
    double e = 0;
    while (!done) {
      e += 1e5;
      f->cpus[0]->set_energy_uj(e, e / 2);
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  });
  auto cs = c.stream("/cpu/stream_power?cpu_ids=0", [&](std::string_view data) {
    cpu_events.push_back(nlohmann::json::parse(data));
    return cpu_events.size() < 2;
  });
  done = true;
  cpu_changer.join();
  ASSERT_TRUE(cs);
  ASSERT_EQ(cpu_events.size(), 2u);
  EXPECT_EQ(cpu_events[0]["cpu_id"], 0);
  EXPECT_GT(cpu_events[0]["cpu_mw"].get<double>(), 0.0);
  EXPECT_FALSE(cpu_events[0]["dram_mw"].is_null());
}

TEST(Server, StopWithOpenStreamAndIdleConnectionsIsPrompt) {
  std::string path = temp_socket("stop");
  auto f = serve(path);
  int idle = connect_raw(path);
  std::thread streamer([&] {
    client::Connection c(client::Endpoint{path});
    (void)c.stream("/gpu/stream_power", [](std::string_view) { return true; });
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  auto t0 = std::chrono::steady_clock::now();
  f->daemon->stop();
  streamer.join();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
  ::close(idle);
  EXPECT_FALSE(std::filesystem::exists(path));
}

}  // namespace
}  // namespace erg::daemon
