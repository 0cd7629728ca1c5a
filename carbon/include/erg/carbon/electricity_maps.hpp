#pragma once
/// ElectricityMaps (API v3) carbon intensity: `GET {base}/carbon-intensity/latest` for the
/// current hour and `GET {base}/carbon-intensity/history` (the last 24 hours) for earlier ones,
/// with the token in the documented `auth-token` header. Query: `zone=` or `lat=&lon=`,
/// `disableEstimations=`, and `emissionFactorType=` when set. Answers: `{"zone", "carbonIntensity"
/// (gCO2eq/kWh), "datetime", "isEstimated", ...}` and `{"zone", "history": [those]}`.
///
/// Every request has a bounded timeout and its HTTP status checked. An hour older than the
/// history is NotFound (monitors fetch each hour as it ends, so long windows keep theirs); the
/// current hour, or the one before it when the history lags, is answered from `latest`, marked
/// estimated when `latest` is for an earlier hour. Values are kept, so no hour is fetched twice;
/// a miss in the history refetches it at most once a minute. Thread-safe.

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "erg/carbon/provider.hpp"
#include "erg/core/clock.hpp"

namespace erg::carbon {

struct ElectricityMapsOptions {
  /// A zone key ("DE", "US-CAL-CISO"), or empty to use `lat`/`lon`.
  std::string zone;
  std::optional<double> lat;
  std::optional<double> lon;
  /// Sent in the `auth-token` header. Empty: $ELECTRICITYMAPS_TOKEN (none sent if unset).
  std::string token;
  /// Accept the provider's estimates (disableEstimations=false); estimated values say so.
  bool estimations = true;
  /// "lifecycle" or "direct"; empty: the API's default.
  std::string emission_factor_type;
  std::string base_url = "https://api.electricitymaps.com/v3";
  /// Bound on each request, connection included.
  std::chrono::milliseconds timeout{5000};
  /// Time source for "now" (wall clock); nullptr = the system's.
  const Clock* clock = nullptr;
};

class ElectricityMaps final : public IntensityProvider {
 public:
  /// InvalidArgument for neither or both of zone and coordinates, coordinates out of range, or
  /// an unknown emission factor type.
  static Result<std::unique_ptr<ElectricityMaps>> create(ElectricityMapsOptions options);
  /// Errors: NoPermission (401/403), NotFound (404, an unknown zone, or no value for the hour),
  /// InvalidArgument (400, malformed JSON or fields), Unavailable (429, 5xx, unreachable),
  /// Timeout.
  Result<Intensity> intensity(UtcHour hour) override;
  [[nodiscard]] std::string name() const override { return "electricitymaps"; }
  /// The zone asked for, or the one the service named for the coordinates.
  [[nodiscard]] std::string zone() const override;

  /// The current intensity (the `latest` endpoint, not kept).
  Result<Intensity> latest();
  /// The `history` endpoint's hours.
  Result<std::map<UtcHour, Intensity>> history();

 private:
  explicit ElectricityMaps(ElectricityMapsOptions options) : options_(std::move(options)) {}
  Result<std::string> get(const std::string& endpoint);
  Result<std::pair<UtcHour, Intensity>> latest_point();
  std::string query() const;

  ElectricityMapsOptions options_;
  mutable std::mutex mu_;
  std::map<UtcHour, Intensity> hours_;
  std::string zone_seen_;
  std::optional<std::chrono::nanoseconds> history_fetched_at_;
};

/// Parses one `latest`-style object (also a `history` entry). InvalidArgument naming the field.
Result<std::pair<UtcHour, Intensity>> parse_electricity_maps_point(const std::string& json_text);

}  // namespace erg::carbon
