// The REST client against a real server (SQLite in a temporary directory, loopback, port 0).

#include "erg/optimizers/batch_size/client/client.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <regex>

#include "live_server.hpp"

namespace erg::batch_size::client {
namespace {

using testing::LiveServer;

JobConfig job(std::optional<std::string> id = std::nullopt) {
  JobConfig j;
  j.job_id = std::move(id);
  j.job_id_prefix = "test";
  j.params.batch_sizes = {32, 8, 16};  // the server keeps them sorted
  j.params.default_batch_size = 16;
  j.params.max_epochs = 3;
  j.params.target_metric = 0.5;
  j.params.mab_seed = 7;
  return j;
}
const GpuConfig kGpus{Watts(600), 2, "NVIDIA A100-SXM4-40GB"};

Client connect(const LiveServer& s) {
  auto c = Client::create(s.url());
  EXPECT_TRUE(c) << c.error().message;
  return std::move(*c);
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(BsoClient, FullJobLifecycle) {
  LiveServer server;
  Client c = connect(server);

  // Register: new (201), with a generated id of Zeus's format; again: the same job (200).
  auto reg = c.register_job(job(), kGpus);
  ASSERT_TRUE(reg) << reg.error().message;
  EXPECT_TRUE(reg->created);
  EXPECT_TRUE(std::regex_match(reg->job_id, std::regex("test-[0-9a-f]{8}"))) << reg->job_id;
  EXPECT_EQ(reg->config.params.batch_sizes, (std::vector<int>{8, 16, 32}));
  const std::string id = reg->job_id;
  auto again = c.register_job(job(id), kGpus);
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_FALSE(again->created);
  EXPECT_EQ(again->job_id, id);
  auto stored = server.stored(id);
  ASSERT_TRUE(stored);
  EXPECT_EQ(stored->max_power(), Watts(600));

  // Trial 1 is the default batch size; it goes on below the target, and stops when it reaches it.
  auto t1 = c.get_batch_size(id);
  ASSERT_TRUE(t1) << t1.error().message;
  EXPECT_EQ(*t1, (TrialId{id, 16, 1}));
  auto r = c.report({*t1, Seconds(10.0), Joules(2000.0), 0.3, 1});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_FALSE(r->stop_train);
  r = c.report({*t1, Seconds(20.0), Joules(4000.0), 0.6, 2});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_TRUE(r->stop_train);
  EXPECT_TRUE(r->converged);
  EXPECT_EQ(r->message, "Train succeeded");
  stored = server.stored(id);
  ASSERT_EQ(stored->trials().size(), 1u);
  EXPECT_EQ(stored->trials()[0].status, TrialStatus::kSucceeded);
  EXPECT_DOUBLE_EQ(*stored->trials()[0].time_s, 20.0);
  EXPECT_DOUBLE_EQ(*stored->trials()[0].energy_j, 4000.0);
  // Ending a finished trial (what the client does at exit) leaves it Succeeded.
  ASSERT_TRUE(c.end_trial(*t1));
  EXPECT_EQ(server.stored(id)->trials()[0].status, TrialStatus::kSucceeded);

  // Trial 2 explores downwards; its job dies: ending it marks it Failed.
  auto t2 = c.get_batch_size(id);
  ASSERT_TRUE(t2) << t2.error().message;
  EXPECT_EQ(*t2, (TrialId{id, 8, 2}));
  ASSERT_TRUE(c.end_trial(*t2));
  EXPECT_EQ(server.stored(id)->trials()[1].status, TrialStatus::kFailed);
  // A report on the failed trial is refused with the server's status and message.
  r = c.report({*t2, Seconds(1.0), Joules(1.0), 0.9, 1});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  EXPECT_TRUE(contains(r.error().message, "POST /report: the server answered 400")) << r.error().message;
  EXPECT_TRUE(contains(r.error().message, "failed")) << r.error().message;

  // Delete: 200, then 404.
  ASSERT_TRUE(c.delete_job(id));
  EXPECT_FALSE(server.stored(id));
  auto gone = c.delete_job(id);
  ASSERT_FALSE(gone);
  EXPECT_EQ(gone.error().code, ErrorCode::kNotFound);
  EXPECT_TRUE(contains(gone.error().message, "DELETE /jobs: the server answered 404")) << gone.error().message;
}

TEST(BsoClient, ServerErrorsCarryTheirStatusAndMessage) {
  LiveServer server;
  Client c = connect(server);
  ASSERT_TRUE(c.register_job(job("test-fixed"), kGpus));

  // The same id with another spec: 409.
  JobConfig other = job("test-fixed");
  other.params.eta_knob = 0.9;
  auto conflict = c.register_job(other, kGpus);
  ASSERT_FALSE(conflict);
  EXPECT_EQ(conflict.error().code, ErrorCode::kAlreadyExists);
  EXPECT_TRUE(contains(conflict.error().message, "POST /jobs: the server answered 409")) << conflict.error().message;

  // A spec the server refuses: 422, naming the field.
  JobConfig bad = job();
  bad.params.eta_knob = 1.5;
  auto invalid = c.register_job(bad, kGpus);
  ASSERT_FALSE(invalid);
  EXPECT_EQ(invalid.error().code, ErrorCode::kInvalidArgument);
  EXPECT_TRUE(contains(invalid.error().message, "answered 422")) << invalid.error().message;
  EXPECT_TRUE(contains(invalid.error().message, "eta_knob")) << invalid.error().message;

  // An unknown job: 400 for a batch size, 404 for ending a trial.
  auto unknown = c.get_batch_size("test-nope");
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error().code, ErrorCode::kInvalidArgument);
  EXPECT_TRUE(contains(unknown.error().message, "GET /jobs/batch_size: the server answered 400"))
      << unknown.error().message;
  auto end = c.end_trial({"test-fixed", 16, 99});
  ASSERT_FALSE(end);
  EXPECT_EQ(end.error().code, ErrorCode::kNotFound);
  EXPECT_TRUE(contains(end.error().message, "PATCH /trials: the server answered 404")) << end.error().message;
}

TEST(BsoClient, UrlsAndUnreachableServers) {
  EXPECT_EQ(Client::create("ftp://example.org").error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(Client::create("127.0.0.1:8000").error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(Client::create("http://").error().code, ErrorCode::kInvalidArgument);

  // A port nothing listens on: the server that had it is gone.
  std::string url;
  {
    LiveServer gone;
    url = gone.url();
  }
  auto c = Client::create(url + "/", ClientOptions{std::chrono::milliseconds(2000)});
  ASSERT_TRUE(c) << c.error().message;
  auto r = c->get_batch_size("test-x");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kUnavailable);
  EXPECT_TRUE(contains(r.error().message, "cannot reach")) << r.error().message;
  EXPECT_TRUE(contains(r.error().message, url)) << r.error().message;
}

TEST(BsoClient, JobBodyIsZeusJobSpecFromClient) {
  const auto body = nlohmann::json::parse(job_body(job(), kGpus));
  for (const char* k :
       {"job_id", "job_id_prefix", "batch_sizes", "default_batch_size", "eta_knob", "beta_knob", "target_metric",
        "higher_is_better_metric", "max_epochs", "num_pruning_rounds", "window_size", "mab_prior_mean",
        "mab_prior_precision", "mab_num_explorations", "mab_seed", "max_power", "number_of_gpus", "gpu_model"})
    EXPECT_TRUE(body.contains(k)) << k;
  EXPECT_EQ(body.size(), 18u);
  EXPECT_TRUE(body["job_id"].is_null());
  EXPECT_EQ(body["beta_knob"], 2.0);
  EXPECT_EQ(body["max_power"], 600.0);
  EXPECT_EQ(body["number_of_gpus"], 2);
}

}  // namespace
}  // namespace erg::batch_size::client
