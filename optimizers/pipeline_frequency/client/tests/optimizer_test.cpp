// The rank side of Perseus against an in-process server over loopback: two ranks (pp 2) on their
// own threads, each driving one GPU of a simulated 2xA100 (real clock; the production NVML path
// into the simulated driver). The simulated device shows what the optimizer locked; its true
// energy checks what it measured. Every wait is bounded.

#include "erg/optimizers/pipeline_frequency/client/optimizer.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "erg/backends/nvml/discovery.hpp"
#include "erg/optimizers/pipeline_frequency/client/clock_guardian.hpp"
#include "erg/optimizers/pipeline_frequency/server/http_server.hpp"
#include "erg/sim/machine.hpp"
#include "erg/sim/spec.hpp"

namespace erg::pipeline_frequency {
namespace {

using namespace std::chrono_literals;
namespace srv = erg::pipeline_frequency::server;

constexpr auto kBound = 30s;  // any wait; far beyond what the steps take
// Work per instruction (simulator units: 1 = 1 s of a busy GPU at its highest clock): long
// enough that a step spans several 100 ms energy-counter periods.
constexpr double kWork = 0.08;
// A step's measured energy against the sensor's own figure over the step (sim::Machine::
// sensor_energy_at: what a perfect reader of the counter reports): the step window's edges are
// settled on the counter's schedule, so only the placement of its updates (the jitter) and the
// moment between an edge and the test's clock read separate them, once the monitor has learned
// the schedule. Seen: within 0.15 % (0.7 % under ASan), also with both cores busy.
constexpr double kSensorTolerance = 0.03;
// ... and against the simulator's physical energy: the sensor's own errors come on top, its gain
// (±2 %) and the A100's partial sampling (each update stands for the last 25 ms of its period, so
// an update sampled after a step's work stopped counts that period at idle power, and the step's
// clock changes move the figure). Seen: −22 % to +1 % (a rank's first step reads low).
constexpr double kPhysicalTolerance = 0.30;

struct Rig {
  std::unique_ptr<sim::Machine> machine;
  std::vector<std::shared_ptr<Gpu>> gpus;
  std::unique_ptr<srv::Service> service;
  std::unique_ptr<srv::HttpServer> http;
  std::thread serving;

  Rig(const std::string& plan_json, std::chrono::milliseconds rank_timeout = 20s) {
    auto spec = sim::parse_spec("2xA100");
    EXPECT_TRUE(spec);
    auto m = sim::Machine::create_temp(*spec);
    EXPECT_TRUE(m) << m.error().message;
    machine = std::move(*m);
    EXPECT_TRUE(machine->export_env());
    nvml::DiscoveryOptions o;
    o.cuda_visible_devices = std::optional<std::string>();
    auto found = nvml::discover(o);
    EXPECT_TRUE(found) << found.error().message;
    gpus = found->gpus;

    srv::ServiceOptions so;
    auto plan = srv::parse_plan(plan_json);
    EXPECT_TRUE(plan) << plan.error().message;
    so.scheduler = srv::SchedulerConfig{srv::SchedulerKind::kPointSolution3D, *plan};
    so.rank_timeout = rank_timeout;
    service = std::make_unique<srv::Service>(so);
    auto h = srv::HttpServer::bind(*service, srv::HttpOptions{});
    EXPECT_TRUE(h) << h.error().message;
    http = std::move(*h);
    serving = std::thread([this] { http->run(); });
    http->wait_until_ready();
  }
  ~Rig() {
    http->stop();
    serving.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(http->port()); }
  sim::GpuStatus status(unsigned gpu) const { return *machine->status(gpu); }
};

/// Rank 0's job id, handed to rank 1 (torch's broadcast in a real job).
struct JobIdBox {
  std::promise<std::string> promise;
  std::shared_future<std::string> future = promise.get_future().share();
  std::function<Result<std::string>(const std::optional<std::string>&)> share() {
    return [this](const std::optional<std::string>& mine) -> Result<std::string> {
      if (mine) {
        promise.set_value(*mine);
        return *mine;
      }
      if (future.wait_for(kBound) != std::future_status::ready) return fail(ErrorCode::kTimeout, "no job id");
      return future.get();
    };
  }
};

RankPlacement stage(int pp_rank) {
  RankPlacement p;
  p.rank = pp_rank, p.pp_rank = pp_rank, p.pp_degree = 2, p.world_size = 2;
  return p;
}

// 2 stages × 2 micro-batches in 1F1B order, clocks the A100 supports.
const char* kPlan = R"({"frequencies": [
  [["forward", 1410], ["forward", 1005], ["backward", 1200], ["backward", 810]],
  [["forward", 1305], ["backward", 705], ["forward", 1410], ["backward", 1095]]]})";

