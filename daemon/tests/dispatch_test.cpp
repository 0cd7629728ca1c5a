// Every route of the zeusd v0.5 API with valid and invalid input, through Daemon::dispatch
// over fake devices: status codes and bodies as in reference/zeus.md §3.

#include <thread>

#include "fixture.hpp"

namespace erg::daemon {
namespace {

using testing::body_json;
using testing::FakeDaemon;

TEST(Dispatch, DiscoverAndTime) {
  FakeDaemon f;
  auto r = f.call("GET", "/discover");
  ASSERT_EQ(r.response.status, 200);
  EXPECT_EQ(r.response.content_type, "application/json");
  auto j = body_json(r);
  ASSERT_EQ(j["gpus"].size(), 4u);
  EXPECT_EQ(j["gpus"][0]["id"], 0);
  EXPECT_EQ(j["gpus"][0]["name"], "Fake A100");
  EXPECT_EQ(j["gpus"][0]["pci_address"], "0000:01:00.0");
  EXPECT_EQ(j["gpus"][3]["pci_address"], "0000:04:00.0");
  EXPECT_EQ(j["gpus"][0]["cumulative_energy_available"], true);
  EXPECT_EQ(j["gpus"][3]["cumulative_energy_available"], false);
  EXPECT_EQ(j["cpus"][0]["dram_available"], true);
  EXPECT_EQ(j["cpus"][1]["dram_available"], false);
  EXPECT_EQ(j["enabled_api_groups"], (nlohmann::json{"gpu-control", "gpu-read", "cpu-read"}));
  EXPECT_EQ(j["auth_required"], false);
  auto t = f.call("GET", "/time");
  ASSERT_EQ(t.response.status, 200);
  EXPECT_GT(body_json(t)["timestamp_ms"].get<std::uint64_t>(), 1600000000000ull);
  EXPECT_EQ(f.call("GET", "/time?x=1").response.status, 400);
}

TEST(Dispatch, UnknownPathMethodAndWhoamiWithoutAuth) {
  FakeDaemon f;
  EXPECT_EQ(f.call("GET", "/nope").response.status, 404);
  EXPECT_EQ(f.call("GET", "/gpu/set_power_limit?gpu_ids=0&power_limit_mw=200000&block=true").response.status, 405);
  EXPECT_EQ(f.call("POST", "/gpu/get_power_limit").response.status, 405);
  EXPECT_EQ(f.call("GET", "/auth/whoami").response.status, 404);
}

TEST(Dispatch, SetPowerLimitSingleMultipleAndBulk) {
  FakeDaemon f;
  auto r = f.call("POST", "/gpu/set_power_limit?gpu_ids=1&power_limit_mw=200000&block=true");
  EXPECT_EQ(r.response.status, 200);
  EXPECT_TRUE(r.response.body.empty());
  EXPECT_EQ(f.gpus[1]->power_limit()->value(), 200000.0);
  EXPECT_EQ(f.gpus[0]->power_limit()->value(), 300000.0);
  ASSERT_EQ(f.call("POST", "/gpu/set_power_limit?gpu_ids=2,0,2&power_limit_mw=150000&block=true").response.status, 200);
  EXPECT_EQ(f.gpus[0]->power_limit()->value(), 150000.0);
  EXPECT_EQ(f.gpus[2]->power_limit()->value(), 150000.0);
  auto g = f.call("GET", "/gpu/get_power_limit");
  ASSERT_EQ(g.response.status, 200);
  EXPECT_EQ(body_json(g), (nlohmann::json{{"0", {{"power_limit_mw", 150000}}},
                                          {"1", {{"power_limit_mw", 200000}}},
                                          {"2", {{"power_limit_mw", 150000}}},
                                          {"3", {{"power_limit_mw", 300000}}}}));
}

TEST(Dispatch, OutOfRangePowerLimitIs400AndChangesNothing) {
  FakeDaemon f;
  auto r = f.call("POST", "/gpu/set_power_limit?gpu_ids=0,1&power_limit_mw=50000&block=true");
  EXPECT_EQ(r.response.status, 400);
  auto j = body_json(r);
  ASSERT_TRUE(j["errors"].contains("0"));
  ASSERT_TRUE(j["errors"].contains("1"));
  EXPECT_EQ(j["errors"]["0"].get<std::string>().rfind("Invalid request", 0), 0u) << j.dump();
  EXPECT_EQ(f.gpus[0]->power_limit()->value(), 300000.0);
  EXPECT_EQ(f.gpus[1]->power_limit()->value(), 300000.0);
  EXPECT_EQ(f.call("POST", "/gpu/set_power_limit?gpu_ids=0&power_limit_mw=400000&block=true").response.status, 400);
  EXPECT_EQ(f.gpus[0]->power_limit()->value(), 300000.0);
}

TEST(Dispatch, SetterValidation) {
  FakeDaemon f;
  struct Case {
    const char* target;
    int status;
    const char* body;
  } cases[] = {
      {"/gpu/set_power_limit?gpu_ids=0&power_limit_mw=200000", 400, "Query deserialize error: missing field `block`"},
      {"/gpu/set_power_limit?gpu_ids=0&power_limit_mw=200000&block=true&x=1", 400,
       "Query deserialize error: unknown field `x`, expected one of `gpu_ids`, `power_limit_mw`, `block`"},
      {"/gpu/set_power_limit?gpu_ids=0&power_limit_mw=abc&block=true", 400,
       "Query deserialize error: invalid digit found in string"},
      {"/gpu/set_power_limit?gpu_ids=0&power_limit_mw=1&block=maybe", 400,
       "Query deserialize error: provided string was not `true` or `false`"},
      {"/gpu/set_power_limit?gpu_ids=4&power_limit_mw=200000&block=true", 400, "GPU index 4 does not exist."},
      {"/gpu/set_power_limit?gpu_ids=&power_limit_mw=200000&block=true", 400,
       R"({"error":"gpu_ids must contain at least one GPU index"})"},
      {"/gpu/set_power_limit?gpu_ids=a,b&power_limit_mw=200000&block=true", 400,
       R"({"error":"gpu_ids must contain at least one GPU index"})"},
      {"/gpu/set_persistence_mode?gpu_ids=0&enabled=1&block=true", 400,
       "Query deserialize error: provided string was not `true` or `false`"},
      {"/gpu/set_gpu_locked_clocks?gpu_ids=0&min_clock_mhz=1&block=true", 400,
       "Query deserialize error: missing field `max_clock_mhz`"},
      {"/gpu/reset_gpu_locked_clocks?gpu_ids=0", 400, "Query deserialize error: missing field `block`"},
      {"/gpu/set_power_limit?gpu_ids=0&power_limit_mw=%ZZ&block=true", 400,
       "Query deserialize error: invalid percent-encoding"},
      {"/gpu/set_power_limit?gpu_ids=%FF&power_limit_mw=1&block=true", 400,
       "Query deserialize error: invalid UTF-8 in query string"},
  };
  for (const auto& c : cases) {
    auto r = f.call("POST", c.target);
    EXPECT_EQ(r.response.status, c.status) << c.target;
    EXPECT_EQ(r.response.body, c.body) << c.target;
  }
  for (auto& g : f.gpus) EXPECT_EQ(g->power_limit()->value(), 300000.0);
}

TEST(Dispatch, OtherSetters) {
  FakeDaemon f;
  EXPECT_EQ(f.call("POST", "/gpu/set_persistence_mode?gpu_ids=0,1&enabled=true&block=true").response.status, 200);
  EXPECT_TRUE(*f.gpus[0]->persistence_mode());
  auto p = f.call("GET", "/gpu/get_persistence_mode?gpu_ids=0,2");
  EXPECT_EQ(body_json(p), (nlohmann::json{{"0", {{"enabled", true}}}, {"2", {{"enabled", false}}}}));
  for (const char* t :
       {"/gpu/set_gpu_locked_clocks?gpu_ids=0&min_clock_mhz=210&max_clock_mhz=1410&block=true",
        "/gpu/set_mem_locked_clocks?gpu_ids=0&min_clock_mhz=1215&max_clock_mhz=1215&block=true",
        "/gpu/reset_gpu_locked_clocks?gpu_ids=0&block=true", "/gpu/reset_mem_locked_clocks?gpu_ids=0&block=false",
        "/gpu/reset_locked_clocks?gpu_ids=0,1,2,3&block=true"})
    EXPECT_EQ(f.call("POST", t).response.status, 200) << t;
  EXPECT_EQ(f.call("POST", "/gpu/set_gpu_locked_clocks?gpu_ids=0&min_clock_mhz=1410&max_clock_mhz=210&block=true")
                .response.status,
            400);
}

TEST(Dispatch, BlockFalseAppliesAsynchronously) {
  FakeDaemon f;
  auto r = f.call("POST", "/gpu/set_power_limit?gpu_ids=0&power_limit_mw=123000&block=false");
  EXPECT_EQ(r.response.status, 200);
  // Applied by the owner thread, soon.
  for (int i = 0; i < 200 && f.gpus[0]->power_limit()->value() != 123000.0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(f.gpus[0]->power_limit()->value(), 123000.0);
  // Out of range with block=false: accepted (only send errors are reported), nothing changes.
  EXPECT_EQ(f.call("POST", "/gpu/set_power_limit?gpu_ids=0&power_limit_mw=1&block=false").response.status, 200);
  f.call("POST", "/gpu/set_power_limit?gpu_ids=0&power_limit_mw=123000&block=true");  // drains the queue
  EXPECT_EQ(f.gpus[0]->power_limit()->value(), 123000.0);
}

TEST(Dispatch, GpuReads) {
  FakeDaemon f;
  f.gpus[0]->set_energy_mj(12345.0);
  f.gpus[1]->set_power_mw(77000.0);
  auto e = f.call("GET", "/gpu/get_cumulative_energy?gpu_ids=0");
  ASSERT_EQ(e.response.status, 200);
  EXPECT_EQ(body_json(e), (nlohmann::json{{"0", {{"energy_mj", 12345}}}}));
  // GPU 3 has no energy counter → 400, errors aggregated.
  auto e3 = f.call("GET", "/gpu/get_cumulative_energy");
  EXPECT_EQ(e3.response.status, 400);
  EXPECT_TRUE(body_json(e3)["errors"].contains("3"));
  EXPECT_EQ(f.call("GET", "/gpu/get_cumulative_energy?gpu_ids=9").response.body, "GPU index 9 does not exist.");
  EXPECT_EQ(f.call("GET", "/gpu/get_cumulative_energy?ids=0").response.status, 400);

  auto p = f.call("GET", "/gpu/get_power?gpu_ids=1");
  ASSERT_EQ(p.response.status, 200);
  auto pj = body_json(p);
  EXPECT_TRUE(pj.contains("timestamp_ms"));
  EXPECT_EQ(pj["power_mw"], (nlohmann::json{{"1", 77000}}));
  EXPECT_EQ(body_json(f.call("GET", "/gpu/get_power"))["power_mw"].size(), 4u);
  auto bad = f.call("GET", "/gpu/get_power?gpu_ids=1,7");
  EXPECT_EQ(bad.response.status, 400);
  EXPECT_EQ(bad.response.body, R"({"error":"Unknown GPU indices: [7]. Available: [0, 1, 2, 3]"})");

  auto c = f.call("GET", "/gpu/get_power_limit_constraints?gpu_ids=0");
  EXPECT_EQ(body_json(c), (nlohmann::json{{"0", {{"min_power_limit_mw", 100000}, {"max_power_limit_mw", 300000}}}}));
  f.gpus[2]->set_failing(true);
  auto lost = f.call("GET", "/gpu/get_cumulative_energy?gpu_ids=1,2");
  EXPECT_EQ(lost.response.status, 500);
  EXPECT_EQ(body_json(lost)["errors"].size(), 1u);
}

TEST(Dispatch, CpuReads) {
  FakeDaemon f;
  auto e = f.call("GET", "/cpu/get_cumulative_energy?cpu=true&dram=true");
  ASSERT_EQ(e.response.status, 200);
  EXPECT_EQ(body_json(e), (nlohmann::json{{"0", {{"cpu_energy_uj", 1000}, {"dram_energy_uj", 500}}},
                                          {"1", {{"cpu_energy_uj", 2000}, {"dram_energy_uj", nullptr}}}}));
  auto only = f.call("GET", "/cpu/get_cumulative_energy?cpu_ids=0&cpu=false&dram=true");
  EXPECT_EQ(body_json(only), (nlohmann::json{{"0", {{"cpu_energy_uj", nullptr}, {"dram_energy_uj", 500}}}}));
  EXPECT_EQ(f.call("GET", "/cpu/get_cumulative_energy?cpu=true").response.body,
            "Query deserialize error: missing field `dram`");
  EXPECT_EQ(f.call("GET", "/cpu/get_cumulative_energy?cpu_ids=5&cpu=true&dram=true").response.body,
            "CPU index 5 does not exist.");
  EXPECT_EQ(f.call("GET", "/cpu/get_cumulative_energy?cpu_ids=&cpu=true&dram=true").response.body,
            R"({"error":"cpu_ids must contain at least one CPU index"})");
  // get_power: two reads one poll period apart (100 ms at 10 Hz).
  std::thread bump([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    f.cpus[0]->set_energy_uj(1000.0 + 5e6, 500.0 + 1e6);  // +5 J, +1 J
  });
  auto p = f.call("GET", "/cpu/get_power?cpu_ids=0");
  bump.join();
  ASSERT_EQ(p.response.status, 200);
  auto pj = body_json(p);
  double cpu_mw = pj["power_mw"]["0"]["cpu_mw"].get<double>();
  EXPECT_GT(cpu_mw, 30000.0);  // ~50 W over ~0.1 s
  EXPECT_LT(cpu_mw, 60000.0);
  EXPECT_FALSE(pj["power_mw"]["0"]["dram_mw"].is_null());
}

TEST(Dispatch, DisabledGroupsAre404) {
  Config c;
  c.enabled = {protocol::ApiGroup::kGpuRead};
  FakeDaemon f(c);
  EXPECT_EQ(f.call("POST", "/gpu/set_power_limit?gpu_ids=0&power_limit_mw=200000&block=true").response.status, 404);
  EXPECT_EQ(f.call("GET", "/cpu/get_cumulative_energy?cpu=true&dram=true").response.status, 404);
  EXPECT_EQ(f.call("GET", "/gpu/get_power_limit").response.status, 200);
  EXPECT_EQ(body_json(f.call("GET", "/discover"))["enabled_api_groups"], (nlohmann::json{"gpu-read"}));
}

TEST(Dispatch, PeerUidNotAllowedForGpuControlIs403) {
  Config c;
  c.allow_uid[protocol::ApiGroup::kGpuControl] = {1000};
  FakeDaemon f(c);
  Peer stranger{true, 1234, 1234};
  auto r = f.call("POST", "/gpu/set_power_limit?gpu_ids=0&power_limit_mw=200000&block=true", stranger);
  EXPECT_EQ(r.response.status, 403);
  EXPECT_NE(r.response.body.find("gpu-control"), std::string::npos);
  EXPECT_EQ(f.gpus[0]->power_limit()->value(), 300000.0);
  // Reads are not restricted by the gpu-control list; an allowed uid and root pass.
  EXPECT_EQ(f.call("GET", "/gpu/get_power_limit", stranger).response.status, 200);
  Peer allowed{true, 1000, 1000};
  EXPECT_EQ(f.call("POST", "/gpu/set_power_limit?gpu_ids=0&power_limit_mw=200000&block=true", allowed).response.status,
            200);
  Peer root{true, 0, 0};
  EXPECT_EQ(f.call("POST", "/gpu/set_power_limit?gpu_ids=0&power_limit_mw=210000&block=true", root).response.status,
            200);
  // A gid list admits members of the group.
  Config g;
  g.allow_gid[protocol::ApiGroup::kGpuControl] = {2000};
  FakeDaemon fg(g);
  Peer member{true, 1234, 2000};
  EXPECT_EQ(fg.call("POST", "/gpu/set_power_limit?gpu_ids=0&power_limit_mw=200000&block=true", member).response.status,
            200);
  EXPECT_EQ(
      fg.call("POST", "/gpu/set_power_limit?gpu_ids=0&power_limit_mw=200000&block=true", stranger).response.status,
      403);
}

// One access model on every transport (docs/security.md): a TCP peer has no uid, so without a
// signing key (--tcp-insecure) it may use only the groups that have no allow list.
TEST(Dispatch, TcpPeersMeetTheAllowListsTheSocketHas) {
  Config c;
  c.allow_gid[protocol::ApiGroup::kGpuControl] = {2000};
  c.tcp = "127.0.0.1:0";
  c.tcp_insecure = true;
  FakeDaemon f(c);
  const Peer tcp{false, std::nullopt, std::nullopt};
  auto r = f.call("POST", "/gpu/set_power_limit?gpu_ids=0&power_limit_mw=100000&block=true", tcp);
  EXPECT_EQ(r.response.status, 403);
  EXPECT_NE(r.response.body.find("TCP peer has no uid"), std::string::npos) << r.response.body;
  EXPECT_EQ(f.call("POST", "/gpu/reset_locked_clocks?gpu_ids=0&block=true", tcp).response.status, 403);
  EXPECT_EQ(f.gpus[0]->power_limit()->value(), 300000.0);
  // Groups without a list stay open to it, as to every socket peer.
  EXPECT_EQ(f.call("GET", "/gpu/get_power_limit", tcp).response.status, 200);
  EXPECT_EQ(f.call("GET", "/cpu/get_cumulative_energy?cpu=true&dram=true", tcp).response.status, 200);
  // A member of the listed gid over the socket may.
  EXPECT_EQ(f.call("POST", "/gpu/set_power_limit?gpu_ids=0&power_limit_mw=100000&block=true", Peer{true, 1234, 2000})
                .response.status,
            200);
  // The warning names what TCP peers may use.
  const auto w = f.daemon->warnings();
  ASSERT_EQ(w.size(), 1u);
  EXPECT_NE(w[0].find("--tcp-insecure"), std::string::npos) << w[0];
  EXPECT_NE(w[0].find("gpu-read, cpu-read"), std::string::npos) << w[0];
  EXPECT_EQ(w[0].find("gpu-control"), std::string::npos) << w[0];
}

TEST(Dispatch, TcpWithoutASigningKeyRefusesToStartUnlessInsecure) {
  Config c;
  c.tcp = "127.0.0.1:0";
  try {
    FakeDaemon f(c);
    ADD_FAILURE() << "created";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("--signing-key-path"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("--tcp-insecure"), std::string::npos) << e.what();
  }
  c.tcp_insecure = true;
  FakeDaemon f(c);
  ASSERT_EQ(f.daemon->warnings().size(), 1u);
  EXPECT_NE(f.daemon->warnings()[0].find("gpu-control, gpu-read, cpu-read"), std::string::npos);
}

// /metrics shows each peer the series of the read groups it may use: RAPL energy (root-only in
// the kernel since CVE-2020-8694) only to cpu-read peers.
TEST(Dispatch, MetricsShowEachPeerOnlyTheReadGroupsItMayUse) {
  Config c;
  c.allow_uid[protocol::ApiGroup::kCpuRead] = {1000};
  FakeDaemon f(c);
  f.cpus[0]->set_energy_uj(2e6, 1e6);
  const Peer stranger{true, 1234, 1234}, reader{true, 1000, 1000}, root{true, 0, 0};
  auto has = [](const Reply& r, const char* what) { return r.response.body.find(what) != std::string::npos; };
  auto s = f.call("GET", "/metrics", stranger);
  ASSERT_EQ(s.response.status, 200);
  EXPECT_TRUE(has(s, "erg_gpu_energy_joules_total{")) << s.response.body;
  EXPECT_FALSE(has(s, "erg_cpu_")) << s.response.body;
  EXPECT_FALSE(has(s, "erg_dram_")) << s.response.body;
  EXPECT_FALSE(has(s, "device=\"cpu\"")) << s.response.body;
  EXPECT_TRUE(has(s, "erg_info{")) << s.response.body;
  for (const Peer& p : {reader, root}) {
    auto r = f.call("GET", "/metrics", p);
    ASSERT_EQ(r.response.status, 200);
    EXPECT_TRUE(has(r, "erg_cpu_energy_joules_total{")) << r.response.body;
    EXPECT_TRUE(has(r, "erg_dram_energy_joules_total{")) << r.response.body;
    EXPECT_TRUE(has(r, "erg_gpu_energy_joules_total{")) << r.response.body;
  }
  // A peer that may use neither read group gets none of it.
  Config both;
  both.allow_uid[protocol::ApiGroup::kCpuRead] = {1000};
  both.allow_uid[protocol::ApiGroup::kGpuRead] = {1000};
  FakeDaemon g(both);
  auto n = g.call("GET", "/metrics", stranger);
  EXPECT_EQ(n.response.status, 403);
  EXPECT_FALSE(has(n, "erg_")) << n.response.body;
  // Nor does a disabled group's data appear.
  Config gpu_only;
  gpu_only.enabled = {protocol::ApiGroup::kGpuRead};
  FakeDaemon h(gpu_only);
  EXPECT_FALSE(has(h.call("GET", "/metrics", root), "erg_cpu_"));
}

// Every energy series counts from 0 at the first scrape (metric_names.hpp's semantics) and
// carries the node and user labels.
TEST(Dispatch, MetricsText) {
  Config c;
  c.metrics_node = "node-a";
  c.metrics_labels = {{"cluster", "c1"}};
  FakeDaemon f(c);
  f.gpus[0]->set_energy_mj(5000.0);
  f.cpus[0]->set_energy_uj(2e6, 1e6);
  auto m = f.call("GET", "/metrics");
  ASSERT_EQ(m.response.status, 200);
  const std::string& t = m.response.body;
  EXPECT_NE(t.find("# TYPE erg_gpu_energy_joules_total counter"), std::string::npos) << t;
  const std::string gpu0 = "{index=\"0\",name=\"Fake A100\",uuid=\"GPU-fake-0\",node=\"node-a\",cluster=\"c1\"}";
  const std::string cpu0 = "{index=\"0\",name=\"package-0\",node=\"node-a\",cluster=\"c1\"}";
  EXPECT_NE(t.find("erg_gpu_energy_joules_total" + gpu0 + " 0\n"), std::string::npos) << t;
  EXPECT_NE(t.find("erg_gpu_power_watts{index=\"0\",name=\"Fake A100\",uuid=\"GPU-fake-0\",node=\"node-a\",cluster="
                   "\"c1\",domain=\"device_instant\"}"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("erg_gpu_power_limit_watts{index=\"1\",name=\"Fake A100\",uuid=\"GPU-fake-1\",node=\"node-a\","
                   "cluster=\"c1\"} 300"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("erg_cpu_energy_joules_total" + cpu0 + " 0\n"), std::string::npos) << t;
  EXPECT_NE(t.find("erg_dram_energy_joules_total" + cpu0 + " 0\n"), std::string::npos) << t;
  EXPECT_NE(t.find("erg_info{exporter=\"ergd\",simulated=\"false\""), std::string::npos) << t;
  f.gpus[0]->set_energy_mj(7000.0);
  f.cpus[0]->set_energy_uj(5e6, 1.5e6);
  const std::string t2 = f.call("GET", "/metrics").response.body;
  EXPECT_NE(t2.find("erg_gpu_energy_joules_total" + gpu0 + " 2\n"), std::string::npos) << t2;
  EXPECT_NE(t2.find("erg_cpu_energy_joules_total" + cpu0 + " 3\n"), std::string::npos) << t2;
  EXPECT_NE(t2.find("erg_dram_energy_joules_total" + cpu0 + " 0.5\n"), std::string::npos) << t2;
}

// One failing GPU in a multi-GPU request: zeusd's reply (the worst status, `errors` naming it),
// so zeusd's clients fail as they would against zeusd, plus what erg's clients read — the
// failing GPU's error code and the values of the GPUs that answered.
TEST(Dispatch, AFailingGpuLeavesTheOthersValuesBesideItsError) {
  FakeDaemon f;
  f.gpus[0]->set_energy_mj(1000.0);
  f.gpus[2]->set_energy_mj(3000.0);
  f.gpus[0]->set_power_mw(50000.0);
  f.gpus[1]->set_failing(true);
  auto e = f.call("GET", "/gpu/get_cumulative_energy?gpu_ids=0,1,2");
  EXPECT_EQ(e.response.status, 500);
  auto j = body_json(e);
  EXPECT_EQ(j["errors"], (nlohmann::json{{"1", "fake GPU lost"}}));
  EXPECT_EQ(j["error_codes"], (nlohmann::json{{"1", "gpu_lost"}}));
  EXPECT_EQ(j["partial"], (nlohmann::json{{"0", {{"energy_mj", 1000}}}, {"2", {{"energy_mj", 3000}}}}));

  auto p = body_json(f.call("GET", "/gpu/get_power?gpu_ids=0,1"));
  EXPECT_EQ(p["error_codes"], (nlohmann::json{{"1", "gpu_lost"}}));
  EXPECT_EQ(p["partial"]["power_mw"], (nlohmann::json{{"0", 50000}}));
  EXPECT_TRUE(p["partial"].contains("timestamp_ms"));

  auto l = f.call("GET", "/gpu/get_power_limit");
  EXPECT_EQ(l.response.status, 500);
  EXPECT_EQ(body_json(l)["partial"].size(), 3u);

  // A setter says which GPUs it reached.
  auto s = f.call("POST", "/gpu/set_power_limit?gpu_ids=0,1,2&power_limit_mw=150000&block=true");
  EXPECT_EQ(s.response.status, 500);
  EXPECT_EQ(body_json(s)["applied"], (nlohmann::json{0, 2}));
  EXPECT_EQ(body_json(s)["error_codes"], (nlohmann::json{{"1", "gpu_lost"}}));
  EXPECT_EQ(f.gpus[0]->power_limit()->value(), 150000.0);

  // Healthy again: a plain 200.
  f.gpus[1]->set_failing(false);
  EXPECT_EQ(f.call("GET", "/gpu/get_cumulative_energy?gpu_ids=0,1,2").response.status, 200);
}

// A read that fails with an error that can pass (I/O here) is tried again at once, as erg's
// monitors do: three failures in a row are absorbed, five are not.
TEST(Dispatch, TransientReadErrorsAreRetried) {
  FakeDaemon f;
  f.cpus[0]->set_energy_uj(2e6, 1e6);
  f.cpus[0]->fail_package_reads(3);
  auto ok = f.call("GET", "/cpu/get_cumulative_energy?cpu_ids=0&cpu=true&dram=false");
  ASSERT_EQ(ok.response.status, 200) << ok.response.body;
  EXPECT_EQ(body_json(ok)["0"]["cpu_energy_uj"], 2000000);
  f.cpus[0]->fail_package_reads(5);
  auto bad = f.call("GET", "/cpu/get_cumulative_energy?cpu_ids=0,1&cpu=true&dram=false");
  EXPECT_EQ(bad.response.status, 500);
  EXPECT_EQ(body_json(bad)["error_codes"], (nlohmann::json{{"0", "io"}}));
  EXPECT_TRUE(body_json(bad)["partial"].contains("1"));
}

// /metrics never shows a frozen value: a GPU that stops answering is erg_gpu_up 0 and its
// energy, power and limit series are withdrawn; they come back when it answers. A counter that
// steps back does not make the energy metric jump (it would add the whole counter), and is
// counted.
TEST(Dispatch, MetricsWithdrawALostGpuAndNeverJumpOnAStepBack) {
  FakeDaemon f;
  for (unsigned g = 0; g < 3; ++g) f.gpus[g]->set_energy_mj(1'000'000.0);
  auto series = [](const std::string& text, const std::string& metric, unsigned gpu) -> std::optional<double> {
    const std::string key = metric + "{index=\"" + std::to_string(gpu) + "\",";
    auto at = text.find(key);
    if (at == std::string::npos) return std::nullopt;
    auto sp = text.find("} ", at);
    return std::stod(text.substr(sp + 2));
  };
  auto t = f.call("GET", "/metrics").response.body;
  EXPECT_EQ(series(t, "erg_gpu_up", 1), 1.0);
  EXPECT_EQ(series(t, "erg_gpu_energy_joules_total", 1), 0.0);

  f.gpus[1]->set_failing(true);
  t = f.call("GET", "/metrics").response.body;
  EXPECT_EQ(series(t, "erg_gpu_up", 1), 0.0) << t;
  EXPECT_FALSE(series(t, "erg_gpu_energy_joules_total", 1)) << t;
  EXPECT_FALSE(series(t, "erg_gpu_power_watts", 1)) << t;
  EXPECT_FALSE(series(t, "erg_gpu_power_limit_watts", 1)) << t;
  EXPECT_NE(t.find("erg_exporter_read_errors_total{device=\"gpu\",index=\"1\","), std::string::npos) << t;
  EXPECT_EQ(series(t, "erg_gpu_up", 0), 1.0);
  EXPECT_EQ(series(t, "erg_gpu_energy_joules_total", 0), 0.0);

  f.gpus[1]->set_failing(false);
  t = f.call("GET", "/metrics").response.body;
  EXPECT_EQ(series(t, "erg_gpu_up", 1), 1.0);
  EXPECT_EQ(series(t, "erg_gpu_energy_joules_total", 1), 0.0);

  // GPU 2 counts 50 J, then steps back 200 J: the metric neither goes back nor jumps by the
  // counter's whole value (a step is bridged; these fakes jump at once, so the bridge's rate is
  // rough: the exact figures are in tests/faults/ergd_faults_test.cpp), and the step is counted.
  f.gpus[2]->set_energy_mj(1'050'000.0);
  t = f.call("GET", "/metrics").response.body;
  EXPECT_EQ(series(t, "erg_gpu_energy_joules_total", 2), 50.0) << t;
  f.gpus[2]->set_energy_mj(850'000.0);
  t = f.call("GET", "/metrics").response.body;
  const double after_step = *series(t, "erg_gpu_energy_joules_total", 2);
  EXPECT_GE(after_step, 50.0) << t;
  EXPECT_LT(after_step, 200.0) << t;
  EXPECT_EQ(series(t, "erg_gpu_energy_anomalies_total", 2), 1.0) << t;
  f.gpus[2]->set_energy_mj(880'000.0);
  t = f.call("GET", "/metrics").response.body;
  EXPECT_NEAR(*series(t, "erg_gpu_energy_joules_total", 2), after_step + 30.0, 1e-6) << t;
  // A restart (driver reload) is counted too, and the metric still only moves forward.
  f.gpus[2]->set_energy_mj(100.0);
  t = f.call("GET", "/metrics").response.body;
  EXPECT_GE(*series(t, "erg_gpu_energy_joules_total", 2), after_step + 30.0) << t;
  EXPECT_EQ(series(t, "erg_gpu_energy_anomalies_total", 2), 2.0) << t;
}

TEST(Dispatch, StreamRepliesCarryTheSpec) {
  FakeDaemon f;
  auto r = f.call("GET", "/gpu/stream_power?gpu_ids=2,1");
  ASSERT_TRUE(r.stream);
  EXPECT_TRUE(r.stream->gpu);
  EXPECT_EQ(r.stream->ids, (std::vector<unsigned>{1, 2}));
  EXPECT_EQ(f.call("GET", "/gpu/stream_power?gpu_ids=8").response.status, 400);
  auto c = f.call("GET", "/cpu/stream_power");
  ASSERT_TRUE(c.stream);
  EXPECT_FALSE(c.stream->gpu);
  EXPECT_EQ(c.stream->ids.size(), 2u);
}

}  // namespace
}  // namespace erg::daemon
