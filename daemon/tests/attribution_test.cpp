// GET /attribution over a hand-fed GPU and a fake proc root: the split (hand-computed), who sees
// which rows (SO_PEERCRED uid, root, --attribution-all-uids/gids, TCP), the "other users" row that
// keeps the sums equal to the GPU's energy, the window, MIG, and bad queries. The sampler runs no
// thread here (poll period 0): the test polls it by hand on a virtual clock.

#include "attribution.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "erg/sim/fake_devices.hpp"
#include "fixture.hpp"

namespace erg::daemon {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

/// A GPU whose counter (with its update time), per-process samples and process list the test sets.
class ProcGpu final : public Gpu {
 public:
  explicit ProcGpu(unsigned index) : inner_(index, true, "Fake A100") {
    caps_ = inner_.capabilities();
    caps_.reading_timestamps = true;
    caps_.running_processes = caps_.process_utilization = true;
  }
  void set(std::chrono::nanoseconds wall, double joules, std::vector<ProcessUtilizationSample> samples,
           std::vector<std::uint32_t> pids) {
    std::lock_guard lock(mutex_);
    wall_ = wall;
    joules_ = joules;
    for (auto& s : samples) samples_.push_back(s);
    pids_ = std::move(pids);
  }
  void set_mig(bool on) { mig_ = on; }

  unsigned index() const override { return inner_.index(); }
  unsigned physical_index() const override { return inner_.physical_index(); }
  GpuVendor vendor() const override { return inner_.vendor(); }
  const std::string& name() const override { return inner_.name(); }
  const std::string& uuid() const override { return inner_.uuid(); }
  const std::string& pci_address() const override { return inner_.pci_address(); }
  const std::string& architecture() const override { return inner_.architecture(); }
  const GpuCapabilities& capabilities() const override { return caps_; }
  Result<MilliJoules> total_energy() override {
    std::lock_guard lock(mutex_);
    return MilliJoules(joules_ * 1000.0);
  }
  Result<EnergyReading> energy_reading() override {
    std::lock_guard lock(mutex_);
    return EnergyReading{MilliJoules(joules_ * 1000.0), wall_, std::nullopt};
  }
  Result<std::vector<GpuProcess>> running_processes() override {
    std::lock_guard lock(mutex_);
    std::vector<GpuProcess> out;
    for (auto p : pids_) out.push_back(GpuProcess{p, std::nullopt, std::nullopt, std::nullopt});
    return out;
  }
  Result<std::vector<ProcessUtilizationSample>> process_utilization(std::chrono::microseconds since) override {
    if (mig_) return fail(ErrorCode::kNotSupported, "MIG is enabled on this GPU: its energy cannot be attributed");
    std::lock_guard lock(mutex_);
    std::vector<ProcessUtilizationSample> out;
    for (const auto& s : samples_)
      if (s.timestamp > since) out.push_back(s);
    return out;
  }
  Result<MilliWatts> power(PowerDomain d) override { return inner_.power(d); }
  Result<MilliWatts> power_limit() override { return inner_.power_limit(); }
  Result<PowerLimitConstraints> power_limit_constraints() override { return inner_.power_limit_constraints(); }
  Result<MilliWatts> default_power_limit() override { return inner_.default_power_limit(); }
  Result<void> set_power_limit(MilliWatts l) override { return inner_.set_power_limit(l); }
  Result<void> reset_power_limit() override { return inner_.reset_power_limit(); }
  Result<bool> persistence_mode() override { return inner_.persistence_mode(); }
  Result<void> set_persistence_mode(bool on) override { return inner_.set_persistence_mode(on); }
  Result<std::vector<Megahertz>> supported_memory_clocks() override { return inner_.supported_memory_clocks(); }
  Result<std::vector<Megahertz>> supported_graphics_clocks(Megahertz m) override {
    return inner_.supported_graphics_clocks(m);
  }
  Result<void> set_gpu_locked_clocks(Megahertz a, Megahertz b) override { return inner_.set_gpu_locked_clocks(a, b); }
  Result<void> reset_gpu_locked_clocks() override { return inner_.reset_gpu_locked_clocks(); }
  Result<void> set_memory_locked_clocks(Megahertz a, Megahertz b) override {
    return inner_.set_memory_locked_clocks(a, b);
  }
  Result<void> reset_memory_locked_clocks() override { return inner_.reset_memory_locked_clocks(); }
  Result<int> temperature() override { return inner_.temperature(); }