TEST(PipelineFrequencyOptimizer, LocksThePlannedClockPerInstructionMeasuresAndPosts) {
  Rig rig(kPlan);
  JobIdBox box;
  const int kSteps = 2;
  struct Seen {
    std::vector<std::pair<double, double>> sm;  // locked SM range during each instruction
    std::vector<double> mem;                    // locked memory max during each instruction
    std::vector<double> true_step_j;            // simulator's true energy per step
    std::vector<std::pair<std::chrono::nanoseconds, std::chrono::nanoseconds>> step_t;  // sim times, each step
    std::vector<double> work_s;  // each instruction's duration by the simulator (run_work)
    std::vector<srv::ProfilingResult> results;
    std::vector<int> available;
    std::string job_id;
    std::string error;
  };
  auto run_rank = [&](int pp) {
    Seen seen;
    PipelineFrequencyOptions o;
    o.server_url = rig.url();
    o.share_job_id = box.share();
    o.read_timeout = 60s;
    auto opt = PipelineFrequencyOptimizer::create(rig.gpus[pp], stage(pp), o);
    if (!opt) {
      seen.error = opt.error().message;
      return seen;
    }
    seen.job_id = (*opt)->job_id();
    seen.available = (*opt)->available_frequencies();
    // The job's setup before its first step (a real one loads its model and data): the optimizer's
    // monitor learns the counter's schedule meanwhile (about a second; a window before that is
    // held to the plain-difference bound, docs/measure.md: −9 % against the sensor on a starved
    // ASan run), so the steps are held to kSensorTolerance.
    std::this_thread::sleep_for(1500ms);
    for (int s = 0; s < kSteps; ++s) {
      if (auto r = (*opt)->on_step_begin(); !r) return seen.error = r.error().message, seen;
      const double e0 = rig.machine->true_energy(pp)->value();
      const auto t0 = rig.machine->now();
      for (const auto& [name, mhz] : (*opt)->schedule().frequencies) {
        if (auto r = (*opt)->on_instruction_begin(name); !r) return seen.error = r.error().message, seen;
        const auto st = rig.status(pp);
        seen.sm.emplace_back(st.locked_sm_min.value(), st.locked_sm_max.value());
        seen.mem.push_back(st.locked_mem_max.value());
        auto took = rig.machine->run_work(pp, name == "forward" ? kWork : 2 * kWork);
        seen.work_s.push_back(took ? std::chrono::duration<double>(*took).count() : -1.0);
        if (auto r = (*opt)->on_instruction_end(name); !r) return seen.error = r.error().message, seen;
      }
      // The truth up to the step's end edge (read before on_step_end, whose POST after the edge
      // may take long on a loaded machine while the GPU idles).
      seen.true_step_j.push_back(rig.machine->true_energy(pp)->value() - e0);
      seen.step_t.emplace_back(t0, rig.machine->now());
      if (auto r = (*opt)->on_step_end(); !r) return seen.error = r.error().message, seen;
    }
    seen.results = (*opt)->results();
    return seen;
  };
  auto f0 = std::async(std::launch::async, run_rank, 0);
  auto f1 = std::async(std::launch::async, run_rank, 1);
  ASSERT_EQ(f0.wait_for(kBound), std::future_status::ready);
  ASSERT_EQ(f1.wait_for(kBound), std::future_status::ready);
  const Seen seen[2] = {f0.get(), f1.get()};

  const auto plan = *srv::parse_plan(kPlan);
  for (int pp = 0; pp < 2; ++pp) {
    const Seen& s = seen[pp];
    ASSERT_TRUE(s.error.empty()) << "rank " << pp << ": " << s.error;
    EXPECT_EQ(s.job_id, seen[0].job_id);
    EXPECT_NE(s.job_id.find("+pp2+"), std::string::npos) << s.job_id;
    // Registered: the A100's SM clocks at its highest memory clock, highest first.
    ASSERT_FALSE(s.available.empty());
    EXPECT_EQ(s.available.front(), 1410);
    EXPECT_TRUE(std::is_sorted(s.available.rbegin(), s.available.rend()));
    // During every instruction the device's SM clock was locked at the plan's MHz for it, and the
    // memory clock at the highest.
    ASSERT_EQ(s.sm.size(), plan[pp].size() * kSteps);
    for (std::size_t i = 0; i < s.sm.size(); ++i) {
      const double want = plan[pp][i % plan[pp].size()].second;
      EXPECT_EQ(s.sm[i], std::make_pair(want, want)) << "rank " << pp << " instruction " << i;
      EXPECT_EQ(s.mem[i], 1593.0) << "rank " << pp << " instruction " << i;
    }
    // One result per step: one iteration, per instruction kind one value per micro-batch.
    ASSERT_EQ(s.results.size(), std::size_t(kSteps));
    for (int k = 0; k < kSteps; ++k) {
      const auto& r = s.results[k];
      EXPECT_EQ(r.rank, pp);
      ASSERT_EQ(r.iter_time.size(), 1u);
      ASSERT_EQ(r.iter_energy.size(), 1u);
      double instr_time = 0, instr_energy = 0;
      for (const char* kind : {"forward", "backward"}) {
        ASSERT_EQ(r.time_breakdown.at(kind).size(), 1u);
        ASSERT_EQ(r.time_breakdown.at(kind)[0].size(), 2u) << kind;
        ASSERT_EQ(r.energy_breakdown.at(kind)[0].size(), 2u) << kind;
        for (double t : r.time_breakdown.at(kind)[0]) EXPECT_GT(t, 0.0), instr_time += t;
        for (double e : r.energy_breakdown.at(kind)[0]) EXPECT_GT(e, 0.0), instr_energy += e;
      }
      EXPECT_LE(instr_time, r.iter_time[0] + 1e-9);
      // Windows shorter than two of the counter's 100 ms updates are counted (80 ms forwards; the
      // 160 ms backwards too unless a lower clock stretched them past 200 ms).
      int coarse = 0;
      for (const char* kind : {"forward", "backward"})
        for (double t : r.time_breakdown.at(kind)[0]) coarse += t < 0.2 ? 1 : 0;
      EXPECT_GE(coarse, 2);
      EXPECT_EQ(r.coarse_energy_windows, coarse) << "rank " << pp << " step " << k;
      // Instruction windows are not settled: their ends lie past the counter's last update (one
      // the follower read in the moment between an edge's read and its figure is not).
      EXPECT_GE(r.extrapolated_energy_windows, 1) << "rank " << pp << " step " << k;
      EXPECT_LE(r.extrapolated_energy_windows, static_cast<int>(plan[pp].size())) << "rank " << pp << " step " << k;
      // Each instruction's window holds its work: at least the simulator's duration of it.
      const std::size_t n = plan[pp].size();
      for (std::size_t i = 0, f = 0, b = 0; i < n; ++i) {
        const bool fwd = plan[pp][i].first == Instruction::kForward;
        const double t = fwd ? r.time_breakdown.at("forward")[0][f++] : r.time_breakdown.at("backward")[0][b++];
        EXPECT_GE(t, s.work_s[k * n + i] - 1e-6) << "rank " << pp << " step " << k << " instruction " << i;
      }
      // The sensor's figure for the step (known: on_step_end waited for the update after it),
      // then the simulator's physical energy: within the stated tolerances.
      auto s0 = rig.machine->sensor_energy_at(pp, s.step_t[k].first);
      auto s1 = rig.machine->sensor_energy_at(pp, s.step_t[k].second);
      ASSERT_TRUE(s0 && s1) << "rank " << pp << " step " << k;
      const double sensor = (*s1 - *s0).value();
      EXPECT_NEAR(r.iter_energy[0], sensor, kSensorTolerance * sensor) << "rank " << pp << " step " << k;
      EXPECT_NEAR(r.iter_energy[0], s.true_step_j[k], kPhysicalTolerance * s.true_step_j[k])
          << "rank " << pp << " step " << k;
      std::printf(
          "[simulated] rank %d step %d: %.3f s, measured %.2f J, sensor %.2f J (%+.2f%%), physical %.2f J (%+.2f%%)\n",
          pp, k, r.iter_time[0], r.iter_energy[0], sensor, 100.0 * (r.iter_energy[0] - sensor) / sensor,
          s.true_step_j[k], 100.0 * (r.iter_energy[0] - s.true_step_j[k]) / s.true_step_j[k]);
    }
  }
  // Destroyed at the end of run_rank: clocks reset on both GPUs.
  for (unsigned g = 0; g < 2; ++g) {
    EXPECT_EQ(rig.status(g).locked_sm_max.value(), 0.0) << "GPU " << g;
    EXPECT_EQ(rig.status(g).locked_mem_max.value(), 0.0) << "GPU " << g;
  }
}

