#pragma once
/// Electricity prices from OpenEI's Utility Rate Database (URDB):
/// `GET {base}/utility_rates?version=&format=json&detail=full&getpage=LABEL&api_key=KEY` gives
/// `{"items": [rate]}`; a rate has `energyratestructure` (periods, each a list of tiers
/// `{"max", "unit", "rate", "adj"}`, prices in $/kWh) and `energyweekdayschedule` /
/// `energyweekendschedule` (12 months × 24 hours of period indices).
///
/// How a price is found: the UTC hour is turned into the utility's local time (`time_zone`); its
/// local month and hour (of the UTC hour's midpoint, for zones offset by a fraction of an hour),
/// and whether the local day is Saturday/Sunday, pick the schedule's period. Within the period,
/// tier i covers cumulative use in the billing period from tier i-1's `max` to its own `max`
/// (kWh; the last tier has no `max`), and energy in it costs `rate + adj` per kWh (a missing
/// field counts 0). Cumulative use starts from what the caller says was used before (a monitor's
/// `kwh_before`, default 0: each window counts from zero). A tier whose `max` is in another unit
/// ("kWh daily", "kWh/kW") cannot be placed by energy alone: such a period applies its first
/// tier to all energy and the price's note says so. Fixed and demand charges are not energy
/// prices and are left out. The rate is fetched once and kept. Thread-safe.

#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "erg/carbon/provider.hpp"
#include "erg/carbon/time_zone.hpp"
#include "erg/core/clock.hpp"

namespace erg::carbon {

struct OpenEiOptions {
  std::string label;    ///< The rate's URDB label (required).
  std::string api_key;  ///< Empty: $OPENEI_API_KEY.
  std::string base_url = "https://api.openei.org";
  std::string version = "latest";
  /// The utility's time zone (IANA name); empty: the machine's.
  std::string time_zone;
  std::chrono::milliseconds timeout{5000};
  std::string currency = "USD";  ///< URDB prices are US dollars.
};

struct RateTier {
  std::optional<double> max_kwh;  ///< Upper end of the tier; nullopt: unbounded.
  std::string unit = "kWh";
  double rate = 0.0;  ///< $/kWh
  double adj = 0.0;   ///< $/kWh
};

/// A parsed URDB rate.
struct UtilityRate {
  std::string label;
  std::string name;
  std::string utility;
  std::vector<std::vector<RateTier>> periods;
  int weekday[12][24] = {};
  int weekend[12][24] = {};
};

/// Parses the answer of the utility_rates endpoint and picks the item with `label`.
/// InvalidArgument naming the field for malformed JSON, tiers or schedules (including a period
/// index out of range); NotFound when no item has the label.
Result<UtilityRate> parse_openei_rate(const std::string& json_text, const std::string& label);

/// The cost of `kwh` at `local` time after `kwh_before` in the billing period (see the header).
Price price_energy(const UtilityRate& rate, std::chrono::sys_seconds local, double kwh_before, double kwh);

class OpenEi final : public PriceProvider {
 public:
  /// InvalidArgument for an empty label or bad timeout; NotFound for an unknown time zone.
  static Result<std::unique_ptr<OpenEi>> create(OpenEiOptions options);
  Result<Price> cost(UtcHour hour, double kwh_before, double kwh) override;
  [[nodiscard]] std::string name() const override { return "openei"; }
  /// Fetches (once) and returns the rate. Errors as IntensityProvider's.
  Result<UtilityRate> rate();

 private:
  OpenEi(OpenEiOptions options, TimeZone tz) : options_(std::move(options)), tz_(std::move(tz)) {}
  OpenEiOptions options_;
  TimeZone tz_;
  std::mutex mu_;
  std::optional<UtilityRate> rate_;
  std::optional<Error> failure_;
  std::chrono::steady_clock::time_point failed_at_;
};

}  // namespace erg::carbon
