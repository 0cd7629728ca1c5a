#pragma once
/// Providers that need no network: erg's table of yearly average intensities (each with its
/// public source and year, carbon/data/grid_intensity_yearly.csv, built into the library) and a
/// user's own hourly series from a CSV file.

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "erg/carbon/provider.hpp"

namespace erg::carbon {

/// One row of the yearly table.
struct YearlyIntensity {
  std::string zone;  ///< Electricity Maps zone key: "DE", "US-CAL-CISO", ...
  int year = 0;
  double g_per_kwh = 0.0;
  std::string source;  ///< The full citation (the source line the row names).
};

/// The table: zone -> row. Parses the format of grid_intensity_yearly.csv (see its header);
/// InvalidArgument naming the line for a malformed line, a row whose source is not defined, or
/// a duplicate zone.
Result<std::map<std::string, YearlyIntensity>> parse_yearly_table(std::string_view text);
/// The table built into erg (parsed once).
const std::map<std::string, YearlyIntensity>& builtin_yearly_table();

/// The yearly average of a zone, for every hour. A region that is not in the table ("US-XYZ")
/// falls back to its country ("US"), and says so in the zone it reports.
class OfflineIntensity final : public IntensityProvider {
 public:
  /// NotFound (listing how to see the known zones) if neither the zone nor its country is in
  /// the table.
  static Result<std::unique_ptr<OfflineIntensity>> create(
      std::string zone, const std::map<std::string, YearlyIntensity>& table = builtin_yearly_table());
  Result<Intensity> intensity(UtcHour hour) override;
  [[nodiscard]] std::string name() const override { return "offline"; }
  [[nodiscard]] std::string zone() const override { return row_.zone; }
  [[nodiscard]] const YearlyIntensity& row() const { return row_; }

 private:
  explicit OfflineIntensity(YearlyIntensity row) : row_(std::move(row)) {}
  YearlyIntensity row_;
};

/// A user's hourly series. CSV with a header line naming at least `datetime` (ISO 8601 UTC, the
/// start of the hour) and `carbon_intensity` (gCO2eq/kWh) columns, optionally `estimated`
/// (true/false/1/0) and `zone`; `#` lines are comments. An hour not in the file is NotFound.
class FileIntensity final : public IntensityProvider {
 public:
  /// Errors: Io if the file cannot be read; InvalidArgument naming the line for a malformed
  /// line, a missing column, a negative intensity or an hour given twice.
  static Result<std::unique_ptr<FileIntensity>> open(const std::string& path);
  static Result<std::unique_ptr<FileIntensity>> parse(std::string_view text, std::string source);
  Result<Intensity> intensity(UtcHour hour) override;
  [[nodiscard]] std::string name() const override { return "file"; }
  [[nodiscard]] std::string zone() const override { return zone_; }

 private:
  FileIntensity() = default;
  std::map<UtcHour, Intensity> hours_;
  std::string zone_;
  std::string source_;
};

}  // namespace erg::carbon
