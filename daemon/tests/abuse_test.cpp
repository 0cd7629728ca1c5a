// ergd under a hostile local user (issue 13, acceptance 2): one uid holds 2,000 idle
// connections and 5 clients that pipeline requests and never read their replies, and probes
// past its per-uid limit; meanwhile another uid (root, this process) is served promptly, the
// excess connections get 503 within 1 s, and the pipelining clients are dropped at the write
// timeout. Bounded in time (a few seconds; well under a minute under ASan).

#include <sys/resource.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <vector>

#include "erg/client/connection.hpp"
#include "socket_helpers.hpp"
#include "uid_agent.hpp"

namespace erg::daemon {
namespace {

using testing::AgentReport;
using testing::UidAgent;
using Clock = std::chrono::steady_clock;

constexpr int kIdle = 2000;
constexpr int kPipelining = 5;
constexpr int kProbes = 20;
constexpr int kRequests = 200;

TEST(ServerAbuse, OneUidWithThousandsOfConnectionsCannotStarveAnother) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root: the hostile client runs as uid 65534 (setuid)";
  // Both processes hold over 2,000 sockets: raise the descriptor limit (root may raise the
  // hard one too). The agent inherits it.
  rlimit rl{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &rl), 0);
  const rlim_t need = 3 * kIdle;
  if (rl.rlim_cur < need) {
    rl.rlim_cur = need;
    rl.rlim_max = std::max(rl.rlim_max, need);
    if (::setrlimit(RLIMIT_NOFILE, &rl) != 0)
      GTEST_SKIP() << "cannot raise RLIMIT_NOFILE to " << need << " (hard limit below it and no CAP_SYS_RESOURCE)";
  }

  char t[] = "/tmp/ergd-abuse-XXXXXX";
  ASSERT_NE(::mkdtemp(t), nullptr);
  const std::string dir = t;
  ::chmod(dir.c_str(), 0755);
  const std::string path = dir + "/ergd.sock";
  UidAgent hostile(65534, path);  // forked before the daemon's threads exist
  ASSERT_TRUE(hostile.running());

  Config c;
  c.socket_mode = 0666;
  c.max_connections = 4096;
  c.max_connections_per_uid = kIdle + kPipelining;  // exactly what the hostile uid holds
  c.write_timeout = std::chrono::milliseconds(1000);
  c.idle_timeout = std::chrono::milliseconds(60'000);
  auto f = testing::serve(path, c);

  auto t0 = Clock::now();
  AgentReport idle = hostile.open(kIdle);
  ASSERT_EQ(idle.ok, kIdle) << "refused " << idle.refused << " other " << idle.other << ": " << idle.last_refusal;
  std::printf("uid 65534 opened %d idle connections in %.2f s\n", kIdle,
              std::chrono::duration<double>(Clock::now() - t0).count());

  // 5 pipelining clients that never read (the per-uid limit is now reached), then probes past
  // it; the agent keeps pipelining (and reconnecting when dropped) for 4 s.
  hostile.pipeline(kPipelining, kProbes, 4000);
  AgentReport probes = hostile.receive();
  EXPECT_EQ(probes.refused, kProbes) << "ok " << probes.ok << " other " << probes.other;
  EXPECT_TRUE(std::string(probes.last_refusal).find("too many connections from uid 65534") != std::string::npos)
      << probes.last_refusal;
  EXPECT_LT(probes.max_refusal_ms, 1000.0);

  // Meanwhile root: sequential requests, each on a new connection.
  std::vector<double> ms;
  int served = 0;
  for (int i = 0; i < kRequests; ++i) {
    auto s = Clock::now();
    client::Connection conn(client::Endpoint{path});
    auto r = conn.request("GET", i % 2 ? "/gpu/get_power_limit?gpu_ids=0" : "/time");
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - s).count());
    if (r && r->status == 200) ++served;
  }
  std::sort(ms.begin(), ms.end());
  const double p50 = ms[ms.size() / 2], p99 = ms[ms.size() * 99 / 100], worst = ms.back();
  AgentReport end = hostile.receive();

  std::printf("root during the abuse: %d/%d served, p50 %.2f ms, p99 %.2f ms, max %.2f ms\n", served, kRequests, p50,
              p99, worst);
  std::printf("uid 65534 past its limit: %d/%d got 503, slowest %.2f ms\n", probes.refused, kProbes,
              probes.max_refusal_ms);
  std::printf(
      "pipelining clients that never read: %ld requests sent, dropped %d times, %.0f ms after filling "
      "(write timeout 1000 ms)\n",
      end.requests_sent, end.dropped, end.max_drop_ms);
  EXPECT_EQ(served, kRequests);
  EXPECT_LT(p99, 100.0);
  // Each pipelining client is dropped at the write timeout (and reconnects), several times in 4 s.
  EXPECT_GE(end.dropped, kPipelining);
  EXPECT_LT(end.max_drop_ms, 1000.0 + 1500.0);
  // The idle connections were not disturbed (idle timeout 60 s).
  EXPECT_EQ(end.still_open, kIdle);
  EXPECT_EQ(hostile.close_all().still_open, kIdle);
  f->daemon->stop();
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

}  // namespace
}  // namespace erg::daemon