 private:
  sim::FakeGpu inner_;
  GpuCapabilities caps_;
  std::mutex mutex_;
  std::chrono::nanoseconds wall_{0};
  double joules_ = 0;
  std::vector<ProcessUtilizationSample> samples_;
  std::vector<std::uint32_t> pids_;
  std::atomic<bool> mig_{false};
};

constexpr std::chrono::nanoseconds kT0 = 1'700'000'000s;
constexpr std::uint32_t kTrainer = 100;  // uid 1000
constexpr std::uint32_t kServer = 200;   // uid 0, in a Docker container

std::chrono::microseconds us(std::chrono::nanoseconds t) {
  return std::chrono::duration_cast<std::chrono::microseconds>(t);
}

class Attribution : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = std::filesystem::temp_directory_path() / ("ergd-attr-test-" + std::to_string(::getpid()));
    std::filesystem::remove_all(root_);
    write_proc(kTrainer, 1000, "trainer", "0::/user.slice/user-1000.slice/session-3.scope\n");
    write_proc(kServer, 0, "server", "0::/system.slice/docker-" + std::string(64, 'a') + ".scope\n");
    write_proc(4242, 1001, "bash", "0::/\n");  // a peer with supplementary group 77
    std::ofstream(root_ / "4242" / "status", std::ios::app) << "Groups:\t20 77\n";
    config_.attribution_poll = 0ms;
    config_.proc_root = root_.string();
    for (unsigned i = 0; i < 2; ++i) {
      gpus_.push_back(std::make_shared<ProcGpu>(i));
      GpuSlot s;
      s.gpu = gpus_.back();
      s.energy_available = true;
      s.worker = std::make_unique<DeviceWorker>();
      devices_.gpus.push_back(std::move(s));
    }
    sampler_ = std::make_unique<AttributionSampler>(devices_, config_);
  }
  void TearDown() override {
    sampler_.reset();
    std::filesystem::remove_all(root_);
  }

  void write_proc(std::uint32_t pid, unsigned uid, const std::string& comm, const std::string& cgroup) {
    auto d = root_ / std::to_string(pid);
    std::filesystem::create_directories(d);
    std::ofstream(d / "status") << "Name:\t" << comm << "\nUid:\t" << uid << "\t" << uid << "\t" << uid << "\t" << uid
                                << "\n";
    std::ofstream(d / "comm") << comm << "\n";
    std::ofstream(d / "cgroup") << cgroup;
  }

  /// GPU `g`: 2 s idle at 50 W, then 2 s at 250 W with the trainer at 60 % SM and the server at
  /// 20 %, samples every 1/6 s tiling the busy part exactly; polled every second.
  void feed(unsigned g) {
    auto& gpu = *gpus_[g];
    double j = 0;
    for (int s = 0; s <= 2; ++s) {
      gpu.set(kT0 + std::chrono::seconds(s), j, {}, {});
      sampler_->poll_once();
      j += 50;
    }
    j = 100;
    for (int s = 3; s <= 4; ++s) {
      std::vector<ProcessUtilizationSample> samples;
      for (int k = 1; k <= 6; ++k) {
        auto ts = us(kT0 + std::chrono::seconds(s - 1)) + std::chrono::microseconds(k * 1'000'000 / 6);
        samples.push_back({kTrainer, ts, 60, 0, 0, 0});
        samples.push_back({kServer, ts, 20, 0, 0, 0});
      }
      j += 250;
      gpu.set(kT0 + std::chrono::seconds(s), j, samples, {kTrainer, kServer});
      sampler_->poll_once();
    }
  }

  json ask(const std::string& query, Peer peer, int expect = 200) {
    auto q = protocol::Query::parse(query, protocol::route_info(protocol::Route::kAttribution).params, {});
    EXPECT_TRUE(q) << q.error().message;
    Reply r = attribution(*sampler_, config_, *q, peer);
    EXPECT_EQ(r.response.status, expect) << r.response.body;
    return json::parse(r.response.body, nullptr, false);
  }

  static std::string since(std::chrono::nanoseconds t) {
    return "since_ms=" + std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(t).count());
  }

  static double row_sum(const json& g) {
    double s =
        g["idle_j"].get<double>() + g["unattributed_j"].get<double>() + g["other_users"]["energy_j"].get<double>();
    for (const auto& p : g["processes"]) s += p["energy_j"].get<double>();
    return s;
  }

  std::filesystem::path root_;
  Config config_;
  DeviceSlots devices_;
  std::vector<std::shared_ptr<ProcGpu>> gpus_;
  std::unique_ptr<AttributionSampler> sampler_;
};

