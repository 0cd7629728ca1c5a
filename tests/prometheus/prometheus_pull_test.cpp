// Acceptance 1 and 3 of the Prometheus exporter (docs/prometheus.md): Debian's prometheus scrapes
// `erg exporter` and ergd over one simulated machine under load, and rate() of every energy
// counter matches the simulator's true power within 5 % across RAPL wraps; promtool accepts both
// expositions and packaging/prometheus/prometheus.yml; every query of the Grafana dashboard
// (packaging/grafana/erg-dashboard.json) returns data.

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "erg/sim/machine.hpp"
#include "erg/sim/spec.hpp"
#include "prom_rig.hpp"

namespace erg {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using testing::BackgroundShell;
using testing::Prometheus;

// A package range of 300 J: at 100 W the package counter wraps every 3 s and DRAM (40 W) every
// 7.5 s, so the 15 s rate window holds several wraps of each (rapl=near-wrap: the first comes
// 3 s after the machine starts).
constexpr double kRangeJ = 300.0;
constexpr double kPackageW = 100.0, kDramW = 40.0;
const char* kSpec =
    R"({"gpus": [{"sku": "A100"}, {"sku": "H100"}], "cpus": [{"max_energy_range_uj": 300000000}],
        "rapl": "near-wrap", "seed": 16})";

std::string exporter_port(const BackgroundShell& exporter) {
  for (int i = 0; i < 200; ++i) {
    auto line = exporter.out();
    if (auto nl = line.find('\n'); nl != std::string::npos) {
      auto j = json::parse(line.substr(0, nl), nullptr, false);
      if (!j.is_discarded() && j.contains("port")) return std::to_string(j["port"].get<int>());
    }
    std::this_thread::sleep_for(50ms);
  }
  return "";
}

/// `promtool check metrics` over `text`: "" when it accepts it, else what it said.
std::string promtool_check_metrics(const std::string& dir, const std::string& name, const std::string& text) {
  const std::string file = dir + "/" + name + ".prom";
  std::ofstream(file) << text;
  auto r = testing::run_shell("/usr/bin/promtool check metrics < " + file);
  return r.exit_code == 0 ? "" : "exit " + std::to_string(r.exit_code) + ": " + r.out + r.err;
}

class PrometheusPull : public ::testing::Test {
 protected:
  void SetUp() override {
    auto spec = sim::parse_spec(kSpec);
    ASSERT_TRUE(spec) << spec.error().message;
    auto m = sim::Machine::create_temp(*spec);
    ASSERT_TRUE(m) << m.error().message;
    machine_ = std::move(*m);
    ASSERT_TRUE(machine_->export_env());
    ::unsetenv("CUDA_VISIBLE_DEVICES");
    ::unsetenv("ERG_DAEMON_SOCK");
    ASSERT_TRUE(machine_->set_utilization(0, 0.9));
    ASSERT_TRUE(machine_->set_utilization(1, 0.4));
    ASSERT_TRUE(machine_->set_cpu_power(0, Watts(kPackageW), Watts(kDramW)));
  }
  std::unique_ptr<sim::Machine> machine_;
  testing::TempDir dir_;
};

