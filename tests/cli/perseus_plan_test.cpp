// End-to-end tests of `erg perseus plan` through the built binary.

#include <gtest/gtest.h>

#include <array>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <future>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>

#include "erg/optimizers/pipeline_frequency/planner.hpp"
#include "erg/optimizers/pipeline_frequency/server/client.hpp"
#include "erg/optimizers/pipeline_frequency/synthetic_profile.hpp"
#include "process.hpp"

namespace erg {
namespace {

using nlohmann::json;
using testing::run_shell;
using testing::shell_quote;
namespace pf = pipeline_frequency;

std::string erg() { return shell_quote(ERG_CLI_PATH); }

std::string csv(const pf::Profile& p) {
  std::ostringstream out;
  out.precision(17);
  out << "stage,instruction,frequency,time,energy\n";
  for (const auto& r : p.rows)
    out << r.stage << "," << pf::to_string(r.instruction) << "," << r.frequency_mhz << "," << r.time_s << ","
        << r.energy_j << "\n";
  return out.str();
}

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(ErgPerseusPlan, WritesTheFrontierAndEveryPlan) {
  testing::TempDir dir;
  constexpr std::array<int, 6> kMhz = {1410, 1170, 930, 690, 450, 210};
  const auto profile = pf::synthetic_profile(2, kMhz);
  std::ofstream(dir.path() + "/profile.csv") << csv(profile);
  const std::string out = dir.path() + "/plans";
  const auto r = run_shell(erg() + " perseus plan --profile " + shell_quote(dir.path() + "/profile.csv") +
                           " --stages 2 --microbatches 3 --out " + shell_quote(out) + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["stages"], 2);
  EXPECT_EQ(j["micro_batches"], 3);
  EXPECT_DOUBLE_EQ(j["unit_s"].get<double>(), 0.001);
  const auto n = j["plans"].get<std::size_t>();
  ASSERT_GE(n, 10u);
  ASSERT_EQ(j["frontier"].size(), n);
  for (std::size_t i = 1; i < n; ++i) {
    EXPECT_LT(j["frontier"][i]["time_s"].get<double>(), j["frontier"][i - 1]["time_s"].get<double>());
    EXPECT_GE(j["frontier"][i]["cost_j"].get<double>(), j["frontier"][i - 1]["cost_j"].get<double>());
  }
  // Same frontier as the library's; each plan as JSON and as Zeus's file, which reads back as data.
  const auto lib = pf::plan_pipeline(profile, {2, 3, 0.001, 70.0});
  ASSERT_TRUE(lib);
  ASSERT_EQ(lib->plans.size(), n);
  const json all = json::parse(read(out + "/frontier.json"));
  EXPECT_EQ(all["plans"].size(), n);
  for (std::size_t i = 0; i < n; i += n / 5) {
    char zeus[64], plan[64];
    std::snprintf(zeus, sizeof zeus, "/freqs_pipeline_%05zu.py", i);
    std::snprintf(plan, sizeof plan, "/plan_%05zu.json", i);
    const auto parsed = pf::parse_zeus_plan_file(read(out + zeus));
    ASSERT_TRUE(parsed) << parsed.error().message;
    EXPECT_EQ(*parsed, lib->plans[i].frequencies);
    const json p = json::parse(read(out + plan));
    EXPECT_EQ(p["time_units"], lib->plans[i].time_units);
    EXPECT_EQ(p["frequencies"], all["plans"][i]["frequencies"]);
  }
  // A second run refuses a used directory unless told to replace the plans.
  const std::string again = erg() + " perseus plan --profile " + shell_quote(dir.path() + "/profile.csv") +
                            " --stages 2 --microbatches 2 --out " + shell_quote(out);
  auto r2 = run_shell(again);
  EXPECT_EQ(r2.exit_code, 2);
  EXPECT_NE(r2.err.find("is not empty"), std::string::npos) << r2.err;
  r2 = run_shell(again + " --overwrite");
  ASSERT_EQ(r2.exit_code, 0) << r2.err;
  EXPECT_NE(r2.out.find("plans in"), std::string::npos) << r2.out;
  const auto fewer = json::parse(read(out + "/frontier.json"))["plans"].size();
  std::size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(out)) files += e.path().extension() == ".py";
  EXPECT_EQ(files, fewer);  // no plan left over from the longer run
}

TEST(ErgPerseusPlan, ClearErrors) {
  testing::TempDir dir;
  const std::string head = "stage,instruction,frequency,time,energy\n";
  auto file = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir.path() + "/" + name) << text;
    return shell_quote(dir.path() + "/" + name);
  };
  const std::string good = head + "0,forward,1410,0.010,3\n0,backward,1410,0.020,6\n";
  struct Case {
    std::string args;
    int exit_code;
    std::string says;
  } cases[] = {
      {"--profile " + file("nocol.csv", "stage,instruction,frequency,time\n0,forward,1410,0.1\n") +
           " --stages 1 --microbatches 2",
       2, "the header has no 'energy' column"},
      {"--profile " + file("nan.csv", head + "0,forward,1410,abc,3\n") + " --stages 1 --microbatches 2", 2,
       "line 2, column time: 'abc' is not a number"},
      {"--profile " + file("good.csv", good) + " --stages 2 --microbatches 2", 2,
       "--stages 2: the profile has 1 stage (0 to 0), the pipeline 2"},
      {"--profile " + file("half.csv", head + "0,forward,1410,0.010,3\n") + " --stages 1 --microbatches 2", 2,
       "no rows for stage 0 backward"},
      {"--profile " + shell_quote(dir.path() + "/missing.csv") + " --stages 1 --microbatches 2", 2, "no such file"},
      {"--profile " + file("good2.csv", good) + " --stages 1 --microbatches 0", 2, "--microbatches"},
      {"--profile " + file("good3.csv", good) + " --stages 1 --microbatches 2 --unit-ms 0", 2,
       "must be greater than 0"},
      {"--stages 1 --microbatches 2", 2, "--profile is required"},
  };
  for (const auto& c : cases) {
    const auto r = run_shell(erg() + " perseus plan " + c.args + " --out " + shell_quote(dir.path() + "/out"));
    EXPECT_EQ(r.exit_code, c.exit_code) << c.args << ": " << r.err;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << c.args << ": " << r.err;
    EXPECT_TRUE(r.out.empty()) << c.args;
  }
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/out"));  // nothing written on an error
  const auto help = run_shell(erg() + " perseus plan --help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("--microbatches"), std::string::npos) << help.out;
}

