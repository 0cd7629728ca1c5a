// End-to-end tests of `erg bso simulate` through the built binary: the trace replay through a
// live server gives what `erg simulate zeus` gives with the same seed, with its own server or
// with `erg bso serve` started here.

#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "process.hpp"

namespace erg {
namespace {

using nlohmann::json;
using testing::BackgroundShell;
using testing::run_shell;
using testing::shell_quote;

std::string erg() { return shell_quote(ERG_CLI_PATH); }

json in_process(const std::string& args) {
  const auto r = run_shell(erg() + " simulate zeus " + args + " --json");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return json::parse(r.out)["pairs"][0];
}

TEST(ErgBsoSimulate, ItsOwnServerConvergesAsTheInProcessSimulator) {
  const std::string args = "--gpu v100 --workload librispeech --seed 1 --recurrences 40";
  const auto r = run_shell(erg() + " bso simulate " + args + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_TRUE(j["simulated"].get<bool>());
  EXPECT_EQ(j["kind"], "trace-driven");
  EXPECT_EQ(j["chosen_from"], "optimizer");
  EXPECT_EQ(j["job_id"].get<std::string>().rfind("erg-bso-simulate-", 0), 0u) << j["job_id"];
  ASSERT_EQ(j["history"].size(), 40u);
  const json z = in_process(args);
  // Every figure of the pair (converged, totals, baseline, optimum) is the in-process one.
  EXPECT_EQ(j["pair"], z);
  EXPECT_EQ(j["chosen_batch_size"], z["converged"]["batch_size"]);

  const auto text = run_shell(erg() + " bso simulate " + args);
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("chosen batch size: " + std::to_string(j["chosen_batch_size"].get<int>())), std::string::npos)
      << text.out;
}

TEST(ErgBsoSimulate, AgainstErgBsoServe) {
  testing::TempDir dir;
  BackgroundShell serve("exec " + erg() + " bso serve --db sqlite:///" + dir.path() +
                        "/bso.db --listen 127.0.0.1:0 --json");
  std::string line;
  for (int i = 0; i < 400 && line.empty(); ++i) {
    const auto out = serve.out();
    if (out.find('\n') != std::string::npos)
      line = out.substr(0, out.find('\n'));
    else
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_FALSE(line.empty()) << serve.err();
  const std::string url = json::parse(line)["url"];
  const std::string args = "--gpu a40 --workload movielens-1m --seed 3 --recurrences 12";
  const auto r = run_shell(erg() + " bso simulate " + args + " --server " + url + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["server"], url);
  EXPECT_EQ(j["chosen_from"], "last_run");  // the server has no route for the optimizer's best
  EXPECT_EQ(j["chosen_batch_size"], j["history"].back()["batch_size"]);
  const json z = in_process(args);
  EXPECT_EQ(j["pair"]["erg"], z["erg"]);  // the same runs
}

TEST(ErgBsoSimulate, UsageErrors) {
  EXPECT_EQ(run_shell(erg() + " bso simulate --gpu v100 --workload nope").exit_code, 2);
  EXPECT_EQ(run_shell(erg() + " bso simulate --gpu h100 --workload cifar100").exit_code, 2);
  EXPECT_EQ(run_shell(erg() + " bso simulate --gpu v100 --workload cifar100 --server ftp://x").exit_code, 2);
  const auto both =
      run_shell(erg() + " bso simulate --gpu v100 --workload cifar100 --db sqlite:///x.db --server http://y:1");
  EXPECT_EQ(both.exit_code, 2) << both.err;
  const auto down = run_shell(erg() + " bso simulate --gpu v100 --workload cifar100 --server http://127.0.0.1:1");
  EXPECT_EQ(down.exit_code, 1);
  EXPECT_NE(down.err.find("cannot reach"), std::string::npos) << down.err;
}

}  // namespace
}  // namespace erg
