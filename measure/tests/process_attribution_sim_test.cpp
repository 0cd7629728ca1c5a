// Per-process attribution against the simulator's truth (issue 23, acceptance 1): one simulated
// GPU on the virtual clock shared by three processes whose shares change at random times (the GPU
// time-slices when they add up to more than 1). erg sees what a real reader sees: the energy
// counter through the NVML backend and the simulated libnvidia-ml.so.1, and the driver's sampled,
// whole-percent per-process utilization (ProcessMeter). The truth is the simulator's own split of
// the physical energy (Machine::process_truth: the energy above the SKU's idle power, divided
// among the processes by their actual time-sliced share × their power intensity, 1 ms at a time;
// the intensities differ by up to 6 %, which erg cannot see).
//
// Asserted over consecutive 10 s windows, faithful V100 and A100, three seeds each: idle +
// processes + unattributed = the measured energy; every process is within its stated bound of
// its true energy; the bounds are useful (under a stated share); and an attribution by equal
// shares, or by each process's last sample only, misses the truth by more than the bound (so the
// test tells a wrong attribution from the right one).

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>

#include "erg/backends/nvml/discovery.hpp"
#include "erg/measure/process_attribution.hpp"
#include "erg/sim/machine.hpp"
#include "erg/sim/spec.hpp"

namespace erg::measure {
namespace {

using namespace std::chrono_literals;
using std::chrono::nanoseconds;

constexpr std::uint32_t kPids[3] = {4101, 4102, 4103};
// The energy figure's error bound as a share of it: the simulated sensor's gain error is within
// ±2 %, its per-update noise 0.3 %; checked below against the truth rather than assumed.
constexpr double kEnergyError = 0.03;

struct Window {
  ProcessAttribution result;
  std::map<std::uint32_t, double> truth;  // J above idle per process
  double true_energy = 0.0;
  std::vector<ProcessUtilizationSample> samples;
};

class ProcessAttributionSim : public ::testing::TestWithParam<std::tuple<std::string, unsigned>> {
 protected:
  void SetUp() override {
    const auto& [sku, seed] = GetParam();
    auto spec = sim::parse_spec("1x" + sku + ",seed=" + std::to_string(seed));
    ASSERT_TRUE(spec) << spec.error().message;
    auto made = sim::Machine::create_temp(*spec, /*virtual_clock=*/true);
    ASSERT_TRUE(made) << made.error().message;
    m_ = std::move(*made);
    ASSERT_TRUE(m_->export_env());
    auto lib = sim::Machine::driver_library_path();
    ASSERT_TRUE(lib);
    nvml::DiscoveryOptions o;
    o.library_path = lib->string();
    o.cuda_visible_devices = std::nullopt;
    auto found = nvml::discover(o);
    ASSERT_TRUE(found) << found.error().message;
    ASSERT_EQ(found->gpus.size(), 1u);
    gpu_ = found->gpus[0];
    clock_ = std::make_unique<sim::MachineClock>(*m_);
    rng_.seed(seed * 7919u + static_cast<unsigned>(sku.size()));
  }

  /// Advances the virtual clock exactly to the energy counter's next update.
  void to_next_update() {
    auto info = m_->sensor_info(0);
    ASSERT_TRUE(info);
    ASSERT_TRUE(m_->advance(info->next_update - m_->now()));
  }

  double counter_j() {
    auto r = gpu_->energy_reading();
    EXPECT_TRUE(r) << r.error().message;
    return r ? r->energy.value() / 1000.0 : 0.0;
  }

  /// The idle model: 3 s of the idle GPU, counter update to counter update.
  IdleModel calibrate() {
    to_next_update();
    const nanoseconds t0 = m_->now();
    const double e0 = counter_j();
    EXPECT_TRUE(m_->advance(3s));
    to_next_update();
    const double e = counter_j() - e0;
    EnergySegment seg{t0, m_->now(), Joules(e), Joules(kEnergyError * e), Watts(0.0)};
    auto idle = calibrate_idle(std::span<const EnergySegment>(&seg, 1));
    EXPECT_TRUE(idle) << idle.error().message;
    return *idle;
  }

