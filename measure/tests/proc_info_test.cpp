// /proc parsing for attribution: CPU time from /proc/<pid>/stat and /proc/stat (a fake proc root),
// cgroup paths to container, runtime, pod UID and QoS class (fixtures in the shapes Docker,
// containerd, CRI-O, Podman, the kubelet's cgroupfs and systemd drivers and systemd sessions
// write), and the CPU package energy split by CPU time.

#include "erg/measure/proc_info.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "erg/sim/fake_devices.hpp"

namespace erg::measure {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

const std::string kId = "4f6c7a521b2c5d3e8f900a1b2c3d4e5f60718293a4b5c6d7e8f9012345678abc";

// A real-shaped stat line (fields 1..52) with a name holding a space and parentheses.
std::string stat_line(std::uint32_t pid, const std::string& comm, unsigned utime, unsigned stime) {
  return std::to_string(pid) + " (" + comm + ") S 1 " + std::to_string(pid) + " " + std::to_string(pid) +
         " 0 -1 4194560 1234 0 5 0 " + std::to_string(utime) + " " + std::to_string(stime) +
         " 0 0 20 0 4 0 987654 123456789 2345 18446744073709551615 1 1 0 0 0 0 0 4096 17663 0 0 0 17 3 0 0 0 0 0 0 0 "
         "0 0 0 0 0 0\n";
}

TEST(ProcStat, ParsesTheFieldsAttributionUses) {
  auto st = parse_proc_pid_stat(stat_line(4242, "python (worker) 1", 1500, 250));
  ASSERT_TRUE(st) << st.error().message;
  EXPECT_EQ(st->pid, 4242u);
  EXPECT_EQ(st->comm, "python (worker) 1");
  EXPECT_EQ(st->state, 'S');
  EXPECT_EQ(st->utime, 1500u);
  EXPECT_EQ(st->stime, 250u);
  EXPECT_EQ(st->cpu_ticks(), 1750u);
  EXPECT_EQ(st->starttime, 987654u);
}

TEST(ProcStat, RejectsMalformedText) {
  EXPECT_FALSE(parse_proc_pid_stat(""));
  EXPECT_FALSE(parse_proc_pid_stat("42 python S 1 2 3"));    // no parentheses
  EXPECT_FALSE(parse_proc_pid_stat("42 (python) S 1 2 3"));  // too few fields
  auto r = parse_proc_pid_stat("x (python) S 1 1 1 0 -1 0 0 0 0 0 a b 0 0 20 0 4 0 987 1 1");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
}

TEST(ProcStat, ParsesTheMachineCpuLine) {
  auto t = parse_proc_stat("cpu  100 5 50 1000 20 3 2 1 7 0\ncpu0 50 2 25 500 10 1 1 0 0 0\nintr 1\n");
  ASSERT_TRUE(t) << t.error().message;
  EXPECT_EQ(t->busy, 100u + 5 + 50 + 3 + 2 + 1);  // guest time is inside user
  EXPECT_EQ(t->idle, 1020u);
  EXPECT_FALSE(parse_proc_stat("intr 1\n"));
  EXPECT_FALSE(parse_proc_stat("cpu 1 x 3 4\n"));
}

class FakeProc : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("erg-fake-proc-" + std::to_string(::getpid()));
    fs::create_directories(root_ / "77");
    std::ofstream(root_ / "stat") << "cpu  2000 0 500 9000 0 0 0 0 0 0\n";
    std::ofstream(root_ / "77" / "stat") << stat_line(77, "trainer", 600, 150);
    std::ofstream(root_ / "77" / "cgroup") << "0::/system.slice/docker-" + kId + ".scope\n";
  }
  void TearDown() override { fs::remove_all(root_); }
  fs::path root_;
};

