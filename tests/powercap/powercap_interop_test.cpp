// The simulated powercap tree as other tools see it, on the real clock with the simulator's
// updater rewriting the files every RAPL period (2^-10 s):
//  - a reader that keeps each energy_uj open and preads it from offset 0 (as sysfs allows, and as
//    erg's RAPL backend does) always gets a whole value, monotonic modulo the wrap — 10^6 reads,
//    with counters that wrap every ~0.2 s;
//  - Debian's prometheus-node-exporter (--collector.rapl, pointed at the tree with --path.sysfs)
//    finds every zone, DRAM included, and agrees with erg's RAPL backend within 1 % over 10 s.
//    node-exporter is installed by ./dev deps; without it the test fails (it never skips).

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <map>
#include <regex>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "erg/backends/rapl/discovery.hpp"
#include "erg/sim/machine.hpp"
#include "erg/sim/spec.hpp"

extern char** environ;

namespace erg {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

std::unique_ptr<sim::Machine> machine(const std::string& spec) {
  auto parsed = sim::parse_spec(spec);
  EXPECT_TRUE(parsed) << parsed.error().message;
  auto m = sim::Machine::create_temp(*parsed);
  EXPECT_TRUE(m) << m.error().message;
  return std::move(*m);
}

std::uint64_t read_u64(const fs::path& p) {
  FILE* f = std::fopen(p.c_str(), "r");
  unsigned long long v = 0;
  if (f != nullptr) {
    if (std::fscanf(f, "%llu", &v) != 1) v = 0;
    std::fclose(f);
  }
  return v;
}

TEST(PowercapStress, KeptOpenPreadsNeverSeeATornValue) {
  // Counters start a few seconds of idle energy below the wrap and run at 200-400 W: each wraps
  // within the first second, during the reads.
  auto m = machine("cpus=2,rapl=near-wrap");
  ASSERT_TRUE(m->set_cpu_power(0, Watts(400.0), Watts(60.0)));
  ASSERT_TRUE(m->set_cpu_power(1, Watts(200.0), Watts(30.0)));
  const fs::path root = m->powercap_root();
  struct File {
    fs::path path;
    unsigned cpu;
    bool dram;
    int fd;
    std::uint64_t range, last = 0;
    bool seen = false;
    int wraps = 0;
  };
  std::vector<File> files;
  for (auto [z, cpu, dram] : {std::tuple{"intel-rapl:0", 0u, false}, std::tuple{"intel-rapl:0:0", 0u, true},
                              std::tuple{"intel-rapl:1", 1u, false}, std::tuple{"intel-rapl:1:0", 1u, true}}) {
    const fs::path p = root / z / "energy_uj";
    const int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0) << p;
    files.push_back({p, cpu, dram, fd, read_u64(root / z / "max_energy_range_uj")});
  }
  const int kReads = 1'000'000;
  int bad = 0;
  for (int i = 0; i < kReads; ++i) {
    File& f = files[static_cast<std::size_t>(i) % files.size()];
    char buf[64];
    const ssize_t n = ::pread(f.fd, buf, sizeof buf - 1, 0);
    // What the counter holds as of its latest update, read after the pread: the file can lag it
    // (its writer is a thread that a loaded machine delays), never lead it.
    const auto truth = m->rapl_energy_uj(f.cpu, f.dram);
    ASSERT_TRUE(truth) << truth.error().message;
    if (n <= 0) {
      ++bad;
      continue;
    }
    buf[n] = '\0';
    char* end = nullptr;
    const unsigned long long v = std::strtoull(buf, &end, 10);
    while (*end == ' ' || *end == '\n') ++end;
    // Every value parses whole: digits (leading spaces allowed), a newline, nothing else.
    if (*end != '\0' || end == buf || v >= f.range) {
      ++bad;
      ADD_FAILURE() << f.path << ": unparsable or out of range: '" << buf << "'";
      continue;
    }
    if (f.seen) {
      // Monotonic modulo the wrap, and never ahead of the counter: going forward from the last
      // value, this one comes no later than the counter's own. A torn read shows as a fall (a
      // forward distance of almost the whole range) or as a value ahead of the counter — or, if
      // it stayed behind the counter, its successor falls below it.
      const auto forward = [&](std::uint64_t to) { return to >= f.last ? to - f.last : to + f.range - f.last; };
      if (forward(v) > forward(*truth)) {
        ++bad;
        ADD_FAILURE() << f.path << ": " << f.last << " -> " << v << " with the counter at " << *truth;
      }
      if (v < f.last) ++f.wraps;
    }
    f.last = v, f.seen = true;
  }
  for (auto& f : files) ::close(f.fd);
  EXPECT_EQ(bad, 0);
  for (const auto& f : files) EXPECT_GE(f.wraps, 1) << f.path << " wrapped during the reads";
}

