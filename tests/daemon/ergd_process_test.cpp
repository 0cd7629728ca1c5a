// ergd as a separate process over the simulated machine (4xA100): routes, privilege (a client
// running as user nobody through ergd vs. without it), uid allow lists, demand-driven SSE
// polling seen in the simulator's call counts, SIGTERM, and a real Prometheus scraping /metrics.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "erg/client/connection.hpp"
#include "erg/sim/machine.hpp"
#include "erg/sim/powercap_tree.hpp"
#include "erg/sim/sku.hpp"
#include "erg/sim/spec.hpp"
#include "process.hpp"

namespace erg {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

/// A child process started with fork/exec; SIGKILLed in the destructor if still running.
struct Child {
  pid_t pid = -1;
  std::string log;
  Child(std::vector<std::string> args, std::string log_path, const std::string& run_as = "")
      : log(std::move(log_path)) {
    if (!run_as.empty()) args.insert(args.begin(), {"runuser", "-u", run_as, "--"});
    pid = ::fork();
    if (pid == 0) {
      int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execvp(argv[0], argv.data());
      ::_exit(127);
    }
  }
  int wait_exit(std::chrono::milliseconds timeout = 10s) {
    auto end = std::chrono::steady_clock::now() + timeout;
    int status = 0;
    while (std::chrono::steady_clock::now() < end) {
      if (::waitpid(pid, &status, WNOHANG) == pid) {
        pid = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(10ms);
    }
    return -1;
  }
  std::string output() const {
    std::ifstream in(log);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  ~Child() {
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  }
};

class ErgdProcess : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root (ergd's privileged groups, runuser)";
    auto spec = sim::parse_spec("4xA100");
    ASSERT_TRUE(spec) << spec.error().message;
    auto m = sim::Machine::create_temp(*spec);
    ASSERT_TRUE(m) << m.error().message;
    machine_ = std::move(*m);
    ASSERT_TRUE(machine_->export_env());
    // RAPL as the kernel ships it since CVE-2020-8694: energy_uj readable by root only.
    // The simulation's updater replaces energy_uj every 10 ms keeping its mode; a chmod that lands
    // between its stat and its rename is lost, so set the mode until it holds over a few updates.
    sim::PowercapTree tree(machine_->powercap_root());
    for (int attempt = 0; attempt < 50; ++attempt) {
      ASSERT_TRUE(tree.set_energy_mode(0, 0400));
      ASSERT_TRUE(tree.set_energy_mode(0, 0400, 0));
      std::this_thread::sleep_for(30ms);
      struct stat pkg {
      }, dram{};
      ASSERT_EQ(::stat((tree.zone_dir(0) / "energy_uj").c_str(), &pkg), 0);
      ASSERT_EQ(::stat((tree.zone_dir(0, 0) / "energy_uj").c_str(), &dram), 0);
      if ((pkg.st_mode & 0777) == 0400 && (dram.st_mode & 0777) == 0400) break;
    }
    ::setenv("CUDA_VISIBLE_DEVICES", "", 1);
    ::unsetenv("CUDA_VISIBLE_DEVICES");
    ::unsetenv("ERG_DAEMON_SOCK");
    ::chmod(dir_.path().c_str(), 0755);
    socket_ = dir_.path() + "/ergd.sock";
  }

  /// `prefix`: a command ergd runs under, e.g. prlimit.
  std::unique_ptr<Child> start_ergd(std::vector<std::string> extra = {}, std::vector<std::string> prefix = {}) {
    std::vector<std::string> args = prefix;
    args.insert(args.end(), {ERGD_PATH, "--socket-path", socket_, "--socket-mode", "0666"});
    args.insert(args.end(), extra.begin(), extra.end());
    auto c = std::make_unique<Child>(args, dir_.path() + "/ergd.log");
    client::Connection conn(client::Endpoint{socket_});
    for (int i = 0; i < 500; ++i) {
      auto r = conn.request("GET", "/time");
      if (r && r->status == 200) return c;
      std::this_thread::sleep_for(10ms);
    }
    ADD_FAILURE() << "ergd did not come up: " << c->output();
    return c;
  }

  json probe(const std::string& limit_mw, bool through_ergd, const std::string& user = "nobody") {
    std::string env = through_ergd ? "ERG_DAEMON_SOCK=" + socket_ : "ERG_DAEMON_SOCK=";
    auto r = testing::run_shell("runuser -u " + user + " -- env " + env + " " + ERGD_PROBE_PATH + " " + limit_mw);
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    auto j = json::parse(r.out, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << r.out << r.err;
    return j;
  }

  double limit_w(unsigned gpu) { return Watts(machine_->status(gpu)->power_limit).value(); }

  std::unique_ptr<sim::Machine> machine_;
  testing::TempDir dir_;
  std::string socket_;
};

TEST_F(ErgdProcess, RoutesOverTheSocketChangeTheSimulatedGpu) {
  auto ergd = start_ergd();
  client::Connection c(client::Endpoint{socket_});
  auto d = c.request("GET", "/discover");
  ASSERT_TRUE(d);
  auto dj = json::parse(d->body);
  ASSERT_EQ(dj["gpus"].size(), 4u);
  EXPECT_EQ(dj["gpus"][0]["cumulative_energy_available"], true);
  EXPECT_EQ(dj["gpus"][0]["pci_address"], "0000:07:00.0");  // from the simulated nvmlDeviceGetPciInfo_v3
  EXPECT_EQ(dj["gpus"][3]["pci_address"], "0000:4e:00.0");
  ASSERT_EQ(dj["cpus"].size(), 1u);
  auto cons = json::parse(c.request("GET", "/gpu/get_power_limit_constraints?gpu_ids=0")->body);
  unsigned max_mw = cons["0"]["max_power_limit_mw"];
  unsigned min_mw = cons["0"]["min_power_limit_mw"];
  double before = limit_w(2);
  auto bad =
      c.request("POST", "/gpu/set_power_limit?gpu_ids=2&power_limit_mw=" + std::to_string(max_mw + 1) + "&block=true");
  EXPECT_EQ(bad->status, 400);
  EXPECT_NE(bad->body.find("Invalid request"), std::string::npos) << bad->body;
  EXPECT_EQ(limit_w(2), before);
  unsigned target = (min_mw + max_mw) / 2 / 1000 * 1000;
  auto good =
      c.request("POST", "/gpu/set_power_limit?gpu_ids=2,3&power_limit_mw=" + std::to_string(target) + "&block=true");
  EXPECT_EQ(good->status, 200) << good->body;
  EXPECT_DOUBLE_EQ(limit_w(2), target / 1000.0);
  EXPECT_DOUBLE_EQ(limit_w(3), target / 1000.0);
  auto async =
      c.request("POST", "/gpu/set_power_limit?gpu_ids=1&power_limit_mw=" + std::to_string(min_mw) + "&block=false");
  EXPECT_EQ(async->status, 200);
  for (int i = 0; i < 200 && limit_w(1) != min_mw / 1000.0; ++i) std::this_thread::sleep_for(5ms);
  EXPECT_DOUBLE_EQ(limit_w(1), min_mw / 1000.0);
  auto e1 = json::parse(c.request("GET", "/gpu/get_cumulative_energy?gpu_ids=0")->body)["0"]["energy_mj"]
                .get<std::uint64_t>();
  ASSERT_TRUE(machine_->set_utilization(0, 1.0));
  std::this_thread::sleep_for(200ms);
  auto e2 = json::parse(c.request("GET", "/gpu/get_cumulative_energy?gpu_ids=0")->body)["0"]["energy_mj"]
                .get<std::uint64_t>();
  EXPECT_GT(e2, e1);
  auto cpu = c.request("GET", "/cpu/get_cumulative_energy?cpu=true&dram=true");
  EXPECT_EQ(cpu->status, 200) << cpu->body;
  EXPECT_EQ(c.request("GET", "/gpu/get_power?gpu_ids=0&x=1")->status, 400);
  EXPECT_EQ(c.request("GET", "/gpu/get_power?gpu_ids=9")->status, 400);

  // SIGTERM: clean exit, socket removed.
  ::kill(ergd->pid, SIGTERM);
  EXPECT_EQ(ergd->wait_exit(), 0) << ergd->output();
  EXPECT_FALSE(std::filesystem::exists(socket_));
}

TEST_F(ErgdProcess, NobodyReadsRaplAndSetsLimitOnlyThroughErgd) {
  // The probe exits right after setting the limit; with restore-on-exit ergd would put the
  // default back within milliseconds of that (ASigkilledPowerLimitOptimizer... tests it), racing
  // the read below.
  auto ergd = start_ergd({"--no-restore-on-exit"});
  // Without ergd: RAPL unreadable and the setter refused, each with a clear NoPermission.
  json alone = probe("150000", false);
  ASSERT_EQ(alone["cpus"], 0) << alone.dump();
  bool rapl_denied = false;
  for (auto& u : alone["unavailable"])
    rapl_denied = rapl_denied || (u["source"] == "rapl" && u["code"] == "no_permission");
  EXPECT_TRUE(rapl_denied) << alone.dump();
  ASSERT_TRUE(alone.contains("set_limit_error")) << alone.dump();
  EXPECT_EQ(alone["set_limit_error"]["code"], "no_permission") << alone.dump();
  EXPECT_NE(limit_w(0), 150.0);
  // Through ergd: both work.
  json via = probe("150000", true);
  EXPECT_EQ(via["cpus"], 1) << via.dump();
  EXPECT_TRUE(via.contains("cpu_energy_uj")) << via.dump();
  EXPECT_EQ(via["set_limit"], "ok") << via.dump();
  EXPECT_DOUBLE_EQ(limit_w(0), 150.0);
  EXPECT_DOUBLE_EQ(via["limit_mw"].get<double>(), 150000.0);
}

TEST_F(ErgdProcess, ErgCommandUsesErgdWhenErgDaemonSockIsSet) {
  auto ergd = start_ergd();
  auto devices = [&](bool through_ergd) {
    std::string env = through_ergd ? "ERG_DAEMON_SOCK=" + socket_ : "ERG_DAEMON_SOCK=";
    auto r = testing::run_shell("runuser -u nobody -- env " + env + " " + ERG_CLI_PATH + " devices --json");
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    return json::parse(r.out, nullptr, false);
  };
  json alone = devices(false);
  ASSERT_FALSE(alone.is_discarded());
  EXPECT_TRUE(alone["cpus"].empty()) << "RAPL is root-only without ergd: " << alone.dump();
  json via = devices(true);
  ASSERT_FALSE(via.is_discarded());
  ASSERT_EQ(via["cpus"].size(), 1u) << via.dump();
  EXPECT_EQ(via["gpus"].size(), 4u) << via.dump();
}

TEST_F(ErgdProcess, UidNotAllowedForGpuControlGets403) {
  auto ergd = start_ergd({"--allow-uid", "gpu-control=4242"});
  json via = probe("160000", true);
  ASSERT_TRUE(via.contains("set_limit_error")) << via.dump();
  EXPECT_EQ(via["set_limit_error"]["code"], "no_permission");
  EXPECT_NE(via["set_limit_error"]["message"].get<std::string>().find("403"), std::string::npos) << via.dump();
  EXPECT_TRUE(via.contains("cpu_energy_uj")) << via.dump();  // cpu-read has no list
  EXPECT_NE(limit_w(0), 160.0);
}

TEST_F(ErgdProcess, PrivilegedGroupRefusedAtStartWithoutPrivilege) {
  Child c({ERGD_PATH, "--socket-path", dir_.path() + "/n.sock", "--enable", "gpu-control"}, dir_.path() + "/n.log",
          "nobody");
  EXPECT_EQ(c.wait_exit(), 1);
  EXPECT_NE(c.output().find("gpu-control needs root or CAP_SYS_ADMIN"), std::string::npos) << c.output();
  Child r({ERGD_PATH, "--socket-path", dir_.path() + "/r.sock", "--enable", "cpu-read"}, dir_.path() + "/r.log",
          "nobody");
  EXPECT_EQ(r.wait_exit(), 1);
  EXPECT_NE(r.output().find("cpu-read needs read access to RAPL"), std::string::npos) << r.output();
}

TEST_F(ErgdProcess, SocketInAMissingDirectoryIsRefusedNamingIt) {
  // ergd runs as root: it must not create directories wherever --socket-path points.
  std::string missing = dir_.path() + "/no-such-dir";
  Child c({ERGD_PATH, "--socket-path", missing + "/ergd.sock"}, dir_.path() + "/m.log");
  EXPECT_EQ(c.wait_exit(), 1);
  EXPECT_NE(c.output().find("directory " + missing + " does not exist"), std::string::npos) << c.output();
  EXPECT_FALSE(std::filesystem::exists(missing));
}

/// Soft and hard "Max open files" of a process, from /proc/PID/limits.
std::pair<std::string, std::string> open_files_limit(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/limits");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("Max open files", 0) == 0) {
      std::istringstream fields(line.substr(14));
      std::string soft, hard;
      fields >> soft >> hard;
      return {soft, hard};
    }
  return {};
}

TEST_F(ErgdProcess, UnderALowFileLimitTheCapIsLoweredAndSaidAndExcessGets503) {
  if (!std::filesystem::exists("/usr/bin/prlimit")) GTEST_SKIP() << "prlimit (util-linux) is not installed";
  // A hard limit that fits (ours, if it does; raising it needs CAP_SYS_RESOURCE): ergd raises its
  // soft limit and says nothing.
  rlimit ours{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &ours), 0);
  if (ours.rlim_max >= 8192) {
    const std::string hard_limit = ours.rlim_max == RLIM_INFINITY ? "unlimited" : std::to_string(ours.rlim_max);
    auto ergd = start_ergd({"--max-connections", "4096"}, {"prlimit", "--nofile=1024:" + hard_limit, "--"});
    auto [soft, hard] = open_files_limit(ergd->pid);
    EXPECT_EQ(hard, hard_limit);
    EXPECT_GE(std::stol(soft), 4096 + 64) << ergd->output();
    EXPECT_LT(std::stol(soft), 4096 + 1024) << "raised as far as needed, not to the hard limit";
    EXPECT_EQ(ergd->output().find("lowered"), std::string::npos) << ergd->output();
  }
  // The usual 1024 as the hard limit: the cap is lowered to fit, in one line.
  auto ergd = start_ergd({"--max-connections", "4096"}, {"prlimit", "--nofile=1024:1024", "--"});
  const std::string log = ergd->output();
  const std::string said = "ergd: file limit 1024 allows ";
  auto at = log.find(said);
  ASSERT_NE(at, std::string::npos) << log;
  EXPECT_NE(log.find(" connections; --max-connections lowered from 4096 (", at), std::string::npos) << log;
  const int cap = std::stoi(log.substr(at + said.size()));
  EXPECT_GT(cap, 800);
  EXPECT_LE(cap, 1024 - 64);
  // Root (like any uid) holds at most a quarter of the cap; every connection past it is answered
  // 503 promptly instead of waiting in the backlog.
  const int per_uid = cap / 4;
  // start_ergd's own connection may not be released yet: allow for it below.
  std::this_thread::sleep_for(200ms);
  std::vector<int> held;
  int refused = 0;
  double slowest_ms = 0;
  for (int i = 0; i < per_uid + 10; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strncpy(a.sun_path, socket_.c_str(), sizeof a.sun_path - 1);
    ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    timeval tv{2, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    const std::string req = "GET /time HTTP/1.1\r\n\r\n";
    // A refused connection is answered 503 at accept and closed at once, possibly before this
    // send (EPIPE): its 503 is still there to read.
    const ssize_t sent = ::send(fd, req.data(), req.size(), MSG_NOSIGNAL);
    const int send_errno = errno;
    EXPECT_TRUE(sent == static_cast<ssize_t>(req.size()) ||
                (sent < 0 && (send_errno == EPIPE || send_errno == ECONNRESET)))
        << "connection " << i << ": " << std::strerror(send_errno);
    char buf[512];
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    ASSERT_GT(n, 12) << "connection " << i << " got no answer";
    std::string reply(buf, static_cast<std::size_t>(n));
    if (reply.compare(9, 3, "503") == 0) {
      ++refused;
      slowest_ms = std::max(slowest_ms,
                            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      EXPECT_NE(reply.find("too many connections from uid 0"), std::string::npos) << reply;
      ::close(fd);
    } else {
      EXPECT_EQ(reply.compare(9, 3, "200"), 0) << reply;
      held.push_back(fd);
    }
  }
  EXPECT_GE(static_cast<int>(held.size()), per_uid - 1);
  EXPECT_LE(static_cast<int>(held.size()), per_uid);
  EXPECT_GE(refused, 10);
  EXPECT_LT(slowest_ms, 1000.0);
  for (int fd : held) ::close(fd);
}

TEST_F(ErgdProcess, SocketDirectoryOthersMayWriteToIsRefusedOrWarnedNamingIt) {
  const std::string shared = dir_.path() + "/shared";
  ASSERT_EQ(::mkdir(shared.c_str(), 0755), 0);
  ::chmod(shared.c_str(), 01777);  // like /tmp
  {
    Child c({ERGD_PATH, "--socket-path", shared + "/ergd.sock"}, dir_.path() + "/s.log");
    EXPECT_EQ(c.wait_exit(), 1);
    EXPECT_NE(c.output().find("socket directory " + shared + " (mode 1777) is writable by other users"),
              std::string::npos)
        << c.output();
    EXPECT_NE(c.output().find("--allow-insecure-socket-dir"), std::string::npos) << c.output();
  }
  socket_ = shared + "/ergd.sock";
  {
    auto ergd = start_ergd({"--allow-insecure-socket-dir"});
    EXPECT_NE(ergd->output().find("ergd: WARNING: socket directory " + shared + " (mode 1777)"), std::string::npos)
        << ergd->output();
  }
  // Without the sticky bit, anyone may replace the socket: refused even with the flag.
  ::chmod(shared.c_str(), 0777);
  Child c({ERGD_PATH, "--socket-path", socket_, "--allow-insecure-socket-dir"}, dir_.path() + "/w.log");
  EXPECT_EQ(c.wait_exit(), 1);
  EXPECT_NE(c.output().find("chmod go-w " + shared), std::string::npos) << c.output();
}

TEST_F(ErgdProcess, SsePollsOnlyWhileSubscribed) {
  // /attribution's sampler reads every GPU's counter (a field value) all the time: off here.
  auto ergd = start_ergd({"--gpu-power-poll-hz", "50", "--attribution-poll-s", "0"});
  // Instant power is read with nvmlDeviceGetFieldValues (or GetPowerUsage on old drivers).
  auto count = [&](unsigned gpu) {
    return *machine_->call_count(gpu, sim::SimCall::kGetPowerUsage) +
           *machine_->call_count(gpu, sim::SimCall::kGetFieldValues);
  };
  std::uint64_t a0 = count(0), a1 = count(1);
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(count(0), a0) << "GPU 0 polled with no subscriber";
  EXPECT_EQ(count(1), a1);
  ASSERT_TRUE(machine_->set_utilization(1, 0.3));
  client::Connection c(client::Endpoint{socket_});
  std::vector<json> events;
  std::thread load([&] {
    for (int i = 0; i < 30; ++i) {
      (void)machine_->set_utilization(1, 0.3 + 0.02 * i);
      std::this_thread::sleep_for(30ms);
    }
  });
  auto st = c.stream("/gpu/stream_power?gpu_ids=1", [&](std::string_view d) {
    events.push_back(json::parse(d));
    return events.size() < 3;
  });
  load.join();
  ASSERT_TRUE(st);
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0]["gpu_id"], 1);
  EXPECT_GT(count(1), a1 + 2);
  EXPECT_EQ(count(0), a0) << "only subscribed GPUs are polled";
  std::this_thread::sleep_for(200ms);  // the stream's end is noticed within ~100 ms
  std::uint64_t after = count(1);
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(count(1), after) << "polling continued after the subscriber left";
}

int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  int port = ntohs(a.sin_port);
  ::close(fd);
  return port;
}