TEST_F(FakeProc, ReadsStatAndCgroupUnderTheRoot) {
  auto st = read_proc_pid_stat(root_, 77);
  ASSERT_TRUE(st) << st.error().message;
  EXPECT_EQ(st->cpu_ticks(), 750u);
  auto sys = read_proc_stat(root_);
  ASSERT_TRUE(sys);
  EXPECT_EQ(sys->busy, 2500u);
  auto cg = read_proc_cgroup(root_, 77);
  ASSERT_TRUE(cg) << cg.error().message;
  EXPECT_EQ(cg->container_id, kId);
  auto gone = read_proc_pid_stat(root_, 78);
  ASSERT_FALSE(gone);
  EXPECT_EQ(gone.error().code, ErrorCode::kNotFound);
}

TEST(Cgroup, DockerUnderSystemd) {
  auto c = parse_proc_cgroup("0::/system.slice/docker-" + kId + ".scope\n");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->container_id, kId);
  EXPECT_EQ(c->runtime, "docker");
  EXPECT_EQ(c->systemd_unit, "docker-" + kId + ".scope");
  EXPECT_FALSE(c->pod_uid);
  EXPECT_FALSE(c->qos_class);
}

TEST(Cgroup, DockerCgroupfsV1) {
  auto c = parse_proc_cgroup("12:memory:/docker/" + kId + "\n11:cpu,cpuacct:/docker/" + kId + "\n1:name=systemd:/\n");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->container_id, kId);
  EXPECT_EQ(c->runtime, "docker");
  EXPECT_EQ(c->path, "/docker/" + kId);
}

TEST(Cgroup, ContainerdPodUnderTheKubeletsSystemdDriver) {
  auto c = parse_proc_cgroup(
      "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1b2c3d4e_aaaa_4bbb_8ccc_0123456789ab.slice/"
      "cri-containerd-" +
      kId + ".scope\n");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->pod_uid, "1b2c3d4e-aaaa-4bbb-8ccc-0123456789ab");  // underscores back to dashes
  EXPECT_EQ(c->qos_class, "burstable");
  EXPECT_EQ(c->container_id, kId);
  EXPECT_EQ(c->runtime, "containerd");
}

TEST(Cgroup, CrioBestEffortPod) {
  auto c = parse_cgroup_path(
      "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod0a1b2c3d_0000_4111_8222_333344445555.slice/"
      "crio-" +
      kId + ".scope");
  EXPECT_EQ(c.pod_uid, "0a1b2c3d-0000-4111-8222-333344445555");
  EXPECT_EQ(c.qos_class, "besteffort");
  EXPECT_EQ(c.runtime, "crio");
}

TEST(Cgroup, GuaranteedPodUnderTheCgroupfsDriver) {
  auto c = parse_proc_cgroup("4:pids:/kubepods/pod0a1b2c3d-0000-4111-8222-333344445555/" + kId + "\n");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->pod_uid, "0a1b2c3d-0000-4111-8222-333344445555");
  EXPECT_EQ(c->qos_class, "guaranteed");
  EXPECT_EQ(c->container_id, kId);
  EXPECT_FALSE(c->runtime);  // the cgroupfs path does not say which runtime
}

TEST(Cgroup, SystemdSessionIsNoContainer) {
  auto c = parse_proc_cgroup("0::/user.slice/user-1000.slice/session-3.scope\n");
  ASSERT_TRUE(c);
  EXPECT_FALSE(c->container_id);
  EXPECT_FALSE(c->pod_uid);
  EXPECT_FALSE(c->qos_class);
  EXPECT_EQ(c->systemd_unit, "session-3.scope");
}

TEST(Cgroup, RootlessPodman) {
  auto c = parse_cgroup_path("/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-" + kId + ".scope");
  EXPECT_EQ(c.container_id, kId);
  EXPECT_EQ(c.runtime, "podman");
}

TEST(Cgroup, HybridHostPrefersTheLineThatShowsTheContainer) {
  auto c = parse_proc_cgroup("12:memory:/docker/" + kId + "\n0::/\n");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->container_id, kId);
  EXPECT_FALSE(parse_proc_cgroup("garbage\n"));
  EXPECT_FALSE(parse_proc_cgroup(""));
  // Not a container id: too short, or not hex.
  EXPECT_FALSE(parse_cgroup_path("/docker/abc123").container_id);
  EXPECT_FALSE(parse_cgroup_path("/system.slice/docker-" + std::string(64, 'z') + ".scope").container_id);
}

