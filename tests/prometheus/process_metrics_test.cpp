// Per-process series of the Prometheus collector (issue 23, acceptance 5): 1,000 short-lived
// processes (entries in the simulated driver's process table, 16 at most per GPU, on four
// simulated V100s) come and go while the collector is scraped every 50 ms on the real clock.
// Asserted at every scrape: the process label sets never exceed the cap plus one "other" series
// per GPU; a process removed from the table has no series; a process first seen while fewer than
// the cap have series gets its own; every counter only grows; and per GPU
//   Σ processes + other + exited + idle + unattributed = the measured energy.
// At the end, with every process gone, the measured energy is within its stated bound (plus the
// two counter-update edges) of the simulator's physical energy.

#include <gtest/gtest.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "erg/devices/devices.hpp"
#include "erg/exporters/prometheus/collector.hpp"
#include "erg/exporters/prometheus/metric_names.hpp"
#include "erg/sim/machine.hpp"
#include "erg/sim/spec.hpp"
#include "prom_rig.hpp"

namespace erg {
namespace {

using namespace std::chrono_literals;
namespace pm = ::prometheus;

std::string label(const pm::ClientMetric& m, const std::string& name) {
  for (const auto& l : m.label)
    if (l.name == name) return l.value;
  return {};
}

const pm::MetricFamily* find(const std::vector<pm::MetricFamily>& fs, const std::string& name) {
  for (const auto& f : fs)
    if (f.name == name) return &f;
  return nullptr;
}

std::string key_of(const pm::ClientMetric& m) {
  std::string k;
  for (const auto& l : m.label) k += l.name + "=" + l.value + ",";
  return k;
}

TEST(PrometheusProcessMetrics, ThousandShortLivedProcessesStayWithinTheCap) {
  devices::DeviceOptions o;
  o.simulate = "4xV100,cpus=0,seed=23";
  auto d = devices::open_devices(o);
  ASSERT_TRUE(d) << d.error().message;
  auto& machine = *d->machine;
  const unsigned gpus = 4;
  ASSERT_EQ(d->inventory.gpus.size(), gpus);
  constexpr std::size_t kCap = 8;
  prom::CollectorOptions co;
  co.node = "";
  co.process_metrics = true;
  co.max_process_series = kCap;
  auto collector = prom::Collector::create(d->inventory.gpus, {}, co);
  ASSERT_TRUE(collector) << collector.error().message;

  std::mt19937 rng(23);
  std::uniform_real_distribution<double> share(0.05, 0.35), life_s(0.1, 0.5);
  struct Live {
    std::uint32_t pid;
    std::chrono::steady_clock::time_point until;
  };
  std::vector<std::vector<Live>> live(gpus);
  std::uint32_t started = 0;
  constexpr std::uint32_t kProcesses = 1000;
  constexpr std::uint32_t kFirstPid = 3'900'000;  // table entries only: no such live processes

  auto first = (*collector)->Collect();  // the baseline: energies count from here
  std::vector<double> true0;
  for (unsigned g = 0; g < gpus; ++g) true0.push_back(machine.true_energy(g)->value());

  std::map<std::string, double> last_counter;  // every counter series' last value
  std::set<std::uint32_t> ever_shown, ever_live;
  std::map<std::uint32_t, unsigned> gpu_of;
  std::size_t scrapes = 0, max_sets = 0, scrapes_with_other = 0;
  const auto t_start = std::chrono::steady_clock::now();
  std::vector<pm::MetricFamily> fs;
  while (true) {
    const auto now = std::chrono::steady_clock::now();
    ASSERT_LT(now - t_start, 60s) << "the churn did not finish";
    bool any = false;
    for (unsigned g = 0; g < gpus; ++g) {
      std::erase_if(live[g], [&](const Live& l) {
        if (l.until > now) return false;
        EXPECT_TRUE(machine.remove_process(g, l.pid));
        return true;
      });
      while (live[g].size() < 16 && started < kProcesses) {
        sim::SimProcess p;
        p.pid = kFirstPid + started++;
        p.share = share(rng);
        ASSERT_TRUE(machine.set_process(g, p));
        live[g].push_back({p.pid, now + std::chrono::duration_cast<std::chrono::nanoseconds>(
                                            std::chrono::duration<double>(life_s(rng)))});
        gpu_of[p.pid] = g;
      }
      any = any || !live[g].empty();
    }
    std::set<std::uint32_t> live_now;
    for (unsigned g = 0; g < gpus; ++g)
      for (const auto& l : live[g]) live_now.insert(l.pid);

    fs = (*collector)->Collect();
    ++scrapes;
    const auto* energy = find(fs, prom::names::kGpuProcessEnergy);
    const auto* parts = find(fs, prom::names::kGpuAttributionEnergy);
    const auto* exited = find(fs, prom::names::kGpuExitedProcessesEnergy);
    const auto* shown_gauge = find(fs, prom::names::kProcessSeries);
    ASSERT_TRUE(energy && parts && exited && shown_gauge);
    // Cardinality: distinct process label sets ≤ the cap + one "other" per GPU.
    std::set<std::string> sets;
    std::size_t own = 0, others = 0;
    std::vector<double> per_gpu(gpus, 0.0);
    for (const auto& m : energy->metric) {
      sets.insert(key_of(m));
      const unsigned g = static_cast<unsigned>(std::stoul(label(m, "index")));
      per_gpu[g] += m.counter.value;
      if (label(m, "pid") == "other") {
        ++others;
        continue;
      }
      ++own;
      const auto pid = static_cast<std::uint32_t>(std::stoul(label(m, "pid")));
      EXPECT_TRUE(live_now.count(pid)) << "pid " << pid << " has a series after it left the table";
      EXPECT_EQ(gpu_of[pid], g);
      ever_shown.insert(pid);
    }
    ASSERT_EQ(sets.size(), energy->metric.size());
    EXPECT_LE(own, kCap);
    EXPECT_LE(others, gpus);
    EXPECT_EQ(static_cast<std::size_t>(shown_gauge->metric.at(0).gauge.value), own);
    max_sets = std::max(max_sets, sets.size());
    scrapes_with_other += others > 0;
    // A process seen for the first time gets its own series unless the cap is reached.
    std::set<std::uint32_t> shown_pids;
    for (const auto& m : energy->metric)
      if (label(m, "pid") != "other") shown_pids.insert(static_cast<std::uint32_t>(std::stoul(label(m, "pid"))));
    for (std::uint32_t pid : live_now) {
      if (ever_live.insert(pid).second && !shown_pids.count(pid)) {
        EXPECT_EQ(own, kCap) << "pid " << pid << " went to \"other\" with " << own << " of " << kCap << " series used";
      }
    }
    // Counters never go back.
    for (const auto& f : fs) {
      if (f.type != pm::MetricType::Counter) continue;
      for (const auto& m : f.metric) {
        const std::string k = f.name + "{" + key_of(m) + "}";
        auto it = last_counter.find(k);
        if (it != last_counter.end()) {
          EXPECT_GE(m.counter.value, it->second) << k;
        }
        last_counter[k] = m.counter.value;
      }
    }
    // The parts add up to the measured energy on every GPU.
    for (unsigned g = 0; g < gpus; ++g) {
      double measured = 0, rest = 0;
      for (const auto& m : parts->metric) {
        if (label(m, "index") != std::to_string(g)) continue;
        if (label(m, "part") == "measured")
          measured = m.counter.value;
        else
          rest += m.counter.value;
      }
      for (const auto& m : exited->metric)
        if (label(m, "index") == std::to_string(g)) rest += m.counter.value;
      EXPECT_NEAR(per_gpu[g] + rest, measured, 1e-9 * measured + 1e-9) << "GPU " << g << " scrape " << scrapes;
    }
    if (!any && started == kProcesses) break;
    std::this_thread::sleep_for(50ms);
  }
  // One more scrape after the last removal (the loop's last scrape saw an empty table already).
  std::this_thread::sleep_for(150ms);
  fs = (*collector)->Collect();
  const auto* energy = find(fs, prom::names::kGpuProcessEnergy);
  ASSERT_TRUE(energy);
  for (const auto& m : energy->metric) EXPECT_EQ(label(m, "pid"), "other") << "a series outlived its process";

  EXPECT_EQ(ever_live.size(), kProcesses);
  EXPECT_GT(ever_shown.size(), 3 * kCap) << "series were not recycled as processes came and went";
  EXPECT_GT(scrapes_with_other, 0u) << "the cap was never reached";
  EXPECT_LE(max_sets, kCap + gpus);
  EXPECT_LT(std::chrono::steady_clock::now() - t_start, 30s);

  // The measured energy against the simulator's physical energy over the same time: within the
  // stated bound plus what the two ends (up to one counter update period, ~100 ms, each at up to
  // the V100's 250 W limit) can add.
  const auto* parts = find(fs, prom::names::kGpuAttributionEnergy);
  const auto* bounds = find(fs, prom::names::kGpuAttributionBound);
  ASSERT_TRUE(parts && bounds);
  for (unsigned g = 0; g < gpus; ++g) {
    double measured = 0, bound = 0;
    for (const auto& m : parts->metric)
      if (label(m, "index") == std::to_string(g) && label(m, "part") == "measured") measured = m.counter.value;
    for (const auto& m : bounds->metric)
      if (label(m, "index") == std::to_string(g) && label(m, "part") == "measured") bound = m.gauge.value;
    const double truth = machine.true_energy(g)->value() - true0[g];
    EXPECT_GT(measured, 0.0);
    EXPECT_LE(std::abs(measured - truth), bound + 2 * 0.11 * 250.0)
        << "GPU " << g << " measured " << measured << " ± " << bound << ", truth " << truth;
  }
  std::printf(
      "process metrics: %zu scrapes, at most %zu process label sets (cap %zu + %u other), %zu processes had "
      "their own series (simulated)\n",
      scrapes, max_sets, kCap, gpus, ever_shown.size());
}

// Per-process labels and per-pod series from the processes' cgroups: a fake proc tree gives three
// table entries their comm and cgroup (two in one Kubernetes pod, one in another). A pod's counter
// is the sum of its processes'; a pod whose processes have left loses its series.
TEST(PrometheusProcessMetrics, PodsSumTheirProcessesAndGoWithThem) {
  devices::DeviceOptions o;
  o.simulate = "1xV100,cpus=0,seed=5";
  auto d = devices::open_devices(o);
  ASSERT_TRUE(d) << d.error().message;
  auto& machine = *d->machine;
  testing::TempDir proc;
  const std::string cid(64, 'c');
  const std::string pod_a = "1b2c3d4e-aaaa-4bbb-8ccc-0123456789ab", pod_b = "0a1b2c3d-0000-4111-8222-333344445555";
  auto fake = [&](std::uint32_t pid, const std::string& comm, const std::string& pod_uid) {
    std::string u = pod_uid;
    std::replace(u.begin(), u.end(), '-', '_');
    std::filesystem::create_directories(proc.path() + "/" + std::to_string(pid));
    std::ofstream(proc.path() + "/" + std::to_string(pid) + "/comm") << comm << "\n";
    std::ofstream(proc.path() + "/" + std::to_string(pid) + "/cgroup")
        << "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" << u << ".slice/cri-containerd-" << cid
        << ".scope\n";
  };
  fake(3'800'001, "trainer", pod_a);
  fake(3'800'002, "loader", pod_a);
  fake(3'800'003, "server", pod_b);
  prom::CollectorOptions co;
  co.node = "";
  co.process_metrics = true;
  co.proc_root = proc.path();
  auto collector = prom::Collector::create(d->inventory.gpus, {}, co);
  ASSERT_TRUE(collector) << collector.error().message;
  (void)(*collector)->Collect();
  const double shares[] = {0.3, 0.2, 0.4};
  for (std::uint32_t k = 0; k < 3; ++k) {
    sim::SimProcess p;
    p.pid = 3'800'001 + k;
    p.share = shares[k];
    ASSERT_TRUE(machine.set_process(0, p));
  }
  std::vector<pm::MetricFamily> fs;
  auto pod_value = [&](const std::string& uid) -> std::optional<double> {
    if (const auto* f = find(fs, prom::names::kGpuPodEnergy))
      for (const auto& m : f->metric)
        if (label(m, "pod") == uid) return m.counter.value;
    return std::nullopt;
  };
  for (int i = 0; i < 5; ++i) {  // three intervals attributed, one step late
    std::this_thread::sleep_for(300ms);
    fs = (*collector)->Collect();
  }
  const auto* energy = find(fs, prom::names::kGpuProcessEnergy);
  ASSERT_TRUE(energy);
  std::map<std::string, double> by_pod;
  std::map<std::string, std::string> comm;
  for (const auto& m : energy->metric) {
    EXPECT_EQ(label(m, "container"), cid);
    EXPECT_GT(m.counter.value, 0.0) << label(m, "pid");
    by_pod[label(m, "pod")] += m.counter.value;
    comm[label(m, "pid")] = label(m, "comm");
  }
  EXPECT_EQ(comm,
            (std::map<std::string, std::string>{{"3800001", "trainer"}, {"3800002", "loader"}, {"3800003", "server"}}));
  for (const auto& uid : {pod_a, pod_b}) {
    ASSERT_TRUE(pod_value(uid)) << uid;
    EXPECT_NEAR(*pod_value(uid), by_pod[uid], 1e-9 * by_pod[uid]) << uid;
  }
  // Pod A's processes leave: its series goes at the next scrape; pod B's stays.
  ASSERT_TRUE(machine.remove_process(0, 3'800'001));
  ASSERT_TRUE(machine.remove_process(0, 3'800'002));
  std::this_thread::sleep_for(200ms);
  fs = (*collector)->Collect();
  EXPECT_FALSE(pod_value(pod_a));
  EXPECT_TRUE(pod_value(pod_b));
}

#ifdef ERG_CLI_PATH
/// The value of the first series of `name` whose labels include `label` in an exposition.
std::optional<double> series_value(const std::string& text, const std::string& name, const std::string& label) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(name + "{", 0) == 0 && line.find(label) != std::string::npos)
      return std::stod(line.substr(line.rfind(' ') + 1));
  return std::nullopt;
}

