// The model against the calibration targets in sim/data/gpu_calibration.csv (measured on real
// GPUs; see sim/data/README.md): a GPU running a training-like load at any mean activity in the
// calibrated range 0.7 … 1.0 (the tests and demos use 0.93, Load::training(), and 1.0, a steady
// fully busy GPU) must reproduce the median slowdown and relative-energy curves within ±10 % at
// every limit, with an energy minimum strictly below the maximum limit. The tables are read from
// the CSV, so a change there is checked without touching this file. A100 and H100 (no traces)
// must meet every limit of their range, down to their lowest listed clock.
//
// Two levels: the steady-state model functions (fast, exact), and the faithful engine itself —
// the limit set through the simulated driver, the control loop settling, ripple and noise on —
// on the virtual clock.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

#include "erg/sim/sku.hpp"
#include "sim_fixture.hpp"

namespace erg::sim {
namespace {

struct Row {
  double limit_w, slowdown, energy, avg_w_max;
};

/// sim/data/gpu_calibration.csv, by SKU key, in file order.
std::map<std::string, std::vector<Row>> read_tables() {
  std::ifstream f(ERG_SOURCE_DIR "/sim/data/gpu_calibration.csv");
  std::map<std::string, std::vector<Row>> tables;
  std::string line;
  std::getline(f, line);  // header
  while (std::getline(f, line)) {
    std::vector<std::string> cells;
    std::stringstream ss(line);
    for (std::string c; std::getline(ss, c, ',');) cells.push_back(c);
    if (cells.size() != 11) continue;
    const Sku* sku = lookup_sku(cells[0]);
    if (sku == nullptr) continue;
    tables[std::string(sku->key)].push_back(
        {std::stod(cells[1]), std::stod(cells[3]), std::stod(cells[6]), std::stod(cells[10])});
  }
  return tables;
}

/// The calibrated range of mean activity, and the activities checked in it.
constexpr double kActivities[] = {0.7, 0.8, 0.93, 1.0};

/// Time and energy per unit of work of a GPU at mean activity `a` under `limit_w`.
struct Point {
  unsigned clock_mhz;
  double power_w, time_per_work, energy_per_work;
};
Point at_limit(const Sku& sku, double limit_w, double a = CalibrationLoad::kMeanActivity) {
  const unsigned f = model_clock_mhz(sku, a, limit_w, sku.max_sm_mhz);
  const double p = model_power_w(sku, f, a);
  const double t = 1.0 / (a * model_speed(sku, f));
  return {f, p, t, p * t};
}

TEST(Calibration, MedianCurvesWithinTenPercent) {
  auto tables = read_tables();
  ASSERT_EQ(tables.size(), 4u) << "expected V100, A40, P100 and RTX 6000 tables";
  for (const auto& [key, rows] : tables) {
    const Sku* sku = lookup_sku(key);
    ASSERT_NE(sku, nullptr);
    ASSERT_FALSE(rows.empty());
    for (const double a : kActivities) {
      const Point ref = at_limit(*sku, sku->max_limit_w, a);
      double min_energy = 1e9, min_energy_limit = 0;
      std::printf("%-8s activity %.2f: limit  clock  power | slowdown model/median | energy model/median\n",
                  key.c_str(), a);
      for (const Row& r : rows) {
        const Point p = at_limit(*sku, r.limit_w, a);
        const double slowdown = p.time_per_work / ref.time_per_work;
        const double energy = p.energy_per_work / ref.energy_per_work;
        std::printf("%-8s %5.0f %6u %6.1f | %6.3f / %4.2f (%+5.1f%%) | %6.3f / %4.2f (%+5.1f%%)\n", key.c_str(),
                    r.limit_w, p.clock_mhz, p.power_w, slowdown, r.slowdown, 100 * (slowdown / r.slowdown - 1), energy,
                    r.energy, 100 * (energy / r.energy - 1));
        EXPECT_NEAR(slowdown, r.slowdown, 0.10 * r.slowdown)
            << key << " slowdown at " << r.limit_w << " W, activity " << a;
        EXPECT_NEAR(energy, r.energy, 0.10 * r.energy) << key << " energy at " << r.limit_w << " W, activity " << a;
        if (energy < min_energy) min_energy = energy, min_energy_limit = r.limit_w;
      }
      EXPECT_LT(min_energy_limit, sku->max_limit_w)
          << key << ": the energy sweet spot must lie below the max limit (activity " << a << ")";
      EXPECT_LT(min_energy, 0.99) << key << " activity " << a;
    }
  }
}

TEST(Calibration, EverySkuHasASweetSpotBelowItsMaximumLimit) {
  for (const Sku& sku : all_skus()) {
    if (sku.secondary_die) continue;  // no power of its own (the card's is on its first die)
    const Point ref = at_limit(sku, sku.max_limit_w);
    double best = 1e9, best_limit = 0;
    for (unsigned l = sku.min_limit_w; l <= sku.max_limit_w; l += 5) {
      const Point p = at_limit(sku, l);
      // Lower limits never speed work up.
      EXPECT_GE(p.time_per_work, ref.time_per_work - 1e-12) << sku.key << " at " << l;
      if (p.energy_per_work < best) best = p.energy_per_work, best_limit = l;
    }
    EXPECT_LT(best_limit, sku.max_limit_w) << sku.key;
    EXPECT_LT(best, ref.energy_per_work) << sku.key;
    // Full-load power at the default limit is plausible: above idle, within the limit.
    EXPECT_GT(ref.power_w, sku.idle_w) << sku.key;
    EXPECT_LE(ref.power_w, sku.max_limit_w) << sku.key;
  }
}

// A10 and T4 (issue 21, Zeus²'s mixed fleet): a training load demands more than the maximum
// limit, so every limit in their narrow ranges binds, and a lower limit is slower but draws less.
TEST(Calibration, A10AndT4RunPowerCappedAcrossTheirRange) {
  for (const char* key : {"A10", "T4"}) {
    const Sku& sku = *lookup_sku(key);
    EXPECT_GT(model_power_w(sku, sku.max_sm_mhz, CalibrationLoad::kMeanActivity), sku.max_limit_w) << key;
    const Point hi = at_limit(sku, sku.max_limit_w), lo = at_limit(sku, sku.min_limit_w);
    EXPECT_LT(hi.clock_mhz, sku.max_sm_mhz) << key << ": the cap binds at the maximum limit";
    EXPECT_LT(lo.clock_mhz, hi.clock_mhz) << key;
    EXPECT_GT(lo.time_per_work, hi.time_per_work) << key;
    EXPECT_LT(lo.power_w, hi.power_w) << key;
    EXPECT_NEAR(hi.power_w, sku.max_limit_w, 0.03 * sku.max_limit_w) << key;
  }
}

TEST(Calibration, ComputeHeavyA100AndH100DemandMoreThanTheDefaultLimit) {
  for (const char* key : {"A100", "H100"}) {
    const Sku& sku = *lookup_sku(key);
    EXPECT_GT(model_power_w(sku, sku.max_sm_mhz, 1.0), sku.default_limit_w * 1.05) << key;
    EXPECT_GT(model_power_w(sku, sku.max_sm_mhz, CalibrationLoad::kMeanActivity), sku.default_limit_w) << key;
    EXPECT_LT(at_limit(sku, sku.default_limit_w).clock_mhz, sku.max_sm_mhz) << key << ": the cap binds";
  }
}

// A100 and H100 meet every limit of their range at any activity up to 1 (fully busy): at their
// lowest listed clock (210 MHz, as nvidia-smi lists for both) the power is under the minimum
// limit, so the clock the limiter picks keeps the power under each limit.
TEST(Calibration, A100AndH100MeetEveryLimitInTheirRange) {
  for (const char* key : {"A100", "H100"}) {
    const Sku& sku = *lookup_sku(key);
    EXPECT_EQ(sku.min_sm_mhz, 210u) << key;
    EXPECT_LT(model_limiter_power_w(sku, sku.min_sm_mhz, 1.0), sku.min_limit_w) << key << " at its lowest clock";
    for (const double a : kActivities)
      for (unsigned l = sku.min_limit_w; l <= sku.max_limit_w; l += 5) {
        const Point p = at_limit(sku, l, a);
        EXPECT_LE(p.power_w, l) << key << " at " << l << " W, activity " << a;
      }
  }
}

// The power-relevant activity h(a): 0 at idle, the calibration activity unchanged, increasing.
TEST(Calibration, PowerActivityIsConcaveAndFixesTheCalibrationPoint) {
  EXPECT_EQ(power_activity(0.0), 0.0);
  EXPECT_NEAR(power_activity(CalibrationLoad::kMeanActivity), CalibrationLoad::kMeanActivity, 1e-12);
  double last = 0.0, last_slope = 1e9;
  for (int i = 1; i <= 100; ++i) {
    const double h = power_activity(i / 100.0);
    EXPECT_GT(h, last) << i;
    EXPECT_LE(h - last, last_slope + 1e-12) << i;
    last_slope = h - last, last = h;
  }
  // An idle-ish GPU still draws clearly less than a busy one.
  EXPECT_LT(power_activity(0.2), 0.7 * power_activity(1.0));
}

/// The loads the engine is checked under, by mean activity: the calibration load scaled to 0.7,
/// the calibration load itself (0.93), and a steady fully busy GPU (1.0, run_work's default).
std::vector<std::pair<double, Load>> engine_loads() {
  const double k = CalibrationLoad::kMeanActivity;
  return {{0.7, Load::training(0.7 / k)}, {k, Load::training()}, {1.0, Load{}}};
}

/// The engine on the virtual clock: per SKU, a GPU under the calibration load at each limit.
class CalibrationEngine : public testing::SimTest {
 protected:
  /// Time and energy per unit of work at `limit_w`, after the control loop settled: measured
  /// over a whole number of load steps.
  Point run(unsigned gpu, double limit_w, const Load& load = Load::training()) {
    machine_->set_privilege(Privilege::kEveryone);
    EXPECT_EQ(nvml_.nvmlDeviceSetPowerManagementLimit(dev(gpu), static_cast<unsigned>(limit_w * 1000)), NVML_SUCCESS);
    EXPECT_TRUE(machine_->set_load(gpu, load));
    EXPECT_TRUE(machine_->advance(std::chrono::milliseconds(1840)));  // 8 steps: the loop settles (τ = 150 ms)
    const double e0 = machine_->true_energy(gpu)->value(), w0 = machine_->status(gpu)->work_done;
    const auto span = load.step.count() > 0 ? load.step * 40 : std::chrono::nanoseconds(9'200'000'000);
    EXPECT_TRUE(machine_->advance(span));
    const double e = machine_->true_energy(gpu)->value() - e0, w = machine_->status(gpu)->work_done - w0;
    const double secs = std::chrono::duration<double>(span).count();
    return {static_cast<unsigned>(machine_->status(gpu)->effective_sm_clock.value()), e / secs, secs / w, e / w};
  }
};

TEST_F(CalibrationEngine, MedianCurvesWithinTenPercentOnTheFaithfulModel) {
  auto tables = read_tables();
  ASSERT_EQ(tables.size(), 4u);
  std::string spec;
  std::vector<std::string> keys;
  for (const auto& [key, rows] : tables) keys.push_back(key), spec += "1x" + key + ",";
  start((spec + "cpus=0").c_str());
  for (const auto& [a, load] : engine_loads()) {
    for (unsigned g = 0; g < keys.size(); ++g) {
      const Sku& sku = *lookup_sku(keys[g]);
      const Point ref = run(g, sku.max_limit_w, load);
      double min_energy = 1e9, min_limit = 0;
      for (const Row& r : tables[keys[g]]) {
        const Point p = run(g, r.limit_w, load);
        const double slowdown = p.time_per_work / ref.time_per_work, energy = p.energy_per_work / ref.energy_per_work;
        std::printf(
            "engine %-8s activity %.2f %5.0f W: clock %4u, %6.1f W | slowdown %.3f / %.2f | energy %.3f / %.2f\n",
            keys[g].c_str(), a, r.limit_w, p.clock_mhz, p.power_w, slowdown, r.slowdown, energy, r.energy);
        EXPECT_NEAR(slowdown, r.slowdown, 0.10 * r.slowdown)
            << keys[g] << " slowdown at " << r.limit_w << " W, activity " << a;
        EXPECT_NEAR(energy, r.energy, 0.10 * r.energy) << keys[g] << " energy at " << r.limit_w << " W, activity " << a;
        // Within the limit, or no more above it than the traced GPUs were (A40 at 100 W: up to
        // 121 W; its lowest clock cannot go lower, as on the real board).
        EXPECT_LE(p.power_w, std::max(r.limit_w * 1.01, r.avg_w_max))
            << keys[g] << " average power within the limit at " << r.limit_w;
        if (energy < min_energy) min_energy = energy, min_limit = r.limit_w;
      }
      EXPECT_LT(min_limit, sku.max_limit_w) << keys[g] << " activity " << a;
    }
  }
}

TEST_F(CalibrationEngine, A100AndH100HaveASweetSpotBelowTheirMaximumLimit) {
  start("1xA100,1xH100,cpus=0");
  for (unsigned g = 0; g < 2; ++g) {
    const Sku& sku = *lookup_sku(g == 0 ? "A100" : "H100");
    const Point ref = run(g, sku.max_limit_w);
    EXPECT_NEAR(ref.power_w, sku.max_limit_w, 0.015 * sku.max_limit_w) << sku.key << ": the default limit binds";
    double best = 1e9, best_limit = 0;
    for (unsigned l = sku.max_limit_w; l >= sku.min_limit_w; l -= 50) {
      const Point p = run(g, l);
      EXPECT_GE(p.time_per_work, ref.time_per_work * 0.999) << sku.key << " at " << l;
      if (p.energy_per_work < best) best = p.energy_per_work, best_limit = l;
    }
    EXPECT_LT(best_limit, sku.max_limit_w) << sku.key;
    EXPECT_LT(best, 0.95 * ref.energy_per_work) << sku.key << ": capping saves energy";
  }
}

// The engine meets every limit: average power within 1 % of the limit or under it, at each
// 50 W step down to the minimum, for the calibration load and for a steady fully busy GPU (the
// issue-30 report: a busy A100 at 100 W drew 145 W).
TEST_F(CalibrationEngine, A100AndH100MeetEveryLimitUnderAnyLoad) {
  start("1xA100,1xH100,cpus=0");
  for (unsigned g = 0; g < 2; ++g) {
    const Sku& sku = *lookup_sku(g == 0 ? "A100" : "H100");
    for (const auto& [a, load] : engine_loads())
      for (unsigned l = sku.max_limit_w; l >= sku.min_limit_w; l -= 50) {
        const Point p = run(g, l, load);
        std::printf("engine %-5s activity %.2f %4u W: clock %4u, %6.1f W\n", sku.key.data(), a, l, p.clock_mhz,
                    p.power_w);
        EXPECT_LE(p.power_w, l * 1.01) << sku.key << " at " << l << " W, activity " << a;
      }
  }
}

}  // namespace
}  // namespace erg::sim
