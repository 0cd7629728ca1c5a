// The Perseus server over loopback HTTP: the endpoint matrix with Zeus's bodies, four ranks in
// lock-step through the C++ client, and a rank that dies.

#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <future>
#include <nlohmann/json.hpp>
#include <thread>

#include "erg/optimizers/pipeline_frequency/server/client.hpp"
#include "erg/optimizers/pipeline_frequency/server/http_server.hpp"

namespace erg::pipeline_frequency::server {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

/// A service and server on a free loopback port, serving on a thread.
class Running {
 public:
  explicit Running(ServiceOptions options) : service_(std::move(options)) {
    auto s = HttpServer::bind(service_, HttpOptions{});
    EXPECT_TRUE(s) << s.error().message;
    server_ = std::move(*s);
    thread_ = std::thread([this] { server_->run(); });
    server_->wait_until_ready();
  }
  ~Running() {
    server_->stop();
    thread_.join();
  }
  int port() const { return server_->port(); }
  Service& service() { return service_; }

 private:
  Service service_;
  std::unique_ptr<HttpServer> server_;
  std::thread thread_;
};

ServiceOptions options(std::chrono::milliseconds rank_timeout = 30s) {
  ServiceOptions o;
  o.scheduler = {SchedulerKind::kPointSolution3D,
                 {{{Instruction::kForward, 1410}, {Instruction::kBackward, 1200}},
                  {{Instruction::kForward, 1000}, {Instruction::kBackward, 900}}}};
  o.rank_timeout = rank_timeout;
  return o;
}

RankInfo rank_info(int rank) { return {rank, rank / 2, rank % 2, 0, {1410, 1200, 1000, 900}}; }

TEST(PerseusHttp, EndpointsAnswerZeusBodiesAndStatuses) {
  Running server(options());
  httplib::Client c("127.0.0.1", server.port());
  const std::string job = R"({"job_id": "", "dp_degree": 1, "pp_degree": 2, "tp_degree": 1, "world_size": 2})";
  auto res = c.Post("/register_job", job, "application/json");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200);
  const auto id = json::parse(res->body).get<std::string>();
  EXPECT_NE(id.find("+dp1+pp2+tp1+PointSolution3D"), std::string::npos) << id;
  // The id holds '+': sent raw or percent-encoded, it names the same job.
  const std::string rank0 = R"({"rank": 0, "dp_rank": 0, "pp_rank": 0, "tp_rank": 0, "available_frequencies": [1410]})";
  res = c.Post(("/register_rank/" + id).c_str(), rank0, "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->body, "null");

  struct Case {
    const char* method;
    std::string path;
    std::string body;
    int status;
  };
  const std::vector<Case> cases{
      {"POST", "/register_job", "{", 422},
      {"POST", "/register_job", R"({"dp_degree": "1", "pp_degree": 2, "tp_degree": 1, "world_size": 2})", 422},
      {"POST", "/register_job", R"({"dp_degree": 1, "pp_degree": 3, "tp_degree": 1, "world_size": 3})", 400},
      {"POST", "/register_rank/nope", rank0, 404},
      {"POST", "/register_rank/" + id, "{", 422},
      {"POST", "/register_rank/" + id,
       R"({"rank": 5, "dp_rank": 0, "pp_rank": 0, "tp_rank": 0, "available_frequencies": []})", 400},
      {"GET", "/schedule/nope?rank=0", "", 404},
      {"GET", "/schedule/" + id, "", 422},
      {"GET", "/schedule/" + id + "?rank=one", "", 422},
      {"GET", "/schedule/" + id + "?rank=1", "", 400},  // rank 1 has not registered
      {"POST", "/result/nope", R"({"rank": 0, "iter_time": [1], "iter_energy": [1]})", 404},
      {"POST", "/result/" + id, R"({"rank": 0, "iter_time": [1]})", 422},
      {"POST", "/result/" + id, R"({"rank": 0, "iter_time": [1], "iter_energy": [1]})", 409},
      {"GET", "/state/nope", "", 404},
      {"GET", "/no_such_route", "", 404},
  };
  for (const auto& k : cases) {
    auto r =
        std::string(k.method) == "GET" ? c.Get(k.path.c_str()) : c.Post(k.path.c_str(), k.body, "application/json");
    ASSERT_TRUE(r) << k.path;
    EXPECT_EQ(r->status, k.status) << k.method << " " << k.path << " " << k.body << " -> " << r->body;
    const auto j = json::parse(r->body, nullptr, false);
    ASSERT_TRUE(j.is_object()) << r->body;
    if (k.status == 422) {
      EXPECT_TRUE(j["detail"].is_array()) << r->body;
    } else if (k.path != "/no_such_route") {
      EXPECT_TRUE(j["message"].is_string()) << r->body;
    }
  }
  // erg's GET /state: the round and the scheduler's state (a point solution has none).
  res = c.Get(("/state/" + id).c_str());
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  const auto state = json::parse(res->body);
  EXPECT_EQ(state["job_id"], id);
  EXPECT_EQ(state["round"], -1);
  EXPECT_TRUE(state["scheduler"].is_null());
}

TEST(PerseusHttp, FourRanksInLockStep) {
  Running server(options());
  Client first("127.0.0.1", server.port(), 60s);
  auto id = first.register_job(JobInfo{"", 2, 2, 1, 4, std::nullopt});
  ASSERT_TRUE(id) << id.error().message;
  constexpr int kRounds = 3;
  std::array<std::atomic<int>, kRounds> asked{};
  std::atomic<int> failures{0};
  auto rank_main = [&](int rank) {
    Client c("127.0.0.1", server.port(), 60s);
    if (!c.register_rank(*id, rank_info(rank))) ++failures;
    for (int round = 0; round < kRounds; ++round) {
      ++asked[static_cast<std::size_t>(round)];
      auto s = c.get_schedule(*id, rank);
      if (!s) {
        ADD_FAILURE() << "rank " << rank << " round " << round << ": " << s.error().message;
        ++failures;
        return;
      }
      // Lock-step: nobody hears round k before all four asked for it.
      EXPECT_EQ(asked[static_cast<std::size_t>(round)].load(), 4) << "rank " << rank << " round " << round;
      EXPECT_EQ(s->rank, rank);
      const int forward = rank % 2 == 0 ? 1410 : 1000;
      ASSERT_EQ(s->frequencies.size(), 2u);
      EXPECT_EQ(s->frequencies[0], (std::pair<std::string, int>{"forward", forward}));
      // Rank 0 sleeps a little before posting so the others' next ask must wait for it.
      if (rank == 0) std::this_thread::sleep_for(20ms);
      if (!c.post_result(*id, ProfilingResult{rank, {1.0}, {100.0}, {}, {}})) ++failures;
    }
  };
  std::vector<std::future<void>> ranks;
  for (int r = 0; r < 4; ++r) ranks.push_back(std::async(std::launch::async, rank_main, r));
  for (auto& f : ranks) ASSERT_EQ(f.wait_for(60s), std::future_status::ready) << "a rank hung";
  EXPECT_EQ(failures.load(), 0);
}

TEST(PerseusHttp, DeadRankGivesTheOthersAnErrorNotAHang) {
  Running server(options(300ms));
  Client first("127.0.0.1", server.port(), 60s);
  auto id = first.register_job(JobInfo{"", 2, 2, 1, 4, std::nullopt});
  ASSERT_TRUE(id);
  for (int r = 0; r < 4; ++r) ASSERT_TRUE(first.register_rank(*id, rank_info(r)));
  // Rank 3 registered and then died: it never asks.
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::future<Result<FrequencySchedule>>> live;
  for (int r = 0; r < 3; ++r)
    live.push_back(std::async(std::launch::async, [&, r] {
      Client c("127.0.0.1", server.port(), 60s);
      return c.get_schedule(*id, r);
    }));
  for (auto& f : live) {
    ASSERT_EQ(f.wait_for(20s), std::future_status::ready) << "a live rank hung";
    const auto s = f.get();
    ASSERT_FALSE(s);
    EXPECT_EQ(s.error().code, ErrorCode::kTimeout);
    EXPECT_NE(s.error().message.find("rank(s) [3] did not ask"), std::string::npos) << s.error().message;
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, 20s);
  EXPECT_FALSE(server.service().has_job(*id));
  const auto again = first.get_schedule(*id, 3);
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().code, ErrorCode::kNotFound);
}

}  // namespace
}  // namespace erg::pipeline_frequency::server
