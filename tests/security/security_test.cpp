// The security suite (issue 31; docs/security.md): each attack a local user could make on erg's
// servers, run against the real programs (ergd, `erg bso serve`, `erg perseus serve`,
// `erg exporter`) over the simulated machine, the attacker a separate process running as user
// nobody under setpriv (tests/security/attacker.cpp). Each test names the issue's item it
// reproduces and asserts the attack is refused, bounded or flagged. Needs root (to start the
// privileged daemon and drop to nobody): skipped, with that reason, otherwise.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "erg/client/connection.hpp"
#include "erg/sim/machine.hpp"
#include "erg/sim/spec.hpp"
#include "process.hpp"

namespace erg {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;
using testing::BackgroundShell;
using testing::run_shell;
using testing::shell_quote;

// The latency bound of the acceptance (p99 under 100 ms on a 2-core runner) is for an optimized
// or debug build; under a sanitizer (several times slower per request) the bound is wider, the
// failure count the same: zero.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr double kP99BoundMs = 500.0;
#else
constexpr double kP99BoundMs = 100.0;
#endif

int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

/// What the attacker saw: the reply's status (0: none) and body.
struct Seen {
  int status = 0;
  std::string body;
  std::string error;
};

/// Latencies of a legitimate client, in ms, and how many of its requests failed.
struct Figures {
  std::vector<double> ms;
  int failed = 0;
  std::string last_failure;
  double p(double q) const {
    if (ms.empty()) return 0.0;
    auto v = ms;
    std::sort(v.begin(), v.end());
    return v[std::min(v.size() - 1, static_cast<std::size_t>(q * static_cast<double>(v.size())))];
  }
};

/// One request on a new connection to a Unix socket, connecting without blocking as a client
/// with a connect timeout does (a full backlog is EAGAIN: a failure, not a wait). The reply, or
/// what went wrong ("connect: ...").
std::optional<std::string> nonblocking_request(const std::string& socket_path, const std::string& request) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::strncpy(a.sun_path, socket_path.c_str(), sizeof a.sun_path - 1);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    const int err = errno;
    ::close(fd);
    return std::string("connect: ") + std::strerror(err);
  }
  ::fcntl(fd, F_SETFL, 0);
  timeval tv{2, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  if (::send(fd, request.data(), request.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(request.size())) {
    ::close(fd);
    return std::nullopt;
  }
  std::string reply;
  char chunk[4096];
  for (ssize_t n; (n = ::recv(fd, chunk, sizeof chunk, 0)) > 0;) reply.append(chunk, static_cast<std::size_t>(n));
  ::close(fd);
  return reply;
}

class Security : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "the security suite needs root (ergd's privileged groups, setpriv to nobody)";
    ::chmod(dir_.path().c_str(), 0755);  // nobody reaches the sockets in it, cannot write to it
    socket_ = dir_.path() + "/ergd.sock";
    for (const char* v : {"ERG_SIMULATE", "ERG_SIM_STATE", "ERG_DAEMON_SOCK", "ERG_NVML_LIBRARY", "ERG_POWERCAP_ROOT"})
      ::unsetenv(v);
  }

  /// ergd over a simulated 2xA100 with two CPU packages (`simulate` false: the machine this
  /// process exported), socket mode 0666 (every local user can connect: the allow lists decide),
  /// plus `flags`.
  std::unique_ptr<BackgroundShell> start_ergd(const std::string& flags, bool simulate = true) {
    return std::make_unique<BackgroundShell>("exec " + shell_quote(ERGD_PATH) + (simulate ? " --simulate 2xA100" : "") +
                                             " --socket-mode 0666 --socket-path " + shell_quote(socket_) + " " + flags);
  }
  /// Waits for ergd to serve (its socket answers /time) or exit.
  bool wait_serving(BackgroundShell& ergd) {
    for (int i = 0; i < 1000; ++i) {
      if (ergd.wait(0ms)) return false;
      if (std::filesystem::exists(socket_)) {
        client::Connection c(client::Endpoint{socket_});
        if (auto r = c.request("GET", "/time"); r && r->status == 200) return true;
      }
      std::this_thread::sleep_for(10ms);
    }
    return false;
  }
  /// The attacker, as nobody: `erg_attacker ARGS`, its one JSON line.
  static Seen attack(const std::string& args) {
    auto r =
        run_shell("setpriv --reuid=nobody --regid=nogroup --clear-groups " + shell_quote(ATTACKER_PATH) + " " + args);
    Seen s;
    auto j = json::parse(r.out, nullptr, false);
    if (r.exit_code != 0 || j.is_discarded()) {
      s.error = "attacker exited " + std::to_string(r.exit_code) + ": " + r.out + r.err;
      return s;
    }
    s.status = j.value("status", 0);
    s.body = j.value("body", "");
    s.error = j.value("error", "");
    return s;
  }
  /// A request as root over the socket.
  protocol::ParsedResponse root(const std::string& method, const std::string& target) {
    client::Connection c(client::Endpoint{socket_});
    auto r = c.request(method, target);
    EXPECT_TRUE(r) << r.error().message;
    return r ? *r : protocol::ParsedResponse{};
  }
  double limit_w(unsigned gpu) {
    auto j = json::parse(root("GET", "/gpu/get_power_limit?gpu_ids=" + std::to_string(gpu)).body, nullptr, false);
    return j.is_discarded() ? -1.0 : j[std::to_string(gpu)]["power_limit_mw"].get<double>() / 1000.0;
  }

  /// ergd with a signing key on TCP; nobody opens 256 TCP connections of `attack` (an
  /// erg_attacker mode: idle, slow) while root makes 50 TCP requests: none may fail.
  void root_over_tcp_beside(const std::string& attack, const std::string& what) {
    const std::string key = dir_.path() + "/key";
    std::ofstream(key) << "0123456789abcdef0123456789abcdef\n";
    ::chmod(key.c_str(), 0600);
    const int port = free_port();
    const std::string tcp = "127.0.0.1:" + std::to_string(port);
    auto ergd = start_ergd("--signing-key-path " + shell_quote(key) + " --tcp " + tcp);
    ASSERT_TRUE(wait_serving(*ergd)) << ergd->err();
    auto token = run_shell(shell_quote(ERGD_PATH) + " token issue --signing-key-path " + shell_quote(key) +
                           " --user root --scope gpu-read");
    ASSERT_EQ(token.exit_code, 0) << token.err;
    while (!token.out.empty() && token.out.back() == '\n') token.out.pop_back();
    BackgroundShell idle("exec setpriv --reuid=nobody --regid=nogroup --clear-groups " + shell_quote(ATTACKER_PATH) +
                         " " + attack + " --tcp " + tcp + " 256 20");
    for (int i = 0; i < 1000 && idle.out().find("opened") == std::string::npos; ++i) std::this_thread::sleep_for(10ms);
    ASSERT_NE(idle.out().find("\"opened\":256"), std::string::npos) << idle.out() << idle.err();
    Figures f;
    for (int i = 0; i < 50; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      client::Connection c(client::Endpoint{"", "127.0.0.1", static_cast<std::uint16_t>(port), token.out});
      auto r = c.request("GET", "/gpu/get_power_limit?gpu_ids=0");
      f.ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      if (!r || r->status != 200) ++f.failed, f.last_failure = r ? r->body : r.error().message;
    }
    std::printf(
        "[item 7] root's TCP requests beside 256 %s TCP connections of nobody: %d/50 failed, p50 %.2f ms, "
        "p99 %.2f ms\n",
        what.c_str(), f.failed, f.p(0.5), f.p(0.99));
    EXPECT_EQ(f.failed, 0) << f.last_failure;
    EXPECT_LT(f.p(0.99), kP99BoundMs);
  }

  testing::TempDir dir_;
  std::string socket_;
};

