// The sensor zoo (sim/README.md, "Sensors"): per-GPU sensor behaviours that break a reader's
// assumptions, each checked through the simulated libnvidia-ml.so.1 as erg reads it. Every check
// is one the behaviour's absence (or a wrong formula) fails: a random walk against a grid of the
// same period and jitter, jumps and skips at the spacings they make, a delayed value against an
// undelayed one, each stamp mode against the exact stamp it states, a nominal-period increment
// against the actual-period one, an exponential average against the boxcar.

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "erg/backends/amdsmi/amdsmi_abi.h"
#include "sim_fixture.hpp"

namespace erg::sim {
namespace {

using namespace std::chrono_literals;
using std::chrono::nanoseconds;
using testing::SimTest;

double ms(nanoseconds d) { return static_cast<double>(d.count()) / 1e6; }

class SensorZoo : public SimTest {
 protected:
  /// wall time − sim time (whole ms on the virtual clock). On the real clock the two reads are
  /// apart: the difference underestimates the offset by that gap, so the largest of a few is kept.
  std::int64_t wall_offset_ns() {
    std::int64_t best = (machine_->wall_now() - machine_->now()).count();
    for (int i = 0; i < 20; ++i) best = std::max(best, (machine_->wall_now() - machine_->now()).count());
    return best;
  }
  /// A field's wall-clock µs stamp as sim time (ns, to the µs).
  std::int64_t stamp_to_sim_ns(long long stamp_us) { return stamp_us * 1000 - wall_offset_ns(); }
  /// The wall-clock µs stamp the driver gives a sim time.
  long long wall_us(nanoseconds t) { return (t.count() + wall_offset_ns()) / 1000; }

