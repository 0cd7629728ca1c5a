// The training job's BatchSizeOptimizer against a real server: Zeus's callback order, the
// trial's cumulative figures, end-of-trial on exit, and measuring with an EnergyMonitor over
// the simulated machine.

#include "erg/optimizers/batch_size/client/batch_size_optimizer.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include "erg/backends/nvml/discovery.hpp"
#include "erg/measure/energy_monitor.hpp"
#include "erg/sim/machine.hpp"
#include "erg/sim/spec.hpp"
#include "live_server.hpp"

namespace erg::batch_size::client {
namespace {

using testing::LiveServer;

BatchSizeOptimizerOptions options(const LiveServer& s, const std::string& id) {
  BatchSizeOptimizerOptions o;
  o.server_url = s.url();
  o.job.job_id = id;
  o.job.job_id_prefix = "train";
  o.job.params.batch_sizes = {16, 32, 64};
  o.job.params.default_batch_size = 32;
  o.job.params.max_epochs = 3;
  o.job.params.target_metric = 0.8;
  o.job.params.mab_seed = 1;
  o.gpus = {Watts(300), 1, "A40"};
  return o;
}

TEST(BsoBatchSizeOptimizer, ReportsCumulativeFiguresUntilTheServerSaysStop) {
  LiveServer server;
  auto bso = BatchSizeOptimizer::create(options(server, "train-a"));
  ASSERT_TRUE(bso) << bso.error().message;
  auto& b = **bso;
  EXPECT_EQ(b.on_train_begin().error().code, ErrorCode::kInvalidArgument);  // before get_batch_size
  auto bs = b.get_batch_size();
  ASSERT_TRUE(bs) << bs.error().message;
  EXPECT_EQ(*bs, 32);
  EXPECT_EQ(*b.get_batch_size(), 32);  // cached: one trial, not two
  ASSERT_EQ(server.stored("train-a")->trials().size(), 1u);
  ASSERT_TRUE(b.on_train_begin());
  // Without a monitor the figures come from the caller; they add up.
  EXPECT_EQ(b.on_evaluate(0.5).error().code, ErrorCode::kInvalidArgument);
  auto r = b.on_evaluate(0.5, Seconds(10.0), Joules(1000.0));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_FALSE(r->stop_train);
  r = b.on_evaluate(0.85, Seconds(12.0), Joules(1500.0));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_TRUE(r->stop_train);
  EXPECT_TRUE(r->converged);
  EXPECT_TRUE(b.training_finished());
  EXPECT_EQ(b.current_epoch(), 2);
  const auto t = server.stored("train-a")->trials()[0];
  EXPECT_EQ(t.status, TrialStatus::kSucceeded);
  EXPECT_DOUBLE_EQ(*t.time_s, 22.0);
  EXPECT_DOUBLE_EQ(*t.energy_j, 2500.0);
  EXPECT_DOUBLE_EQ(*t.cost, zeus_cost(Joules(2500.0), Seconds(22.0), 0.5, Watts(300)));
  // After the stop: the same answer, no request (the figures stay).
  r = b.on_evaluate(0.9, Seconds(5.0), Joules(5.0));
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->converged);
  EXPECT_DOUBLE_EQ(*server.stored("train-a")->trials()[0].time_s, 22.0);
  bso->reset();  // the destructor leaves a finished trial as it is
  EXPECT_EQ(server.stored("train-a")->trials()[0].status, TrialStatus::kSucceeded);
}

TEST(BsoBatchSizeOptimizer, ARunThatFailsToConvergeIsTold) {
  LiveServer server;
  auto bso = BatchSizeOptimizer::create(options(server, "train-b"));
  ASSERT_TRUE(bso) << bso.error().message;
  ASSERT_TRUE((*bso)->get_batch_size());
  ASSERT_TRUE((*bso)->on_train_begin());
  ReportResponse last;
  for (int epoch = 1; epoch <= 3; ++epoch) {
    auto r = (*bso)->on_evaluate(0.1, Seconds(1.0), Joules(100.0));
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_EQ(r->stop_train, epoch == 3);
    last = *r;
  }
  EXPECT_FALSE(last.converged);  // Zeus raises ZeusBSOTrainFailError here
  EXPECT_NE(last.message.find("max_epochs"), std::string::npos) << last.message;
}

TEST(BsoBatchSizeOptimizer, ATrialLeftOutIsEndedOnExitAndOnlyRankZeroAsks) {
  LiveServer server;
  {
    auto bso = BatchSizeOptimizer::create(options(server, "train-c"));
    ASSERT_TRUE(bso) << bso.error().message;
    ASSERT_TRUE((*bso)->get_batch_size());
    ASSERT_TRUE((*bso)->on_train_begin());
    ASSERT_TRUE((*bso)->on_evaluate(0.1, Seconds(1.0), Joules(1.0)));
    EXPECT_EQ(server.stored("train-c")->trials()[0].status, TrialStatus::kDispatched);
  }  // the run dies before the server said stop
  EXPECT_EQ(server.stored("train-c")->trials()[0].status, TrialStatus::kFailed);

  auto o = options(server, "train-c");
  auto explicit_end = BatchSizeOptimizer::create(o);
  ASSERT_TRUE(explicit_end) << explicit_end.error().message;
  EXPECT_FALSE((*explicit_end)->job().created);  // registered before: 200
  ASSERT_TRUE((*explicit_end)->get_batch_size());
  ASSERT_TRUE((*explicit_end)->end_trial());
  ASSERT_TRUE((*explicit_end)->end_trial());  // once is enough
  EXPECT_EQ(server.stored("train-c")->trials()[1].status, TrialStatus::kFailed);

  o.rank = 1;
  auto rank1 = BatchSizeOptimizer::create(o);
  ASSERT_TRUE(rank1) << rank1.error().message;
  auto bs = (*rank1)->get_batch_size();
  ASSERT_FALSE(bs);
  EXPECT_EQ(bs.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(server.stored("train-c")->trials().size(), 2u);

  o.server_url = "http://127.0.0.1:1";
  o.job.job_id = "train-d";
  auto nobody = BatchSizeOptimizer::create(o);
  ASSERT_FALSE(nobody);
  EXPECT_EQ(nobody.error().code, ErrorCode::kUnavailable);
}

TEST(BsoBatchSizeOptimizer, MeasuresTheTrialWithAnEnergyMonitor) {
  LiveServer server;
  auto spec = sim::parse_spec("2xA100");
  ASSERT_TRUE(spec) << spec.error().message;
  auto machine = sim::Machine::create_temp(*spec, /*virtual_clock=*/true);
  ASSERT_TRUE(machine) << machine.error().message;
  auto& m = **machine;
  ASSERT_TRUE(m.export_env());
  nvml::DiscoveryOptions d;
  d.cuda_visible_devices = std::optional<std::string>();
  auto found = nvml::discover(d);
  ASSERT_TRUE(found) << found.error().message;
  const auto& gpus = found->gpus;
  ASSERT_EQ(gpus.size(), 2u);
  sim::MachineClock clock(m);
  measure::EnergyMonitorOptions mo;
  mo.clock = &clock;
  mo.follower_thread = false;
  mo.settle = true;  // end edges wait for the counters' next update: exact to the sensor
  mo.cpu_indices = std::vector<unsigned>{};
  auto monitor = measure::EnergyMonitor::create(gpus, {}, mo);
  ASSERT_TRUE(monitor) << monitor.error().message;

  auto o = options(server, "train-m");
  o.gpus = {};  // from the GPUs: their model, their maximum limits added up
  auto bso = BatchSizeOptimizer::create(o, monitor->get(), gpus);
  ASSERT_TRUE(bso) << bso.error().message;
  double max_w = 0;
  for (const auto& g : gpus) max_w += std::floor(g->power_limit_constraints()->max.value() / 1000.0);
  EXPECT_EQ((*bso)->job().gpus.number_of_gpus, 2);
  EXPECT_EQ((*bso)->job().gpus.gpu_model, gpus[0]->name());
  EXPECT_EQ(server.stored("train-m")->max_power(), Watts(max_w));

  ASSERT_TRUE((*bso)->get_batch_size());
  for (unsigned g = 0; g < 2; ++g) ASSERT_TRUE(m.set_utilization(g, 1.0));
  ASSERT_TRUE(m.advance(std::chrono::seconds(2)));  // the counters' schedule is learned first
  const auto e0 = *m.true_energy(0) + *m.true_energy(1);
  const auto t0 = m.now();
  ASSERT_TRUE((*bso)->on_train_begin());
  ASSERT_TRUE(m.advance(std::chrono::seconds(30)));
  auto r = (*bso)->on_evaluate(0.1);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_FALSE(r->stop_train);
  ASSERT_TRUE(m.advance(std::chrono::seconds(30)));
  r = (*bso)->on_evaluate(0.9);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_TRUE(r->stop_train);
  EXPECT_TRUE(r->converged);
  // The server holds the whole run: both windows, and the moment between them.
  const double true_j = (*m.true_energy(0) + *m.true_energy(1) - e0).value();
  const double true_s = std::chrono::duration<double>(m.now() - t0).count();
  const auto t = server.stored("train-m")->trials()[0];
  EXPECT_NEAR(*t.time_s, true_s, 0.5);
  EXPECT_NEAR(*t.energy_j, true_j, 0.03 * true_j);
  EXPECT_GT(*t.energy_j, 60 * 2 * 100.0);  // two loaded A100s for a minute: well over 100 W each
  EXPECT_TRUE((*monitor)->open_windows().empty());
}

}  // namespace
}  // namespace erg::batch_size::client
