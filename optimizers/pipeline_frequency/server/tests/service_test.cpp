// The Perseus service without HTTP: job ids, validation, the per-job state machine, the plans'
// schedulers, dumps, idle eviction and the dead-rank rule.

#include "erg/optimizers/pipeline_frequency/server/service.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <future>
#include <nlohmann/json.hpp>
#include <regex>
#include <thread>

namespace erg::pipeline_frequency::server {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

/// Two stages: stage 0 at 1410/1200 MHz, stage 1 at 1000/900 MHz.
StageFrequencies two_stages() {
  return {{{Instruction::kForward, 1410}, {Instruction::kBackward, 1200}},
          {{Instruction::kForward, 1000}, {Instruction::kBackward, 900}}};
}

std::string job_body(int dp, int pp, int tp, std::optional<std::string> meta = std::nullopt) {
  json j{{"job_id", ""}, {"dp_degree", dp}, {"pp_degree", pp}, {"tp_degree", tp}, {"world_size", dp * pp * tp}};
  if (meta) j["job_metadata"] = *meta;
  return j.dump();
}
/// Rank r of a dp x pp job: pp_rank = r % pp, dp_rank = r / pp.
std::string rank_body(int rank, int pp) {
  return json{{"rank", rank},
              {"dp_rank", rank / pp},
              {"pp_rank", rank % pp},
              {"tp_rank", 0},
              {"available_frequencies", {1410, 1200, 1000, 900}}}
      .dump();
}
std::string result_body(int rank, double time_s = 1.0, double energy_j = 100.0) {
  return json{{"rank", rank},
              {"iter_time", {time_s}},
              {"iter_energy", {energy_j}},
              {"time_breakdown", {{"forward", {{0.1, 0.2}}}}},
              {"energy_breakdown", json::object()}}
      .dump();
}

/// A wall clock the test moves.
struct FakeClock {
  std::atomic<std::int64_t> seconds{1'795'000'000};
  std::function<std::chrono::system_clock::time_point()> fn() {
    return [this] { return std::chrono::system_clock::time_point(std::chrono::seconds(seconds.load())); };
  }
};

ServiceOptions options_3d(FakeClock* clock = nullptr) {
  ServiceOptions o;
  o.scheduler = {SchedulerKind::kPointSolution3D, two_stages()};
  if (clock) o.clock = clock->fn();
  return o;
}

std::string id_of(const Reply& r) {
  EXPECT_EQ(r.status, 200) << r.body;
  return json::parse(r.body).get<std::string>();
}

/// Registers a dp x pp job and all its ranks; returns the id.
std::string register_all(Service& s, int dp, int pp) {
  const auto id = id_of(s.register_job(job_body(dp, pp, 1)));
  for (int r = 0; r < dp * pp; ++r) EXPECT_EQ(s.register_rank(id, rank_body(r, pp)).status, 200);
  return id;
}

json frequencies(const Reply& r) {
  EXPECT_EQ(r.status, 200) << r.body;
  return json::parse(r.body)["frequencies"];
}

TEST(PerseusService, JobIdIsZeusFormatInLocalTime) {
  ::setenv("TZ", "UTC", 1);
  ::tzset();
  std::tm tm{};
  tm.tm_year = 2026 - 1900;
  tm.tm_mon = 10;
  tm.tm_mday = 25;
  tm.tm_hour = 23;
  tm.tm_min = 1;
  tm.tm_sec = 6;
  FakeClock clock;
  clock.seconds = ::timegm(&tm);
  auto zeus_ids = options_3d(&clock);
  zeus_ids.id_nonce = {};  // Zeus's own format; erg's default adds an unguessable part (below)
  Service s(zeus_ids);
  EXPECT_EQ(id_of(s.register_job(job_body(2, 2, 1))), "2026-11-25-23-01-06+dp2+pp2+tp1+PointSolution3D");
  EXPECT_EQ(id_of(s.register_job(job_body(2, 2, 1, "llama-7b"))),
            "2026-11-25-23-01-06+dp2+pp2+tp1+PointSolution3D+llama-7b");
  // The same configuration within the same second names the same job: refused, not merged.
  EXPECT_EQ(s.register_job(job_body(2, 2, 1)).status, 409);
  clock.seconds += 1;
  EXPECT_EQ(id_of(s.register_job(job_body(2, 2, 1))), "2026-11-25-23-01-07+dp2+pp2+tp1+PointSolution3D");

  ServiceOptions plain;
  plain.scheduler = {SchedulerKind::kPointSolution, two_stages()};
  plain.clock = clock.fn();
  plain.id_nonce = {};
  Service p(plain);
  EXPECT_EQ(id_of(p.register_job(job_body(1, 2, 1))), "2026-11-25-23-01-07+dp1+pp2+tp1+PointSolution");
}

// A job belongs to the local user that registered it: another local user is refused its ranks,
// schedules, results and state (issue 31 item 5); root is not; a peer on another host has no uid
// and is let in by the job id, which it cannot guess.
TEST(PerseusService, AnotherLocalUserIsRefusedTheJob) {
  Service s(options_3d());
  const Caller owner{.in_process = false, .uid = 1000, .token = ""};
  const Caller other{.in_process = false, .uid = 1001, .token = ""};
  const Caller root{.in_process = false, .uid = 0, .token = ""};
  const Caller remote{.in_process = false, .uid = std::nullopt, .token = ""};
  const std::string id = id_of(s.register_job(job_body(1, 2, 1), owner));
  ASSERT_FALSE(id.empty());
  const Reply taken = s.register_rank(id, rank_body(1, 2), other);
  EXPECT_EQ(taken.status, 403) << taken.body;
  EXPECT_EQ(s.get_state(id, other).status, 403);
  EXPECT_EQ(s.get_schedule(id, "0", {}, other).status, 403);
  EXPECT_EQ(s.post_result(id, result_body(0), other).status, 403);
  EXPECT_EQ(s.register_rank(id, rank_body(1, 2), root).status, 200);
  EXPECT_EQ(s.register_rank(id, rank_body(0, 2), remote).status, 200);
  EXPECT_EQ(s.get_state(id, owner).status, 200);
}

// Zeus's ids are the clock and the configuration: another local user can name a new job's id
// and take its ranks (issue 31 item 5). erg's default id carries 64 random bits before the
// metadata, so the same configuration in the same second gives two jobs, not a 409.
TEST(PerseusService, JobIdsCannotBeGuessed) {
  FakeClock clock;
  clock.seconds = 1'800'000'000;
  Service s(options_3d(&clock));
  const std::string a = id_of(s.register_job(job_body(2, 2, 1, "llama")));
  const std::string b = id_of(s.register_job(job_body(2, 2, 1, "llama")));
  ASSERT_FALSE(a.empty());
  ASSERT_FALSE(b.empty());
  EXPECT_NE(a, b);
  const std::regex shape(R"(\d{4}-\d\d-\d\d-\d\d-\d\d-\d\d\+dp2\+pp2\+tp1\+PointSolution3D\+[0-9a-f]{16}\+llama)");
  EXPECT_TRUE(std::regex_match(a, shape)) << a;
  EXPECT_TRUE(std::regex_match(b, shape)) << b;
}

TEST(PerseusService, RegisterJobRejectsBadBodies) {
  Service s(options_3d());
  auto expect_422 = [&](const std::string& body, const json& loc) {
    const auto r = s.register_job(body);
    EXPECT_EQ(r.status, 422) << body;
    const auto j = json::parse(r.body);
    EXPECT_EQ(j["detail"][0]["loc"], loc) << r.body;
    EXPECT_TRUE(j["message"].is_string());
  };
  expect_422("{not json", json::array({"body"}));
  expect_422("[1, 2]", json::array({"body"}));
  expect_422(R"({"dp_degree": "2", "pp_degree": 2, "tp_degree": 1, "world_size": 4})",
             json::array({"body", "dp_degree"}));
  expect_422(R"({"dp_degree": 2.5, "pp_degree": 2, "tp_degree": 1, "world_size": 4})",
             json::array({"body", "dp_degree"}));
  expect_422(R"({"dp_degree": 2, "tp_degree": 1, "world_size": 4})", json::array({"body", "pp_degree"}));
  expect_422(R"({"dp_degree": 2, "pp_degree": 2, "tp_degree": 1, "world_size": 5})",
             json::array({"body", "world_size"}));
  expect_422(R"({"dp_degree": 0, "pp_degree": 2, "tp_degree": 1, "world_size": 0})",
             json::array({"body", "dp_degree"}));
  expect_422(R"({"dp_degree": 2, "pp_degree": 2, "tp_degree": 1, "world_size": 4, "extra": 1})",
             json::array({"body", "extra"}));
  expect_422(R"({"dp_degree": 2, "pp_degree": 2, "tp_degree": 1, "world_size": 4, "job_metadata": 7})",
             json::array({"body", "job_metadata"}));
  // The plan has two stages: a three-stage job cannot use it (400, the message says why).
  const auto r = s.register_job(job_body(1, 3, 1));
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(json::parse(r.body)["message"].get<std::string>().find("needs 3"), std::string::npos) << r.body;
}

TEST(PerseusService, PlainPointSolutionNeedsOneEntryPerRank) {
  ServiceOptions o;
  o.scheduler = {SchedulerKind::kPointSolution, two_stages()};
  Service s(o);
  EXPECT_EQ(s.register_job(job_body(2, 2, 1)).status, 400);  // 4 ranks, 2 entries
  const auto id = id_of(s.register_job(job_body(2, 1, 1)));  // 2 ranks, 2 entries: entry = rank
  ASSERT_EQ(s.register_rank(id, rank_body(0, 1)).status, 200);
  ASSERT_EQ(s.register_rank(id, rank_body(1, 1)).status, 200);
  auto f0 = std::async(std::launch::async, [&] { return s.get_schedule(id, "0"); });
  const auto f1 = frequencies(s.get_schedule(id, "1"));
  EXPECT_EQ(frequencies(f0.get()), json::parse(R"([["forward",1410],["backward",1200]])"));
  EXPECT_EQ(f1, json::parse(R"([["forward",1000],["backward",900]])"));
}

TEST(PerseusService, UnknownJobsAndBadRanks) {
  Service s(options_3d());
  EXPECT_EQ(s.register_rank("nope", rank_body(0, 1)).status, 404);
  EXPECT_EQ(s.get_schedule("nope", "0").status, 404);
  EXPECT_EQ(s.post_result("nope", result_body(0)).status, 404);
  EXPECT_EQ(json::parse(s.get_schedule("nope", "0").body)["message"], "unknown job nope");

  const auto id = id_of(s.register_job(job_body(2, 2, 1)));
  EXPECT_EQ(s.get_schedule(id, std::nullopt).status, 422);
  EXPECT_EQ(json::parse(s.get_schedule(id, std::nullopt).body)["detail"][0]["loc"], json::parse(R"(["query","rank"])"));
  EXPECT_EQ(s.get_schedule(id, "x").status, 422);
  EXPECT_EQ(s.get_schedule(id, "1x").status, 422);
  EXPECT_EQ(s.get_schedule(id, "4").status, 400);
  EXPECT_EQ(s.get_schedule(id, "0").status, 400);  // not registered yet
  EXPECT_EQ(s.register_rank(id, "{").status, 422);
  EXPECT_EQ(s.register_rank(id, R"({"rank": 0, "dp_rank": 0, "pp_rank": 0, "tp_rank": 0})").status, 422);
  EXPECT_EQ(s.register_rank(id, R"({"rank": 0, "dp_rank": 0, "pp_rank": 0, "tp_rank": 0,
                                   "available_frequencies": [1410, "x"]})")
                .status,
            422);
  EXPECT_EQ(s.register_rank(id, rank_body(4, 2)).status, 400);  // rank out of range
  EXPECT_EQ(s.register_rank(id, R"({"rank": 0, "dp_rank": 0, "pp_rank": 2, "tp_rank": 0,
                                   "available_frequencies": []})")
                .status,
            400);  // pp_rank out of range
  EXPECT_EQ(s.register_rank(id, rank_body(0, 2)).status, 200);
  EXPECT_EQ(s.register_rank(id, rank_body(0, 2)).status, 200);  // the same again: no change
  EXPECT_EQ(s.register_rank(id, R"({"rank": 0, "dp_rank": 1, "pp_rank": 0, "tp_rank": 0,
                                   "available_frequencies": []})")
                .status,
            409);
  EXPECT_EQ(s.post_result(id, result_body(0)).status, 409);  // no schedule yet
  EXPECT_EQ(s.post_result(id, R"({"rank": 0, "iter_time": "1", "iter_energy": []})").status, 422);
  EXPECT_EQ(s.post_result(id, R"({"rank": 0, "iter_time": [1], "iter_energy": [], "time_breakdown": []})").status, 422);
  EXPECT_EQ(s.post_result(id, result_body(7)).status, 400);
}