TEST(PipelineFrequencyOptimizer, RefusesInstructionsOutOfPlanAndADeadRankEndsTheJob) {
  Rig rig(kPlan, /*rank_timeout=*/2s);
  JobIdBox box;
  auto make = [&](int pp) {
    PipelineFrequencyOptions o;
    o.server_url = rig.url();
    o.share_job_id = box.share();
    o.read_timeout = 20s;
    return PipelineFrequencyOptimizer::create(rig.gpus[pp], stage(pp), o);
  };
  auto f1 = std::async(std::launch::async, make, 1);
  auto r0 = make(0);
  ASSERT_EQ(f1.wait_for(kBound), std::future_status::ready);
  auto r1 = f1.get();
  ASSERT_TRUE(r0) << r0.error().message;
  ASSERT_TRUE(r1) << r1.error().message;
  auto& opt = **r0;

  // Out of plan: before a step, the wrong name, a second begin, an early step end.
  EXPECT_EQ(opt.on_instruction_begin("forward").error().code, ErrorCode::kInvalidArgument);
  ASSERT_TRUE(opt.on_step_begin());
  EXPECT_EQ(opt.on_step_begin().error().code, ErrorCode::kAlreadyExists);
  auto wrong = opt.on_instruction_begin("backward");
  ASSERT_FALSE(wrong);
  EXPECT_NE(wrong.error().message.find("is \"forward\", not \"backward\""), std::string::npos) << wrong.error().message;
  ASSERT_TRUE(opt.on_instruction_begin("forward"));
  EXPECT_EQ(opt.on_instruction_end("backward").error().code, ErrorCode::kInvalidArgument);
  ASSERT_TRUE(opt.on_instruction_end("forward"));
  EXPECT_EQ(opt.on_step_end().error().code, ErrorCode::kInvalidArgument);  // 1 of 4 instructions
  for (const char* name : {"forward", "backward", "backward"}) {
    ASSERT_TRUE(opt.on_instruction_begin(name));
    ASSERT_TRUE(opt.on_instruction_end(name));
  }
  ASSERT_TRUE(opt.on_step_end());

  // Rank 1 dies without asking for round 1: rank 0's next step gets the eviction (504), not a hang.
  r1->reset();  // its destructor resets its GPU's clocks
  EXPECT_EQ(rig.status(1).locked_sm_max.value(), 0.0);
  const auto t0 = std::chrono::steady_clock::now();
  auto next = opt.on_step_begin();
  const auto waited = std::chrono::steady_clock::now() - t0;
  ASSERT_FALSE(next);
  EXPECT_EQ(next.error().code, ErrorCode::kTimeout) << next.error().message;
  EXPECT_NE(next.error().message.find("[1]"), std::string::npos) << next.error().message;
  EXPECT_LT(waited, kBound);
  // Its own clocks come back when it is done with.
  ASSERT_TRUE(opt.reset_clocks());
  EXPECT_EQ(rig.status(0).locked_sm_max.value(), 0.0);
  EXPECT_EQ(rig.status(0).locked_mem_max.value(), 0.0);
}