// Item 1: ergd over TCP without a signing key was open to every local user (the allow lists
// applied only to the Unix socket). The packaging's example command line now refuses to start.
TEST_F(Security, Item1TcpWithoutASigningKeyRefusesToStart) {
  const int port = free_port();
  auto ergd = start_ergd("--allow-gid gpu-control=4242 --tcp 127.0.0.1:" + std::to_string(port));
  auto code = ergd->wait(20s);
  ASSERT_TRUE(code) << "ergd started: " << ergd->err();
  EXPECT_NE(*code, 0);
  EXPECT_NE(ergd->err().find("--tcp-insecure"), std::string::npos) << ergd->err();
  EXPECT_NE(ergd->err().find("--signing-key-path"), std::string::npos) << ergd->err();
  const Seen s = attack("request --tcp 127.0.0.1:" + std::to_string(port) + " GET /time");
  EXPECT_EQ(s.status, 0) << s.body;
}

// Item 1, opened on purpose (--tcp-insecure): the allow lists hold on TCP too, and the start-up
// warning names what every TCP peer may use.
TEST_F(Security, Item1InsecureTcpKeepsTheAllowLists) {
  const int port = free_port();
  const std::string tcp = "--tcp 127.0.0.1:" + std::to_string(port);
  auto ergd = start_ergd("--allow-gid gpu-control=4242 --tcp-insecure " + tcp);
  ASSERT_TRUE(wait_serving(*ergd)) << ergd->err();
  EXPECT_NE(ergd->err().find("WARNING: --tcp-insecure"), std::string::npos) << ergd->err();
  EXPECT_NE(ergd->err().find("gpu-read, cpu-read"), std::string::npos) << ergd->err();
  const double before[2] = {limit_w(0), limit_w(1)};
  for (const std::string& via : {"--unix " + socket_, tcp}) {
    for (unsigned g = 0; g < 2; ++g) {
      const Seen set = attack("request " + via + " POST '/gpu/set_power_limit?gpu_ids=" + std::to_string(g) +
                              "&power_limit_mw=100000&block=true'");
      EXPECT_EQ(set.status, 403) << via << ": " << set.body << set.error;
    }
    const Seen lock =
        attack("request " + via +
               " POST '/gpu/set_gpu_locked_clocks?gpu_ids=0,1&min_clock_mhz=210&max_clock_mhz=210&block=true'");
    EXPECT_EQ(lock.status, 403) << via << ": " << lock.body << lock.error;
  }
  for (unsigned g = 0; g < 2; ++g) EXPECT_EQ(limit_w(g), before[g]) << "GPU " << g;
  // What the warning named stays open to TCP peers (the operator's choice).
  EXPECT_EQ(attack("request " + tcp + " GET /gpu/get_power_limit").status, 200);
}

// Item 2: /metrics served RAPL energy at µJ resolution to any peer. Now a peer refused cpu-read
// sees no CPU package or DRAM series (the kernel keeps energy_uj root-only since CVE-2020-8694).
TEST_F(Security, Item2MetricsHideRaplFromPeersRefusedCpuRead) {
  auto ergd = start_ergd("--allow-uid cpu-read=4242");
  ASSERT_TRUE(wait_serving(*ergd)) << ergd->err();
  const std::string via = "--unix " + socket_;
  EXPECT_EQ(attack("request " + via + " GET '/cpu/get_cumulative_energy?cpu_ids=0&cpu=true&dram=true'").status, 403);
  for (int scrape = 0; scrape < 3; ++scrape) {
    const Seen m = attack("request " + via + " GET /metrics");
    ASSERT_EQ(m.status, 200) << m.body << m.error;
    EXPECT_NE(m.body.find("erg_gpu_energy_joules_total{"), std::string::npos) << m.body;
    EXPECT_EQ(m.body.find("erg_cpu_energy_joules_total"), std::string::npos) << m.body;
    EXPECT_EQ(m.body.find("erg_dram_energy_joules_total"), std::string::npos) << m.body;
  }
  // Root (and any cpu-read peer) still sees them.
  EXPECT_NE(root("GET", "/metrics").body.find("erg_cpu_energy_joules_total{"), std::string::npos);
}