TEST_F(ErgdProcess, TokenIssuedByErgdOpensTheTcpListener) {
  std::string key = dir_.path() + "/signing.key";
  std::ofstream(key) << "erg-test-signing-key-0123456789\n";
  auto issue = [&](const std::string& scope, const std::string& expires) {
    auto r = testing::run_shell(std::string(ERGD_PATH) + " token issue --signing-key-path " + key +
                                " --user alice --scope " + scope + " --expires " + expires);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    while (!r.out.empty() && r.out.back() == '\n') r.out.pop_back();
    return r.out;
  };
  std::string reader = issue("gpu-read", "1h");
  std::string controller = issue("gpu-control,gpu-read", "never");
  ASSERT_EQ(std::count(reader.begin(), reader.end(), '.'), 2) << reader;  // header.claims.signature

  // The same command line through `serve`, as zeusd spells it.
  int port = free_port();
  std::vector<std::string> args = {ERGD_PATH,
                                   "serve",
                                   "--socket-path",
                                   socket_,
                                   "--socket-mode",
                                   "0666",
                                   "--tcp",
                                   "127.0.0.1:" + std::to_string(port),
                                   "--signing-key-path",
                                   key};
  Child ergd(args, dir_.path() + "/ergd.log");
  auto tcp = [&](const std::string& token) {
    return client::Connection(client::Endpoint{"", "127.0.0.1", static_cast<std::uint16_t>(port), token});
  };
  bool up = false;
  for (int i = 0; i < 500 && !up; ++i) {
    auto r = tcp("").request("GET", "/time");
    up = r && r->status == 200;
    if (!up) std::this_thread::sleep_for(10ms);
  }
  ASSERT_TRUE(up) << ergd.output();
  EXPECT_EQ(tcp("").request("GET", "/gpu/get_power_limit?gpu_ids=0")->status, 401);
  EXPECT_EQ(tcp(reader).request("GET", "/gpu/get_power_limit?gpu_ids=0")->status, 200);
  EXPECT_EQ(tcp(reader).request("POST", "/gpu/set_power_limit?gpu_ids=0&power_limit_mw=300000&block=true")->status,
            403);
  auto set = tcp(controller).request("POST", "/gpu/set_power_limit?gpu_ids=0&power_limit_mw=300000&block=true");
  EXPECT_EQ(set->status, 200) << set->body;
  EXPECT_DOUBLE_EQ(limit_w(0), 300.0);
  auto who = json::parse(tcp(reader).request("GET", "/auth/whoami")->body);
  EXPECT_EQ(who["sub"], "alice");
  EXPECT_EQ(who["scopes"], json({"gpu-read"}));
  auto exp = who["exp"].get<std::int64_t>() - static_cast<std::int64_t>(std::time(nullptr));
  EXPECT_GT(exp, 3500);
  EXPECT_LE(exp, 3600);

  // Bad input: a clear one-line error and exit status 2; a short key: status 1.
  auto bad = testing::run_shell(std::string(ERGD_PATH) + " token issue --signing-key-path " + key +
                                " --user alice --scope gpu-write");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("gpu-write"), std::string::npos) << bad.err;
  EXPECT_TRUE(bad.out.empty());
  std::ofstream(dir_.path() + "/short.key") << "abc";
  auto short_key = testing::run_shell(std::string(ERGD_PATH) + " token issue --signing-key-path " + dir_.path() +
                                      "/short.key --user alice --scope gpu-read");
  EXPECT_EQ(short_key.exit_code, 1);
  EXPECT_NE(short_key.err.find("too short"), std::string::npos) << short_key.err;
}