TEST(Consumers, GroupsProcessesByContainerAndPod) {
  ProcessAttribution a;
  a.processes = {{10, Joules(5.0), Joules(1.0), Seconds(1.0), 0.1, 3},
                 {11, Joules(7.0), Joules(2.0), Seconds(1.0), 0.2, 3},
                 {12, Joules(3.0), Joules(0.5), Seconds(1.0), 0.1, 3},
                 {13, Joules(2.0), Joules(0.25), Seconds(1.0), 0.1, 3},
                 {14, Joules(1.0), Joules(0.125), Seconds(1.0), 0.1, 3}};
  const std::string other(64, 'b');
  const std::string pod =
      "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0a1b2c3d_0000_4111_8222_"
      "333344445555.slice/cri-containerd-";
  auto cgroup_of = [&](std::uint32_t pid) -> std::optional<CgroupInfo> {
    switch (pid) {
      case 10: return parse_cgroup_path(pod + kId + ".scope");    // pod, container A
      case 11: return parse_cgroup_path(pod + other + ".scope");  // same pod, container B
      case 12: return parse_cgroup_path("/system.slice/docker-" + kId + ".scope");
      case 13: return parse_cgroup_path("/user.slice/user-1000.slice/session-3.scope");
      default: return std::nullopt;  // gone
    }
  };
  auto pods = group_processes(a, ConsumerLevel::kPod, cgroup_of);
  ASSERT_EQ(pods.size(), 4u);  // sorted: container:..., host, pod:..., unknown
  EXPECT_EQ(pods[0].key, "container:" + kId);
  EXPECT_EQ(pods[1].key, "host");
  EXPECT_EQ(pods[2].key, "pod:0a1b2c3d-0000-4111-8222-333344445555");
  EXPECT_EQ(pods[2].pids, (std::vector<std::uint32_t>{10, 11}));
  EXPECT_DOUBLE_EQ(pods[2].energy.value(), 12.0);
  EXPECT_DOUBLE_EQ(pods[2].bound.value(), 3.0);
  EXPECT_EQ(pods[2].cgroup.qos_class, "burstable");
  EXPECT_FALSE(pods[2].cgroup.container_id);
  EXPECT_EQ(pods[3].key, "unknown");
  double sum = 0;
  for (const auto& g : pods) sum += g.energy.value();
  EXPECT_DOUBLE_EQ(sum, a.attributed().value());
  auto containers = group_processes(a, ConsumerLevel::kContainer, cgroup_of);
  ASSERT_EQ(containers.size(), 4u);                  // pid 10 and 12 share the container id; 11 is its own
  EXPECT_EQ(containers[0].key, "container:" + kId);  // "4f6c…" sorts before "bbbb…"
  EXPECT_EQ(containers[0].pids, (std::vector<std::uint32_t>{10, 12}));
  EXPECT_EQ(containers[1].key, "container:" + other);
}

TEST_F(FakeProc, GroupsByTheCgroupsUnderTheRoot) {
  ProcessAttribution a;
  a.processes = {{77, Joules(4.0), Joules(1.0), Seconds(1.0), 0.5, 3},
                 {78, Joules(4.0), Joules(1.0), Seconds(1.0), 0.5, 3}};
  auto g = group_processes(a, ConsumerLevel::kContainer, root_);
  ASSERT_EQ(g.size(), 2u);
  EXPECT_EQ(g[0].key, "container:" + kId);
  EXPECT_EQ(g[0].cgroup.runtime, "docker");
  EXPECT_EQ(g[1].key, "unknown");
}

// A settable clock for the meter.
class ManualClock final : public Clock {
 public:
  std::chrono::nanoseconds now() const override { return t; }
  std::chrono::nanoseconds wall_now() const override { return t; }
  std::chrono::nanoseconds t{0};
};