// --- node-exporter ----------------------------------------------------------------------

int free_port() {
  const int s = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(s);
  return ntohs(a.sin_port);
}

/// GET http://127.0.0.1:port/metrics (HTTP/1.0: the server closes when done); "" on failure.
std::string scrape(int port) {
  const int s = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(s);
    return "";
  }
  const std::string req = "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
  if (::write(s, req.data(), req.size()) != static_cast<ssize_t>(req.size())) {
    ::close(s);
    return "";
  }
  std::string out;
  char buf[8192];
  for (ssize_t n; (n = ::read(s, buf, sizeof buf)) > 0;) out.append(buf, static_cast<std::size_t>(n));
  ::close(s);
  return out;
}

/// node_rapl_<name>_joules_total{index="I",...} values, keyed "<name><I>".
std::map<std::string, double> rapl_metrics(const std::string& text) {
  std::map<std::string, double> out;
  const std::regex line(R"re(^node_rapl_(\w+)_joules_total\{index="(\d+)"[^}]*\} ([0-9.e+]+)$)re");
  std::smatch mt;
  std::size_t pos = 0;
  while (pos < text.size()) {
    const std::size_t nl = text.find('\n', pos);
    const std::string l = text.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
    if (std::regex_match(l, mt, line)) out[mt[1].str() + mt[2].str()] = std::stod(mt[3].str());
    if (nl == std::string::npos) break;
    pos = nl + 1;
  }
  return out;
}

TEST(NodeExporter, FindsEveryZoneAndAgreesWithErgOverTenSeconds) {
  const std::string binary = "/usr/bin/prometheus-node-exporter";
  ASSERT_TRUE(fs::exists(binary)) << binary << " is missing: ./dev deps installs prometheus-node-exporter";
  auto m = machine("cpus=2");
  ASSERT_TRUE(m->set_cpu_power(0, Watts(90.0), Watts(12.0)));
  ASSERT_TRUE(m->set_cpu_power(1, Watts(40.0), Watts(6.0)));
  const fs::path sysfs = m->dir() / "sys";
  const int port = free_port();
  const std::string args[] = {binary,
                              "--path.sysfs=" + sysfs.string(),
                              "--collector.disable-defaults",
                              "--collector.rapl",
                              "--web.listen-address=127.0.0.1:" + std::to_string(port),
                              "--log.level=warn"};
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = 0;
  ASSERT_EQ(::posix_spawn(&pid, binary.c_str(), nullptr, nullptr, argv.data(), environ), 0);
  struct Reaper {
    pid_t pid;
    ~Reaper() {
      ::kill(pid, SIGTERM);
      int st = 0;
      ::waitpid(pid, &st, 0);
    }
  } reaper{pid};

  // erg's own reader of the same tree.
  rapl::DiscoveryOptions ro;
  ro.root = m->powercap_root();
  ro.keepalive = false;
  auto found = rapl::discover(ro);
  ASSERT_EQ(found.cpus.size(), 2u);
  auto erg_now = [&] {
    std::map<std::string, double> e;
    for (const auto& c : found.cpus) {
      e["package" + std::to_string(c->index())] = c->package_energy()->value() * 1e-6;
      e["dram" + std::to_string(c->index())] = c->dram_energy()->value() * 1e-6;
    }
    return e;
  };

  std::map<std::string, double> first;
  for (int i = 0; i < 100 && first.empty(); ++i) {  // until it listens
    std::this_thread::sleep_for(50ms);
    first = rapl_metrics(scrape(port));
  }
  auto e0 = erg_now();
  ASSERT_EQ(first.size(), 4u) << "every zone, DRAM included: package0, package1, dram0, dram1";
  std::this_thread::sleep_for(10s);
  auto last = rapl_metrics(scrape(port));
  auto e1 = erg_now();
  ASSERT_EQ(last.size(), 4u);
  for (const auto& [zone, v0] : first) {
    // node-exporter reports the raw (wrapping) counter; over 10 s at these powers a wrap is
    // possible only right at the range, which the delta modulo the range covers.
    const bool dram = zone.rfind("dram", 0) == 0;
    const double range_j = (dram ? sim::kDramEnergyRangeUj : sim::CpuSpec{}.max_energy_range_uj) * 1e-6;
    const double ne = std::fmod(last[zone] - v0 + range_j, range_j);
    const double ours = e1[zone] - e0[zone];
    EXPECT_GT(ours, dram ? 40.0 : 300.0) << zone;
    EXPECT_NEAR(ne, ours, 0.01 * ours) << zone;
  }
}

}  // namespace
}  // namespace erg