TEST(PerseusService, RoundsNeedEveryResultBeforeTheNextAsk) {
  ServiceOptions o;
  o.scheduler = {SchedulerKind::kPointSolution3D, {two_stages()[0]}};
  Service s(o);
  const auto id = register_all(s, 1, 1);
  EXPECT_EQ(s.post_result(id, result_body(0)).status, 409);  // before any schedule
  for (int round = 0; round < 3; ++round) {
    const auto r = s.get_schedule(id, "0");  // one rank: nobody else to wait for
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(json::parse(r.body), json::parse(R"({"rank":0,"frequencies":[["forward",1410],["backward",1200]]})"));
    EXPECT_EQ(s.get_schedule(id, "0").status, 409) << "asked again without posting round " << round;
    EXPECT_EQ(s.post_result(id, result_body(0)).status, 200);
    EXPECT_EQ(s.post_result(id, result_body(0)).status, 409) << "posted twice in round " << round;
  }
}

TEST(PerseusService, ThreeDCopiesEachStageToItsDataParallelRanks) {
  Service s(options_3d());
  const auto id = register_all(s, 2, 2);  // ranks 0,2 are stage 0; 1,3 stage 1
  std::vector<std::future<Reply>> f;
  for (int r = 0; r < 4; ++r)
    f.push_back(std::async(std::launch::async, [&, r] { return s.get_schedule(id, std::to_string(r)); }));
  const auto stage0 = json::parse(R"([["forward",1410],["backward",1200]])");
  const auto stage1 = json::parse(R"([["forward",1000],["backward",900]])");
  for (int r = 0; r < 4; ++r) {
    const auto reply = f[static_cast<std::size_t>(r)].get();
    EXPECT_EQ(json::parse(reply.body)["rank"], r);
    EXPECT_EQ(frequencies(reply), r % 2 == 0 ? stage0 : stage1) << "rank " << r;
  }
}

