// RemoteGpu / RemoteCpu / HybridGpu over an in-process ergd on fake devices.

#include "erg/client/remote.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>

#include "fixture.hpp"

namespace erg::client {
namespace {

struct Served {
  daemon::testing::FakeDaemon fake;
  std::string path = "/tmp/ergd-client-test-" + std::to_string(::getpid()) + ".sock";
  Served() {
    Inventory inv;
    for (auto& g : fake.gpus) inv.gpus.push_back(g);
    for (auto& c : fake.cpus) inv.cpus.push_back(c);
    daemon::Config c;
    c.socket_path = path;
    c.skip_privilege_check = true;
    c.allow_insecure_socket_dir = true;  // a socket in /tmp itself (sticky, shared)
    auto d = daemon::Daemon::create(c, std::move(inv));
    fake.daemon = std::move(*d);
    EXPECT_TRUE(fake.daemon->start());
  }
};

TEST(Remote, GpuOverDaemon) {
  Served s;
  s.fake.gpus[1]->set_energy_mj(4242.0);
  Inventory inv = with_daemon(Inventory{}, Endpoint{s.path});
  ASSERT_EQ(inv.gpus.size(), 4u);
  ASSERT_EQ(inv.cpus.size(), 2u);
  Gpu& g = *inv.gpus[1];
  EXPECT_EQ(g.name(), "Fake A100");
  EXPECT_EQ(g.pci_address(), "0000:02:00.0");  // from /discover
  EXPECT_TRUE(g.capabilities().energy_counter);
  EXPECT_FALSE(inv.gpus[3]->capabilities().energy_counter);
  EXPECT_EQ(g.total_energy()->value(), 4242.0);
  EXPECT_EQ(g.power_limit_constraints()->max.value(), 300000.0);
  ASSERT_TRUE(g.set_power_limit(MilliWatts(180000.0)));
  EXPECT_EQ(s.fake.gpus[1]->power_limit()->value(), 180000.0);
  EXPECT_EQ(g.power_limit()->value(), 180000.0);
  auto bad = g.set_power_limit(MilliWatts(10.0));
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(bad.error().message.find("Invalid request"), std::string::npos) << bad.error().message;
  ASSERT_TRUE(g.set_persistence_mode(true));
  EXPECT_TRUE(*g.persistence_mode());
  ASSERT_TRUE(g.reset_power_limit());
  EXPECT_EQ(s.fake.gpus[1]->power_limit()->value(), 300000.0);
  EXPECT_EQ(g.temperature().error().code, ErrorCode::kNotSupported);
}

TEST(Remote, CpuCountsFromFirstRead) {
  Served s;
  Inventory inv = with_daemon(Inventory{}, Endpoint{s.path});
  Cpu& c = *inv.cpus[0];
  EXPECT_TRUE(c.capabilities().dram);
  EXPECT_EQ(c.package_energy()->value(), 0.0);
  EXPECT_EQ(c.dram_energy()->value(), 0.0);
  s.fake.cpus[0]->set_energy_uj(1000.0 + 7e6, 500.0 + 2e6);
  EXPECT_EQ(c.package_energy()->value(), 7e6);
  EXPECT_EQ(c.dram_energy()->value(), 2e6);
  EXPECT_EQ(inv.cpus[1]->dram_energy().error().code, ErrorCode::kNotSupported);
}

TEST(Remote, HybridReadsLocallyAndSetsThroughDaemon) {
  Served s;
  Inventory local;
  auto mine = std::make_shared<sim::FakeGpu>(2, true, "Local");
  mine->set_energy_mj(1.0);
  local.gpus.push_back(mine);
  local.unavailable.push_back({"rapl", ErrorCode::kNoPermission, "denied"});
  Inventory inv = with_daemon(local, Endpoint{s.path});
  ASSERT_EQ(inv.gpus.size(), 1u);
  EXPECT_EQ(inv.gpus[0]->name(), "Local");
  EXPECT_EQ(inv.gpus[0]->total_energy()->value(), 1.0);  // local read
  ASSERT_TRUE(inv.gpus[0]->set_power_limit(MilliWatts(150000.0)));
  EXPECT_EQ(s.fake.gpus[2]->power_limit()->value(), 150000.0);  // same PCI address (and index) on the daemon
  EXPECT_EQ(mine->power_limit()->value(), 300000.0);
  EXPECT_EQ(inv.cpus.size(), 2u);  // RAPL came from the daemon
  EXPECT_TRUE(inv.unavailable.empty());
}

TEST(Remote, HybridMatchesTheDaemonsGpuByPciAddress) {
  Served s;
  Inventory local;
  // Local GPU 0 (say CUDA_VISIBLE_DEVICES=3) is the daemon's GPU 3: same PCI address.
  auto third = std::make_shared<sim::FakeGpu>(0, true, "Local");
  // The local side in NVML's busId form (8-digit domain, uppercase): the same address.
  ASSERT_EQ(s.fake.gpus[3]->pci_address(), "0000:04:00.0");
  third->set_pci_address("00000000:04:00.0");
  // A local GPU the daemon does not serve is left alone (its setters stay local).
  auto stranger = std::make_shared<sim::FakeGpu>(1, true, "Other");
  stranger->set_pci_address("0000:aa:00.0");
  local.gpus = {third, stranger};
  Inventory inv = with_daemon(local, Endpoint{s.path});
  ASSERT_EQ(inv.gpus.size(), 2u);
  ASSERT_TRUE(inv.gpus[0]->set_power_limit(MilliWatts(150000.0)));
  EXPECT_EQ(s.fake.gpus[3]->power_limit()->value(), 150000.0);
  EXPECT_EQ(s.fake.gpus[0]->power_limit()->value(), 300000.0);
  EXPECT_EQ(inv.gpus[0]->pci_address(), "00000000:04:00.0");
  EXPECT_EQ(inv.gpus[1].get(), stranger.get());
}

TEST(Remote, EndpointFromTheEnvironment) {
  for (const char* v : {"ERG_DAEMON_SOCK", "ZEUSD_SOCK_PATH", "ERG_DAEMON_HOST_PORT", "ZEUSD_HOST_PORT",
                        "ERG_DAEMON_TOKEN", "ZEUSD_TOKEN"})
    ::unsetenv(v);
  EXPECT_FALSE(*DaemonClient::endpoint_from_env());
  ::setenv("ZEUSD_HOST_PORT", "127.0.0.1:4938", 1);
  ::setenv("ZEUSD_TOKEN", "tok", 1);
  auto tcp = DaemonClient::endpoint_from_env();
  ASSERT_TRUE(tcp && *tcp);
  EXPECT_EQ((*tcp)->host, "127.0.0.1");
  EXPECT_EQ((*tcp)->port, 4938);
  EXPECT_EQ((*tcp)->token, "tok");
  EXPECT_TRUE((*tcp)->socket_path.empty());
  ::setenv("ERG_DAEMON_SOCK", "/run/ergd/ergd.sock", 1);  // the socket wins
  auto uds = DaemonClient::endpoint_from_env();
  EXPECT_EQ((*uds)->socket_path, "/run/ergd/ergd.sock");
  ::unsetenv("ERG_DAEMON_SOCK");
  for (const char* bad : {"4938", "127.0.0.1", "127.0.0.1:", "127.0.0.1:99999", ":4938", "127.0.0.1:49x"}) {
    ::setenv("ERG_DAEMON_HOST_PORT", bad, 1);
    auto e = DaemonClient::endpoint_from_env();
    ASSERT_FALSE(e) << bad;
    EXPECT_NE(e.error().message.find("ERG_DAEMON_HOST_PORT"), std::string::npos) << e.error().message;
  }
  for (const char* v : {"ERG_DAEMON_HOST_PORT", "ZEUSD_HOST_PORT", "ZEUSD_TOKEN"}) ::unsetenv(v);
}

TEST(Remote, UnreachableDaemonIsRecorded) {
  Inventory inv = with_daemon(Inventory{}, Endpoint{"/tmp/ergd-nobody-listens.sock"});
  ASSERT_EQ(inv.unavailable.size(), 1u);
  EXPECT_EQ(inv.unavailable[0].source, "ergd");
  EXPECT_NE(inv.unavailable[0].reason.find("is ergd running?"), std::string::npos);
}

}  // namespace
}  // namespace erg::client