  void set_share(std::uint32_t pid) {
    std::uniform_real_distribution<double> share(0.0, 0.6);
    std::bernoulli_distribution off(0.15);
    ASSERT_TRUE(m_->set_process_share(0, pid, off(rng_) ? 0.0 : share(rng_)));
  }

  /// One window of about 10 s: shares change every 0.3–1.5 s per process; the meter polls every
  /// second; the window starts and ends at counter updates.
  Window run_window(const ProcessAttributionOptions& options) {
    Window w;
    ProcessMeter meter(*gpu_, *clock_, options);
    to_next_update();
    auto t0 = m_->process_truth(0);
    const double true0 = m_->true_energy(0)->value();
    EXPECT_TRUE(meter.begin());
    const nanoseconds start = m_->now();
    std::uniform_int_distribution<int> gap_ms(300, 1500);
    std::map<std::uint32_t, nanoseconds> next_change;
    for (auto pid : kPids) next_change[pid] = start + std::chrono::milliseconds(gap_ms(rng_));
    nanoseconds next_poll = start + 1s;
    const nanoseconds stop = start + 10s;
    while (m_->now() < stop) {
      nanoseconds next = std::min(stop, next_poll);
      for (auto& [pid, t] : next_change) next = std::min(next, t);
      EXPECT_TRUE(m_->advance(next - m_->now()));
      for (auto& [pid, t] : next_change)
        if (t <= m_->now()) {
          set_share(pid);
          t = m_->now() + std::chrono::milliseconds(gap_ms(rng_));
        }
      if (next_poll <= m_->now()) {
        EXPECT_TRUE(meter.poll());
        next_poll += 1s;
      }
    }
    to_next_update();
    auto t1 = m_->process_truth(0);
    w.true_energy = m_->true_energy(0)->value() - true0;
    EXPECT_TRUE(meter.end(kEnergyError));
    EXPECT_TRUE(m_->advance(300ms));  // the driver samples past the end
    auto r = meter.attribute();
    EXPECT_TRUE(r) << r.error().message;
    w.samples = meter.samples();
    if (r) w.result = *r;
    for (const auto& p : t1->processes) w.truth[p.pid] = p.energy.value();
    for (const auto& p : t0->processes) w.truth[p.pid] -= p.energy.value();
    return w;
  }