TEST_F(FakeProc, CpuProcessMeterSplitsThePackageByCpuTime) {
  sim::FakeCpu cpu(0);
  ManualClock clock;
  fs::create_directories(root_ / "88");
  fs::create_directories(root_ / "99");
  std::ofstream(root_ / "88" / "stat") << stat_line(88, "server", 100, 0);
  std::ofstream(root_ / "99" / "stat") << stat_line(99, "short-lived", 10, 0);
  cpu.set_energy_uj(1e6, 0);
  CpuProcessMeter meter(cpu, clock, root_, IdleModel{Watts(10.0), Watts(0.5), Seconds(2.0)});
  const std::vector<std::uint32_t> pids = {77, 88, 99, 123};  // 123 does not exist
  ASSERT_TRUE(meter.begin(pids));
  // 2 s later: 100 J more; the machine was busy 400 ticks: pid 77 +200, pid 88 +100, pid 99 exited.
  clock.t = 2s;
  cpu.set_energy_uj(101e6, 0);
  std::ofstream(root_ / "stat") << "cpu  2300 0 600 9100 0 0 0 0 0 0\n";
  std::ofstream(root_ / "77" / "stat") << stat_line(77, "trainer", 750, 200);
  std::ofstream(root_ / "88" / "stat") << stat_line(88, "server", 200, 0);
  fs::remove_all(root_ / "99");
  auto a = meter.end(0.02);
  ASSERT_TRUE(a) << a.error().message;
  EXPECT_DOUBLE_EQ(a->measured.value(), 100.0);
  EXPECT_DOUBLE_EQ(a->idle.value(), 20.0);
  ASSERT_EQ(a->processes.size(), 2u);
  EXPECT_EQ(a->processes[0].pid, 77u);
  EXPECT_NEAR(a->processes[0].energy.value(), 80.0 * 200.0 / 400.0, 1e-9);
  EXPECT_NEAR(a->processes[1].energy.value(), 80.0 * 100.0 / 400.0, 1e-9);
  EXPECT_NEAR(a->other.value(), 20.0, 1e-9);  // pid 99's and everyone else's CPU time
  EXPECT_FALSE(meter.end());                  // no interval open
}

TEST(CpuAttribution, SplitsPackageEnergyByCpuTime) {
  // 10 s, 500 J ± 5 J; idle 20 W ± 1 W; the machine was busy 400 ticks, pid 1 for 300, pid 2 for 60.
  const EnergySegment pkg{0s, 10s, Joules(500.0), Joules(5.0), Watts(0.0)};
  const std::vector<ProcessCpuTime> procs = {{1, 300}, {2, 60}};
  auto a = attribute_cpu_energy(pkg, 400, procs, IdleModel{Watts(20.0), Watts(1.0), Seconds(5.0)}, 100.0, 0.1);
  ASSERT_TRUE(a) << a.error().message;
  EXPECT_DOUBLE_EQ(a->idle.value(), 200.0);
  ASSERT_EQ(a->processes.size(), 2u);
  EXPECT_NEAR(a->processes[0].energy.value(), 300.0 * 0.75, 1e-9);
  EXPECT_NEAR(a->processes[1].energy.value(), 300.0 * 0.15, 1e-9);
  EXPECT_NEAR(a->processes[0].cpu_time.count(), 3.0, 1e-12);
  EXPECT_NEAR(a->other.value(), 30.0, 1e-9);
  EXPECT_NEAR((a->idle + a->other + a->processes[0].energy + a->processes[1].energy).value(), 500.0, 1e-9);
  // Bound: tick rounding (2 + 2w)/(busy − 2), the energy's and idle model's errors, the model's 10 %.
  const double w = 0.75;
  EXPECT_NEAR(a->processes[0].bound.value(), 300.0 * (2 + 2 * w) / 398.0 + w * (5.0 + 10.0) + 0.1 * 225.0, 1e-9);
  EXPECT_FALSE(attribute_cpu_energy(pkg, 100, procs, IdleModel{}, 100.0));  // 300 ticks > 100 busy
  EXPECT_FALSE(attribute_cpu_energy({0s, 0s, Joules(1.0), Joules(0.0), Watts(0.0)}, 1, {}, IdleModel{}));
}

}  // namespace
}  // namespace erg::measure