Peer unix_peer(uid_t uid, gid_t gid = 100, std::optional<pid_t> pid = std::nullopt) {
  Peer p;
  p.unix_socket = true;
  p.uid = uid;
  p.gid = gid;
  p.pid = pid;
  return p;
}

TEST_F(Attribution, RootSeesEveryProcessWithTheHandComputedSplit) {
  feed(0);
  json body = ask("gpu_ids=0&" + since(kT0 + 2s), unix_peer(0, 0));
  EXPECT_TRUE(body["sees_all_processes"]);
  const json& g = body["gpus"]["0"];
  EXPECT_EQ(g["attributable"], true);
  EXPECT_NEAR(g["measured_j"].get<double>(), 500.0, 1e-9);
  EXPECT_NEAR(g["duration_s"].get<double>(), 2.0, 1e-9);
  EXPECT_EQ(g["idle_calibrated"], true);
  EXPECT_NEAR(g["idle_power_w"].get<double>(), 50.0, 1e-9);
  EXPECT_NEAR(g["idle_j"].get<double>(), 100.0, 1e-9);  // 50 W × 2 s
  ASSERT_EQ(g["processes"].size(), 2u) << g.dump();
  // 400 J active, busy 1.2 s vs 0.4 s.
  const json& trainer = g["processes"][0];
  const json& server = g["processes"][1];
  EXPECT_EQ(trainer["pid"], kTrainer);
  EXPECT_EQ(trainer["uid"], 1000);
  EXPECT_EQ(trainer["comm"], "trainer");
  EXPECT_TRUE(trainer["container"].is_null());
  EXPECT_NEAR(trainer["energy_j"].get<double>(), 300.0, 1e-6);
  EXPECT_NEAR(trainer["power_w"].get<double>(), 150.0, 1e-6);
  EXPECT_NEAR(trainer["busy_s"].get<double>(), 1.2, 1e-5);  // timestamps in whole µs
  EXPECT_GT(trainer["bound_j"].get<double>(), 0.0);
  EXPECT_EQ(server["uid"], 0);
  EXPECT_EQ(server["container"], std::string(64, 'a'));
  EXPECT_NEAR(server["energy_j"].get<double>(), 100.0, 1e-6);
  EXPECT_EQ(g["other_users"]["processes"], 0);
  EXPECT_NEAR(row_sum(g), 500.0, 1e-9);
}