// Item 2 over TCP with a signing key: /metrics needs a token too, and shows its read scopes.
TEST_F(Security, Item2MetricsOverTcpNeedAToken) {
  const std::string key = dir_.path() + "/key";
  std::ofstream(key) << "0123456789abcdef0123456789abcdef\n";
  ::chmod(key.c_str(), 0600);
  const int port = free_port();
  const std::string tcp = "--tcp 127.0.0.1:" + std::to_string(port);
  auto ergd = start_ergd("--signing-key-path " + shell_quote(key) + " " + tcp);
  ASSERT_TRUE(wait_serving(*ergd)) << ergd->err();
  const Seen none = attack("request " + tcp + " GET /metrics");
  EXPECT_EQ(none.status, 401) << none.body;
  EXPECT_EQ(none.body.find("erg_"), std::string::npos) << none.body;
  auto token = run_shell(shell_quote(ERGD_PATH) + " token issue --signing-key-path " + shell_quote(key) +
                         " --user reader --scope gpu-read");
  ASSERT_EQ(token.exit_code, 0) << token.err;
  while (!token.out.empty() && token.out.back() == '\n') token.out.pop_back();
  const Seen gpu = attack("request " + tcp + " --token " + token.out + " GET /metrics");
  ASSERT_EQ(gpu.status, 200) << gpu.body << gpu.error;
  EXPECT_NE(gpu.body.find("erg_gpu_energy_joules_total{"), std::string::npos);
  EXPECT_EQ(gpu.body.find("erg_cpu_energy_joules_total"), std::string::npos);
}

// Item 7: all TCP peers counted as one user, so idle TCP connections from one user (256 from
// nobody) left no slot for anyone else's TCP requests (0 of 50 served). Now a full TCP bucket
// closes its longest-idle connection for a new one.
TEST_F(Security, Item7IdleTcpConnectionsDoNotLockOthersOut) { root_over_tcp_beside("idle", "idle"); }

// Item 7 (per source): unfinished requests (a byte every 200 ms) of one local user over TCP
// filled the TCP peers' one bucket, which only idle connections could be evicted from. A
// loopback TCP peer is now counted as the local user that owns its socket: nobody fills only
// its own bucket.
TEST_F(Security, Item7UnfinishedTcpRequestsOfOneUserDoNotLockOthersOut) { root_over_tcp_beside("slow", "unfinished"); }

// Item 7: a connect/close flood from one user filled the socket's backlog, so other users'
// non-blocking connects failed with EAGAIN (74 % of root's requests). Now ergd drains the
// backlog in batches.
TEST_F(Security, Item7ConnectFloodDoesNotDenyOthers) {
  auto ergd = start_ergd("");
  ASSERT_TRUE(wait_serving(*ergd)) << ergd->err();
  std::vector<std::unique_ptr<BackgroundShell>> floods;
  for (int k = 0; k < 2; ++k)
    floods.push_back(std::make_unique<BackgroundShell>("exec setpriv --reuid=nobody --regid=nogroup --clear-groups " +
                                                       shell_quote(ATTACKER_PATH) + " flood --unix " +
                                                       shell_quote(socket_) + " 6"));
  std::this_thread::sleep_for(500ms);
  Figures f;
  const auto end = std::chrono::steady_clock::now() + 4s;
  while (std::chrono::steady_clock::now() < end) {
    const auto t0 = std::chrono::steady_clock::now();
    auto reply =
        nonblocking_request(socket_, "GET /gpu/get_power_limit?gpu_ids=0 HTTP/1.1\r\nConnection: close\r\n\r\n");
    f.ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    if (!reply || reply->rfind("HTTP/1.1 200", 0) != 0) ++f.failed, f.last_failure = reply ? *reply : "no reply";
    std::this_thread::sleep_for(10ms);
  }
  long connects = 0;
  for (auto& fl : floods) {
    ASSERT_TRUE(fl->wait(10s));
    auto j = json::parse(fl->out(), nullptr, false);
    if (!j.is_discarded()) connects += j.value("connects", 0L);
  }
  std::printf(
      "[item 7] root's requests during a connect/close flood by nobody (%ld connects): %d/%zu failed, p50 "
      "%.2f ms, p99 %.2f ms\n",
      connects, f.failed, f.ms.size(), f.p(0.5), f.p(0.99));
  EXPECT_EQ(f.failed, 0) << f.last_failure;
  EXPECT_LT(f.p(0.99), kP99BoundMs);
}

