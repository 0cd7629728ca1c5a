// Acceptance 2 and 4 of the push side (exporters/prometheus/push.hpp): Debian's
// prometheus-pushgateway on loopback, scraped by Prometheus with honor_labels, takes an
// EnergyHistogram, an EnergyCumulativeCounter with two concurrent windows and a PowerGauge on
// one job, and keeps every series; end_window returns at once with a 10 s period and its final
// value still arrives; a gateway that accepts and never answers never holds up the program.

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <thread>

#include "erg/devices/devices.hpp"
#include "erg/exporters/prometheus/push.hpp"
#include "erg/sim/machine.hpp"
#include "prom_rig.hpp"

namespace erg {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

struct Rig {
  devices::Devices dev;
  Rig() {
    devices::DeviceOptions o;
    o.simulate = "2xA100,cpus=1,seed=16";
    auto d = devices::open_devices(o);
    EXPECT_TRUE(d) << d.error().message;
    dev = std::move(*d);
  }
};

std::chrono::milliseconds since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t);
}

TEST(PrometheusPush, EveryObjectsSeriesStayVisibleAndEndWindowIsPrompt) {
  Rig rig;
  auto& inv = rig.dev.inventory;
  ASSERT_EQ(inv.gpus.size(), 2u);
  ASSERT_TRUE(rig.dev.machine->set_utilization(0, 0.8));
  testing::TempDir dir;
  const int gw_port = testing::free_port();
  const std::string gw_bin = "/usr/bin/prometheus-pushgateway";
  ASSERT_TRUE(std::filesystem::exists(gw_bin)) << "install Debian's prometheus-pushgateway (./dev deps)";
  testing::BackgroundShell gateway("exec " + gw_bin + " --web.listen-address=127.0.0.1:" + std::to_string(gw_port));
  bool gw_up = false;
  for (int i = 0; i < 100 && !gw_up; ++i) {
    auto r = testing::http_get(gw_port, "/-/ready");
    gw_up = r && r->status == 200;
    if (!gw_up) std::this_thread::sleep_for(100ms);
  }
  ASSERT_TRUE(gw_up) << gateway.err();
  testing::Prometheus prom(dir.path(),
                           "  - job_name: pushgateway\n    honor_labels: true\n    static_configs: "
                           "[{targets: ['127.0.0.1:" +
                               std::to_string(gw_port) + "']}]\n");

  std::vector<std::string> errors;
  std::mutex errors_mutex;
  prom::PushOptions o;
  o.gateway_url = "http://127.0.0.1:" + std::to_string(gw_port);
  o.job = "train";
  o.grouping = {{"rank", "0"}};
  o.on_error = [&](const std::string& m) {
    std::lock_guard lock(errors_mutex);
    errors.push_back(m);
  };
  auto hist = prom::EnergyHistogram::create(inv.gpus, inv.cpus, o, {1, 10, 100, 1000, 10000}, {1, 10, 100, 1000},
                                            {0.1, 1, 10, 100});
  ASSERT_TRUE(hist) << hist.error().message;
  auto counter = prom::EnergyCumulativeCounter::create(inv.gpus, inv.cpus, 10s, o);
  ASSERT_TRUE(counter);
  auto gauge = prom::PowerGauge::create(inv.gpus, 10s, o);
  ASSERT_TRUE(gauge);

  ASSERT_TRUE((*counter)->begin_window("epoch", false));
  ASSERT_TRUE((*counter)->begin_window("step", false));
  EXPECT_EQ((*counter)->begin_window("step", false).error().code, ErrorCode::kAlreadyExists);
  ASSERT_TRUE((*gauge)->begin_window("epoch", false));
  for (int k = 0; k < 2; ++k) {
    ASSERT_TRUE((*hist)->begin_window("epoch", false));
    std::this_thread::sleep_for(600ms);
    ASSERT_TRUE((*hist)->end_window("epoch", false));
  }
  EXPECT_EQ((*hist)->end_window("nope", false).error().code, ErrorCode::kNotFound);
  std::this_thread::sleep_for(500ms);
  // end_window with a 10 s update period: returns at once, the final value still goes out.
  auto t = std::chrono::steady_clock::now();
  ASSERT_TRUE((*counter)->end_window("step", false));
  EXPECT_LT(since(t), 300ms);
  t = std::chrono::steady_clock::now();
  ASSERT_TRUE((*gauge)->end_window("epoch", false));
  EXPECT_LT(since(t), 300ms);
  ASSERT_TRUE((*counter)->end_window("epoch", false));
  EXPECT_TRUE((*hist)->flush(5s));
  EXPECT_TRUE((*counter)->flush(5s));
  EXPECT_TRUE((*gauge)->flush(5s));
  EXPECT_TRUE(errors.empty()) << errors.front();

  ASSERT_TRUE(prom.wait_up({"pushgateway"})) << prom.log();
  auto v = [&](const std::string& e) {
    std::optional<double> r;
    for (int i = 0; i < 30 && !r; ++i) {
      r = prom.value(e);
      if (!r) std::this_thread::sleep_for(200ms);
    }
    return r;
  };
  const std::string sel = "job=\"train\",rank=\"0\"";
  // Histogram: two observations of the GPU 0 energy of a 0.6 s window at ~0.8 utilisation.
  EXPECT_EQ(v("energy_monitor_gpu_energy_joules_count{" + sel + ",window=\"epoch\",index=\"0\"}"), 2.0);
  auto sum = v("energy_monitor_gpu_energy_joules_sum{" + sel + ",window=\"epoch\",index=\"0\"}");
  ASSERT_TRUE(sum);
  EXPECT_GT(*sum, 2 * 0.6 * 50.0);
  EXPECT_LT(*sum, 2 * 0.6 * 450.0);
  EXPECT_EQ(v("energy_monitor_gpu_energy_joules_bucket{" + sel + ",window=\"epoch\",index=\"0\",le=\"+Inf\"}"), 2.0);
  EXPECT_TRUE(v("energy_monitor_cpu_energy_joules_count{" + sel + ",window=\"epoch\",index=\"0\"}"));
  EXPECT_TRUE(v("energy_monitor_dram_energy_joules_count{" + sel + ",window=\"epoch\",index=\"0\"}"));
  // Two concurrent counter windows and the gauge, on the same job: all still there.
  auto epoch = v("energy_monitor_gpu_energy_joules_total{" + sel + ",window=\"epoch\",index=\"0\"}");
  auto step = v("energy_monitor_gpu_energy_joules_total{" + sel + ",window=\"step\",index=\"0\"}");
  ASSERT_TRUE(epoch && step);
  EXPECT_GT(*epoch, *step);  // epoch ended later
  EXPECT_GT(*step, 0.0);
  EXPECT_TRUE(v("energy_monitor_cpu_energy_joules_total{" + sel + ",window=\"step\",index=\"0\"}"));
  auto watts = v("power_monitor_gpu_power_watts{" + sel + ",window=\"epoch\",index=\"0\"}");
  ASSERT_TRUE(watts);
  EXPECT_GT(*watts, 50.0);
  // Types and HELP as Zeus has them, as Prometheus recorded them from the gateway.
  auto meta = [&](const std::string& metric) {
    auto r = testing::http_get(prom.port(), "/api/v1/metadata?metric=" + metric);
    if (!r || r->status != 200) return json();
    auto j = json::parse(r->body, nullptr, false);
    return j.is_discarded() || !j["data"].contains(metric) ? json() : j["data"][metric][0];
  };
  auto hm = meta("energy_monitor_gpu_energy_joules");
  EXPECT_EQ(hm["type"], "histogram") << hm.dump();
  EXPECT_EQ(hm["help"], "GPU energy consumption") << hm.dump();
  EXPECT_EQ(meta("energy_monitor_gpu_energy_joules_total")["type"], "counter");
  EXPECT_EQ(meta("power_monitor_gpu_power_watts")["type"], "gauge");
  EXPECT_EQ(meta("power_monitor_gpu_power_watts")["help"], "Records power consumption for GPU over time");
}