// Issue 23, acceptance 4: /attribution shows a client only its own processes (SO_PEERCRED uid),
// others' folded into one "other users" figure so the sums still match the GPU's energy; root sees
// every process, and so does nobody once --attribution-all-uids names it. Three `erg simulate
// load` GPU processes share simulated GPU 0: two of root's, one of nobody's. The client is
// ergd_probe (the client library's get_attribution) run as nobody.
TEST_F(ErgdProcess, AttributionShowsNobodyOnlyItsOwnProcessesUnlessAllowed) {
  const passwd* pw = ::getpwnam("nobody");
  ASSERT_NE(pw, nullptr) << "no user nobody";
  const std::uint32_t nobody = pw->pw_uid;
  auto ergd = start_ergd({"--attribution-poll-s", "0.2"});
  const std::string load = std::string(ERG_CLI_PATH) + " simulate load --gpus 0 --seconds 120 --share ";
  testing::BackgroundShell root_a("exec " + load + "0.4");
  testing::BackgroundShell root_b("exec " + load + "0.2");
  // setpriv execs in place: the shell's pid is the load's.
  testing::BackgroundShell mine("exec setpriv --reuid=nobody --regid=nogroup --clear-groups -- " + load + "0.3");
  const std::set<std::uint32_t> all = {static_cast<std::uint32_t>(root_a.pid()),
                                       static_cast<std::uint32_t>(root_b.pid()),
                                       static_cast<std::uint32_t>(mine.pid())};
  const auto own = static_cast<std::uint32_t>(mine.pid());

  // ergd_probe attribution as `user` ("" = root): the parsed reply, once `ready` holds (≤ 15 s).
  auto ask = [&](const std::string& user, const std::function<bool(const json&)>& ready) {
    std::string prefix = user.empty() ? "" : "setpriv --reuid=" + user + " --regid=nogroup --clear-groups -- ";
    json j;
    for (int i = 0; i < 75; ++i) {
      auto r = testing::run_shell(prefix + "env ERG_DAEMON_SOCK=" + socket_ + " " + ERGD_PROBE_PATH + " attribution");
      j = json::parse(r.out, nullptr, false);
      if (r.exit_code == 0 && !j.is_discarded() && ready(j)) return j;
      std::this_thread::sleep_for(200ms);
    }
    ADD_FAILURE() << "no ready /attribution reply for " << (user.empty() ? "root" : user) << ": " << j.dump();
    return j;
  };
  auto pids = [](const json& j) {
    std::set<std::uint32_t> out;
    for (const auto& p : j["gpus"]["0"]["pids"]) out.insert(p["pid"].get<std::uint32_t>());
    return out;
  };
  auto all_busy = [&](const json& j) {
    if (!j.contains("gpus") || !j["gpus"].contains("0")) return false;
    for (const auto& p : j["gpus"]["0"]["pids"])
      if (!(p["energy_j"].get<double>() > 0)) return false;
    return true;
  };
  auto sums_match = [](const json& g) {
    EXPECT_NEAR(g["sum_j"].get<double>(), g["measured_j"].get<double>(), 1e-9 * g["measured_j"].get<double>() + 1e-9)
        << g.dump();
  };

  // As nobody: its own process alone, root's two folded into "other users".
  json as_nobody = ask("nobody", [&](const json& j) {
    return all_busy(j) && pids(j) == std::set<std::uint32_t>{own} && j["gpus"]["0"]["other_pids"] == 2 &&
           j["gpus"]["0"]["other_j"].get<double>() > 0;
  });
  EXPECT_EQ(as_nobody["sees_all_processes"], false);
  EXPECT_EQ(as_nobody["uid"], nobody);
  ASSERT_EQ(as_nobody["gpus"]["0"]["pids"].size(), 1u) << as_nobody.dump();
  EXPECT_EQ(as_nobody["gpus"]["0"]["pids"][0]["uid"], nobody);
  EXPECT_EQ(as_nobody["gpus"]["0"]["pids"][0]["comm"], "erg");
  sums_match(as_nobody["gpus"]["0"]);
  for (const char* other : {"1", "2", "3"}) EXPECT_TRUE(as_nobody["gpus"][other]["pids"].empty()) << other;

  // As root: all three, nothing folded. GPU 1 with MIG on: not attributable, with the reason.
  ASSERT_TRUE(machine_->set_mig_mode(1, true));
  json as_root = ask("", [&](const json& j) {
    return all_busy(j) && pids(j) == all && j["gpus"].contains("1") && j["gpus"]["1"]["attributable"] == false;
  });
  EXPECT_NE(as_root["gpus"]["1"]["error"].get<std::string>().find("MIG"), std::string::npos) << as_root.dump();
  EXPECT_TRUE(as_root["gpus"]["1"]["pids"].empty());
  EXPECT_GT(as_root["gpus"]["1"]["measured_j"].get<double>(), 0.0) << "the GPU's energy, never 0";
  ASSERT_TRUE(machine_->set_mig_mode(1, false));
  EXPECT_EQ(as_root["sees_all_processes"], true);
  EXPECT_EQ(as_root["gpus"]["0"]["other_pids"], 0);
  for (const auto& p : as_root["gpus"]["0"]["pids"]) EXPECT_EQ(p["uid"], p["pid"] == own ? nobody : 0u) << p.dump();
  sums_match(as_root["gpus"]["0"]);
  // The larger share got more energy (0.4 vs 0.2 of the same time on the same GPU).
  std::map<std::uint32_t, double> e;
  for (const auto& p : as_root["gpus"]["0"]["pids"]) e[p["pid"]] = p["energy_j"];
  EXPECT_GT(e[static_cast<std::uint32_t>(root_a.pid())], e[static_cast<std::uint32_t>(root_b.pid())]);

  // nobody allowed by the flag: it sees all three.
  ::kill(ergd->pid, SIGTERM);
  ASSERT_EQ(ergd->wait_exit(), 0) << ergd->output();
  ergd = start_ergd({"--attribution-poll-s", "0.2", "--attribution-all-uids", std::to_string(nobody)});
  json allowed = ask("nobody", [&](const json& j) { return all_busy(j) && pids(j) == all; });
  EXPECT_EQ(allowed["sees_all_processes"], true);
  EXPECT_EQ(allowed["gpus"]["0"]["other_pids"], 0);
  sums_match(allowed["gpus"]["0"]);
}

