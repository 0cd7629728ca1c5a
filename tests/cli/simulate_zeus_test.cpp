// End-to-end tests of `erg simulate zeus` through the built binary and the repository's traces.

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "process.hpp"

namespace erg {
namespace {

using nlohmann::json;
using testing::run_shell;
using testing::shell_quote;

std::string erg() { return shell_quote(ERG_CLI_PATH); }
/// A simulated-machine setting that would fail if `simulate zeus` tried to open one.
std::string env() { return "env -u ERG_SIM_STATE ERG_SIMULATE=not-a-spec "; }

TEST(ErgSimulateZeus, AllIsDeterministicForASeedAndNeedsNoSimulatedMachine) {
  const auto a = run_shell(env() + erg() + " simulate zeus --all --eta 0.5 --beta 2.0 --seed 1 --json");
  ASSERT_EQ(a.exit_code, 0) << a.err;
  const auto b = run_shell(env() + erg() + " simulate zeus --all --seed 1 --json");
  ASSERT_EQ(b.exit_code, 0) << b.err;
  EXPECT_EQ(a.out, b.out);
  const json j = json::parse(a.out);
  EXPECT_TRUE(j["simulated"].get<bool>());
  EXPECT_EQ(j["kind"], "trace-driven");
  ASSERT_EQ(j["pairs"].size(), 19u);
  ASSERT_EQ(j["skipped"].size(), 5u);
  for (const auto& p : j["pairs"]) {
    SCOPED_TRACE(p["gpu"].get<std::string>() + " " + p["workload"].get<std::string>());
    for (const char* k : {"energy_j", "time_s", "cost"}) {
      EXPECT_TRUE(p["baseline"][k].is_number());
      EXPECT_TRUE(p["erg"][k].is_number());
    }
    EXPECT_LE(p["converged_gap_pct"].get<double>(), 5.0);
    EXPECT_GT(p["improvement_pct"]["energy"].get<double>(), 0.0);
    EXPECT_LT(p["erg"]["energy_j"].get<double>(), p["baseline"]["energy_j"].get<double>());
    EXPECT_EQ(p["baseline"]["batch_size"], p["default_batch_size"]);
    EXPECT_EQ(p["baseline"]["power_limit_w"], p["max_power_w"]);
  }
  for (const auto& s : j["skipped"])
    EXPECT_NE(s["reason"].get<std::string>().find("default batch size"), std::string::npos);

  const auto c = run_shell(env() + erg() + " simulate zeus --all --seed 2 --json");
  ASSERT_EQ(c.exit_code, 0) << c.err;
  EXPECT_NE(a.out, c.out);
}

TEST(ErgSimulateZeus, OnePairAndTheHumanTable) {
  const auto r = run_shell(env() + erg() + " simulate zeus --gpu V100 --workload cifar100 --recurrences 30 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  ASSERT_EQ(j["pairs"].size(), 1u);
  EXPECT_EQ(j["pairs"][0]["gpu"], "v100");
  EXPECT_EQ(j["pairs"][0]["recurrences"], 30);
  EXPECT_EQ(j["pairs"][0]["batch_sizes"].size(), 10u);

  const auto t = run_shell(env() + erg() + " simulate zeus --gpu p100");
  ASSERT_EQ(t.exit_code, 0) << t.err;
  EXPECT_NE(t.out.find("Trace-driven simulation"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("p100     cifar100"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("skipped p100 imagenet: default batch size 256 is not in the p100 power trace"),
            std::string::npos)
      << t.out;
}

TEST(ErgSimulateZeus, ClearErrors) {
  struct Case {
    std::string args;
    int exit_code;
    const char* says;
  } cases[] = {
      {"--gpu h100", 2, "unknown GPU 'h100' (a40, p100, rtx6000, v100)"},
      {"--gpu v100 --workload mnist", 2, "unknown workload 'mnist'"},
      {"--gpu v100 --eta 1.5", 2, "--eta"},
      {"--gpu v100 --beta 0", 2, "must be greater than 0"},
      {"--gpu v100 --beta -1", 2, "must be greater than 0"},
      {"--gpu v100 --trace-dir /nonexistent/traces", 2, "trace directory /nonexistent/traces does not exist"},
      {"--gpu p100 --workload imagenet", 1, "default batch size 256 is not in the p100 power trace"},
      {"", 2, "needs --gpu, --workload or --all"},
      {"--all --gpu v100", 2, "excludes"},
  };
  for (const auto& c : cases) {
    const auto r = run_shell(env() + erg() + " simulate zeus " + c.args);
    EXPECT_EQ(r.exit_code, c.exit_code) << c.args << ": " << r.err;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << c.args << ": " << r.err;
    EXPECT_TRUE(r.out.empty()) << c.args;
  }
}

TEST(ErgSimulateZeus, TraceDirOverridesTheDefault) {
  testing::TempDir dir;
  const std::string data = std::string(ERG_SOURCE_DIR) + "/optimizers/zeus_sim/data/";
  for (const char* f : {"summary_train.csv", "summary_power_v100.csv"}) {
    std::ifstream in(data + f, std::ios::binary);
    std::ofstream(dir.path() + "/" + f, std::ios::binary) << in.rdbuf();
  }
  auto r = run_shell(env() + erg() + " simulate zeus --all --json --trace-dir " + shell_quote(dir.path()));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  for (const auto& p : j["pairs"]) EXPECT_EQ(p["gpu"], "v100");
  EXPECT_EQ(j["pairs"].size(), 6u);
  r = run_shell(env() + erg() + " simulate zeus --gpu a40 --trace-dir " + shell_quote(dir.path()));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("no power trace for a40"), std::string::npos) << r.err;
  std::ofstream(dir.path() + "/summary_train.csv") << "garbage\n";
  r = run_shell(env() + erg() + " simulate zeus --gpu v100 --trace-dir " + shell_quote(dir.path()));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("summary_train.csv: line 1"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace erg
