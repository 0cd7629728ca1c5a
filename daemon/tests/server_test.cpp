// ergd over a real Unix socket (and loopback TCP) with fake devices: keep-alive, malformed
// input, concurrency, stale sockets, the socket's directory. SSE and stop: stream_test.cpp.

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "erg/client/connection.hpp"
#include "socket_helpers.hpp"

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