TEST_F(Attribution, AUserSeesItsOwnProcessesAndOneOtherUsersRow) {
  feed(0);
  json body = ask("gpu_ids=0&" + since(kT0 + 2s), unix_peer(1000));
  EXPECT_FALSE(body["sees_all_processes"]);
  EXPECT_EQ(body["uid"], 1000);
  const json& g = body["gpus"]["0"];
  ASSERT_EQ(g["processes"].size(), 1u) << g.dump();
  EXPECT_EQ(g["processes"][0]["pid"], kTrainer);
  EXPECT_NEAR(g["processes"][0]["energy_j"].get<double>(), 300.0, 1e-6);
  EXPECT_EQ(g["other_users"]["processes"], 1);
  EXPECT_NEAR(g["other_users"]["energy_j"].get<double>(), 100.0, 1e-6);
  EXPECT_GT(g["other_users"]["bound_j"].get<double>(), 0.0);
  std::set<std::string> keys;
  for (const auto& [k, v] : g["other_users"].items()) keys.insert(k);
  EXPECT_EQ(keys, (std::set<std::string>{"processes", "energy_j", "bound_j", "power_w"})) << "no pid of another user";
  EXPECT_EQ(g.dump().find("\"server\""), std::string::npos) << "no command of another user";
  EXPECT_NEAR(row_sum(g), g["measured_j"].get<double>(), 1e-9);
  // Someone with no process on the GPU: everything folded.
  json stranger = ask("gpu_ids=0&" + since(kT0 + 2s), unix_peer(2000));
  EXPECT_TRUE(stranger["gpus"]["0"]["processes"].empty());
  EXPECT_NEAR(stranger["gpus"]["0"]["other_users"]["energy_j"].get<double>(), 400.0, 1e-6);
  // TCP: no uid, nothing but the totals.
  Peer tcp;
  json remote = ask("gpu_ids=0&" + since(kT0 + 2s), tcp);
  EXPECT_TRUE(remote["gpus"]["0"]["processes"].empty());
  EXPECT_TRUE(remote["uid"].is_null());
}

TEST_F(Attribution, AllowedUidsAndGroupsSeeEverything) {
  feed(0);
  config_.attribution_all_uids = {1001};
  EXPECT_EQ(ask("gpu_ids=0", unix_peer(1001))["gpus"]["0"]["processes"].size(), 2u);
  EXPECT_EQ(ask("gpu_ids=0", unix_peer(1002))["gpus"]["0"]["processes"].size(), 0u);
  config_.attribution_all_uids.clear();
  config_.attribution_all_gids = {77};
  EXPECT_EQ(ask("gpu_ids=0", unix_peer(1003, 77))["gpus"]["0"]["processes"].size(), 2u);  // primary group
  // Supplementary group, from the peer's /proc/<pid>/status.
  EXPECT_EQ(ask("gpu_ids=0", unix_peer(1001, 100, 4242))["gpus"]["0"]["processes"].size(), 2u);
  EXPECT_EQ(ask("gpu_ids=0", unix_peer(1001, 100))["gpus"]["0"]["processes"].size(), 0u);
}

TEST_F(Attribution, TheWindowRunsFromSinceToTheLatestPoll) {
  feed(0);
  // Since the daemon's first reading: 2 s idle then 2 s busy; the processes still get only the active part.
  json all = ask("gpu_ids=0", unix_peer(0));
  const json& g = all["gpus"]["0"];
  EXPECT_NEAR(g["duration_s"].get<double>(), 4.0, 1e-9);
  EXPECT_NEAR(g["measured_j"].get<double>(), 600.0, 1e-9);
  EXPECT_NEAR(g["idle_j"].get<double>(), 200.0, 1e-9);
  EXPECT_NEAR(g["processes"][0]["energy_j"].get<double>(), 300.0, 1e-6);
  EXPECT_EQ(g["start_ms"], std::chrono::duration_cast<std::chrono::milliseconds>(kT0).count());
  // An earlier since starts at the oldest reading held; a later one at the next reading.
  EXPECT_EQ(ask("gpu_ids=0&since_ms=1", unix_peer(0))["gpus"]["0"]["start_ms"], g["start_ms"]);
  json last = ask("gpu_ids=0&" + since(kT0 + 2500ms), unix_peer(0));
  EXPECT_NEAR(last["gpus"]["0"]["duration_s"].get<double>(), 1.0, 1e-9);
  EXPECT_NEAR(last["gpus"]["0"]["measured_j"].get<double>(), 250.0, 1e-9);
}

