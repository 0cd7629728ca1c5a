// ergd serves AMD GPUs like NVIDIA ones (issue 18 acceptance 5): the zeusd API of reference §3
// reads and sets an AMD power cap, over the production AMD SMI backend and the simulated
// libamd_smi.so; the simulated machine sees the cap.

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "erg/backends/amdsmi/discovery.hpp"
#include "erg/daemon/daemon.hpp"
#include "erg/protocol/http.hpp"
#include "erg/sim/machine.hpp"
#include "erg/sim/spec.hpp"

namespace erg {
namespace {

struct AmdErgd {
  std::unique_ptr<sim::Machine> machine;
  std::unique_ptr<daemon::Daemon> daemon;

  AmdErgd() {
    auto spec = sim::parse_spec("2xMI300X");
    EXPECT_TRUE(spec);
    auto m = sim::Machine::create_temp(*spec);
    EXPECT_TRUE(m) << m.error().message;
    machine = std::move(*m);
    machine->set_privilege(sim::Privilege::kEveryone);  // ergd runs as root; the test does not
    EXPECT_TRUE(machine->export_env());
    amdsmi::DiscoveryOptions o;
    o.visible_devices = std::optional<std::string>();
    auto found = amdsmi::discover(o);  // with the 0.5 s counter check, as ergd starts
    EXPECT_TRUE(found) << found.error().message;
    Inventory inv;
    inv.gpus = found->gpus;
    daemon::Config c;
    c.skip_privilege_check = true;
    c.socket_path.clear();
    auto d = daemon::Daemon::create(std::move(c), std::move(inv));
    EXPECT_TRUE(d) << d.error().message;
    daemon = std::move(*d);
  }

  daemon::Reply call(const std::string& method, const std::string& target) {
    protocol::HttpRequest r;
    const std::string buf = method + " " + target + " HTTP/1.1\r\n\r\n";
    auto o = protocol::parse_request(buf, r);
    EXPECT_EQ(o.status, protocol::ParseStatus::kComplete) << target;
    return daemon->dispatch(r, daemon::Peer{});
  }
};

nlohmann::json body(const daemon::Reply& r) { return nlohmann::json::parse(r.response.body); }

TEST(ErgdAmd, DiscoversAmdGpusWithTheirCounters) {
  AmdErgd t;
  auto r = t.call("GET", "/discover");
  ASSERT_EQ(r.response.status, 200) << r.response.body;
  auto j = body(r);
  ASSERT_EQ(j["gpus"].size(), 2u);
  EXPECT_EQ(j["gpus"][0]["name"], "AMD Instinct MI300X");
  EXPECT_EQ(j["gpus"][0]["pci_address"], "0000:0c:00.0");
  EXPECT_EQ(j["gpus"][1]["cumulative_energy_available"], true);
}

TEST(ErgdAmd, SetsAndReadsAnAmdPowerCapThroughTheZeusdApi) {
  AmdErgd t;
  auto c = t.call("GET", "/gpu/get_power_limit_constraints?gpu_ids=1");
  ASSERT_EQ(c.response.status, 200) << c.response.body;
  EXPECT_EQ(body(c)["1"]["min_power_limit_mw"], 200000);
  EXPECT_EQ(body(c)["1"]["max_power_limit_mw"], 750000);

  auto s = t.call("POST", "/gpu/set_power_limit?gpu_ids=1&power_limit_mw=450000&block=true");
  ASSERT_EQ(s.response.status, 200) << s.response.body;
  auto g = t.call("GET", "/gpu/get_power_limit?gpu_ids=0,1");
  ASSERT_EQ(g.response.status, 200) << g.response.body;
  EXPECT_EQ(body(g)["1"]["power_limit_mw"], 450000);
  EXPECT_EQ(body(g)["0"]["power_limit_mw"], 750000) << "only GPU 1 changed";
  // The simulated hardware holds the cap (set in µW through amdsmi_set_power_cap).
  auto st = t.machine->status(1);
  ASSERT_TRUE(st);
  EXPECT_EQ(st->power_limit.value(), 450000.0);
  auto log = t.machine->power_limit_log();
  ASSERT_EQ(log.size(), 1u);
  EXPECT_TRUE(log[0].ok());

  // Out of range: AMDSMI_STATUS_INVAL → 400, nothing changes (zeusd maps INVAL to 400).
  auto bad = t.call("POST", "/gpu/set_power_limit?gpu_ids=1&power_limit_mw=100000&block=true");
  EXPECT_EQ(bad.response.status, 400) << bad.response.body;
  EXPECT_EQ(t.machine->status(1)->power_limit.value(), 450000.0);
  // Persistence mode is NVIDIA's: 400 on AMD, as zeusd answers.
  auto pm = t.call("POST", "/gpu/set_persistence_mode?gpu_ids=1&enabled=true&block=true");
  EXPECT_EQ(pm.response.status, 400) << pm.response.body;

  auto e = t.call("GET", "/gpu/get_cumulative_energy?gpu_ids=0");
  ASSERT_EQ(e.response.status, 200) << e.response.body;
  EXPECT_GT(body(e)["0"]["energy_mj"].get<double>(), 0.0);
}

}  // namespace
}  // namespace erg
