// The model against the calibration targets in shared/reference/gpu-model-calibration.md:
// a fully busy GPU must reproduce the median slowdown and relative-energy curves within ±10 %,
// with an energy minimum strictly below the maximum limit. The tables are parsed from the
// markdown itself, so a change there is checked without touching this file.

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include "erg/sim/sku.hpp"

namespace erg::sim {
namespace {

struct Row {
  double limit_w, slowdown, energy;
};

std::map<std::string, std::vector<Row>> read_tables() {
  std::ifstream f(ERG_SOURCE_DIR "/../shared/reference/gpu-model-calibration.md");
  std::map<std::string, std::vector<Row>> tables;
  std::string line, current;
  const std::regex heading(R"(^##\s+([^(]+?)\s*(\(.*)?$)");
  const std::regex row(R"(^\|\s*(\d+)\s*\|\s*\d+\s*\|\s*([\d.]+)\s*\(.*?\)\s*\|\s*([\d.]+)\s*\()");
  std::smatch m;
  while (std::getline(f, line)) {
    if (std::regex_match(line, m, heading)) {
      const Sku* sku = lookup_sku(m[1].str());
      current = sku != nullptr ? std::string(sku->key) : "";
    } else if (!current.empty() && std::regex_search(line, m, row)) {
      tables[current].push_back({std::stod(m[1].str()), std::stod(m[2].str()), std::stod(m[3].str())});
    }
  }
  return tables;
}

/// Time and energy per unit of work of a fully busy GPU under `limit_w`.
struct Point {
  unsigned clock_mhz;
  double power_w, time_per_work, energy_per_work;
};
Point at_limit(const Sku& sku, double limit_w) {
  const unsigned f = model_clock_mhz(sku, 1.0, limit_w, sku.max_sm_mhz);
  const double p = model_power_w(sku, f, 1.0);
  const double t = 1.0 / model_speed(sku, f);
  return {f, p, t, p * t};
}

TEST(Calibration, MedianCurvesWithinTenPercent) {
  auto tables = read_tables();
  ASSERT_EQ(tables.size(), 4u) << "expected V100, A40, P100 and RTX 6000 tables";
  for (const auto& [key, rows] : tables) {
    const Sku* sku = lookup_sku(key);
    ASSERT_NE(sku, nullptr);
    ASSERT_FALSE(rows.empty());
    const Point ref = at_limit(*sku, sku->max_limit_w);
    double min_energy = 1e9, min_energy_limit = 0;
    std::printf("%-8s limit  clock  power | slowdown model/median | energy model/median\n", key.c_str());
    for (const Row& r : rows) {
      const Point p = at_limit(*sku, r.limit_w);
      const double slowdown = p.time_per_work / ref.time_per_work;
      const double energy = p.energy_per_work / ref.energy_per_work;
      std::printf("%-8s %5.0f %6u %6.1f | %6.3f / %4.2f (%+5.1f%%) | %6.3f / %4.2f (%+5.1f%%)\n", key.c_str(),
                  r.limit_w, p.clock_mhz, p.power_w, slowdown, r.slowdown, 100 * (slowdown / r.slowdown - 1), energy,
                  r.energy, 100 * (energy / r.energy - 1));
      EXPECT_NEAR(slowdown, r.slowdown, 0.10 * r.slowdown) << key << " slowdown at " << r.limit_w << " W";
      EXPECT_NEAR(energy, r.energy, 0.10 * r.energy) << key << " energy at " << r.limit_w << " W";
      if (energy < min_energy) min_energy = energy, min_energy_limit = r.limit_w;
    }
    EXPECT_LT(min_energy_limit, sku->max_limit_w) << key << ": the energy sweet spot must lie below the max limit";
    EXPECT_LT(min_energy, 0.99) << key;
  }
}

TEST(Calibration, EverySkuHasASweetSpotBelowItsMaximumLimit) {
  for (const Sku& sku : all_skus()) {
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

}  // namespace
}  // namespace erg::sim
