// Every route of the table with every method it does not take: 405 naming the right method, and
// no device touched. The GPUs record every setter call, and the requests carry valid fields
// with block=true, so a dispatch that fell into a setter would change a GPU before answering.

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "erg/daemon/daemon.hpp"
#include "erg/protocol/http.hpp"
#include "erg/protocol/routes.hpp"
#include "erg/sim/fake_devices.hpp"

namespace erg::daemon {
namespace {

/// A FakeGpu (final) behind a wrapper that counts setter calls.
class SpyGpu final : public Gpu {
 public:
  explicit SpyGpu(unsigned index) : inner_(index, index != 3, "Fake A100") {}
  std::atomic<int> setter_calls{0};
  sim::FakeGpu& inner() { return inner_; }

  unsigned index() const override { return inner_.index(); }
  unsigned physical_index() const override { return inner_.physical_index(); }
  GpuVendor vendor() const override { return inner_.vendor(); }
  const std::string& name() const override { return inner_.name(); }
  const std::string& uuid() const override { return inner_.uuid(); }
  const std::string& pci_address() const override { return inner_.pci_address(); }
  const std::string& architecture() const override { return inner_.architecture(); }
  const GpuCapabilities& capabilities() const override { return inner_.capabilities(); }
  Result<MilliJoules> total_energy() override { return inner_.total_energy(); }
  Result<MilliWatts> power(PowerDomain domain) override { return inner_.power(domain); }
  Result<MilliWatts> power_limit() override { return inner_.power_limit(); }
  Result<PowerLimitConstraints> power_limit_constraints() override { return inner_.power_limit_constraints(); }
  Result<MilliWatts> default_power_limit() override { return inner_.default_power_limit(); }
  Result<bool> persistence_mode() override { return inner_.persistence_mode(); }
  Result<std::vector<Megahertz>> supported_memory_clocks() override { return inner_.supported_memory_clocks(); }
  Result<std::vector<Megahertz>> supported_graphics_clocks(Megahertz m) override {
    return inner_.supported_graphics_clocks(m);
  }
  Result<int> temperature() override { return inner_.temperature(); }

  Result<void> set_power_limit(MilliWatts limit) override { return count(inner_.set_power_limit(limit)); }
  Result<void> reset_power_limit() override { return count(inner_.reset_power_limit()); }
  Result<void> set_persistence_mode(bool on) override { return count(inner_.set_persistence_mode(on)); }
  Result<void> set_gpu_locked_clocks(Megahertz lo, Megahertz hi) override {
    return count(inner_.set_gpu_locked_clocks(lo, hi));
  }
  Result<void> reset_gpu_locked_clocks() override { return count(inner_.reset_gpu_locked_clocks()); }
  Result<void> set_memory_locked_clocks(Megahertz lo, Megahertz hi) override {
    return count(inner_.set_memory_locked_clocks(lo, hi));
  }
  Result<void> reset_memory_locked_clocks() override { return count(inner_.reset_memory_locked_clocks()); }

 private:
  Result<void> count(Result<void> r) {
    ++setter_calls;
    return r;
  }
  sim::FakeGpu inner_;
};

/// A valid value for each field of the route table.
std::string valid_value(std::string_view field) {
  if (field == "gpu_ids") return "0,1,2";
  if (field == "cpu_ids") return "0,1";
  if (field == "power_limit_mw") return "150000";
  if (field == "enabled") return "true";
  if (field == "min_clock_mhz") return "500";
  if (field == "max_clock_mhz") return "1000";
  if (field == "block" || field == "cpu" || field == "dram") return "true";
  if (field == "since_ms") return "0";
  ADD_FAILURE() << "no test value for field " << field << ": extend valid_value()";
  return "";
}

std::string target_with_valid_fields(const protocol::RouteInfo& route) {
  std::string target(route.path);
  char sep = '?';
  for (auto field : route.params) {
    target += sep;
    target += std::string(field) + "=" + valid_value(field);
    sep = '&';
  }
  return target;
}

struct Rig {
  std::vector<std::shared_ptr<SpyGpu>> gpus;
  std::unique_ptr<Daemon> daemon;
  std::string key_path = "/tmp/ergd-method-test-" + std::to_string(::getpid()) + ".key";