// Issue 15: a power-limit optimizer killed with SIGKILL in the middle of profiling cannot restore
// anything itself; ergd, through which it set the limits (user nobody: the simulated driver
// refuses its own setter calls), puts every GPU back at its default once the process is gone.
TEST_F(ErgdProcess, ASigkilledPowerLimitOptimizerLeavesEveryGpuAtItsDefault) {
  auto ergd = start_ergd();
  const double default_w = sim::lookup_sku("A100")->default_limit_w;
  machine_->clear_power_limit_log();
  // setpriv execs in place (runuser would fork), so the child's pid is erg's own.
  Child erg({"setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--", "env",
             "ERG_DAEMON_SOCK=" + socket_, ERG_CLI_PATH, "optimize", "power-limit", "--warmup-steps", "2",
             "--profile-steps", "50", "--", "sh", "-c", "while :; do echo step >&$ERG_OPTIMIZER_FD; sleep 0.02; done"},
            dir_.path() + "/optimize.log");
  // Profiling has begun once every GPU runs below its default.
  auto all_below = [&] {
    for (unsigned g = 0; g < 4; ++g)
      if (limit_w(g) >= default_w) return false;
    return true;
  };
  for (int i = 0; i < 1000 && !all_below(); ++i) std::this_thread::sleep_for(10ms);
  ASSERT_TRUE(all_below()) << erg.output() << ergd->output();
  const auto calls = machine_->power_limit_log();
  ASSERT_FALSE(calls.empty());
  ::kill(erg.pid, SIGKILL);
  EXPECT_EQ(erg.wait_exit(), 128 + SIGKILL);
  for (int i = 0; i < 300 && all_below(); ++i) std::this_thread::sleep_for(10ms);
  for (unsigned g = 0; g < 4; ++g) {
    for (int i = 0; i < 300 && limit_w(g) != default_w; ++i) std::this_thread::sleep_for(10ms);
    EXPECT_EQ(limit_w(g), default_w) << "GPU " << g << "\n" << ergd->output();
  }
  EXPECT_NE(ergd->output().find("restored the default limit"), std::string::npos) << ergd->output();
}