TEST_F(PrometheusPull, RatesOfEveryEnergyCounterMatchTheSimulatedPowerAcrossRaplWraps) {
  // erg exporter, port picked by the kernel and printed with --json.
  BackgroundShell exporter(std::string("exec ") + ERG_CLI_PATH +
                           " exporter --listen 127.0.0.1:0 --json --node sim-node --label cluster=ci");
  const std::string eport = exporter_port(exporter);
  ASSERT_FALSE(eport.empty()) << exporter.out() << exporter.err();
  // ergd, read-only groups (no root needed), /metrics over TCP.
  const int dport = testing::free_port();
  BackgroundShell ergd(std::string("exec ") + ERGD_PATH + " --socket-path " + dir_.path() +
                       "/ergd.sock --enable gpu-read,cpu-read --metrics-node sim-node --tcp-insecure --tcp 127.0.0.1:" +
                       std::to_string(dport));
  bool ergd_up = false;
  for (int i = 0; i < 200 && !ergd_up; ++i) {
    auto r = testing::http_get(dport, "/metrics");
    ergd_up = r && r->status == 200;
    if (!ergd_up) std::this_thread::sleep_for(50ms);
  }
  ASSERT_TRUE(ergd_up) << ergd.err();

  Prometheus prom(dir_.path(), "  - job_name: erg-exporter\n    static_configs: [{targets: ['127.0.0.1:" + eport +
                                   "']}]\n  - job_name: ergd\n    static_configs: [{targets: ['127.0.0.1:" +
                                   std::to_string(dport) + "']}]\n");
  ASSERT_TRUE(prom.wait_up({"erg-exporter", "ergd"})) << prom.log();

  // The true energies over the last 15 s before the queries (the load is constant).
  auto truth = [&] {
    std::array<double, 4> j{};
    j[0] = machine_->true_energy(0)->value();
    j[1] = machine_->true_energy(1)->value();
    j[2] = machine_->true_cpu_energy(0)->value();
    j[3] = machine_->true_dram_energy(0)->value();
    return j;
  };
  const auto t0 = std::chrono::steady_clock::now();
  const auto e0 = truth();
  std::this_thread::sleep_for(16s);
  const auto e1 = truth();
  const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::array<double, 4> watts{};
  for (int k = 0; k < 4; ++k) watts[k] = (e1[k] - e0[k]) / dt;
  // Several wraps of each RAPL counter inside the window (their range is 300 J).
  EXPECT_GT(e1[2] - e0[2], 2 * kRangeJ);
  EXPECT_GT(e1[3] - e0[3], kRangeJ);

  for (const std::string job : {"erg-exporter", "ergd"}) {
    const std::string sel = "job=\"" + job + "\",node=\"sim-node\"";
    const std::pair<std::string, double> checks[] = {
        {"rate(erg_gpu_energy_joules_total{" + sel + ",index=\"0\"}[15s])", watts[0]},
        {"rate(erg_gpu_energy_joules_total{" + sel + ",index=\"1\"}[15s])", watts[1]},
        {"rate(erg_cpu_energy_joules_total{" + sel + ",index=\"0\"}[15s])", watts[2]},
        {"rate(erg_dram_energy_joules_total{" + sel + ",index=\"0\"}[15s])", watts[3]},
    };
    for (const auto& [expr, want] : checks) {
      auto got = prom.value(expr);
      ASSERT_TRUE(got) << expr << "\n" << prom.log();
      std::printf("%s = %.2f W, simulated %.2f W (%+.2f %%)\n", expr.c_str(), *got, want, 100.0 * (*got - want) / want);
      EXPECT_NEAR(*got, want, 0.05 * want) << expr << " (true mean power " << want << " W)";
    }
    // Energy counters never went back (resets() counts decreases).
    for (const char* m :
         {"erg_gpu_energy_joules_total", "erg_cpu_energy_joules_total", "erg_dram_energy_joules_total"}) {
      auto res = prom.query(std::string("resets(") + m + "{" + sel + "}[1m])");
      ASSERT_FALSE(res.empty()) << m;
      for (auto& s : res) EXPECT_EQ(s["value"][1], "0") << m << " " << s.dump();
    }
    EXPECT_EQ(prom.value("erg_gpu_up{" + sel + "}"), 1.0);
    EXPECT_TRUE(prom.value("erg_gpu_power_watts{" + sel + ",domain=\"device_instant\"}"));
    EXPECT_TRUE(prom.value("erg_gpu_temperature_celsius{" + sel + "}"));
    EXPECT_EQ(prom.value("erg_info{" + sel + ",simulated=\"true\"}"), 1.0);
  }
  EXPECT_EQ(prom.value("erg_gpu_up{job=\"erg-exporter\",cluster=\"ci\",index=\"1\"}"), 1.0);

  // promtool accepts both expositions.
  auto em = testing::http_get(std::stoi(eport), "/metrics");
  auto dm = testing::http_get(dport, "/metrics");
  ASSERT_TRUE(em && dm);
  EXPECT_EQ(promtool_check_metrics(dir_.path(), "exporter", em->body), "") << em->body;
  EXPECT_EQ(promtool_check_metrics(dir_.path(), "ergd", dm->body), "") << dm->body;

  // Every query of the Grafana dashboard returns data from this Prometheus, for both jobs.
  std::ifstream dash_file(std::string(ERG_SOURCE_DIR) + "/packaging/grafana/erg-dashboard.json");
  ASSERT_TRUE(dash_file) << "packaging/grafana/erg-dashboard.json";
  const json dash = json::parse(dash_file, nullptr, false);
  ASSERT_FALSE(dash.is_discarded()) << "the dashboard is not JSON";
  auto values = testing::http_get(prom.port(), "/api/v1/label/node/values?" + testing::url_encode("match[]") + "=" +
                                                   testing::url_encode("erg_info"));
  ASSERT_TRUE(values && values->status == 200);
  EXPECT_NE(values->body.find("\"sim-node\""), std::string::npos) << values->body;  // the $node variable
  std::size_t queries = 0;
  for (const auto& panel : dash["panels"]) {
    ASSERT_TRUE(panel.contains("targets") && !panel["targets"].empty()) << panel["title"];
    for (const auto& target : panel["targets"]) {
      std::string expr = target["expr"];
      // Grafana's variables as the dashboard would set them for this node.
      for (auto [var, value] : {std::pair{"$__rate_interval", "15s"}, {"$__range", "1m"}, {"$node", "sim-node"}})
        for (auto at = expr.find(var); at != std::string::npos; at = expr.find(var))
          expr.replace(at, std::string(var).size(), value);
      ASSERT_EQ(expr.find('$'), std::string::npos) << "a variable the test does not set: " << expr;
      auto res = prom.query(expr);
      std::set<std::string> jobs;
      for (const auto& r : res)
        if (r["metric"].contains("job")) jobs.insert(r["metric"]["job"].get<std::string>());
      EXPECT_FALSE(res.empty()) << panel["title"] << ": " << expr;
      if (!expr.starts_with("sum by (node)")) {
        EXPECT_EQ(jobs.size(), 2u) << panel["title"] << ": " << expr << " " << res.dump();
      }
      ++queries;
    }
  }
  EXPECT_GE(queries, 10u);
}