TEST(ErgPerseusServe, ServesAPlanThePlannerWrote) {
  testing::TempDir dir;
  constexpr std::array<int, 4> kMhz = {1410, 1170, 930, 690};
  std::ofstream(dir.path() + "/profile.csv") << csv(pf::synthetic_profile(2, kMhz));
  const std::string out = dir.path() + "/plans";
  const auto planned = run_shell(erg() + " perseus plan --profile " + shell_quote(dir.path() + "/profile.csv") +
                                 " --stages 2 --microbatches 2 --out " + shell_quote(out) + " --json");
  ASSERT_EQ(planned.exit_code, 0) << planned.err;
  const std::string plan = out + "/plan_00000.json";
  const json expected = json::parse(read(plan))["frequencies"];

  testing::BackgroundShell serve("exec " + erg() + " perseus serve --plan " + shell_quote(plan) +
                                 " --scheduler point-solution-3d --listen 127.0.0.1:0 --json");
  std::string line;
  for (int i = 0; i < 400 && line.empty(); ++i) {
    const auto o = serve.out();
    if (o.find('\n') != std::string::npos)
      line = o.substr(0, o.find('\n'));
    else
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_FALSE(line.empty()) << serve.err();
  const int port = json::parse(line)["port"];
  EXPECT_EQ(json::parse(line)["plan_entries"], 2);

  // Two data-parallel copies of a 2-stage pipeline: each stage's plan entry reaches both.
  pf::server::Client job("127.0.0.1", port, std::chrono::seconds(60));
  const auto id = job.register_job({"", 2, 2, 1, 4, "e2e"});
  ASSERT_TRUE(id) << id.error().message;
  std::vector<std::future<Result<pf::server::FrequencySchedule>>> ranks;
  for (int r = 0; r < 4; ++r)
    ranks.push_back(std::async(std::launch::async, [&, r]() -> Result<pf::server::FrequencySchedule> {
      pf::server::Client c("127.0.0.1", port, std::chrono::seconds(60));
      if (auto ok = c.register_rank(*id, {r, r / 2, r % 2, 0, {1410, 1170, 930, 690}}); !ok) return fail(ok.error());
      return c.get_schedule(*id, r);
    }));
  for (int r = 0; r < 4; ++r) {
    ASSERT_EQ(ranks[static_cast<std::size_t>(r)].wait_for(std::chrono::seconds(60)), std::future_status::ready);
    const auto s = ranks[static_cast<std::size_t>(r)].get();
    ASSERT_TRUE(s) << s.error().message;
    json got = json::array();
    for (const auto& [instruction, mhz] : s->frequencies) got.push_back(json::array({instruction, mhz}));
    EXPECT_EQ(got, expected[static_cast<std::size_t>(r % 2)]) << "rank " << r;
  }
  serve.signal(SIGTERM);
  EXPECT_EQ(serve.wait(std::chrono::seconds(20)), 0) << serve.err();

  const auto bad = run_shell(erg() + " perseus serve --plan " + shell_quote(dir.path() + "/profile.csv"));
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--plan"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace erg
