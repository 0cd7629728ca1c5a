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

TEST(ErgPerseusServe, OnlineSchedulerNeedsNoPlan) {
  testing::BackgroundShell serve("exec " + erg() +
                                 " perseus serve --scheduler online --microbatches 2 --frequency-step 2 "
                                 "--listen 127.0.0.1:0 --json");
  std::string line;
  for (int i = 0; i < 400 && line.empty(); ++i) {
    const auto o = serve.out();
    if (o.find('\n') != std::string::npos)
      line = o.substr(0, o.find('\n'));
    else
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_FALSE(line.empty()) << serve.err();
  const json started = json::parse(line);
  EXPECT_EQ(started["scheduler"], "online");
  EXPECT_TRUE(started["plan_entries"].is_null());
  // Round 0 of a 2-stage job: every computation at the highest clock the ranks share.
  pf::server::Client job("127.0.0.1", started["port"].get<int>(), std::chrono::seconds(60));
  const auto id = job.register_job({"", 2, 1, 1, 2, std::nullopt});
  ASSERT_TRUE(id) << id.error().message;
  EXPECT_NE(id->find("+dp1+pp2+tp1+Online"), std::string::npos) << *id;
  std::vector<std::future<Result<pf::server::FrequencySchedule>>> ranks;
  for (int r = 0; r < 2; ++r)
    ranks.push_back(std::async(std::launch::async, [&, r]() -> Result<pf::server::FrequencySchedule> {
      pf::server::Client c("127.0.0.1", started["port"].get<int>(), std::chrono::seconds(60));
      if (auto ok = c.register_rank(*id, {r, 0, r, 0, {1410, 1300, 1200}}); !ok) return fail(ok.error());
      return c.get_schedule(*id, r);
    }));
  for (auto& f : ranks) {
    ASSERT_EQ(f.wait_for(std::chrono::seconds(60)), std::future_status::ready);
    const auto s = f.get();
    ASSERT_TRUE(s) << s.error().message;
    ASSERT_EQ(s->frequencies.size(), 4u);
    for (const auto& [instruction, mhz] : s->frequencies) EXPECT_EQ(mhz, 1410);
  }
  serve.signal(SIGTERM);
  EXPECT_EQ(serve.wait(std::chrono::seconds(20)), 0) << serve.err();

  struct Case {
    std::string args;
    std::string says;
  };
  for (const Case& c : std::vector<Case>{
           {"--scheduler online", "--scheduler online needs --microbatches"},
           {"--scheduler online --microbatches 2 --plan x.json", "the online scheduler makes its own plan"},
           {"--scheduler point-solution --plan x.json --microbatches 2", "--microbatches is for --scheduler online"},
           {"--scheduler point-solution-3d", "--plan is required"},
       }) {
    const auto r = run_shell(erg() + " perseus serve --listen 127.0.0.1:0 " + c.args);
    EXPECT_EQ(r.exit_code, 2) << c.args << ": " << r.err;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << c.args << ": " << r.err;
  }
}

TEST(ErgPerseusProfile, ProfilesASimulatedPipelineThatThePlannerPlans) {
  testing::TempDir dir;
  const std::string csv_path = dir.path() + "/profile.csv";
  const auto r = run_shell(erg() + " perseus profile --out " + shell_quote(csv_path) +
                           " --stages 2 --microbatches 4 --stage-load 1,1.3 --frequency-step 8 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["simulated"], true);
  EXPECT_EQ(j["spec"], "2xA100,cpus=0,seed=0");
  const auto& offered = j["frequencies_offered"];
  ASSERT_GE(offered.size(), 8u);
  EXPECT_EQ(offered[0], 1410);
  EXPECT_EQ(offered[1], 1410 - 8 * 15);  // every eighth of the A100's 15 MHz steps
  // Blocked A100s draw about their idle power (55 W in the simulator's model).
  const double p2p = j["p2p_power_w"];
  EXPECT_GT(p2p, 45.0);
  EXPECT_LT(p2p, 65.0);

  // The CSV is what the planner reads, with the rows the summary counts; times follow the device
  // model (30 ms forward at 1410 MHz for load 1, 39 ms for load 1.3, backward twice that).
  auto profile = pf::read_profile_csv(csv_path);
  ASSERT_TRUE(profile) << profile.error().message;
  EXPECT_EQ(profile->rows.size(), j["rows"].get<std::size_t>());
  for (const auto& row : profile->rows) {
    if (row.frequency_mhz != 1410) continue;
    const double want = 0.030 * (row.stage == 0 ? 1.0 : 1.3) * (row.instruction == pf::Instruction::kForward ? 1 : 2);
    EXPECT_NEAR(row.time_s, want, 0.003 * want) << row.stage << " " << pf::to_string(row.instruction);
    EXPECT_GT(row.energy_j, 0.0);
  }

  const std::string out = dir.path() + "/plans";
  const auto planned = run_shell(erg() + " perseus plan --profile " + shell_quote(csv_path) +
                                 " --stages 2 --microbatches 4 --unit-ms 0.25 --p2p-power-w " + std::to_string(p2p) +
                                 " --out " + shell_quote(out) + " --json");
  ASSERT_EQ(planned.exit_code, 0) << planned.err;
  const json frontier = json::parse(planned.out);
  const auto n = frontier["plans"].get<std::size_t>();
  ASSERT_GE(n, 2u);
  EXPECT_TRUE(std::filesystem::exists(out + "/plan_00000.json"));
  const auto& fastest = frontier["frontier"][n - 1];
  const auto& cheapest = frontier["frontier"][0];
  // The heavier stage bounds the iteration: 4 micro-batches x (39 + 78) ms at least, and the
  // 1F1B fill and drain (one more slot) at most, plus a unit per computation of rounding.
  EXPECT_GT(fastest["time_s"].get<double>(), 4 * 0.117);
  EXPECT_LT(fastest["time_s"].get<double>(), 5 * 0.117 + 16 * 0.00025);
  EXPECT_GT(cheapest["time_s"].get<double>(), fastest["time_s"].get<double>());
  EXPECT_GT(fastest["energy_j"].get<double>(), 0.0);

  struct Case {
    std::string args;
    std::string says;
  };
  for (const Case& c : std::vector<Case>{
           {"--out " + shell_quote(csv_path), "exists (use --overwrite"},
           {"--out x.csv --stages 2 --stage-load 1,2,3", "3 factors for 2 stages"},
           {"--out x.csv --sim-sku Nope", "unknown GPU"},
           {"--out x.csv --sim-sku MI300X", "choose an NVIDIA GPU"},
           {"--out x.csv --stages 0", "--stages"},
           {"--stages 2", "--out is required"},
       }) {
    const auto bad = run_shell(erg() + " perseus profile " + c.args);
    EXPECT_EQ(bad.exit_code, 2) << c.args << ": " << bad.err;
    EXPECT_NE(bad.err.find(c.says), std::string::npos) << c.args << ": " << bad.err;
  }
  EXPECT_FALSE(std::filesystem::exists("x.csv"));
  const auto help = run_shell(erg() + " perseus profile --help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("simulated"), std::string::npos) << help.out;
}

}  // namespace
}  // namespace erg