TEST(PipelineFrequencyOptimizer, BadArgumentsAreRefusedByName) {
  EXPECT_EQ(parse_server_url("http://127.0.0.1:7787")->second, 7787);
  EXPECT_EQ(parse_server_url("http://localhost:80/")->first, "localhost");
  for (const char* bad :
       {"https://h:1", "127.0.0.1:7787", "http://h", "http://h:0", "http://h:99999", "http://h:1/x", "http://:80"})
    EXPECT_FALSE(parse_server_url(bad)) << bad;

  auto spec = sim::parse_spec("1xA100");
  auto machine = sim::Machine::create_temp(*spec);
  ASSERT_TRUE(machine);
  ASSERT_TRUE((*machine)->export_env());
  nvml::DiscoveryOptions d;
  d.cuda_visible_devices = std::optional<std::string>();
  auto gpus = nvml::discover(d)->gpus;
  PipelineFrequencyOptions o;
  o.server_url = "http://127.0.0.1:1";
  RankPlacement p;
  p.world_size = 2;  // ≠ 1·1·1
  auto r = PipelineFrequencyOptimizer::create(gpus[0], p, o);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("world_size 2"), std::string::npos) << r.error().message;
  p.pp_degree = 2, p.pp_rank = 2;
  r = PipelineFrequencyOptimizer::create(gpus[0], p, o);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("outside the job's degrees"), std::string::npos) << r.error().message;
  p.pp_rank = 1, p.rank = 1;
  r = PipelineFrequencyOptimizer::create(gpus[0], p, o);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("share_job_id"), std::string::npos) << r.error().message;
  // A server that is not there: unavailable, and the clocks locked on the way are reset.
  RankPlacement alone;
  r = PipelineFrequencyOptimizer::create(gpus[0], alone, o);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kUnavailable) << r.error().message;
  EXPECT_EQ((*machine)->status(0)->locked_sm_max.value(), 0.0);
  EXPECT_EQ((*machine)->status(0)->locked_mem_max.value(), 0.0);
}