TEST_F(ErgdProcess, PrometheusScrapesEnergyCounters) {
  std::string prom = "/usr/bin/prometheus";
  if (!std::filesystem::exists(prom)) GTEST_SKIP() << "prometheus is not installed (apt-get install prometheus)";
  int ergd_port = free_port();
  auto ergd = start_ergd({"--tcp", "127.0.0.1:" + std::to_string(ergd_port), "--tcp-insecure"});
  ASSERT_TRUE(machine_->set_utilization(0, 0.8));
  int prom_port = free_port();
  std::string cfg = dir_.path() + "/prometheus.yml";
  std::ofstream(cfg) << "global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\nscrape_configs:\n"
                     << "  - job_name: ergd\n    static_configs:\n      - targets: ['127.0.0.1:" << ergd_port << "']\n";
  Child p({prom, "--config.file=" + cfg, "--storage.tsdb.path=" + dir_.path() + "/tsdb",
           "--web.listen-address=127.0.0.1:" + std::to_string(prom_port)},
          dir_.path() + "/prometheus.log");
  client::Connection api(client::Endpoint{"", "127.0.0.1", static_cast<std::uint16_t>(prom_port), ""});
  auto query = [&](const std::string& expr) -> std::optional<double> {
    auto r = api.request("GET", "/api/v1/query?query=" + expr);
    if (!r || r->status != 200) return std::nullopt;
    auto j = json::parse(r->body, nullptr, false);
    if (j.is_discarded() || j["data"]["result"].empty()) return std::nullopt;
    return std::stod(j["data"]["result"][0]["value"][1].get<std::string>());
  };
  bool up = false;
  for (int i = 0; i < 300 && !up; ++i) {  // Prometheus takes 5-8 s to scrape a first time
    auto r = api.request("GET", "/api/v1/targets");
    if (r && r->status == 200) {
      auto j = json::parse(r->body, nullptr, false);
      if (!j.is_discarded())
        for (auto& t : j["data"]["activeTargets"]) up = up || t["health"] == "up";
    }
    if (!up) std::this_thread::sleep_for(100ms);
  }
  ASSERT_TRUE(up) << p.output();
  const std::string gpu = "erg_gpu_energy_joules_total%7Bindex%3D%220%22%7D";
  std::optional<double> first;
  for (int i = 0; i < 50 && !first; ++i) {
    first = query(gpu);
    if (!first) std::this_thread::sleep_for(100ms);
  }
  ASSERT_TRUE(first);
  auto cpu_first = query("erg_cpu_energy_joules_total");
  ASSERT_TRUE(cpu_first);
  std::optional<double> later;
  for (int i = 0; i < 60; ++i) {
    std::this_thread::sleep_for(100ms);
    later = query(gpu);
    if (later && *later > *first) break;
  }
  ASSERT_TRUE(later);
  EXPECT_GT(*later, *first);
  auto cpu_later = query("erg_cpu_energy_joules_total");
  ASSERT_TRUE(cpu_later);
  EXPECT_GT(*cpu_later, *cpu_first);
  EXPECT_TRUE(query("erg_gpu_power_limit_watts"));
  EXPECT_TRUE(query("erg_dram_energy_joules_total"));
}

}  // namespace
}  // namespace erg