  std::unique_ptr<sim::Machine> m_;
  std::shared_ptr<Gpu> gpu_;
  std::unique_ptr<sim::MachineClock> clock_;
  std::mt19937 rng_;
};

TEST_P(ProcessAttributionSim, SharesSumExactlyAndMatchTheTruthWithinTheirBounds) {
  const IdleModel idle = calibrate();
  auto info = m_->sensor_info(0);
  ASSERT_TRUE(info);
  // The processes' kernels differ: per unit of SM activity they draw 100 %, 97 % and 94 % of the
  // SKU model's active power. Their samples do not show it, erg's model assumes it away, and the
  // truth has it: the stated model error (5 %) must cover it.
  const double intensity[3] = {1.0, 0.97, 0.94};
  for (int i = 0; i < 3; ++i)
    ASSERT_TRUE(m_->set_process(0, {kPids[i], 0.3, 2ull << 30, false, std::nullopt, intensity[i]}));
  ASSERT_TRUE(m_->advance(500ms));  // the processes settle in before the first window

  ProcessAttributionOptions options;
  options.idle = idle;
  // What a reader knows: the nominal sample period, and that read-time stamps put each end of the
  // interval within one counter period (~100 ms) of the counter's update.
  options.sample_period = 166'666'667ns;
  options.edge_uncertainty = 100ms;

  int equal_misses = 0, last_sample_misses = 0;
  for (int k = 0; k < 2; ++k) {
    const Window w = run_window(options);
    const ProcessAttribution& a = w.result;
    const std::string what = "window " + std::to_string(k);
    ASSERT_TRUE(a.attributable) << a.reason;
    // The measured energy is within its stated bound of the truth (the bound's premise, checked).
    EXPECT_LE(std::abs(a.measured.value() - w.true_energy), a.measured_bound.value()) << what;
    // idle + processes + unattributed = measured, exactly up to rounding.
    EXPECT_NEAR((a.idle + a.attributed() + a.unattributed).value(), a.measured.value(), 1e-12 * a.measured.value())
        << what;
    // The inferred sample period is the driver's.
    auto inferred = infer_sample_period(w.samples);
    ASSERT_TRUE(inferred);
    EXPECT_NEAR(static_cast<double>(inferred->count()), static_cast<double>(info->utilization_period.count()),
                0.05 * static_cast<double>(info->utilization_period.count()));

    ASSERT_EQ(a.processes.size(), 3u) << what;
    double active = a.measured.value() - a.idle.value();
    for (const auto& p : a.processes) {
      const double truth = w.truth.at(p.pid);
      EXPECT_LE(std::abs(p.energy.value() - truth), p.bound.value())
          << what << " pid " << p.pid << " est " << p.energy.value() << " truth " << truth << " bound "
          << p.bound.value();
      // Useful bounds: a small share of the process's energy (sampling, sensor, idle model, model).
      EXPECT_LE(p.bound.value(), 0.25 * p.energy.value() + 0.01 * active) << what << " pid " << p.pid;
      // Wrong attributions miss by more than the bound: equal shares, and each process's last
      // sample extrapolated over the window.
      if (std::abs(active / 3.0 - truth) > p.bound.value()) ++equal_misses;
      double last_sm = 0.0, last_sum = 0.0;
      std::map<std::uint32_t, double> last;
      for (const auto& s : w.samples)
        if (std::chrono::duration_cast<nanoseconds>(s.timestamp) <= a.end) last[s.pid] = s.sm_percent;
      for (const auto& [pid, v] : last) last_sum += v;
      last_sm = last.count(p.pid) ? last[p.pid] : 0.0;
      const double by_last = last_sum > 0.0 ? active * last_sm / last_sum : 0.0;
      if (std::abs(by_last - truth) > p.bound.value()) ++last_sample_misses;
    }
  }
  EXPECT_GE(equal_misses, 2);
  EXPECT_GE(last_sample_misses, 2);
}

// A driver that samples every second (the long end of NVML's 1/6 s to 1 s): the reader infers
// the period from the samples, and the bounds, wider now, still hold.
TEST_P(ProcessAttributionSim, SlowSamplingWidensTheBoundsWhichStillHold) {
  const IdleModel idle = calibrate();
  ASSERT_TRUE(m_->set_utilization_period(0, 1s));
  EXPECT_FALSE(m_->set_utilization_period(0, 1ms));
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(m_->set_process(0, {kPids[i], 0.3, 0, false, std::nullopt}));
  ASSERT_TRUE(m_->advance(3s));
  auto seen = gpu_->process_utilization(std::chrono::microseconds(0));
  ASSERT_TRUE(seen);
  auto period = infer_sample_period(*seen);
  ASSERT_TRUE(period);
  EXPECT_NEAR(std::chrono::duration<double>(*period).count(), 1.0, 0.05);
  ProcessAttributionOptions options;
  options.idle = idle;
  options.sample_period = *period;
  options.edge_uncertainty = 100ms;
  const Window w = run_window(options);
  const ProcessAttribution& a = w.result;
  ASSERT_TRUE(a.attributable);
  ASSERT_EQ(a.processes.size(), 3u);
  EXPECT_NEAR((a.idle + a.attributed() + a.unattributed).value(), a.measured.value(), 1e-12 * a.measured.value());
  for (const auto& p : a.processes) {
    const double truth = w.truth.at(p.pid);
    EXPECT_LE(std::abs(p.energy.value() - truth), p.bound.value())
        << "pid " << p.pid << " est " << p.energy.value() << " truth " << truth << " bound " << p.bound.value();
  }
}

// MIG: the GPU's energy is reported as not attributable, with the reason, never as 0 J each.
TEST_P(ProcessAttributionSim, MigIsReportedAsNotAttributable) {
  const auto& [sku, seed] = GetParam();
  if (sku != "A100") {  // MIG needs Ampere or newer
    auto refused = m_->set_mig_mode(0, true);
    ASSERT_FALSE(refused);
    EXPECT_EQ(refused.error().code, ErrorCode::kNotSupported);
    return;
  }
  for (auto pid : kPids) ASSERT_TRUE(m_->set_process(0, {pid, 0.3, 0, false, 0u}));
  ASSERT_TRUE(m_->set_mig_mode(0, true));
  ProcessMeter meter(*gpu_, *clock_, ProcessAttributionOptions{});
  to_next_update();
  ASSERT_TRUE(meter.begin());
  ASSERT_TRUE(m_->advance(2s));
  ASSERT_TRUE(meter.poll());
  to_next_update();
  ASSERT_TRUE(meter.end());
  auto r = meter.attribute();
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_FALSE(r->attributable);
  EXPECT_NE(r->reason.find("MIG"), std::string::npos) << r->reason;
  EXPECT_TRUE(r->processes.empty());
  EXPECT_GT(r->measured.value(), 0.0);
}

// The one-call face (measure_processes, calibrate_idle over a Gpu) on the virtual clock: the clock
// moves itself; sums exact; with constant shares the energies stand in the ratio of the shares.
TEST_P(ProcessAttributionSim, OneCallMeasuresAndAttributes) {
  auto idle = calibrate_idle(*gpu_, *clock_, 3s);
  ASSERT_TRUE(idle) << idle.error().message;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(m_->set_process(0, {kPids[i], 0.15 + 0.2 * i, 0, false, std::nullopt}));
  // Not idle any more: calibrating now names the processes.
  auto busy = calibrate_idle(*gpu_, *clock_, 1s);
  ASSERT_FALSE(busy);
  EXPECT_NE(busy.error().message.find(std::to_string(kPids[0])), std::string::npos) << busy.error().message;
  ASSERT_TRUE(m_->advance(300ms));
  ProcessAttributionOptions options;
  options.idle = *idle;
  options.edge_uncertainty = 100ms;  // read-time stamps
  auto a = measure_processes(*gpu_, *clock_, 5s, options);
  ASSERT_TRUE(a) << a.error().message;
  ASSERT_TRUE(a->attributable);
  EXPECT_NEAR((a->idle + a->attributed() + a->unattributed).value(), a->measured.value(), 1e-12 * a->measured.value());
  ASSERT_EQ(a->processes.size(), 3u);
  // Shares are constant, so the processes' energies stand in the ratio of their shares.
  EXPECT_NEAR(a->processes[1].energy.value() / a->processes[0].energy.value(), 0.35 / 0.15, 0.05 * 0.35 / 0.15);
  EXPECT_NEAR(a->processes[2].energy.value() / a->processes[0].energy.value(), 0.55 / 0.15, 0.05 * 0.55 / 0.15);
  for (const auto& p : a->processes) EXPECT_LT(p.bound.value(), 0.35 * p.energy.value());
  EXPECT_FALSE(measure_processes(*gpu_, *clock_, 0s, options));
}

INSTANTIATE_TEST_SUITE_P(FaithfulGpus, ProcessAttributionSim,
                         ::testing::Combine(::testing::Values("V100", "A100"), ::testing::Values(1u, 2u, 3u)),
                         [](const auto& p) {
                           return std::get<0>(p.param) + "_seed" + std::to_string(std::get<1>(p.param));
                         });

}  // namespace
}  // namespace erg::measure
