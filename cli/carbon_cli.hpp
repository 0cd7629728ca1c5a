#pragma once
// `erg run --carbon ZONE|LAT,LON [--price ...]`: the options, the providers they name, and what
// they add to the summary and the JSON (carbon_g, cost and their details).

#include <CLI/CLI.hpp>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "erg/carbon/hourly.hpp"
#include "erg/carbon/monitor.hpp"
#include "erg/carbon/provider.hpp"

namespace erg::cli {

struct CarbonCli {
  std::string carbon;         ///< --carbon ZONE or LAT,LON
  std::string carbon_source;  ///< --carbon-source auto|offline|electricitymaps|FILE.csv
  std::string carbon_url;     ///< --carbon-url
  std::string price;          ///< --price AMOUNT[CURRENCY] or openei:LABEL
  std::string price_tz;       ///< --price-tz
  std::string price_url;      ///< --price-url
  double timeout_s = 5.0;     ///< --provider-timeout

  std::shared_ptr<carbon::IntensityProvider> intensity;
  std::shared_ptr<carbon::IntensityProvider> fallback;
  std::shared_ptr<carbon::PriceProvider> price_provider;

  void add_options(CLI::App& cmd);
  /// Builds the providers the options name; throws CliError (usage) for bad options. No request
  /// is made here.
  void setup();
  [[nodiscard]] bool active() const { return intensity != nullptr || price_provider != nullptr; }
  /// Called as each hour of the run ends: fetches its values while the providers have them.
  void on_hour_end(carbon::UtcHour hour) const;

  std::optional<carbon::CarbonMeasurement> carbon_result;
  std::optional<carbon::CostMeasurement> cost_result;
  /// Joins the run's hourly measurement with the providers (never fails: problems are warnings).
  void attribute(const carbon::HourlyMeasurement& m);
  /// Adds carbon_g / cost and their "carbon" / "price" details to `out`.
  void add_json(nlohmann::json& out) const;
  /// Lines for the human summary.
  [[nodiscard]] std::string table() const;
};

}  // namespace erg::cli