// Item 11: after ergd was killed or restarted while a setter held a power limit or locked clocks,
// nothing restored them. ergd now records who owns what (--state-dir): killed with SIGKILL, then
// restarted, it restores the limit of a setter that exited while it was down, and adopts the
// clocks of one that still runs, resetting them when that one exits.
TEST_F(Security, Item11LimitsComeBackAcrossAnErgdRestart) {
  auto made = sim::Machine::create_temp(*sim::parse_spec("2xA100,cpus=0"));
  ASSERT_TRUE(made) << made.error().message;
  auto machine = std::move(*made);
  ASSERT_TRUE(machine->export_env());  // both ergds serve this machine
  const double default_mw = machine->status(0)->power_limit.value();
  const std::string state = dir_.path() + "/state";
  ASSERT_EQ(::mkdir(state.c_str(), 0700), 0);
  const std::string flags = "--state-dir " + shell_quote(state);
  auto ergd = start_ergd(flags, false);
  ASSERT_TRUE(wait_serving(*ergd)) << ergd->err();
  auto setter = [&](double seconds, const std::string& method, const std::string& target) {
    auto s = std::make_unique<BackgroundShell>("exec " + shell_quote(ATTACKER_PATH) + " hold --unix " +
                                               shell_quote(socket_) + " " + std::to_string(seconds) + " " + method +
                                               " " + shell_quote(target));
    for (int i = 0; i < 1000 && s->out().find("statuses") == std::string::npos; ++i) std::this_thread::sleep_for(5ms);
    EXPECT_NE(s->out().find("[200]"), std::string::npos) << s->out() << s->err();
    return s;
  };
  // A: GPU 0's limit, exits while ergd is down. B: GPU 1's SM clocks, outlives the restart.
  auto a = setter(1.0, "POST", "/gpu/set_power_limit?gpu_ids=0&power_limit_mw=200000&block=true");
  auto b = setter(5.0, "POST", "/gpu/set_gpu_locked_clocks?gpu_ids=1&min_clock_mhz=1005&max_clock_mhz=1005&block=true");
  EXPECT_EQ(machine->status(0)->power_limit.value(), 200000.0);
  EXPECT_EQ(machine->status(1)->locked_sm_max.value(), 1005.0);
  ergd->signal(SIGKILL);
  ASSERT_TRUE(ergd->wait(5s));
  ASSERT_TRUE(a->wait(5s));  // A exits while no ergd runs
  EXPECT_EQ(machine->status(0)->power_limit.value(), 200000.0);

  auto again = start_ergd(flags, false);
  ASSERT_TRUE(wait_serving(*again)) << again->err();
  for (int i = 0; i < 300 && machine->status(0)->power_limit.value() != default_mw; ++i)
    std::this_thread::sleep_for(10ms);
  EXPECT_EQ(machine->status(0)->power_limit.value(), default_mw) << again->err();
  // B still runs: its clocks stay locked until it exits.
  EXPECT_EQ(machine->status(1)->locked_sm_max.value(), 1005.0) << again->err();
  ASSERT_TRUE(b->wait(10s));
  for (int i = 0; i < 300 && machine->status(1)->locked_sm_max.value() != 0.0; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(machine->status(1)->locked_sm_max.value(), 0.0) << again->err();
  EXPECT_NE(again->err().find("restored the default limit"), std::string::npos) << again->err();
  EXPECT_NE(again->err().find("reset its locked SM clocks"), std::string::npos) << again->err();
  for (const char* v : {"ERG_SIMULATE", "ERG_SIM_STATE", "ERG_NVML_LIBRARY", "ERG_AMDSMI_LIBRARY", "ERG_POWERCAP_ROOT"})
    ::unsetenv(v);
}

// Item 11, the records themselves: a malformed claims.json never stops ergd, and a second ergd
// on the same state directory leaves the first one's records alone.
TEST_F(Security, Item11RecordsAreReadSafelyAndOwnedByOneErgd) {
  const std::string state = dir_.path() + "/state";
  ASSERT_EQ(::mkdir(state.c_str(), 0700), 0);
  std::ofstream(state + "/claims.json")
      << R"({"version": 1, "boot_id": 7, "claims": [7, {"uuid": 5, "kind": "power_limit", "pid": "x"},)"
      << R"( {"uuid": "GPU-x", "kind": "sm_clocks", "pid": 1, "start_time": "never"}]})";
  auto ergd = start_ergd("--state-dir " + shell_quote(state));
  ASSERT_TRUE(wait_serving(*ergd)) << ergd->err();
  EXPECT_NE(ergd->err().find("malformed record skipped"), std::string::npos) << ergd->err();
  std::ofstream(state + "/claims.json") << "not json";
  const std::string first_socket = socket_;
  socket_ = dir_.path() + "/second.sock";
  auto second = start_ergd("--state-dir " + shell_quote(state));
  ASSERT_TRUE(wait_serving(*second)) << second->err();
  EXPECT_NE(second->err().find("is in use by another ergd"), std::string::npos) << second->err();
  socket_ = first_socket;
  // Neither a simulated ergd without --state-dir touches the default directory.
  EXPECT_EQ(ergd->err().find("/var/lib/ergd"), std::string::npos) << ergd->err();
}

// Item 8: `erg exporter` showed every user's GPU processes (pid, command, container, pod,
// energy) to any peer that connects. Its per-process series are now off unless asked for, and
// asked for, a start-up warning says who sees them.
TEST_F(Security, Item8ExporterShowsNoProcessesUnlessAskedTo) {
  auto made = sim::Machine::create_temp(*sim::parse_spec("2xA100,cpus=0"));
  ASSERT_TRUE(made) << made.error().message;
  auto machine = std::move(*made);
  ASSERT_TRUE(machine->export_env());  // the exporter attaches to this machine
  sim::SimProcess root_job;
  root_job.pid = 3'900'001;  // a table entry: root's job on GPU 0
  root_job.share = 0.5;
  ASSERT_TRUE(machine->set_process(0, root_job));
  for (const bool asked : {false, true}) {
    BackgroundShell exporter("exec " + shell_quote(ERG_CLI_PATH) + " exporter --listen 127.0.0.1:0 --json" +
                             (asked ? " --process-metrics" : ""));
    int port = 0;
    for (int i = 0; i < 1000 && port == 0; ++i) {
      auto j = json::parse(exporter.out(), nullptr, false);
      if (!j.is_discarded() && j.contains("port")) port = j["port"].get<int>();
      if (port == 0) std::this_thread::sleep_for(10ms);
    }
    ASSERT_NE(port, 0) << exporter.err();
    std::string body;
    for (int scrape = 0; scrape < 3; ++scrape) {  // the first scrape is the baseline
      const Seen m = attack("request --tcp 127.0.0.1:" + std::to_string(port) + " GET /metrics");
      ASSERT_EQ(m.status, 200) << m.body << m.error;
      body = m.body;
      std::this_thread::sleep_for(200ms);
    }
    EXPECT_NE(body.find("erg_gpu_energy_joules_total{"), std::string::npos) << body;
    if (!asked) {
      EXPECT_EQ(body.find("erg_gpu_process_"), std::string::npos) << body;
      EXPECT_EQ(body.find("pid=\"3900001\""), std::string::npos) << body;
      EXPECT_EQ(exporter.err().find("WARNING"), std::string::npos) << exporter.err();
    } else {
      EXPECT_NE(body.find("pid=\"3900001\""), std::string::npos) << body;
      EXPECT_NE(exporter.err().find("WARNING: --process-metrics"), std::string::npos) << exporter.err();
    }
  }
  for (const char* v : {"ERG_SIMULATE", "ERG_SIM_STATE", "ERG_NVML_LIBRARY", "ERG_AMDSMI_LIBRARY", "ERG_POWERCAP_ROOT"})
    ::unsetenv(v);
}

// Item 6: one local user could stall each server built on cpp-httplib: BSO (64 worker threads, no
// whole-request deadline: 100 slow connections made each request take 29.6 s), Perseus (waiting
// requests held its 256 workers), the exporter (2 workers: 10 slow connections stopped every
// scrape), and BSO's listen backlog of 5 reset bursts. Now each serves through a GuardedServer:
// a thread per connection, connections capped per peer (a local user over loopback, found from
// the kernel's socket table) with the idle ones evicted first, a whole-request deadline, a
// backlog of 4096. Under 150 slow-loris and 150 idle connections of nobody, root's requests
// (each on a new connection, as Zeus's clients make them) all succeed, p99 printed and bounded;
// then a burst of 256 connections at once is answered in full.
struct GuardedTarget {
  std::string name;
  std::string command;  // prints one JSON line with "port" or "url" once listening
  std::string request;  // a cheap request root makes
  std::string burst;    // a request that needs no database or device: the burst measures connections
};

int port_of(const BackgroundShell& server) {
  const std::string out = server.out();
  const auto nl = out.find('\n');
  if (nl == std::string::npos) return 0;
  auto j = json::parse(out.substr(0, nl), nullptr, false);
  if (j.is_discarded()) return 0;
  if (j.contains("port")) return j["port"].get<int>();
  if (j.contains("url")) {
    const std::string url = j["url"].get<std::string>();
    return std::atoi(url.c_str() + url.rfind(':') + 1);
  }
  return 0;
}

/// A reply as a client reads it: status (0: none), head and body.
struct Exchange {
  int status = 0;
  std::string head;
  std::string body;
};

/// One HTTP request (which should say Connection: close) on a new loopback connection, as root;
/// what came back within 5 s.
Exchange http_exchange(int port, const std::string& request) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  Exchange x;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      ::send(fd, request.data(), request.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(request.size())) {
    std::string reply;
    char chunk[4096];
    for (ssize_t n; (n = ::recv(fd, chunk, sizeof chunk, 0)) > 0;) reply.append(chunk, static_cast<std::size_t>(n));
    if (reply.rfind("HTTP/1.1 ", 0) == 0) x.status = std::atoi(reply.c_str() + 9);
    const auto end = reply.find("\r\n\r\n");
    x.head = reply.substr(0, end);
    if (end != std::string::npos) x.body = reply.substr(end + 4);
  }
  ::close(fd);
  return x;
}