// A gateway that accepts connections and never answers: end_window still returns at once,
// failures are reported (bounded retries), and destroying the objects is bounded too.
TEST(PrometheusPush, AGatewayThatNeverAnswersNeverHoldsUpTheProgram) {
  Rig rig;
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(fd, 16), 0);  // the kernel accepts; nobody ever reads or answers
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  std::atomic<int> reported{0};
  prom::PushOptions o;
  o.gateway_url = "127.0.0.1:" + std::to_string(ntohs(a.sin_port));
  o.job = "stuck";
  o.timeout = 300ms;
  o.max_attempts = 2;
  o.retry_backoff = 50ms;
  o.close_timeout = 1s;
  o.on_error = [&](const std::string&) { ++reported; };
  const auto t0 = std::chrono::steady_clock::now();
  {
    auto hist = prom::EnergyHistogram::create(rig.dev.inventory.gpus, rig.dev.inventory.cpus, o);
    ASSERT_TRUE(hist);
    auto counter = prom::EnergyCumulativeCounter::create(rig.dev.inventory.gpus, rig.dev.inventory.cpus, 10s, o);
    ASSERT_TRUE(counter);
    for (int k = 0; k < 5; ++k) {
      ASSERT_TRUE((*hist)->begin_window("w", false));
      auto t = std::chrono::steady_clock::now();
      ASSERT_TRUE((*hist)->end_window("w", false));
      EXPECT_LT(since(t), 200ms);
    }
    ASSERT_TRUE((*counter)->begin_window("c", false));
    auto t = std::chrono::steady_clock::now();
    ASSERT_TRUE((*counter)->end_window("c", false));
    EXPECT_LT(since(t), 200ms);
    EXPECT_TRUE((*hist)->flush(3s));
    EXPECT_GE((*hist)->push_errors(), 2u);
  }
  EXPECT_LT(since(t0), 6s);
  EXPECT_GE(reported.load(), 2);
  ::close(fd);
}

TEST(PrometheusPush, BadArgumentsAreErrorsNamingTheProblem) {
  prom::PushOptions o;
  o.gateway_url = "https://gw:9091";
  o.job = "j";
  auto h = prom::EnergyHistogram::create({}, {}, o);
  ASSERT_FALSE(h);
  EXPECT_NE(h.error().message.find("https"), std::string::npos);
  o.gateway_url = "gw:9091";
  h = prom::EnergyHistogram::create({}, {}, o, {});
  ASSERT_FALSE(h);
  EXPECT_NE(h.error().message.find("GPU bucket range cannot be empty"), std::string::npos);
  o.job = "";
  EXPECT_FALSE(prom::PowerGauge::create({}, 1s, o));
}

}  // namespace
}  // namespace erg