// The guardian (`erg perseus guard-clocks`, a separate process on the same simulated machine):
// when the rank's end of the pipe closes without "done" — what the kernel does when the rank is
// killed — it resets the GPU's SM and memory locked clocks; released, it leaves them alone.
TEST(ClockGuardian, ResetsTheClocksWhenTheRankIsGoneNotWhenReleased) {
  Rig rig(kPlan);
  auto& gpu = *rig.gpus[1];
  auto mems = gpu.supported_memory_clocks();
  ASSERT_TRUE(mems && !mems->empty());
  const Megahertz mem =
      *std::max_element(mems->begin(), mems->end(), [](Megahertz a, Megahertz b) { return a.value() < b.value(); });
  auto lock = [&] {
    ASSERT_TRUE(gpu.set_gpu_locked_clocks(Megahertz(1005.0), Megahertz(1005.0)));
    ASSERT_TRUE(gpu.set_memory_locked_clocks(mem, mem));
    ASSERT_EQ(rig.status(1).locked_sm_max.value(), 1005.0);
  };

  // Gone without a word: the guardian resets both (and says so on stderr).
  auto g = ClockGuardian::spawn(ERG_CLI_PATH, 1);
  ASSERT_TRUE(g) << g.error().message;
  lock();
  auto status = (*g)->abandon();
  ASSERT_TRUE(status) << status.error().message;
  EXPECT_EQ(*status, 0);
  EXPECT_EQ(rig.status(1).locked_sm_max.value(), 0.0);
  EXPECT_EQ(rig.status(1).locked_mem_max.value(), 0.0);
  EXPECT_EQ(rig.status(0).locked_sm_max.value(), 0.0);  // another GPU: untouched either way

  // Released ("done": the rank reset them itself): the guardian exits and touches nothing.
  auto h = ClockGuardian::spawn(ERG_CLI_PATH, 1);
  ASSERT_TRUE(h) << h.error().message;
  lock();
  ASSERT_TRUE((*h)->release());
  EXPECT_EQ(rig.status(1).locked_sm_max.value(), 1005.0);
  ASSERT_TRUE(gpu.reset_gpu_locked_clocks());
  ASSERT_TRUE(gpu.reset_memory_locked_clocks());

  // A command that cannot be started is an error naming it, from the optimizer too.
  auto bad = ClockGuardian::spawn("/nonexistent/erg", 1);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("/nonexistent/erg"), std::string::npos) << bad.error().message;
  PipelineFrequencyOptions o;
  o.server_url = rig.url();
  o.guardian_executable = "/nonexistent/erg";
  RankPlacement solo;
  auto opt = PipelineFrequencyOptimizer::create(rig.gpus[1], solo, o);
  ASSERT_FALSE(opt);
  EXPECT_NE(opt.error().message.find("/nonexistent/erg"), std::string::npos) << opt.error().message;
  EXPECT_EQ(rig.status(1).locked_sm_max.value(), 0.0);  // refused before locking anything
}

}  // namespace
}  // namespace erg::pipeline_frequency