int http_status(int port, const std::string& request) { return http_exchange(port, request).status; }

/// METHOD TARGET with a JSON body (empty: none) and extra header lines, closing the connection.
std::string http_request(const std::string& method, const std::string& target, const std::string& body,
                         const std::string& headers = "") {
  return method + " " + target + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n" + headers +
         (body.empty() ? std::string() : "Content-Type: application/json\r\n") +
         "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

/// The server's port from its --json line, waiting up to 10 s.
int wait_port(const BackgroundShell& server) {
  int port = 0;
  for (int i = 0; i < 1000 && port == 0; ++i) {
    port = port_of(server);
    if (port == 0) std::this_thread::sleep_for(10ms);
  }
  return port;
}

/// A header's value in a reply head ("" if absent).
std::string header_of(const std::string& head, const std::string& name) {
  const auto at = head.find("\r\n" + name + ": ");
  if (at == std::string::npos) return "";
  const auto from = at + 4 + name.size();
  return head.substr(from, head.find("\r\n", from) - from);
}

// Item 5: the batch-size and Perseus servers authenticated nothing: nobody deleted and poisoned
// root's BSO job, and took a new Perseus job's rank 1 within 0.5 s (its id is the clock). Now a
// BSO job is written only by root, the local user that registered it (read from the kernel's
// socket table over loopback) or a request presenting the secret its registration answered;
// a Perseus job id carries 64 random bits and another local user is refused its ranks.
TEST_F(Security, Item5OnlyAJobsOwnerWritesIt) {
  const std::string erg = shell_quote(ERG_CLI_PATH);
  const std::string nobody = "setpriv --reuid=nobody --regid=nogroup --clear-groups " + shell_quote(ATTACKER_PATH);
  auto as_nobody = [&](int port, const std::string& request) {
    auto r = run_shell(nobody + " raw --tcp 127.0.0.1:" + std::to_string(port) + " " + shell_quote(request));
    auto j = json::parse(r.out, nullptr, false);
    Exchange x;
    if (j.is_discarded()) return x;
    x.status = j.value("status", 0);
    x.head = j.value("head", "");
    x.body = j.value("body", "");
    return x;
  };
  // The batch-size server.
  {
    BackgroundShell bso("exec " + erg + " bso serve --db " + shell_quote("sqlite:///" + dir_.path() + "/bso.db") +
                        " --listen 127.0.0.1:0 --json");
    const int port = wait_port(bso);
    ASSERT_NE(port, 0) << bso.err();
    auto job = [](const std::string& id) {
      return json{{"job_id", id},
                  {"job_id_prefix", "sec"},
                  {"batch_sizes", {32, 64, 128}},
                  {"default_batch_size", 64},
                  {"max_epochs", 5},
                  {"mab_seed", 7},
                  {"max_power", 300},
                  {"number_of_gpus", 1},
                  {"gpu_model", "A100"}}
          .dump();
    };
    const Exchange made = http_exchange(port, http_request("POST", "/jobs", job("sec-root")));
    ASSERT_EQ(made.status, 201) << made.head << made.body;
    const std::string secret = header_of(made.head, "X-Erg-Job-Token");
    ASSERT_EQ(secret.size(), 32u) << made.head;
    const std::string report = json{{"job_id", "sec-root"}, {"batch_size", 64}, {"trial_number", 1}, {"time", 1.0},
                                    {"energy", 1e9},        {"metric", 0.1},    {"current_epoch", 1}}
                                   .dump();
    for (const auto& attack :
         {http_request("DELETE", "/jobs?job_id=sec-root", ""),
          http_request("GET", "/jobs/batch_size?job_id=sec-root", ""), http_request("POST", "/report", report),
          http_request("PATCH", "/trials", R"({"job_id":"sec-root","batch_size":64,"trial_number":1})")}) {
      const Exchange x = as_nobody(port, attack);
      EXPECT_EQ(x.status, 403) << attack << "\n" << x.head << x.body;
    }
    // A client that closed before the server looked is owned by no one the kernel will name (its
    // orphaned socket reports uid 0): it must not pass for root.
    auto fired = run_shell(nobody + " fire --tcp 127.0.0.1:" + std::to_string(port) + " 50 " +
                           shell_quote(http_request("DELETE", "/jobs?job_id=sec-root", "")));
    EXPECT_NE(fired.out.find("\"sent\":50"), std::string::npos) << fired.out << fired.err;
    std::this_thread::sleep_for(300ms);  // the server has served what it accepted
    // Root's job is whole: its first trial is still to come.
    const Exchange first = http_exchange(port, http_request("GET", "/jobs/batch_size?job_id=sec-root", ""));
    ASSERT_EQ(first.status, 200) << first.body;
    EXPECT_EQ(json::parse(first.body)["trial_number"], 1);
    // The secret opens it to whoever root gives it to.
    const Exchange with_secret = as_nobody(
        port, http_request("GET", "/jobs/batch_size?job_id=sec-root", "", "X-Erg-Job-Token: " + secret + "\r\n"));
    EXPECT_EQ(with_secret.status, 200) << with_secret.body;
    // A job nobody registers is nobody's: it writes it without a secret, as Zeus's client does.
    EXPECT_EQ(as_nobody(port, http_request("POST", "/jobs", job("sec-nobody"))).status, 201);
    EXPECT_EQ(as_nobody(port, http_request("GET", "/jobs/batch_size?job_id=sec-nobody", "")).status, 200);
    EXPECT_EQ(as_nobody(port, http_request("DELETE", "/jobs?job_id=sec-nobody", "")).status, 200);
  }
  // The Perseus server.
  {
    BackgroundShell perseus("exec " + erg +
                            " perseus serve --scheduler online --microbatches 2 --frequency-step 2 "
                            "--listen 127.0.0.1:0 --json");
    const int port = wait_port(perseus);
    ASSERT_NE(port, 0) << perseus.err();
    const std::string job =
        R"({"job_id":"","pp_degree":2,"dp_degree":1,"tp_degree":1,"world_size":2,"job_metadata":"sec"})";
    const Exchange made = http_exchange(port, http_request("POST", "/register_job", job));
    ASSERT_EQ(made.status, 200) << made.body;
    const std::string id = json::parse(made.body).get<std::string>();
    EXPECT_TRUE(std::regex_search(id, std::regex(R"(\+[0-9a-f]{16}\+sec$)"))) << id;
    const std::string rank1 =
        R"({"rank":1,"dp_rank":0,"pp_rank":1,"tp_rank":0,"available_frequencies":[1410,1200,1000]})";
    const Exchange taken = as_nobody(port, http_request("POST", "/register_rank/" + id, rank1));
    EXPECT_EQ(taken.status, 403) << taken.body;
    const Exchange mine = http_exchange(port, http_request("POST", "/register_rank/" + id, rank1));
    EXPECT_EQ(mine.status, 200) << mine.body;
  }
}

// Acceptance 3: Zeus's own clients keep working in the documented default deployment, for an
// ordinary user (nobody here), not only for root: the requests ZeusdClient makes over ergd's Unix
// socket, those of Zeus's BSO client against `erg bso serve` on loopback (it sends no secret: the
// job is its user's), and those of Zeus's Perseus client against `erg perseus serve` on loopback.
TEST_F(Security, Acceptance3ZeusClientsWorkForAnOrdinaryUser) {
  const std::string nobody = "setpriv --reuid=nobody --regid=nogroup --clear-groups " + shell_quote(ATTACKER_PATH);
  auto as_nobody = [&](const std::string& where, const std::string& request) {
    auto r = run_shell(nobody + " raw " + where + " " + shell_quote(request));
    auto j = json::parse(r.out, nullptr, false);
    Exchange x;
    if (j.is_discarded()) return x;
    x.status = j.value("status", 0);
    x.head = j.value("head", "");
    x.body = j.value("body", "");
    return x;
  };
  // ZeusdClient: GET /discover at construction, then its reads.
  {
    auto ergd = start_ergd("");
    ASSERT_TRUE(wait_serving(*ergd)) << ergd->err();
    const std::string where = "--unix " + socket_;
    const Exchange discover = as_nobody(where, http_request("GET", "/discover", ""));
    ASSERT_EQ(discover.status, 200) << discover.body;
    const json d = json::parse(discover.body, nullptr, false);
    ASSERT_FALSE(d.is_discarded()) << discover.body;
    EXPECT_TRUE(d.contains("gpus")) << discover.body;
    for (const char* target : {"/gpu/get_cumulative_energy?gpu_ids=0,1", "/gpu/get_power_limit?gpu_ids=0",
                               "/gpu/get_power?gpu_ids=0", "/time"}) {
      const Exchange x = as_nobody(where, http_request("GET", target, ""));
      EXPECT_EQ(x.status, 200) << target << ": " << x.body;
    }
  }
  const std::string erg = shell_quote(ERG_CLI_PATH);
  // Zeus's BSO client: register, ask a batch size, report, end the trial, all as nobody.
  {
    BackgroundShell bso("exec " + erg + " bso serve --db " + shell_quote("sqlite:///" + dir_.path() + "/zeus.db") +
                        " --listen 127.0.0.1:0 --json");
    const int port = wait_port(bso);
    ASSERT_NE(port, 0) << bso.err();
    const std::string where = "--tcp 127.0.0.1:" + std::to_string(port);
    const std::string job =
        json{{"job_id", "zeus-1"}, {"job_id_prefix", "zeus"}, {"batch_sizes", {32, 64}}, {"default_batch_size", 64},
             {"max_epochs", 5},    {"max_power", 300},        {"number_of_gpus", 1},     {"gpu_model", "A100"}}
            .dump();
    EXPECT_EQ(as_nobody(where, http_request("POST", "/jobs", job)).status, 201);
    const Exchange trial = as_nobody(where, http_request("GET", "/jobs/batch_size?job_id=zeus-1", ""));
    ASSERT_EQ(trial.status, 200) << trial.body;
    const json t = json::parse(trial.body);
    const std::string report = json{
        {"job_id", "zeus-1"}, {"batch_size", t["batch_size"]},
        {"trial_number", 1},  {"time", 10.0},
        {"energy", 3000.0},   {"metric", 0.9},
        {"current_epoch", 1}}.dump();
    const Exchange reported = as_nobody(where, http_request("POST", "/report", report));
    EXPECT_EQ(reported.status, 200) << reported.body;
    const std::string end = json{{"job_id", "zeus-1"}, {"batch_size", t["batch_size"]}, {"trial_number", 1}}.dump();
    const Exchange ended = as_nobody(where, http_request("PATCH", "/trials", end));
    EXPECT_EQ(ended.status, 200) << ended.body;
  }
  // Zeus's Perseus client: rank 0 registers the job, every rank registers itself.
  {
    BackgroundShell perseus("exec " + erg +
                            " perseus serve --scheduler online --microbatches 2 --frequency-step 2 "
                            "--listen 127.0.0.1:0 --json");
    const int port = wait_port(perseus);
    ASSERT_NE(port, 0) << perseus.err();
    const std::string where = "--tcp 127.0.0.1:" + std::to_string(port);
    const Exchange made = as_nobody(
        where,
        http_request("POST", "/register_job",
                     R"({"job_id":"","pp_degree":2,"dp_degree":1,"tp_degree":1,"world_size":2,"job_metadata":null})"));
    ASSERT_EQ(made.status, 200) << made.body;
    const std::string id = json::parse(made.body).get<std::string>();
    for (int rank = 0; rank < 2; ++rank) {
      const std::string body = json{
          {"rank", rank},
          {"dp_rank", 0},
          {"pp_rank", rank},
          {"tp_rank", 0},
          {"available_frequencies",
           {1410, 1200, 1000}}}.dump();
      const Exchange r = as_nobody(where, http_request("POST", "/register_rank/" + id, body));
      EXPECT_EQ(r.status, 200) << r.body;
    }
    EXPECT_EQ(as_nobody(where, http_request("GET", "/state/" + id, "")).status, 200);
  }
}

// Item 3: `erg perseus serve --dump-dir` named a job's dump folder from the job id, which holds
// the client's job_metadata: "/../../x" wrote ranks.json outside the dump folder, as root. Now the
// server names the folder itself. Item 4: a chunked body was read whole past the 64 KiB limit
// (300 MiB took the BSO server to 620 MB); chunked, length-less and compressed bodies are now
// refused before any of it is read.
TEST_F(Security, Items3And4ClientStringsNeverNamePathsAndBodiesStayBounded) {
  const std::string nobody = "setpriv --reuid=nobody --regid=nogroup --clear-groups " + shell_quote(ATTACKER_PATH);
  auto as_nobody = [&](const std::string& where, const std::string& request) {
    auto r = run_shell(nobody + " raw " + where + " " + shell_quote(request));
    auto j = json::parse(r.out, nullptr, false);
    Exchange x;
    if (j.is_discarded()) return x;
    x.status = j.value("status", 0);
    x.body = j.value("body", "");
    return x;
  };
  const std::string erg = shell_quote(ERG_CLI_PATH);
  {
    const std::string dump = dir_.path() + "/deep/er/dump";
    std::filesystem::create_directories(dump);
    BackgroundShell perseus("exec " + erg +
                            " perseus serve --scheduler online --microbatches 2 --frequency-step 2 --dump-dir " +
                            shell_quote(dump) + " --listen 127.0.0.1:0 --json");
    const int port = wait_port(perseus);
    ASSERT_NE(port, 0) << perseus.err();
    const std::string where = "--tcp 127.0.0.1:" + std::to_string(port);
    const Exchange made = as_nobody(
        where,
        http_request(
            "POST", "/register_job",
            R"({"job_id":"","pp_degree":1,"dp_degree":1,"tp_degree":1,"world_size":1,"job_metadata":"/../../escape"})"));
    ASSERT_EQ(made.status, 200) << made.body;
    const std::string id = json::parse(made.body).get<std::string>();
    const Exchange rank = as_nobody(
        where, http_request("POST", "/register_rank/" + id,
                            R"({"rank":0,"dp_rank":0,"pp_rank":0,"tp_rank":0,"available_frequencies":[1410,1200]})"));
    EXPECT_EQ(rank.status, 200) << rank.body;
    // Whatever the job wrote is in one folder directly under the dump folder.
    EXPECT_FALSE(std::filesystem::exists(dir_.path() + "/deep/escape"));
    EXPECT_FALSE(std::filesystem::exists(dir_.path() + "/deep/er/escape"));
    std::vector<std::string> folders;
    for (const auto& e : std::filesystem::directory_iterator(dump)) folders.push_back(e.path().filename().string());
    ASSERT_EQ(folders.size(), 1u);
    EXPECT_EQ(folders[0].find('/'), std::string::npos);
    EXPECT_TRUE(std::filesystem::exists(dump + "/" + folders[0] + "/ranks.json")) << folders[0];
  }
  {
    BackgroundShell bso("exec " + erg + " bso serve --db " + shell_quote("sqlite:///" + dir_.path() + "/body.db") +
                        " --listen 127.0.0.1:0 --json");
    const int port = wait_port(bso);
    ASSERT_NE(port, 0) << bso.err();
    const std::string where = "--tcp 127.0.0.1:" + std::to_string(port);
    const std::string chunk(60'000, ' ');
    std::string chunked =
        "POST /jobs HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\n"
        "Transfer-Encoding: chunked\r\n\r\n";
    // 120 KB, past the 64 KiB limit (and under the 128 KiB a command-line argument may hold).
    for (int i = 0; i < 2; ++i) chunked += "ea60\r\n" + chunk + "\r\n";
    chunked += "0\r\n\r\n";
    const Exchange c = as_nobody(where, chunked);
    EXPECT_EQ(c.status, 411) << c.body;
    const Exchange z =
        as_nobody(where, http_request("POST", "/jobs", "\x1f\x8b\x08\x00", "Content-Encoding: gzip\r\n"));
    EXPECT_EQ(z.status, 415) << z.body;
    const std::string lengthless =
        "POST /jobs HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\n\r\n{}";
    EXPECT_EQ(as_nobody(where, lengthless).status, 411);
  }
}

// Item 10: a refused connection's 503 went out before its request was read, so a client that had
// written saw a reset instead. Now ergd reads the request (briefly) first: nobody, over its
// per-uid limit, reads the 503 and why.
TEST_F(Security, Item10ARefusedClientReadsIts503) {
  auto ergd = start_ergd("--max-connections-per-uid 2");
  ASSERT_TRUE(wait_serving(*ergd)) << ergd->err();
  const std::string attacker = "setpriv --reuid=nobody --regid=nogroup --clear-groups " + shell_quote(ATTACKER_PATH);
  BackgroundShell held(attacker + " slow --unix " + shell_quote(socket_) + " 2 6");
  for (int i = 0; i < 1000 && held.out().empty(); ++i) std::this_thread::sleep_for(10ms);
  ASSERT_FALSE(held.out().empty()) << held.err();
  std::this_thread::sleep_for(300ms);  // both of nobody's slots hold a request in progress
  int refused = 0;
  for (int i = 0; i < 5; ++i) {
    auto r = run_shell(attacker + " raw --unix " + shell_quote(socket_) + " " +
                       shell_quote(http_request("GET", "/time", "")));
    auto j = json::parse(r.out, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << r.out << r.err;
    EXPECT_EQ(j.value("status", 0), 503) << r.out;
    EXPECT_NE(j.value("body", "").find("too many connections from uid"), std::string::npos) << r.out;
    if (j.value("status", 0) == 503) ++refused;
  }
  EXPECT_EQ(refused, 5);
  // Root is another user: served.
  EXPECT_EQ(root("GET", "/time").status, 200);
}

TEST_F(Security, Item6SlowAndIdleConnectionsDoNotStallTheServers) {
  auto made = sim::Machine::create_temp(*sim::parse_spec("2xA100,cpus=0"));
  ASSERT_TRUE(made) << made.error().message;
  auto machine = std::move(*made);
  ASSERT_TRUE(machine->export_env());  // the exporter attaches to this machine
  const std::string erg = shell_quote(ERG_CLI_PATH);
  // The batch-size server's database in memory-backed /dev/shm: each of its requests waits for an
  // fsync (group commit), and what is measured here is what the attack does to the server, not
  // the runner's disk (shared with the tests running beside this one).
  const std::string shm = std::filesystem::is_directory("/dev/shm") ? "/dev/shm" : dir_.path();
  const std::string db = shm + "/erg-security-" + std::to_string(::getpid()) + ".db";
  struct Removed {
    std::string path;
    ~Removed() {
      for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix);
    }
  } removed{db};
  const std::vector<GuardedTarget> targets = {
      {"erg bso serve",
       "exec " + erg + " bso serve --db " + shell_quote("sqlite://" + db) + " --listen 127.0.0.1:0 --json",
       "DELETE /jobs?job_id=none HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
       "GET /none HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"},
      {"erg perseus serve",
       "exec " + erg +
           " perseus serve --scheduler online --microbatches 2 --frequency-step 2 --listen 127.0.0.1:0 --json",
       "GET /state/none HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
       "GET /none HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"},
      {"erg exporter", "exec " + erg + " exporter --listen 127.0.0.1:0 --json",
       "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
       "GET /none HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"},
  };
  for (const auto& target : targets) {
    SCOPED_TRACE(target.name);
    BackgroundShell server(target.command);
    int port = 0;
    for (int i = 0; i < 1000 && port == 0; ++i) {
      port = port_of(server);
      if (port == 0) std::this_thread::sleep_for(10ms);
    }
    ASSERT_NE(port, 0) << server.err();
    const std::string where = "--tcp 127.0.0.1:" + std::to_string(port);
    const std::string nobody = "setpriv --reuid=nobody --regid=nogroup --clear-groups " + shell_quote(ATTACKER_PATH);
    BackgroundShell slow(nobody + " slow " + where + " 150 8");
    BackgroundShell idle(nobody + " idle " + where + " 150 8");
    for (int i = 0; i < 1000 && (slow.out().empty() || idle.out().empty()); ++i) std::this_thread::sleep_for(10ms);
    ASSERT_FALSE(slow.out().empty()) << slow.err();
    ASSERT_FALSE(idle.out().empty()) << idle.err();
    std::this_thread::sleep_for(500ms);  // the slow connections are mid-request
    Figures f;                           // 200 requests, so the p99 is not the single slowest
    for (int i = 0; i < 200; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      const int status = http_status(port, target.request);
      f.ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      if (status == 0 || status == 503) {
        ++f.failed;
        f.last_failure = "status " + std::to_string(status);
      }
      std::this_thread::sleep_for(15ms);
    }
    std::printf(
        "[ FIGURES  ] %s under 150 slow + 150 idle connections of nobody: root %d/%zu failed, p50 %.1f ms, "
        "p99 %.1f ms\n",
        target.name.c_str(), f.failed, f.ms.size(), f.p(0.5), f.p(0.99));
    EXPECT_EQ(f.failed, 0) << f.last_failure;
    EXPECT_LT(f.p(0.99), kP99BoundMs);
    slow.wait(20s);
    idle.wait(20s);
    // The attacker held at most its per-peer share; its connections over the cap were answered
    // 503 or its idle ones evicted, never the server's whole capacity.
    std::printf("[ FIGURES  ] %s attacker: slow %s idle %s", target.name.c_str(), slow.out().c_str(),
                idle.out().c_str());

    // A burst: 256 connections of root at once, a request on each: every one is served (over its
    // per-peer cap, a connection waits for a slot), none reset by a full backlog.
    std::vector<std::thread> burst;
    std::atomic<int> answered{0}, refused{0};
    for (int i = 0; i < 256; ++i)
      burst.emplace_back([&] {
        const int status = http_status(port, target.burst);
        if (status == 503) ++refused;
        if (status != 0 && status != 503) ++answered;
      });
    for (auto& th : burst) th.join();
    std::printf("[ FIGURES  ] %s: a burst of 256 connections, %d served, %d refused (503)\n", target.name.c_str(),
                answered.load(), refused.load());
    EXPECT_EQ(answered.load(), 256);
  }
  for (const char* v : {"ERG_SIMULATE", "ERG_SIM_STATE", "ERG_NVML_LIBRARY", "ERG_AMDSMI_LIBRARY", "ERG_POWERCAP_ROOT"})
    ::unsetenv(v);
}

}  // namespace
}  // namespace erg