// `erg exporter --once` prints one exposition; promtool accepts it; bad labels are refused with
// the label named.
TEST_F(PrometheusPull, ExporterOnceIsValidAndBadLabelsAreNamed) {
  auto r = testing::run_shell(std::string(ERG_CLI_PATH) + " exporter --once --label team=ml");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("erg_gpu_energy_joules_total{index=\"1\""), std::string::npos) << r.out;
  EXPECT_EQ(promtool_check_metrics(dir_.path(), "once", r.out), "");
  auto bad = testing::run_shell(std::string(ERG_CLI_PATH) + " exporter --once --label 9x=1");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("'9x'"), std::string::npos) << bad.err;
  auto taken = testing::run_shell(std::string(ERG_CLI_PATH) + " exporter --listen 127.0.0.1:notaport");
  EXPECT_NE(taken.exit_code, 0);
  EXPECT_NE(taken.err.find("--listen"), std::string::npos) << taken.err;
}

/// The value of the first series of `metric` whose text line contains `has` (nullopt if none).
std::optional<double> series_value(const std::string& text, const std::string& metric, const std::string& has) {
  std::size_t at = 0;
  while ((at = text.find("\n" + metric + "{", at)) != std::string::npos) {
    const auto end = text.find('\n', at + 1);
    const std::string line = text.substr(at + 1, end - at - 1);
    at = end;
    if (line.find(has) == std::string::npos) continue;
    return std::stod(line.substr(line.rfind(' ') + 1));
  }
  return std::nullopt;
}

// `erg --simulate jetson=orin exporter --once`: every rail has an energy series (0 J at the
// first read) and a power series (the simulated rails draw their default power), and promtool
// accepts the exposition.
TEST(PrometheusSoc, ExporterOnceShowsJetsonRails) {
  testing::TempDir dir;
  auto r = testing::run_shell(std::string(ERG_CLI_PATH) + " --simulate jetson=orin exporter --once");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* rail : {"VDD_GPU_SOC", "VDD_CPU_CV", "VIN_SYS_5V0"}) {
    const std::string has = std::string("rail=\"") + rail + "\"";
    auto e = series_value(r.out, "erg_soc_energy_joules_total", has);
    auto p = series_value(r.out, "erg_soc_power_watts", has);
    ASSERT_TRUE(e && p) << rail << "\n" << r.out;
    EXPECT_EQ(*e, 0.0) << rail << ": counts from the exporter's first read";
    EXPECT_GT(*p, 0.1) << rail;
    EXPECT_LT(*p, 60.0) << rail << ": an Orin module draws at most 60 W";
  }
  EXPECT_NE(r.out.find("kind=\"gpu\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("erg_soc_up{"), std::string::npos) << r.out;
  EXPECT_EQ(promtool_check_metrics(dir.path(), "jetson", r.out), "");
}

// `erg --simulate 2xMI300X exporter --once`: both AMD GPUs have energy and power series (an
// idle MI300X draws about 140 W), and promtool accepts the exposition.
TEST(PrometheusAmd, ExporterOnceShowsMI300XEnergyAndPower) {
  testing::TempDir dir;
  auto r = testing::run_shell(std::string(ERG_CLI_PATH) + " --simulate 2xMI300X exporter --once");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* index : {"index=\"0\"", "index=\"1\""}) {
    auto e = series_value(r.out, "erg_gpu_energy_joules_total", index);
    auto p = series_value(r.out, "erg_gpu_power_watts", index);
    ASSERT_TRUE(e && p) << index << "\n" << r.out;
    EXPECT_GE(*e, 0.0);
    EXPECT_LT(*e, 5.0) << "counts from the exporter's first read";
    EXPECT_NEAR(*p, 140.0, 20.0) << index;
    EXPECT_NE(r.out.find(std::string("erg_gpu_up{") + index + ",name=\"AMD Instinct MI300X\""), std::string::npos)
        << r.out;
  }
  EXPECT_NE(r.out.find("domain=\"device_instant\""), std::string::npos) << r.out;
  EXPECT_EQ(promtool_check_metrics(dir.path(), "amd", r.out), "");
}

TEST(PrometheusConfig, PromtoolAcceptsThePackagedScrapeConfig) {
  auto r = testing::run_shell(std::string("/usr/bin/promtool check config ") + ERG_SOURCE_DIR +
                              "/packaging/prometheus/prometheus.yml");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
}

}  // namespace
}  // namespace erg
