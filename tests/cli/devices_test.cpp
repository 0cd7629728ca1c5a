// End-to-end tests of `erg devices` through the built binary and the simulated machine.

#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>

#include "erg/sim/powercap_tree.hpp"
#include "process.hpp"

namespace erg {
namespace {

using nlohmann::json;
using testing::run_shell;
using testing::shell_quote;

/// Environment cleared of every variable that points erg at hardware, so each test states
/// exactly what it simulates.
std::string clean_env() {
  return "env -u ERG_SIMULATE -u ERG_SIM_STATE -u ERG_NVML_LIBRARY -u ERG_POWERCAP_ROOT -u CUDA_VISIBLE_DEVICES ";
}
std::string erg() { return shell_quote(ERG_CLI_PATH); }

json devices_json(const std::string& prefix, const std::string& spec) {
  auto r = run_shell(clean_env() + prefix + " " + erg() + " --simulate " + shell_quote(spec) + " devices --json");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return json::parse(r.out);
}

bool one_line(const std::string& s) {
  return !s.empty() && std::count(s.begin(), s.end(), '\n') == 1 && s.back() == '\n';
}

TEST(ErgDevices, FourSimulatedA100) {
  json j = devices_json("", "4xA100");
  EXPECT_TRUE(j["simulated"].get<bool>());
  ASSERT_EQ(j["gpus"].size(), 4u);
  for (unsigned i = 0; i < 4; ++i) {
    const auto& g = j["gpus"][i];
    EXPECT_EQ(g["index"], i);
    EXPECT_EQ(g["physical_index"], i);
    EXPECT_EQ(g["vendor"], "nvidia");
    EXPECT_NE(g["name"].get<std::string>().find("A100"), std::string::npos);
    EXPECT_EQ(g["uuid"].get<std::string>().rfind("GPU-", 0), 0u);
    EXPECT_EQ(g["architecture"], "ampere");
    EXPECT_TRUE(g["energy_counter"].get<bool>());
    // The A100 SKU of the simulated machine: 100–400 W, default 400 W.
    EXPECT_EQ(g["power_limit_range_mw"], json::array({100000, 400000}));
    EXPECT_EQ(g["power_limit_mw"], 400000);
    EXPECT_FALSE(g["power_domains"].empty());
    EXPECT_TRUE(g["update_period_ms"].is_number());
  }
  // Each GPU has its own UUID.
  EXPECT_NE(j["gpus"][0]["uuid"], j["gpus"][1]["uuid"]);
  // A simulated machine has one CPU package with DRAM by default.
  ASSERT_EQ(j["cpus"].size(), 1u);
  EXPECT_TRUE(j["cpus"][0]["dram"].get<bool>());
  EXPECT_GT(j["cpus"][0]["max_energy_range_uj"].get<unsigned long long>(), 0u);
}

TEST(ErgDevices, CudaVisibleDevicesSelectsAndOrders) {
  json j = devices_json("CUDA_VISIBLE_DEVICES=2,3", "4xA100");
  ASSERT_EQ(j["gpus"].size(), 2u);
  EXPECT_EQ(j["gpus"][0]["index"], 0);
  EXPECT_EQ(j["gpus"][0]["physical_index"], 2);
  EXPECT_EQ(j["gpus"][1]["index"], 1);
  EXPECT_EQ(j["gpus"][1]["physical_index"], 3);

  json reversed = devices_json("CUDA_VISIBLE_DEVICES=3,1", "4xA100");
  ASSERT_EQ(reversed["gpus"].size(), 2u);
  EXPECT_EQ(reversed["gpus"][0]["physical_index"], 3);
  EXPECT_EQ(reversed["gpus"][1]["physical_index"], 1);
}

TEST(ErgDevices, CudaVisibleDevicesByUuid) {
  json all = devices_json("", "4xA100");
  std::string uuid2 = all["gpus"][2]["uuid"];
  std::string uuid3 = all["gpus"][3]["uuid"];
  json j = devices_json("CUDA_VISIBLE_DEVICES=" + shell_quote(uuid2 + "," + uuid3), "4xA100");
  ASSERT_EQ(j["gpus"].size(), 2u);
  EXPECT_EQ(j["gpus"][0]["physical_index"], 2);
  EXPECT_EQ(j["gpus"][0]["uuid"], uuid2);
  EXPECT_EQ(j["gpus"][1]["physical_index"], 3);
}

TEST(ErgDevices, MigAndEmptyVisibleDevicesAreOneLineErrors) {
  for (std::string value : {"MIG-4f6c7a52-1b2c-5d3e-8f90-0a1b2c3d4e5f", ""}) {
    auto r = run_shell(clean_env() + "CUDA_VISIBLE_DEVICES=" + shell_quote(value) + " " + erg() +
                       " --simulate 4xA100 devices --json");
    EXPECT_NE(r.exit_code, 0) << value;
    EXPECT_TRUE(r.out.empty()) << r.out;
    EXPECT_TRUE(one_line(r.err)) << r.err;
    EXPECT_NE(r.err.find("CUDA_VISIBLE_DEVICES"), std::string::npos) << r.err;
    if (!value.empty()) {
      EXPECT_NE(r.err.find("MIG"), std::string::npos) << r.err;
    }
  }
}

TEST(ErgDevices, P100HasNoEnergyCounter) {
  json j = devices_json("", "1xP100,1xV100");
  ASSERT_EQ(j["gpus"].size(), 2u);
  EXPECT_NE(j["gpus"][0]["name"].get<std::string>().find("P100"), std::string::npos);
  EXPECT_FALSE(j["gpus"][0]["energy_counter"].get<bool>());
  EXPECT_EQ(j["gpus"][0]["architecture"], "pascal");
  EXPECT_TRUE(j["gpus"][1]["energy_counter"].get<bool>());
  EXPECT_EQ(j["gpus"][1]["power_limit_range_mw"], json::array({100000, 250000}));
}

TEST(ErgDevices, NoDriverStillListsCpusAndExitsZero) {
  testing::TempDir dir;
  sim::PowercapTree tree(dir.path() + "/powercap");
  ASSERT_TRUE(tree.add_zone(0, "package-0", 262143328850ULL));
  ASSERT_TRUE(tree.add_zone(0, "dram", 65712999613ULL, 0));
  ASSERT_TRUE(tree.set_energy_uj(0, 123456));
  const std::string root = "ERG_POWERCAP_ROOT=" + shell_quote(tree.root().string()) + " ";
  // A driver path that does not exist stands for "no libnvidia-ml.so.1 anywhere" on any host.
  for (std::string nvml : {std::string("ERG_NVML_LIBRARY=/nonexistent/libnvidia-ml.so.1 "), std::string()}) {
    auto r = run_shell(clean_env() + root + nvml + erg() + " devices --json");
    if (nvml.empty() && r.exit_code == 0 && !json::parse(r.out)["gpus"].empty()) continue;  // a real driver
    ASSERT_EQ(r.exit_code, 0) << r.err;
    json j = json::parse(r.out);
    EXPECT_FALSE(j["simulated"].get<bool>());
    EXPECT_TRUE(j["gpus"].empty());
    ASSERT_EQ(j["cpus"].size(), 1u);
    EXPECT_EQ(j["cpus"][0]["name"], "package-0");
    EXPECT_TRUE(j["cpus"][0]["dram"].get<bool>());
    bool said_no_driver = false;
    for (const auto& u : j["unavailable"]) {
      if (u["source"] == "nvml" && u["reason"].get<std::string>().find("no NVIDIA driver") != std::string::npos)
        said_no_driver = true;
    }
    EXPECT_TRUE(said_no_driver) << j.dump();
  }
  auto table = run_shell(clean_env() + root + "ERG_NVML_LIBRARY=/nonexistent/libnvidia-ml.so.1 " + erg() + " devices");
  EXPECT_EQ(table.exit_code, 0);
  EXPECT_NE(table.out.find("no NVIDIA driver"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("package-0"), std::string::npos) << table.out;
}

TEST(ErgDevices, HumanTableIsLabelledSimulated) {
  auto r = run_shell(clean_env() + erg() + " --simulate 2xH100 devices");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("SIMULATED"), std::string::npos);
  EXPECT_NE(r.out.find("H100"), std::string::npos);
}

TEST(ErgDevices, BadInputIsAOneLineError) {
  for (std::string args : {"--simulate 4xB999 devices", "--simulate 'x,,y' devices", "frobnicate", "devices --bogus"}) {
    auto r = run_shell(clean_env() + erg() + " " + args);
    EXPECT_NE(r.exit_code, 0) << args;
    EXPECT_TRUE(one_line(r.err)) << args << ": " << r.err;
    EXPECT_EQ(r.err.rfind("erg: error:", 0), 0u) << r.err;
  }
  auto help = run_shell(erg() + " devices --help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("--json"), std::string::npos);
  auto version = run_shell(erg() + " --version");
  EXPECT_EQ(version.exit_code, 0);
  EXPECT_NE(version.out.find("erg "), std::string::npos);
}

}  // namespace
}  // namespace erg