TEST_F(Attribution, MigIsNotAttributableNeverZero) {
  feed(0);
  gpus_[1]->set_mig(true);
  gpus_[1]->set(kT0, 0, {}, {});
  sampler_->poll_once();
  gpus_[1]->set(kT0 + 1s, 80, {}, {});
  sampler_->poll_once();
  json body = ask("", unix_peer(0));
  const json& g = body["gpus"]["1"];
  EXPECT_EQ(g["attributable"], false);
  EXPECT_NE(g["error"].get<std::string>().find("MIG"), std::string::npos) << g.dump();
  EXPECT_NEAR(g["measured_j"].get<double>(), 80.0, 1e-9);
  EXPECT_FALSE(g.contains("processes"));
  EXPECT_EQ(body["gpus"]["0"]["attributable"], true);
}

TEST_F(Attribution, AGpuWithoutACounterSaysSo) {
  devices_.gpus[1].energy_available = false;
  sampler_->poll_once();
  sampler_->poll_once();
  json body = ask("gpu_ids=1", unix_peer(0));
  EXPECT_EQ(body["gpus"]["1"]["attributable"], false);
  EXPECT_NE(body["gpus"]["1"]["error"].get<std::string>().find("no energy counter"), std::string::npos) << body.dump();
  EXPECT_FALSE(body["gpus"]["1"].contains("measured_j"));
}

TEST_F(Attribution, BadQueriesAndTooEarly) {
  json early = ask("gpu_ids=1", unix_peer(0), 503);
  EXPECT_NE(early["errors"]["1"].get<std::string>().find("no counter update"), std::string::npos) << early.dump();
  feed(0);
  EXPECT_NE(ask("gpu_ids=0&since_ms=abc", unix_peer(0), 400)["error"].get<std::string>().find("since_ms"),
            std::string::npos);
  EXPECT_NE(ask("gpu_ids=0&since_ms=99999999999999", unix_peer(0), 400)["error"].get<std::string>().find("future"),
            std::string::npos);
  ask("gpu_ids=7", unix_peer(0), 400);
}

TEST(AttributionRoute, UnknownParametersAreNamedIn400) {
  testing::FakeDaemon d;
  Reply r = d.call("GET", "/attribution?gpu_ids=0&window=5", Peer{true, 0, 0});
  EXPECT_EQ(r.response.status, 400);
  EXPECT_NE(r.response.body.find("window"), std::string::npos) << r.response.body;
}

TEST(AttributionOwner, ReadsTheEffectiveUidCommAndContainer) {
  auto root = std::filesystem::temp_directory_path() / ("ergd-owner-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(root / "7");
  std::ofstream(root / "7" / "status") << "Name:\tx\nUid:\t1000\t65534\t1000\t1000\n";
  std::ofstream(root / "7" / "comm") << "python3\n";
  std::ofstream(root / "7" / "cgroup")
      << "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1234abcd_5678_90ab_cdef_1234567890ab.slice/"
         "cri-containerd-"
      << std::string(64, 'b') << ".scope\n";
  auto o = read_process_owner(root, 7);
  EXPECT_EQ(o.uid, 65534u);
  EXPECT_EQ(o.comm, "python3");
  EXPECT_EQ(o.container, std::string(64, 'b'));
  EXPECT_EQ(o.pod, "1234abcd-5678-90ab-cdef-1234567890ab");
  auto gone = read_process_owner(root, 8);
  EXPECT_FALSE(gone.uid);
  std::filesystem::remove_all(root);
}

}  // namespace
}  // namespace erg::daemon
