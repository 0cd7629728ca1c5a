// Issue 19 acceptance 5: the NSDI'23 trace simulation replayed through a live server (client,
// HTTP, server, SQLite) converges to the batch size the in-process simulator converges to with
// the same seed, run for run.

#include "erg/optimizers/batch_size/client/server_agent.hpp"

#include <gtest/gtest.h>

#include "live_server.hpp"

namespace erg::batch_size::client {
namespace {

using testing::LiveServer;

const zeus_sim::Traces& traces() {
  static const zeus_sim::Traces t = [] {
    auto loaded = zeus_sim::load_traces(std::filesystem::path(ERG_SOURCE_DIR) / "optimizers/zeus_sim/data");
    EXPECT_TRUE(loaded) << loaded.error().message;
    return std::move(*loaded);
  }();
  return t;
}

/// Both ways for one (GPU, workload, seed); every run must match.
void expect_same_both_ways(const std::string& gpu, const std::string& workload, std::uint64_t seed) {
  SCOPED_TRACE(gpu + " " + workload + " seed " + std::to_string(seed));
  const zeus_sim::Workload* w = zeus_sim::find_workload(workload);
  ASSERT_NE(w, nullptr);
  zeus_sim::Options o;
  o.eta = 0.5;
  o.beta = 2.0;
  o.seed = seed;
  auto in_process = zeus_sim::simulate(traces(), gpu, *w, o);
  ASSERT_TRUE(in_process) << in_process.error().message;

  LiveServer server;
  auto client = Client::create(server.url());
  ASSERT_TRUE(client) << client.error().message;
  ServerAgent agent(*client, "sim", gpu, [&server](const std::string& id) -> Result<int> {
    auto stored = server.stored(id);
    if (!stored) return fail(ErrorCode::kNotFound, id);
    return stored->best_batch_size();
  });
  auto through_server = zeus_sim::simulate(traces(), gpu, *w, o, agent);
  ASSERT_TRUE(through_server) << through_server.error().message;

  // The answer: the same converged batch size (and limit).
  EXPECT_EQ(through_server->converged.batch_size, in_process->converged.batch_size);
  EXPECT_EQ(through_server->converged.power_limit, in_process->converged.power_limit);
  // The way there: the same batch size on every try of every recurrence, the same figures.
  ASSERT_EQ(through_server->history.size(), in_process->history.size());
  for (std::size_t i = 0; i < in_process->history.size(); ++i) {
    SCOPED_TRACE("recurrence " + std::to_string(i + 1));
    EXPECT_EQ(through_server->history[i].batch_sizes, in_process->history[i].batch_sizes);
    EXPECT_EQ(through_server->history[i].totals.cost, in_process->history[i].totals.cost);
  }
  EXPECT_EQ(through_server->erg.energy, in_process->erg.energy);

  // The server really did the work: every try is a finished trial of the job in its database,
  // and it reached the bandit stage.
  auto stored = server.stored(agent.job_id());
  ASSERT_TRUE(stored);
  std::size_t tries = 0;
  for (const auto& r : in_process->history) tries += r.batch_sizes.size();
  EXPECT_EQ(stored->trials().size(), tries);
  for (const auto& t : stored->trials()) EXPECT_EQ(t.status, TrialStatus::kSucceeded);
  EXPECT_EQ(stored->stage(), Stage::kMab);
  EXPECT_EQ(agent.responses().size(), tries);
}

TEST(BsoSimulate, LibrispeechOnV100ConvergesAsTheInProcessSimulator) {
  // Zeus's own end-to-end check (tests/optimizer/batch_size/test_simulator.py) uses this pair.
  expect_same_both_ways("v100", "librispeech", 1);
}

TEST(BsoSimulate, WithoutTheDatabaseTheBestIsTheLastRunsBatchSize) {
  LiveServer server;
  auto client = Client::create(server.url());
  ASSERT_TRUE(client) << client.error().message;
  ServerAgent agent(*client, "sim", "v100");
  zeus_sim::Options o;
  o.recurrences = 5;
  auto r = zeus_sim::simulate(traces(), "v100", *zeus_sim::find_workload("librispeech"), o, agent);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->converged.batch_size, r->history.back().config.batch_size);
}

}  // namespace
}  // namespace erg::batch_size::client