// End to end with a real process: `erg exporter` over HTTP on a simulated A100 shared by an
// `erg simulate load --share` child. Its series appear with energy, and are gone from the first
// scrape after the driver dropped it; its energy is then in the exited counter.
TEST(PrometheusProcessMetrics, ErgExporterShowsARealProcessUntilItExits) {
  auto made = sim::Machine::create_temp(*sim::parse_spec("1xA100,cpus=0"));
  ASSERT_TRUE(made) << made.error().message;
  auto machine = std::move(*made);
  ASSERT_TRUE(machine->export_env());
  const std::string erg = testing::shell_quote(ERG_CLI_PATH);
  testing::BackgroundShell exporter("exec " + erg + " exporter --listen 127.0.0.1:0 --json --process-metrics");
  int port = 0;
  for (int i = 0; i < 200 && port == 0; ++i) {
    const std::string out = exporter.out();
    if (out.find('\n') != std::string::npos) port = nlohmann::json::parse(out.substr(0, out.find('\n')))["port"];
    if (port == 0) std::this_thread::sleep_for(50ms);
  }
  ASSERT_NE(port, 0) << exporter.err();
  testing::BackgroundShell load("exec " + erg + " simulate load --gpus 0 --share 0.4 --seconds 60");
  const std::string pid_label = "pid=\"" + std::to_string(load.pid()) + "\"";
  auto scrape = [&] {
    auto r = testing::http_get(port, "/metrics");
    EXPECT_TRUE(r && r->status == 200);
    return r ? r->body : std::string();
  };
  std::optional<double> joules;
  for (int i = 0; i < 50 && !(joules && *joules > 0); ++i) {
    std::this_thread::sleep_for(200ms);
    joules = series_value(scrape(), prom::names::kGpuProcessEnergy, pid_label);
  }
  ASSERT_TRUE(joules && *joules > 0) << "the load's series never showed energy";
  std::string text = scrape();
  EXPECT_NE(text.find("comm=\"erg\""), std::string::npos);
  ASSERT_TRUE(series_value(text, prom::names::kGpuProcessPower, pid_label));

  load.signal(SIGKILL);
  ASSERT_TRUE(load.wait(10s));
  bool dropped = false;  // the simulated driver drops a dead process, as a real one does
  for (int i = 0; i < 200 && !dropped; ++i) {
    dropped = true;
    const auto listed = machine->processes(0);  // held: a range-for over *temporary would dangle
    ASSERT_TRUE(listed);
    for (const auto& p : *listed) dropped = dropped && p.pid != static_cast<std::uint32_t>(load.pid());
    if (!dropped) std::this_thread::sleep_for(50ms);
  }
  ASSERT_TRUE(dropped);
  text = scrape();
  EXPECT_FALSE(series_value(text, prom::names::kGpuProcessEnergy, pid_label)) << text;
  EXPECT_FALSE(series_value(text, prom::names::kGpuProcessPower, pid_label));
  auto exited = series_value(text, prom::names::kGpuExitedProcessesEnergy, "index=\"0\"");
  ASSERT_TRUE(exited);
  EXPECT_GE(*exited, *joules);
  exporter.signal(SIGTERM);
  EXPECT_EQ(exporter.wait(10s), std::optional<int>(0));
  for (const char* v : {"ERG_SIMULATE", "ERG_SIM_STATE", "ERG_NVML_LIBRARY", "ERG_POWERCAP_ROOT", "ERG_HWMON_ROOT",
                        "ERG_AMDSMI_LIBRARY"})
    ::unsetenv(v);
}
#endif

}  // namespace
}  // namespace erg