TEST(PerseusService, DumpsRanksSchedulesAndResults) {
  const auto dir = std::filesystem::temp_directory_path() / ("erg-perseus-dump-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  auto o = options_3d();
  o.dump_data = true;
  o.dump_dir = dir;
  Service s(o);
  const auto id = register_all(s, 1, 2);
  auto read = [&](const char* name) {
    std::ifstream in(dir / id / name);
    EXPECT_TRUE(in.good()) << (dir / id / name);
    return json::parse(in, nullptr, false);
  };
  const auto ranks = read("ranks.json");
  ASSERT_EQ(ranks.size(), 2u);
  EXPECT_EQ(ranks[1]["pp_rank"], 1);
  EXPECT_EQ(ranks[1]["available_frequencies"], json::parse("[1410,1200,1000,900]"));
  for (int round = 0; round < 2; ++round) {
    auto f0 = std::async(std::launch::async, [&] { return s.get_schedule(id, "0"); });
    ASSERT_EQ(s.get_schedule(id, "1").status, 200);
    ASSERT_EQ(f0.get().status, 200);
    const auto sched = read((std::to_string(round) + ".sched.json").c_str());
    EXPECT_EQ(sched[1]["frequencies"], json::parse(R"([["forward",1000],["backward",900]])"));
    EXPECT_FALSE(std::filesystem::exists(dir / id / (std::to_string(round) + ".prof.json")));
    ASSERT_EQ(s.post_result(id, result_body(0, 1.0 + round, 100)).status, 200);
    ASSERT_EQ(s.post_result(id, result_body(1, 2.0, 50)).status, 200);
    const auto prof = read((std::to_string(round) + ".prof.json").c_str());
    ASSERT_EQ(prof.size(), 2u);
    EXPECT_EQ(prof[0]["iter_time"][0], 1.0 + round);
    EXPECT_EQ(prof[1]["iter_energy"][0], 50.0);
    EXPECT_EQ(prof[0]["time_breakdown"]["forward"], json::parse("[[0.1,0.2]]"));
  }
  std::filesystem::remove_all(dir);
}

TEST(PerseusService, IdleJobsAreEvicted) {
  FakeClock clock;
  auto o = options_3d(&clock);
  o.max_job_idle_time = 10s;
  Service s(o);
  const auto id = id_of(s.register_job(job_body(1, 2, 1)));
  clock.seconds += 8;
  EXPECT_EQ(s.register_rank(id, rank_body(0, 2)).status, 200);  // a request keeps it alive
  clock.seconds += 8;
  EXPECT_EQ(s.evict_idle(), 0u);
  EXPECT_TRUE(s.has_job(id));
  clock.seconds += 3;  // 11 s since the last request
  EXPECT_EQ(s.evict_idle(), 1u);
  EXPECT_FALSE(s.has_job(id));
  EXPECT_EQ(s.register_rank(id, rank_body(1, 2)).status, 404);

  // Requests evict too, without the sweeper.
  const auto other = id_of(s.register_job(job_body(1, 2, 1, "b")));
  clock.seconds += 11;
  EXPECT_EQ(s.get_schedule(other, "0").status, 404);
}

TEST(PerseusService, DeadRankEvictsTheJobWithinTheTimeout) {
  auto o = options_3d();
  o.rank_timeout = 200ms;
  Service s(o);
  const auto id = register_all(s, 2, 2);
  // Ranks 0 and 2 ask; 1 and 3 never do.
  const auto start = std::chrono::steady_clock::now();
  auto f0 = std::async(std::launch::async, [&] { return s.get_schedule(id, "0"); });
  auto f2 = std::async(std::launch::async, [&] { return s.get_schedule(id, "2"); });
  // A hang would fail here rather than block the suite.
  ASSERT_EQ(f0.wait_for(10s), std::future_status::ready);
  ASSERT_EQ(f2.wait_for(10s), std::future_status::ready);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
  for (auto* f : {&f0, &f2}) {
    const auto r = f->get();
    EXPECT_EQ(r.status, 504) << r.body;
    EXPECT_NE(r.body.find("rank(s) [1, 3] did not ask for round 0"), std::string::npos) << r.body;
  }
  EXPECT_FALSE(s.has_job(id));
  EXPECT_EQ(s.get_schedule(id, "1").status, 404);
}

TEST(PerseusService, CloseWakesWaitingRanks) {
  Service s(options_3d());
  const auto id = register_all(s, 1, 2);
  auto f0 = std::async(std::launch::async, [&] { return s.get_schedule(id, "0"); });
  // Until rank 0 waits, close() would only refuse it; either way it answers 503.
  s.close();
  ASSERT_EQ(f0.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(f0.get().status, 503);
  EXPECT_EQ(s.register_job(job_body(1, 2, 1)).status, 503);
}

TEST(PerseusPlan, ReadsErgJsonAndZeusFiles) {
  const auto from_json = parse_plan(R"({"index": 3, "frequencies": [[["forward", 1410], ["backward", 1200]],
                                       [["forward", 1000], ["backward", 900]]]})");
  ASSERT_TRUE(from_json) << from_json.error().message;
  EXPECT_EQ(*from_json, two_stages());
  const auto from_zeus = parse_plan(
      "[[(\"forward\", 1410), (\"backward\", 1200)],\n"
      " [('forward', 1000), ('backward', 900)]]\n# time 1.0\n");
  ASSERT_TRUE(from_zeus) << from_zeus.error().message;
  EXPECT_EQ(*from_zeus, two_stages());
  EXPECT_FALSE(parse_plan(R"({"frequencies": [[["sideways", 1410]]]})"));
  EXPECT_FALSE(parse_plan(R"({"frequencies": [[["forward", "1410"]]]})"));
  EXPECT_FALSE(parse_plan(R"({"plans": []})"));
  EXPECT_FALSE(parse_plan("__import__('os')"));
}

TEST(PerseusPlan, AggregatesByStageAsZeus3D) {
  std::vector<RankInfo> ranks{{0, 0, 0, 0, {}}, {1, 0, 1, 0, {}}, {2, 1, 0, 0, {}}, {3, 1, 1, 0, {}}};
  std::vector<ProfilingResult> results(4);
  for (int r = 0; r < 4; ++r) results[static_cast<std::size_t>(r)] = {r, {1.0 + r}, {10.0 * (r + 1)}, {}, {}};
  const auto stages = aggregate_by_stage(results, ranks, 2);
  ASSERT_EQ(stages.size(), 2u);
  EXPECT_EQ(stages[0].rank, 0);
  EXPECT_EQ(stages[0].iter_time, std::vector<double>{3.0});     // max(1, 3)
  EXPECT_EQ(stages[0].iter_energy, std::vector<double>{40.0});  // 10 + 30
  EXPECT_EQ(stages[1].iter_time, std::vector<double>{4.0});
  EXPECT_EQ(stages[1].iter_energy, std::vector<double>{60.0});
}

}  // namespace
}  // namespace erg::pipeline_frequency::server
