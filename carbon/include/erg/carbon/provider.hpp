#pragma once
/// Carbon-intensity and electricity-price providers: where the figure for one UTC hour comes
/// from, and what is known about it (resolution, whether it was estimated, its source).

#include <chrono>
#include <string>
#include <string_view>

#include "erg/core/result.hpp"

namespace erg::carbon {

/// The start of a UTC hour (seconds since the Unix epoch, a multiple of 3600).
using UtcHour = std::chrono::sys_seconds;

/// The UTC hour that contains `t`.
[[nodiscard]] UtcHour utc_hour_of(std::chrono::sys_seconds t);
/// "2026-11-25T18:00:00Z".
[[nodiscard]] std::string format_utc(std::chrono::sys_seconds t);
/// Parses an ISO 8601 UTC time as the providers write it ("2026-11-25T18:00:00.000Z",
/// "2026-11-25T18:00Z", "2026-11-25T18:00:00+00:00"); InvalidArgument for anything else.
Result<std::chrono::sys_seconds> parse_utc(std::string_view text);

/// How finely a provider resolves a figure in time.
enum class Resolution {
  kHourly,  ///< A value for this very hour.
  kYearly,  ///< A yearly average standing in for every hour of the year.
  kFlat,    ///< One value for every hour (a user-given price or intensity).
};
/// "hourly", "yearly", "flat".
std::string_view to_string(Resolution resolution);

/// The carbon intensity of the grid during one hour.
struct Intensity {
  double g_per_kwh = 0.0;  ///< gCO2eq per kWh.
  Resolution resolution = Resolution::kHourly;
  /// The provider says the value is estimated (ElectricityMaps `isEstimated`), not measured.
  bool estimated = false;
  std::string provider;  ///< "electricitymaps", "offline", "file", "fixed".
  std::string zone;      ///< The zone the value is for (e.g. "DE"), when known.
  std::string source;    ///< Where the number comes from (dataset and year, or URL).
};

/// Gives the carbon intensity of any UTC hour. Implementations are thread-safe.
class IntensityProvider {
 public:
  virtual ~IntensityProvider() = default;
  /// Intensity during the UTC hour starting at `hour`. Errors (provider-specific): NotFound for
  /// an unknown zone or an hour the provider does not cover; Unavailable/Timeout/Io when a
  /// service cannot be reached; InvalidArgument for a malformed answer.
  virtual Result<Intensity> intensity(UtcHour hour) = 0;
  /// Short name ("electricitymaps", "offline", ...).
  [[nodiscard]] virtual std::string name() const = 0;
  /// The zone this provider answers for, if it knows it (an offline fallback looks it up).
  [[nodiscard]] virtual std::string zone() const { return {}; }
};

/// What electricity costs during one hour, for energy used on top of `used_before`.
struct Price {
  double cost = 0.0;     ///< In `currency`, for the energy asked about.
  double per_kwh = 0.0;  ///< Average price applied, `currency`/kWh (rate + adjustment).
  std::string currency;  ///< ISO 4217 code where known ("USD"), else as the source says.
  Resolution resolution = Resolution::kHourly;
  std::string provider;  ///< "openei", "fixed".
  std::string source;    ///< Which rate (e.g. OpenEI label and name).
  std::string note;      ///< A caveat about how the price was found, or empty.
};

/// Gives the cost of energy used during any UTC hour. Implementations are thread-safe.
class PriceProvider {
 public:
  virtual ~PriceProvider() = default;
  /// Cost of `kwh` used during the UTC hour starting at `hour`, after `kwh_before` already used
  /// in the same billing period (tiered rates depend on it). Errors as IntensityProvider's.
  virtual Result<Price> cost(UtcHour hour, double kwh_before, double kwh) = 0;
  [[nodiscard]] virtual std::string name() const = 0;
};

/// One intensity for every hour (`g_per_kwh`, source "user-given"). Thread-safe.
class FixedIntensity final : public IntensityProvider {
 public:
  explicit FixedIntensity(double g_per_kwh) : g_per_kwh_(g_per_kwh) {}
  Result<Intensity> intensity(UtcHour hour) override;
  [[nodiscard]] std::string name() const override { return "fixed"; }

 private:
  double g_per_kwh_;
};

/// One price per kWh for every hour, in `currency`. Thread-safe.
class FixedPrice final : public PriceProvider {
 public:
  FixedPrice(double per_kwh, std::string currency) : per_kwh_(per_kwh), currency_(std::move(currency)) {}
  Result<Price> cost(UtcHour hour, double kwh_before, double kwh) override;
  [[nodiscard]] std::string name() const override { return "fixed"; }

 private:
  double per_kwh_;
  std::string currency_;
};

}  // namespace erg::carbon