namespace erg {
namespace {

/// ergd started on its own (no parent exported a simulated machine): `ERG_SIMULATE=SPEC ergd` and
/// `ergd --simulate SPEC` serve SPEC, and a client given the state ergd names shares its hardware.
class ErgdSimulates : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root (ergd's gpu-control group)";
    ::chmod(dir_.path().c_str(), 0755);
  }
  /// `env` with every simulator and daemon variable of this process removed, then `vars`.
  static std::vector<std::string> clean_env(const std::vector<std::string>& vars) {
    std::vector<std::string> a = {"env"};
    for (const char* k : {"ERG_SIMULATE", "ERG_SIM_STATE", "ERG_NVML_LIBRARY", "ERG_POWERCAP_ROOT", "ERG_DAEMON_SOCK",
                          "ZEUSD_SOCK_PATH", "CUDA_VISIBLE_DEVICES"}) {
      a.push_back("-u");
      a.push_back(k);
    }
    a.insert(a.end(), vars.begin(), vars.end());
    return a;
  }
  std::unique_ptr<Child> start(std::vector<std::string> args, const std::string& name) {
    auto c = std::make_unique<Child>(std::move(args), dir_.path() + "/" + name + ".log");
    client::Connection conn(client::Endpoint{dir_.path() + "/" + name + ".sock"});
    for (int i = 0; i < 500; ++i) {
      auto r = conn.request("GET", "/time");
      if (r && r->status == 200) return c;
      std::this_thread::sleep_for(10ms);
    }
    ADD_FAILURE() << "ergd did not come up: " << c->output();
    return c;
  }
  testing::TempDir dir_;
};

TEST_F(ErgdSimulates, OnItsOwnFromErgSimulateOrTheFlagAndAClientSharesItsMachine) {
  for (bool flag : {false, true}) {
    SCOPED_TRACE(flag ? "ergd --simulate 2xA100" : "ERG_SIMULATE=2xA100 ergd");
    const std::string name = flag ? "flag" : "env";
    const std::string socket = dir_.path() + "/" + name + ".sock";
    auto args = clean_env(flag ? std::vector<std::string>{} : std::vector<std::string>{"ERG_SIMULATE=2xA100"});
    args.insert(args.end(), {ERGD_PATH, "--socket-path", socket, "--socket-mode", "0666"});
    if (flag) args.insert(args.end(), {"--simulate", "2xA100"});
    auto ergd = start(args, name);
    client::Connection c(client::Endpoint{socket});
    auto d = c.request("GET", "/discover");
    ASSERT_TRUE(d);
    auto dj = json::parse(d->body);
    EXPECT_EQ(dj["gpus"].size(), 2u) << d->body;

    // ergd names its machine; a client started with that state and ERG_DAEMON_SOCK reads the
    // limit ergd sets, on its own (local) reads.
    const std::string log = ergd->output();
    const auto at = log.find("ERG_SIM_STATE=");
    ASSERT_NE(at, std::string::npos) << log;
    const std::string state = log.substr(at + 14, log.find_first_of(" \n", at) - at - 14);
    auto set = c.request("POST", "/gpu/set_power_limit?gpu_ids=1&power_limit_mw=175000&block=true");
    ASSERT_TRUE(set);
    ASSERT_EQ(set->status, 200) << set->body;
    std::string cmd;
    for (const auto& a : clean_env({"ERG_SIMULATE=2xA100", "ERG_SIM_STATE=" + state, "ERG_DAEMON_SOCK=" + socket}))
      cmd += a + " ";
    auto r = testing::run_shell(cmd + ERG_CLI_PATH + " devices --json");
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    auto j = json::parse(r.out, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << r.out;
    EXPECT_EQ(j["simulated"], true);
    ASSERT_EQ(j["gpus"].size(), 2u) << r.out;
    EXPECT_EQ(j["gpus"][1]["power_limit_mw"], 175000) << r.out;
    EXPECT_NE(j["gpus"][0]["power_limit_mw"], 175000) << r.out;
  }
}

TEST_F(ErgdSimulates, AnEmptyOrMalformedSpecIsRefusedNamingIt) {
  for (auto [extra, want] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--simulate", ""}, "--simulate needs a spec"}, {{"--simulate", "2xQ9"}, "'2xQ9'"}}) {
    auto args = clean_env({});
    args.insert(args.end(), {ERGD_PATH, "--socket-path", dir_.path() + "/x.sock"});
    args.insert(args.end(), extra.begin(), extra.end());
    Child c(args, dir_.path() + "/x.log");
    EXPECT_EQ(c.wait_exit(), 2);
    EXPECT_NE(c.output().find(want), std::string::npos) << c.output();
  }
}

}  // namespace
}  // namespace erg