  /// Drives the machine from one energy-counter update to the next of the GPUs in `gpus`, until
  /// each has `n` more. At each update the GPU's energy field is read through the driver; its
  /// timestamp (the GPU has update-time stamps) gives the update's time, as sim ns to the µs.
  std::vector<std::vector<std::int64_t>> update_times(
      const std::vector<unsigned>& gpus, std::size_t n,
      std::vector<std::vector<unsigned long long>>* counters = nullptr) {
    std::vector<std::vector<std::int64_t>> out(gpus.size());
    if (counters != nullptr) counters->assign(gpus.size(), {});
    for (;;) {
      nanoseconds next = nanoseconds::max();
      for (std::size_t i = 0; i < gpus.size(); ++i)
        if (out[i].size() < n) next = std::min(next, machine_->sensor_info(gpus[i])->next_update);
      if (next == nanoseconds::max()) return out;
      EXPECT_TRUE(machine_->advance(next - machine_->now()));
      for (std::size_t i = 0; i < gpus.size(); ++i) {
        if (out[i].size() >= n || machine_->sensor_info(gpus[i])->last_update != next) continue;
        const auto v = field(gpus[i], NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION);
        EXPECT_EQ(stamp_to_sim_ns(v.timestamp), next.count() / 1000 * 1000) << "GPU " << gpus[i];
        out[i].push_back(stamp_to_sim_ns(v.timestamp));
        if (counters != nullptr) (*counters)[i].push_back(v.value.ullVal);
      }
    }
  }
};

std::vector<double> spacings_ms(const std::vector<std::int64_t>& t) {
  std::vector<double> d;
  for (std::size_t i = 1; i < t.size(); ++i) d.push_back(static_cast<double>(t[i] - t[i - 1]) / 1e6);
  return d;
}

double mean(const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0) / v.size(); }

/// Mean over k of (τ_{k+m} − τ_k − m·P)² in ms²: σ²·m for a random walk, 2σ² for jitter on a grid.
double lag_variance(const std::vector<std::vector<std::int64_t>>& walks, std::size_t m, double period_ms) {
  double sum = 0.0;
  std::size_t count = 0;
  for (const auto& t : walks)
    for (std::size_t k = 0; k + m < t.size(); ++k) {
      const double d = static_cast<double>(t[k + m] - t[k]) / 1e6 - static_cast<double>(m) * period_ms;
      sum += d * d;
      ++count;
    }
  return sum / static_cast<double>(count);
}

/// RMS distance (ms) of the update times from the fixed grid that fits them best (least squares).
double rms_from_best_grid(const std::vector<std::int64_t>& t) {
  const double n = static_cast<double>(t.size());
  double sk = 0, st = 0, skk = 0, skt = 0;
  for (std::size_t k = 0; k < t.size(); ++k) {
    const double x = static_cast<double>(k), y = static_cast<double>(t[k] - t[0]) / 1e6;
    sk += x, st += y, skk += x * x, skt += x * y;
  }
  const double period = (n * skt - sk * st) / (n * skk - sk * sk);
  const double origin = (st - period * sk) / n;
  double ss = 0;
  for (std::size_t k = 0; k < t.size(); ++k) {
    const double r = static_cast<double>(t[k] - t[0]) / 1e6 - (origin + period * static_cast<double>(k));
    ss += r * r;
  }
  return std::sqrt(ss / n);
}

TEST_F(SensorZoo, RandomWalkDriftsFromEveryGridLikeTheSquareRootOfTheUpdates) {
  // GPUs 0–7 walk, 8–11 jitter around a grid; all with a 100 ms period and σ = 2 ms.
  std::string gpus;
  for (int i = 0; i < 12; ++i)
    gpus += std::string(i ? "," : "") + R"({"sku":"A100","energy_period_ms":100,"jitter_ms":2,"stamps":"update")" +
            (i < 8 ? R"(,"schedule":"random_walk"})" : "}");
  start((R"({"gpus":[)" + gpus + R"(],"cpus":0,"seed":21})").c_str());
  for (unsigned g = 0; g < 12; ++g) {
    EXPECT_EQ(machine_->sensor_info(g)->schedule, g < 8 ? Schedule::kRandomWalk : Schedule::kGrid);
    EXPECT_EQ(machine_->sensor_info(g)->energy_period, 100ms);
  }
  const auto times = update_times({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, 401);
  const std::vector<std::vector<std::int64_t>> walks(times.begin(), times.begin() + 8);
  const std::vector<std::vector<std::int64_t>> grids(times.begin() + 8, times.end());
  // Each step is a period plus a zero-mean offset: the spacings average the period.
  for (const auto& t : walks) EXPECT_NEAR(mean(spacings_ms(t)), 100.0, 0.5);
  // Yet no fixed grid stays near the updates: the mean square distance from the best-fitting
  // grid is σ²·N/15 for a walk of N steps (107 ms² here), σ² for jitter around a grid (4 ms²).
  auto mean_square = [](const std::vector<std::vector<std::int64_t>>& runs) {
    double sum = 0;
    for (const auto& t : runs) sum += rms_from_best_grid(t) * rms_from_best_grid(t);
    return sum / static_cast<double>(runs.size());
  };
  EXPECT_GT(mean_square(walks), 40.0) << "a random walk, not jitter around a grid";
  EXPECT_LT(mean_square(grids), 6.0) << "the grid stays within its jitter";
  // The deviation over m updates grows like √m: its variance like m (σ² per step).
  const double v1 = lag_variance(walks, 1, 100.0), v25 = lag_variance(walks, 25, 100.0);
  const double v100 = lag_variance(walks, 100, 100.0);
  EXPECT_NEAR(v1, 4.0, 1.0) << "σ = 2 ms per step";
  EXPECT_GT(v25 / v1, 12.0);
  EXPECT_LT(v25 / v1, 50.0);
  EXPECT_GT(v100 / v1, 30.0);
  EXPECT_LT(v100 / v1, 250.0);
  // Jitter around a grid: the same variance at every lag (2σ²).
  const double g1 = lag_variance(grids, 1, 100.0), g100 = lag_variance(grids, 100, 100.0);
  EXPECT_NEAR(g1, 8.0, 2.0);
  EXPECT_LT(g100 / g1, 2.0);
}

TEST_F(SensorZoo, PhaseJumpsAtTheStatedTimesBySeededSharesOfThePeriod) {
  start(R"({"gpus":[{"sku":"A100","energy_period_ms":100,"jitter_ms":0.2,"stamps":"update",)"
        R"("schedule":"phase_jumps","phase_jump_s":2}],"cpus":0})");
  const auto created = machine_->now();
  const auto info = machine_->sensor_info(0);
  EXPECT_EQ(info->schedule, Schedule::kPhaseJumps);
  EXPECT_EQ(info->phase_jump_every, 2s);
  const auto t = update_times({0}, 95)[0];  // 9.5 s: jumps at 2, 4, 6 and 8 s
  std::vector<double> jumps;
  for (std::size_t k = 1; k < t.size(); ++k) {
    const double d = static_cast<double>(t[k] - t[k - 1]) / 1e6;
    // A jump moves every later update by δ·period: the spacing across it is (1 + δ)·period.
    std::int64_t jump_at = 0;
    for (int j = 1; j <= 4; ++j) {
      const std::int64_t at = (created + j * 2s).count();
      if (t[k - 1] < at && at <= t[k]) jump_at = at;
    }
    if (jump_at == 0) {
      EXPECT_NEAR(d, 100.0, 6 * 0.2 + 0.01) << "no jump between updates " << k - 1 << " and " << k;
    } else {
      EXPECT_GT(d, 100.0 * 1.2 - 1.3) << "the jump at " << jump_at;
      EXPECT_LT(d, 100.0 * 1.8 + 1.3) << "the jump at " << jump_at;
      jumps.push_back(d / 100.0 - 1.0);
    }
  }
  ASSERT_EQ(jumps.size(), 4u) << "one jump every 2 s";
  EXPECT_GT(*std::max_element(jumps.begin(), jumps.end()) - *std::min_element(jumps.begin(), jumps.end()), 0.02)
      << "seeded jumps, not one fixed share";
}

TEST_F(SensorZoo, SkipsAndDoubledUpdatesCoverTheirSpans) {
  start(R"({"gpus":[{"sku":"A100","energy_period_ms":100,"jitter_ms":0.2,"stamps":"update",)"
        R"("schedule":"skips","skip_share":0.1,"increment":"whole"}],"cpus":0,"seed":4})");
  EXPECT_EQ(machine_->sensor_info(0)->skip_share, 0.1);
  ASSERT_TRUE(machine_->set_utilization(0, 0.6));
  ASSERT_TRUE(machine_->advance(1s));
  std::vector<std::vector<unsigned long long>> counters;
  const auto times = update_times({0}, 300, &counters);
  const auto d = spacings_ms(times[0]);
  const auto& c = counters[0];
  int doubled = 0, skipped = 0, whole = 0;
  std::vector<double> rates;  // counter increment / spacing: the power, whatever the spacing
  for (std::size_t k = 0; k < d.size(); ++k) {
    // Every spacing is a whole number of half periods (±6σ of jitter).
    const double halves = d[k] / 50.0;
    EXPECT_NEAR(halves, std::round(halves), 1.3 / 50.0) << d[k];
    if (std::round(halves) == 1) ++doubled;  // a half period: one side of a doubled update
    if (std::round(halves) == 2) ++whole;
    if (std::round(halves) >= 4) ++skipped;
    rates.push_back(static_cast<double>(c[k + 1] - c[k]) / d[k]);
  }
  EXPECT_GT(skipped, 10) << "some spacings are two periods";
  EXPECT_GT(doubled, 20) << "some are half a period";
  EXPECT_GT(whole, 150);
  // The update after a skip covers both periods and a doubled one the first half: the counter's
  // rate is the power throughout (whole increments, steady load; noise 0.3 % per update and the
  // counter's 1 mJ steps).
  const double r = mean(rates);
  for (std::size_t k = 0; k < rates.size(); ++k) EXPECT_NEAR(rates[k], r, 0.02 * r) << "spacing " << d[k];
}

TEST_F(SensorZoo, ThePeriodChangesAtTheStatedTime) {
  start(R"({"gpus":[{"sku":"A100","energy_period_ms":100,"jitter_ms":0.2,"stamps":"update",)"
        R"("schedule":"period_change","change_at_s":3,"period_after_ms":170},)"
        R"({"sku":"A100","stamps":"update","schedule":"period_change"}],"cpus":0})");
  const auto created = machine_->now();
  auto info = machine_->sensor_info(0);
  EXPECT_EQ(info->schedule, Schedule::kPeriodChange);
  EXPECT_EQ(info->period_change_at, created + 3s);
  EXPECT_EQ(info->period_after, 170ms);
  EXPECT_EQ(info->energy_period, 100ms);
  const auto p1 = machine_->sensor_info(1)->energy_period;
  EXPECT_EQ(machine_->sensor_info(1)->period_after.count(), std::llround(1.3 * static_cast<double>(p1.count())))
      << "the default: 1.3 × the period";
  EXPECT_EQ(machine_->sensor_info(1)->period_change_at, created + 5s) << "the default: 5 s";
  const auto times = update_times({0, 1}, 60);
  for (unsigned g = 0; g < 2; ++g) {
    const auto& t = times[g];
    const std::int64_t at = machine_->sensor_info(g)->period_change_at.count();
    const double before = g == 0 ? 100.0 : ms(p1);
    const double after = g == 0 ? 170.0 : ms(machine_->sensor_info(1)->period_after);
    int n_before = 0, n_after = 0;
    for (std::size_t k = 1; k < t.size(); ++k) {
      const double d = static_cast<double>(t[k] - t[k - 1]) / 1e6;
      const double sigma = ms(machine_->sensor_info(g)->jitter);
      // Clear of the change by more than 3σ: the update is on the old grid, or on the new one.
      if (t[k] < at - 5'000'000) {
        EXPECT_NEAR(d, before, 6 * sigma + 0.01) << g;
        ++n_before;
      } else if (t[k - 1] > at + 5'000'000) {
        EXPECT_NEAR(d, after, 6 * sigma + 0.01) << g;
        ++n_after;
      }
    }
    EXPECT_GT(n_before, 25) << g;
    EXPECT_GT(n_after, 5) << g;
  }
  EXPECT_EQ(machine_->sensor_info(0)->energy_period, 170ms);
}

TEST_F(SensorZoo, APublishDelayShowsThePreviousValueUntilItPasses) {
  // GPU 0 publishes 30 ms late; GPU 1 is the same without the delay. Same seed, position apart.
  start(R"({"gpus":[{"sku":"A100","energy_period_ms":100,"publish_delay_ms":30,"stamps":"update"},)"
        R"({"sku":"A100","energy_period_ms":100,"stamps":"update"}],"cpus":0})");
  ASSERT_TRUE(machine_->set_utilization(0, 0.8));
  ASSERT_TRUE(machine_->set_utilization(1, 0.8));
  ASSERT_TRUE(machine_->advance(1s));
  EXPECT_EQ(machine_->sensor_info(0)->publish_delay, 30ms);
  for (unsigned g = 0; g < 2; ++g) {
    for (int round = 0; round < 5; ++round) {
      const auto tau = machine_->sensor_info(g)->next_update;
      ASSERT_TRUE(machine_->advance(tau - machine_->now() - 1ms));
      const auto before = field(g, NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION);
      const auto before_p = field(g, NVML_FI_DEV_POWER_INSTANT);
      ASSERT_TRUE(machine_->advance(2ms));  // 1 ms after the update
      EXPECT_EQ(machine_->sensor_info(g)->last_update, tau) << "the update happened (and integrated up to τ)";
      const auto after = field(g, NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION);
      const auto after_p = field(g, NVML_FI_DEV_POWER_INSTANT);
      unsigned long long api = 0;
      ASSERT_EQ(nvml_.nvmlDeviceGetTotalEnergyConsumption(dev(g), &api), NVML_SUCCESS);
      EXPECT_EQ(api, after.value.ullVal);
      if (g == 0) {
        EXPECT_EQ(after.value.ullVal, before.value.ullVal) << "still the previous update's value";
        EXPECT_EQ(after.timestamp, before.timestamp) << "and its stamp";
        EXPECT_EQ(after_p.value.uiVal, before_p.value.uiVal);
        EXPECT_LT(stamp_to_sim_ns(after.timestamp), tau.count() - 50'000'000);
      } else {
        EXPECT_GT(after.value.ullVal, before.value.ullVal) << "undelayed: the new value at once";
        EXPECT_EQ(stamp_to_sim_ns(after.timestamp), tau.count() / 1000 * 1000);
      }
      // The delay later (and 1 ms), the new value.
      ASSERT_TRUE(machine_->advance(30ms));
      const auto late = field(g, NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION);
      EXPECT_GT(late.value.ullVal, before.value.ullVal) << g;
      EXPECT_EQ(stamp_to_sim_ns(late.timestamp), tau.count() / 1000 * 1000) << "stamped with its update time";
    }
  }
  // The integrated energy is the sensor's, at its update times, delay or not.
  const auto t = machine_->now() - 500ms;
  EXPECT_TRUE(machine_->sensor_energy_at(0, t));
}

TEST_F(SensorZoo, APublishDelayHoldsOnTheLockFreeReadPath) {
  start(R"({"gpus":[{"sku":"A100","publish_delay_ms":50,"stamps":"update"}],"cpus":0})", /*virtual_clock=*/false);
  const auto info = *machine_->sensor_info(0);
  const std::int64_t delay = 50'000'000, bound = info.energy_period.count() + 4 * info.jitter.count() + 1000;
  const std::int64_t offset = wall_offset_ns();
  nvmlDevice_t d = dev(0);  // once: getting a handle is a control call, which voids published readings
  const auto end = std::chrono::steady_clock::now() + 600ms;
  int reads = 0;
  while (std::chrono::steady_clock::now() < end) {
    const std::int64_t t0 = machine_->now().count();
    nvmlFieldValue_t v{};
    v.fieldId = NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION;
    ASSERT_EQ(nvml_.nvmlDeviceGetFieldValues(d, 1, &v), NVML_SUCCESS);
    const std::int64_t t1 = machine_->now().count();
    const std::int64_t shown = v.timestamp * 1000 - offset;  // the update the value comes from
    // Readable only `delay` after its update, and the latest such update.
    EXPECT_LE(shown, t1 - delay + 100'000);
    EXPECT_GT(shown, t0 - delay - bound);
    ++reads;
    std::this_thread::sleep_for(300us);
  }
  EXPECT_GT(reads, 100);
  EXPECT_GT(*machine_->lock_free_reads(0), 0u) << "the published readings were used";
}

TEST_F(SensorZoo, EachStampModeGivesTheStatedStamp) {
  // Machine-wide update-time stamps; GPU 1 overrides it with read time, GPU 5 keeps it.
  start(R"({"gpus":[{"sku":"H100","stamps":"update"},{"sku":"H100","stamps":"read"},)"
        R"({"sku":"H100","stamps":"interval_start"},{"sku":"H100","stamps":"floored"},)"
        R"({"sku":"H100","stamps":"floored","stamp_unit_ms":250},{"sku":"H100"},)"
        R"({"sku":"H100","stamps":"unrelated"}],"cpus":0,"timestamps":"update"})");
  const auto created = machine_->now();
  const StampMode want[] = {StampMode::kUpdate,  StampMode::kRead,   StampMode::kIntervalStart, StampMode::kFloored,
                            StampMode::kFloored, StampMode::kUpdate, StampMode::kUnrelated};
  for (unsigned g = 0; g < 7; ++g) EXPECT_EQ(machine_->sensor_info(g)->stamps, want[g]) << g;
  EXPECT_EQ(machine_->sensor_info(3)->stamp_unit, 1s) << "default unit";
  EXPECT_EQ(machine_->sensor_info(4)->stamp_unit, 250ms);
  ASSERT_TRUE(machine_->set_utilization(6, 0.5));
  std::vector<nanoseconds> updates[7];  // every update seen (reads every 37 ms < the period)
  long long last_unrelated = 0;
  for (int i = 0; i < 150; ++i) {
    ASSERT_TRUE(machine_->advance(37ms));
    const auto now = machine_->now();
    for (unsigned g = 0; g < 7; ++g) {
      const auto info = *machine_->sensor_info(g);
      if (updates[g].empty() || updates[g].back() != info.last_update) updates[g].push_back(info.last_update);
      const auto e = field(g, NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION);
      const auto p = field(g, NVML_FI_DEV_POWER_INSTANT);
      const auto a = field(g, NVML_FI_DEV_POWER_AVERAGE);
      const auto& u = updates[g];
      if (u.size() < 12) continue;  // the boxcar average's span (10 updates) seen whole
      const long long update = wall_us(info.last_update), read = wall_us(now);
      switch (want[g]) {
        case StampMode::kUpdate:
          EXPECT_EQ(e.timestamp, update) << g;
          EXPECT_EQ(p.timestamp, update) << g << ": the power fields update with the counter on H100";
          EXPECT_EQ(a.timestamp, update) << g;
          break;
        case StampMode::kRead:
          EXPECT_EQ(e.timestamp, read);
          EXPECT_EQ(p.timestamp, read);
          EXPECT_EQ(a.timestamp, read);
          break;
        case StampMode::kIntervalStart:
          EXPECT_EQ(e.timestamp, wall_us(u[u.size() - 2])) << "the previous update: where the increment starts";
          EXPECT_EQ(p.timestamp, wall_us(u[u.size() - 2]));
          EXPECT_EQ(a.timestamp, wall_us(u[u.size() - 11])) << "the boxcar average covers the last 10 periods";
          break;
        case StampMode::kFloored: {
          const long long unit = machine_->sensor_info(g)->stamp_unit.count() / 1000;
          for (long long s : {e.timestamp, p.timestamp, a.timestamp}) {
            EXPECT_EQ(s, update / unit * unit) << g;
            EXPECT_EQ(s % unit, 0);
          }
          break;
        }
        case StampMode::kUnrelated: {
          const auto& si = info;
          const double drift = si.stamp_drift * static_cast<double>((now - created).count());
          const long long expect =
              (now.count() + wall_offset_ns() + si.stamp_offset.count() + std::llround(drift)) / 1000;
          EXPECT_EQ(e.timestamp, expect);
          EXPECT_EQ(p.timestamp, expect);
          EXPECT_EQ(a.timestamp, expect);
          EXPECT_GE(e.timestamp - read, 2'900'000) << "several seconds off the read time";
          EXPECT_GT(e.timestamp, last_unrelated) << "monotonic";
          last_unrelated = e.timestamp;
          break;
        }
      }
    }
  }
  EXPECT_GT(last_unrelated, 0);
  const auto si = *machine_->sensor_info(6);
  EXPECT_GE(si.stamp_offset, 3s);
  EXPECT_LE(si.stamp_offset, 8s);
  EXPECT_NE(si.stamp_drift, 0.0);
  EXPECT_LE(std::abs(si.stamp_drift), 1e-3);
}

TEST_F(SensorZoo, StampModesHoldOnTheLockFreeReadPath) {
  start(R"({"gpus":[{"sku":"A100","stamps":"floored","stamp_unit_ms":50},{"sku":"A100","stamps":"unrelated"},)"
        R"({"sku":"A100","stamps":"interval_start"}],"cpus":0})",
        /*virtual_clock=*/false);
  const std::int64_t offset = wall_offset_ns();
  const auto info = *machine_->sensor_info(1);
  nvmlDevice_t d[3] = {dev(0), dev(1), dev(2)};  // once: getting a handle voids published readings
  auto read = [&](unsigned g, unsigned id) {
    nvmlFieldValue_t v{};
    v.fieldId = id;
    EXPECT_EQ(nvml_.nvmlDeviceGetFieldValues(d[g], 1, &v), NVML_SUCCESS);
    return v;
  };
  const auto end = std::chrono::steady_clock::now() + 400ms;
  while (std::chrono::steady_clock::now() < end) {
    const auto t0 = machine_->now();
    const auto f = read(0, NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION);
    const auto u = read(1, NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION);
    const auto s = read(2, NVML_FI_DEV_POWER_INSTANT);
    const auto t1 = machine_->now();
    EXPECT_EQ(f.timestamp % 50'000, 0) << "floored to 50 ms";
    EXPECT_LE(f.timestamp * 1000 - offset, t1.count());
    // The unrelated clock at some instant of the read: between its values at t0 and t1 (its
    // offset is 3–8 s, its drift ≤ 0.1 % of the few seconds since creation: bounded by 10 ms).
    EXPECT_GE(u.timestamp * 1000 - offset - info.stamp_offset.count(), t0.count() - 10'000'000);
    EXPECT_LE(u.timestamp * 1000 - offset - info.stamp_offset.count(), t1.count() + 10'000'000);
    // interval_start: a whole period before the update shown, so never within the last period.
    EXPECT_LE(s.timestamp * 1000 - offset, t1.count() - 90'000'000);
    std::this_thread::sleep_for(500us);
  }
  for (unsigned g = 0; g < 3; ++g) EXPECT_GT(*machine_->lock_free_reads(g), 0u) << g;
}

TEST_F(SensorZoo, PartialNominalIncrementsFollowTheNominalPeriodNotTheActualOne) {
  // Both sample the last 25 ms; the spacings vary (skips: ½, 1, 2 periods).
  start(R"({"gpus":[{"sku":"A100","increment":"partial","schedule":"skips","skip_share":0.15,"stamps":"update",)"
        R"("energy_period_ms":100,"jitter_ms":0.2},)"
        R"({"sku":"A100","increment":"partial_nominal","schedule":"skips","skip_share":0.15,"stamps":"update",)"
        R"("energy_period_ms":100,"jitter_ms":0.2}],"cpus":0,"seed":9})");
  for (unsigned g = 0; g < 2; ++g) {
    const auto info = *machine_->sensor_info(g);
    EXPECT_EQ(info.increment, g == 0 ? Increment::kPartial : Increment::kPartialNominal);
    EXPECT_TRUE(info.partial_sampling);
    EXPECT_EQ(info.sampled_window, 25ms);
    EXPECT_EQ(info.nominal_period, 100ms);
    ASSERT_TRUE(machine_->set_utilization(g, 0.7));
  }
  ASSERT_TRUE(machine_->advance(1s));
  std::vector<std::vector<unsigned long long>> c;
  const auto t = update_times({0, 1}, 200, &c);
  for (unsigned g = 0; g < 2; ++g) {
    const auto d = spacings_ms(t[g]);
    std::vector<double> inc;
    for (std::size_t k = 0; k < d.size(); ++k) inc.push_back(static_cast<double>(c[g][k + 1] - c[g][k]));
    // Short and long spacings, as the schedule makes them.
    double shortest = 1e9, longest = 0;
    for (double x : d) shortest = std::min(shortest, x), longest = std::max(longest, x);
    ASSERT_LT(shortest, 60.0);
    ASSERT_GT(longest, 190.0);
    // The steady power the window samples, from the increments of whole-period spacings.
    std::vector<double> per_ms;
    for (std::size_t k = 0; k < d.size(); ++k)
      if (std::abs(d[k] - 100.0) < 2.0) per_ms.push_back(inc[k] / d[k]);
    const double p = mean(per_ms);  // mJ per ms = W
    for (std::size_t k = 0; k < d.size(); ++k) {
      const double want = p * (g == 0 ? d[k] : 100.0);  // × the actual or the nominal period
      EXPECT_NEAR(inc[k], want, 0.02 * want) << "GPU " << g << ", spacing " << d[k] << " ms";
    }
  }
}

TEST_F(SensorZoo, TheExponentialAverageFollowsOneMinusEToTheMinusTOverOneSecond) {
  // A40: POWER_AVERAGE and GetPowerUsage report the average; the cap (300 W) does not bind.
  start(R"({"gpus":[{"sku":"A40","energy_period_ms":100,"jitter_ms":0,"average":"exponential"},)"
        R"({"sku":"A40","energy_period_ms":100,"jitter_ms":0}],"cpus":0})");
  EXPECT_EQ(machine_->sensor_info(0)->average, AverageMode::kExponential);
  EXPECT_EQ(machine_->sensor_info(1)->average, AverageMode::kBoxcar);
  ASSERT_TRUE(machine_->advance(3s));
  auto average_w = [&](unsigned g) { return field(g, NVML_FI_DEV_POWER_AVERAGE).value.uiVal / 1000.0; };
  // The step: full load from just after GPU 0's update.
  const auto tau0 = machine_->sensor_info(0)->next_update;
  ASSERT_TRUE(machine_->advance(tau0 - machine_->now()));
  const double low[2] = {average_w(0), average_w(1)};
  for (unsigned g = 0; g < 2; ++g) ASSERT_TRUE(machine_->set_utilization(g, 1.0));
  std::vector<std::pair<double, double>> response[2];  // (time since the step in s, normalized average)
  std::vector<double> raw[2];
  for (int k = 1; k <= 60; ++k) {
    // Read just after GPU 0's update k (and GPU 1 whenever its reading is k updates old too).
    ASSERT_TRUE(machine_->advance(tau0 + k * 100ms + 1ms - machine_->now()));
    for (unsigned g = 0; g < 2; ++g) raw[g].push_back(average_w(g));
    unsigned usage = 0;
    ASSERT_EQ(nvml_.nvmlDeviceGetPowerUsage(dev(0), &usage), NVML_SUCCESS);
    EXPECT_EQ(usage, field(0, NVML_FI_DEV_POWER_AVERAGE).value.uiVal) << "GetPowerUsage is the average";
  }
  const double high[2] = {raw[0].back(), raw[1].back()};
  ASSERT_GT(high[0], low[0] + 100.0);
  for (int k = 1; k <= 60; ++k) {
    const double t = 0.1 * k;
    const double exp_norm = (raw[0][k - 1] - low[0]) / (high[0] - low[0]);
    EXPECT_NEAR(exp_norm, 1.0 - std::exp(-t / 1.0), 0.03) << "t = " << t << " s";
  }
  // The boxcar instead reaches the new level within its 1 s (GPU 1's phase is its own: ±0.1 s).
  const double box_norm_05 = (raw[1][4] - low[1]) / (high[1] - low[1]);
  const double box_norm_15 = (raw[1][14] - low[1]) / (high[1] - low[1]);
  EXPECT_NEAR(box_norm_05, 0.5, 0.15);
  EXPECT_GT(box_norm_15, 0.97);
  EXPECT_LT((raw[0][14] - low[0]) / (high[0] - low[0]), 0.85) << "the exponential one is still at 1 − e^−1.5";
}

TEST_F(SensorZoo, PhysicalEnergyAtIsTheTrueEnergyAtThatTime) {
  for (const char* spec : {"1xA100,cpus=0", "1xA100,ideal,cpus=0"}) {
    start(spec);
    ASSERT_TRUE(machine_->set_load(0, Load::training()));
    std::vector<std::pair<nanoseconds, double>> seen;  // (time, true_energy read then)
    for (int i = 0; i < 400; ++i) {
      // Odd steps (within and across 1 ms physics steps), and control events mid-step.
      ASSERT_TRUE(machine_->advance(nanoseconds(123'457 + 1'000'003 * (i % 5))));
      if (i % 97 == 0) {
        ASSERT_TRUE(machine_->set_utilization(0, 0.3 + 0.001 * i));
      }
      if (i % 131 == 0) {
        ASSERT_TRUE(machine_->set_load(0, Load::training()));
      }
      seen.emplace_back(machine_->now(), machine_->true_energy(0)->value());
      const auto here = machine_->physical_energy_at(0, machine_->now());
      ASSERT_TRUE(here) << here.error().message;
      EXPECT_NEAR(here->value(), seen.back().second, 1e-9 * seen.back().second) << "at now";
    }
    ASSERT_TRUE(machine_->advance(3s));
    for (const auto& [t, e] : seen) {
      const auto p = machine_->physical_energy_at(0, t);
      ASSERT_TRUE(p) << spec << ": " << p.error().message;
      EXPECT_NEAR(p->value(), e, 1e-9 * e) << spec << " at " << t.count();
    }
    const auto future = machine_->physical_energy_at(0, machine_->now() + 1ns);
    ASSERT_FALSE(future);
    EXPECT_EQ(future.error().code, ErrorCode::kUnavailable);
    if (std::string(spec).find("ideal") == std::string::npos) {
      ASSERT_TRUE(machine_->advance(25s));
      const auto old = machine_->physical_energy_at(0, seen.front().first);
      ASSERT_FALSE(old) << "kept for about 20 s";
      EXPECT_EQ(old.error().code, ErrorCode::kNotFound);
      EXPECT_TRUE(machine_->physical_energy_at(0, machine_->now() - 19s));
    }
    EXPECT_FALSE(machine_->physical_energy_at(3, machine_->now()));
    TearDown();
  }
}

TEST_F(SensorZoo, SchedulesAreAFunctionOfTheSeedNotOfHowTheMachineIsDriven) {
  const char* zoo[] = {
      R"("schedule":"random_walk")",
      R"("schedule":"phase_jumps","phase_jump_s":1.5)",
      R"("schedule":"skips","skip_share":0.2)",
      R"("schedule":"period_change","change_at_s":2)",
  };
  for (const char* z : zoo) {
    const std::string spec = std::string(R"({"gpus":[{"sku":"A100",)") + z +
                             R"(,"publish_delay_ms":20,"increment":"partial_nominal","average":"exponential"},)"
                             R"({"sku":"A40",)" +
                             z + R"(,"average":"exponential"}],"cpus":0,"seed":5})";
    struct Run {
      unsigned long long counter[2];
      nanoseconds last[2], next[2];
      unsigned average;
    };
    auto run = [&](bool small_steps) {
      start(spec.c_str());
      EXPECT_TRUE(machine_->set_load(0, Load::training()));
      EXPECT_TRUE(machine_->set_load(1, Load::training()));
      if (small_steps) {
        for (int i = 0; i < 6000; ++i) {
          EXPECT_TRUE(machine_->advance(1ms));
          if (i % 7 == 0) (void)counter_mj(i % 2);
        }
      } else {
        EXPECT_TRUE(machine_->advance(6s));
      }
      Run r{};
      for (unsigned g = 0; g < 2; ++g) {
        r.counter[g] = counter_mj(g);
        r.last[g] = machine_->sensor_info(g)->last_update;
        r.next[g] = machine_->sensor_info(g)->next_update;
      }
      r.average = field(1, NVML_FI_DEV_POWER_AVERAGE).value.uiVal;
      TearDown();
      return r;
    };
    const Run a = run(false), b = run(true);
    for (unsigned g = 0; g < 2; ++g) {
      EXPECT_EQ(a.counter[g], b.counter[g]) << z;
      EXPECT_EQ(a.last[g], b.last[g]) << z;
      EXPECT_EQ(a.next[g], b.next[g]) << z;
    }
    EXPECT_EQ(a.average, b.average) << z;
  }
}

/// The simulated libamd_smi.so (dlopen, like the NVML one), with the calls the AMD check needs.
struct AmdSmi {
  void* lib = ::dlopen(ERG_SIM_AMDSMI, RTLD_NOW | RTLD_LOCAL);
  template <class F>
  F sym(const char* name) {
    return lib != nullptr ? reinterpret_cast<F>(::dlsym(lib, name)) : nullptr;
  }
  amdsmi_init_fn init = sym<amdsmi_init_fn>("amdsmi_init");
  amdsmi_shut_down_fn shut_down = sym<amdsmi_shut_down_fn>("amdsmi_shut_down");
  amdsmi_get_socket_handles_fn sockets = sym<amdsmi_get_socket_handles_fn>("amdsmi_get_socket_handles");
  amdsmi_get_processor_handles_fn processors = sym<amdsmi_get_processor_handles_fn>("amdsmi_get_processor_handles");
  amdsmi_get_energy_count_fn energy = sym<amdsmi_get_energy_count_fn>("amdsmi_get_energy_count");
  amdsmi_get_power_info_fn power = sym<amdsmi_get_power_info_fn>("amdsmi_get_power_info");
  ~AmdSmi() {
    if (lib != nullptr) ::dlclose(lib);
  }
};

TEST_F(SensorZoo, AmdEnergyStampsPublishDelayAndExponentialAverage) {
  start(R"({"gpus":[{"sku":"MI210","stamps":"interval_start","publish_delay_ms":20,"average":"exponential",)"
        R"("energy_period_ms":100,"jitter_ms":0},{"sku":"MI210","stamps":"floored","stamp_unit_ms":250},)"
        R"({"sku":"MI210"}],"cpus":0})");  // GPU 2: the SKU's 10 ms period (the boxcar: 100 updates)
  const auto created = machine_->now();
  AmdSmi amd;
  ASSERT_TRUE(amd.init && amd.shut_down && amd.sockets && amd.processors && amd.energy && amd.power) << ::dlerror();
  ASSERT_EQ(amd.init(AMDSMI_INIT_AMD_GPUS), AMDSMI_STATUS_SUCCESS);
  std::uint32_t n = 3;
  amdsmi_socket_handle sockets[3] = {};
  ASSERT_EQ(amd.sockets(&n, sockets), AMDSMI_STATUS_SUCCESS);
  ASSERT_EQ(n, 3u);
  amdsmi_processor_handle h[3] = {};
  for (unsigned i = 0; i < 3; ++i) {
    std::uint32_t one = 1;
    ASSERT_EQ(amd.processors(sockets[i], &one, &h[i]), AMDSMI_STATUS_SUCCESS);
  }
  struct Reading {
    std::uint64_t count = 0, stamp = 0;
  };
  auto energy = [&](unsigned g) {
    Reading r;
    float resolution = 0;
    EXPECT_EQ(amd.energy(h[g], &r.count, &resolution, &r.stamp), AMDSMI_STATUS_SUCCESS);
    return r;
  };
  auto average_w = [&](unsigned g) {
    erg_amdsmi_power_info_any_t info{};
    EXPECT_EQ(amd.power(h[g], &info), AMDSMI_STATUS_SUCCESS);
    return static_cast<double>(info.v26.average_socket_power);
  };
  ASSERT_TRUE(machine_->advance(1234ms));
  // The default: the update time on the GPU's clock (ns from creation); floored: to 250 ms.
  const auto last2 = machine_->sensor_info(2)->last_update, last1 = machine_->sensor_info(1)->last_update;
  EXPECT_EQ(energy(2).stamp, static_cast<std::uint64_t>((last2 - created).count()));
  EXPECT_EQ(energy(1).stamp, static_cast<std::uint64_t>((last1 - created) / 250ms * 250'000'000));
  // GPU 0: the previous update's time (interval start), 20 ms late.
  const auto tau = machine_->sensor_info(0)->next_update;
  ASSERT_TRUE(machine_->advance(tau - machine_->now() - 1ms));
  const Reading before = energy(0);
  EXPECT_EQ(before.stamp, static_cast<std::uint64_t>((tau - 200ms - created).count()));
  ASSERT_TRUE(machine_->advance(2ms));
  const Reading early = energy(0);
  EXPECT_EQ(early.count, before.count) << "not readable yet";
  EXPECT_EQ(early.stamp, before.stamp);
  ASSERT_TRUE(machine_->advance(20ms));
  const Reading late = energy(0);
  EXPECT_GT(late.count, before.count);
  EXPECT_EQ(late.stamp, static_cast<std::uint64_t>((tau - 100ms - created).count()));

  // The exponential average (GPU 0) against the boxcar (GPU 2) after a step at GPU 0's update.
  const auto tau0 = machine_->sensor_info(0)->next_update;
  ASSERT_TRUE(machine_->advance(tau0 - machine_->now()));
  const double low[2] = {average_w(0), average_w(2)};
  ASSERT_TRUE(machine_->set_utilization(0, 0.6));
  ASSERT_TRUE(machine_->set_utilization(2, 0.6));
  std::vector<double> raw[2];
  for (int k = 1; k <= 60; ++k) {
    ASSERT_TRUE(machine_->advance(tau0 + k * 100ms + 21ms - machine_->now()));  // update k, readable
    raw[0].push_back(average_w(0));
    raw[1].push_back(average_w(2));
  }
  const double high[2] = {raw[0].back(), raw[1].back()};
  ASSERT_GT(high[0], low[0] + 50.0);
  for (int k : {5, 10, 20, 30}) {
    const double norm = (raw[0][k - 1] - low[0]) / (high[0] - low[0]);
    EXPECT_NEAR(norm, 1.0 - std::exp(-0.1 * k), 0.04) << "t = " << 0.1 * k << " s";
  }
  EXPECT_GT((raw[1][14] - low[1]) / (high[1] - low[1]), 0.95) << "the boxcar is there after 1.5 s";
  EXPECT_EQ(amd.shut_down(), AMDSMI_STATUS_SUCCESS);
}

}  // namespace
}  // namespace erg::sim
