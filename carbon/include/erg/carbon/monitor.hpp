#pragma once
/// CarbonMonitor and CostMonitor: measurement windows like EnergyMonitor's whose energy is split
/// at UTC hour boundaries (see hourly.hpp) and multiplied by each hour's carbon intensity or
/// electricity price (Zeus's CarbonEmissionMonitor and EnergyCostMonitor, reference/zeus.md
/// §1.4-1.5). The energy figure never depends on the provider: a provider that fails gives a
/// result with a warning (carbon: the offline yearly average of the zone stands in), never a
/// lost measurement. Each hour's value is fetched once per monitor (successes are kept; a
/// failure is retried after five minutes), and each hour is fetched as soon as it ends while a
/// window is open, so long windows neither refetch nor fall out of a provider's history.
///
/// Thread-safe: windows may be begun and ended from any thread.

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "erg/carbon/hourly.hpp"
#include "erg/carbon/provider.hpp"

namespace erg::carbon {

struct HourCarbon {
  UtcHour hour;
  Seconds time{0.0};                       ///< Part of the window in this hour.
  std::map<std::string, double> energy_j;  ///< Per device ("gpu0", "cpu0", "dram0").
  double total_energy_j = 0.0;
  std::optional<Intensity> intensity;  ///< nullopt: no provider had a value.
  std::optional<double> carbon_g;      ///< total_energy_j / 3.6e6 × intensity.
};

struct CarbonMeasurement {
  measure::Measurement energy;  ///< The window's measurement, as EnergyMonitor gives it.
  std::vector<HourCarbon> hours;
  /// gCO2eq over the devices whose energy is known; nullopt if some hour has no intensity.
  std::optional<double> carbon_g;
  std::map<std::string, double> carbon_g_by_device;  ///< "gpu0" -> gCO2eq (when carbon_g is known).
  /// The providers that gave the values, in order of first use ("electricitymaps", "offline").
  std::vector<std::string> providers;
  /// The coarsest resolution among the hours' values (hourly < flat < yearly).
  std::optional<Resolution> resolution;
  bool estimated = false;             ///< Some hour's value was estimated by its provider.
  std::vector<std::string> sources;   ///< Distinct sources of the values used.
  std::vector<std::string> warnings;  ///< Provider failures, fallbacks, missing hours.
};

struct CarbonMonitorOptions {
  HourlyOptions hourly;
  /// Used for an hour the provider fails on. nullptr: the offline yearly average of the
  /// provider's zone (or of `fallback_zone`), when erg's table has it.
  std::shared_ptr<IntensityProvider> fallback;
  std::string fallback_zone;
  bool use_fallback = true;
};

class CarbonMonitor {
 public:
  /// Errors as EnergyMonitor::create; InvalidArgument for a null provider.
  static Result<std::unique_ptr<CarbonMonitor>> create(std::shared_ptr<IntensityProvider> provider,
                                                       std::vector<std::shared_ptr<Gpu>> gpus,
                                                       std::vector<std::shared_ptr<Cpu>> cpus,
                                                       CarbonMonitorOptions options = {});
  ~CarbonMonitor();
  Result<void> begin_window(const std::string& name, bool sync = true);
  /// NotFound for an unknown window; errors of the energy measurement itself. Provider
  /// problems never fail it: they are in `warnings`.
  Result<CarbonMeasurement> end_window(const std::string& name, bool sync = true);
  Result<void> cancel_window(const std::string& name);
  /// Joins intensities to an hourly measurement made elsewhere (erg run's).
  CarbonMeasurement attribute(HourlyMeasurement m);
  [[nodiscard]] HourlyEnergyMonitor& hourly();

 private:
  struct Impl;
  explicit CarbonMonitor(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

struct HourCost {
  UtcHour hour;
  Seconds time{0.0};
  std::map<std::string, double> energy_j;
  double total_energy_j = 0.0;
  std::optional<Price> price;  ///< nullopt: the provider had no price.
  std::optional<double> cost;
};

struct CostMeasurement {
  measure::Measurement energy;
  std::vector<HourCost> hours;
  std::optional<double> cost;  ///< In `currency`; nullopt if some hour has no price.
  std::string currency;
  std::map<std::string, double> cost_by_device;  ///< Split in proportion to each hour's energy.
  std::vector<std::string> providers;
  std::optional<Resolution> resolution;
  std::vector<std::string> sources;
  std::vector<std::string> warnings;  ///< Provider failures and caveats (e.g. tier units).
};

struct CostMonitorOptions {
  HourlyOptions hourly;
  /// Energy already used in the billing period before each window, kWh (tiered rates count
  /// from it; default: each window counts from zero).
  double kwh_before = 0.0;
};

class CostMonitor {
 public:
  static Result<std::unique_ptr<CostMonitor>> create(std::shared_ptr<PriceProvider> provider,
                                                     std::vector<std::shared_ptr<Gpu>> gpus,
                                                     std::vector<std::shared_ptr<Cpu>> cpus,
                                                     CostMonitorOptions options = {});
  ~CostMonitor();
  Result<void> begin_window(const std::string& name, bool sync = true);
  Result<CostMeasurement> end_window(const std::string& name, bool sync = true);
  Result<void> cancel_window(const std::string& name);
  CostMeasurement attribute(HourlyMeasurement m);
  [[nodiscard]] HourlyEnergyMonitor& hourly();

 private:
  struct Impl;
  explicit CostMonitor(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

/// Joins an hourly measurement with intensities without a monitor (the CLI's path; `fallback`
/// may be null). Thread-safe as its providers are.
CarbonMeasurement attribute_carbon(HourlyMeasurement m, IntensityProvider& provider, IntensityProvider* fallback);
CostMeasurement attribute_cost(HourlyMeasurement m, PriceProvider& provider, double kwh_before = 0.0);

}  // namespace erg::carbon