  Rig() {
    Inventory inv;
    for (unsigned i = 0; i < 4; ++i) {
      gpus.push_back(std::make_shared<SpyGpu>(i));
      inv.gpus.push_back(gpus.back());
    }
    for (unsigned i = 0; i < 2; ++i) inv.cpus.push_back(std::make_shared<sim::FakeCpu>(i, i == 0));
    // A signing key, so /auth/whoami exists too.
    std::ofstream(key_path) << "0123456789abcdef0123456789abcdef";
    Config c;
    c.socket_path.clear();
    c.skip_privilege_check = true;
    c.signing_key_path = key_path;
    auto d = Daemon::create(c, std::move(inv));
    if (!d) throw std::runtime_error(d.error().message);
    daemon = std::move(*d);
  }
  ~Rig() { std::remove(key_path.c_str()); }

  Reply call(const std::string& method, const std::string& target) {
    protocol::HttpRequest r;
    std::string wire = method + " " + target + " HTTP/1.1\r\n\r\n";
    auto o = protocol::parse_request(wire, r);
    EXPECT_EQ(o.status, protocol::ParseStatus::kComplete) << wire;
    // Root on the Unix socket: past every allow list, no token needed.
    return daemon->dispatch(r, Peer{true, 0, 0});
  }

  int setter_calls() const {
    int n = 0;
    for (const auto& g : gpus) n += g->setter_calls.load();
    return n;
  }
};

TEST(Methods, EveryRouteRefusesEveryOtherMethodWith405AndTouchesNoDevice) {
  Rig rig;
  const std::vector<std::string> methods = {"GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"};
  ASSERT_FALSE(protocol::all_routes().empty());
  for (const auto& route : protocol::all_routes()) {
    std::string target = target_with_valid_fields(route);
    for (const auto& method : methods) {
      if (method == route.method) continue;
      Reply r = rig.call(method, target);
      EXPECT_EQ(r.response.status, 405) << method << " " << target;
      EXPECT_FALSE(r.stream) << method << " " << target;
      EXPECT_TRUE(r.response.body.empty()) << method << " " << target;
      ASSERT_EQ(r.response.headers.size(), 1u) << method << " " << target;
      EXPECT_EQ(r.response.headers[0].first, "Allow");
      EXPECT_EQ(r.response.headers[0].second, route.method) << target;
    }
  }
  EXPECT_EQ(rig.setter_calls(), 0);
  for (const auto& g : rig.gpus) {
    EXPECT_EQ(g->inner().power_limit()->value(), 300000.0) << "GPU " << g->index();
    EXPECT_FALSE(*g->inner().persistence_mode()) << "GPU " << g->index();
  }
}

TEST(Methods, TheSameRequestsWithTheRightMethodDoReachTheSetters) {
  // The control for the test above: its requests are ones a setter acts on.
  Rig rig;
  int setters = 0;
  for (const auto& route : protocol::all_routes()) {
    if (route.method != "POST") continue;
    ++setters;
    int before = rig.setter_calls();
    Reply r = rig.call("POST", target_with_valid_fields(route));
    EXPECT_EQ(r.response.status, 200) << route.path << ": " << r.response.body;
    EXPECT_GT(rig.setter_calls(), before) << route.path;
  }
  EXPECT_EQ(setters, 7);
  EXPECT_EQ(rig.gpus[0]->inner().power_limit()->value(), 150000.0);
  EXPECT_TRUE(*rig.gpus[0]->inner().persistence_mode());
}

TEST(Methods, ADisabledGroupIs404ForEveryMethod) {
  // zeusd registers none of a disabled group's routes: the path does not exist, whatever the
  // method (no 405 telling a caller that the route is there).
  Inventory inv;
  inv.gpus.push_back(std::make_shared<sim::FakeGpu>(0));
  Config c;
  c.socket_path.clear();
  c.skip_privilege_check = true;
  c.enabled = {protocol::ApiGroup::kGpuRead};
  auto d = Daemon::create(c, std::move(inv));
  ASSERT_TRUE(d);
  for (const char* method : {"GET", "POST", "DELETE"}) {
    protocol::HttpRequest r;
    std::string wire = std::string(method) + " /gpu/set_power_limit HTTP/1.1\r\n\r\n";
    ASSERT_EQ(protocol::parse_request(wire, r).status, protocol::ParseStatus::kComplete);
    EXPECT_EQ((*d)->dispatch(r, Peer{true, 0, 0}).response.status, 404) << method;
  }
}

}  // namespace
}  // namespace erg::daemon
