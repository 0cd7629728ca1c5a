#include "carbon_cli.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "app.hpp"
#include "erg/carbon/electricity_maps.hpp"
#include "erg/carbon/offline.hpp"
#include "erg/carbon/openei.hpp"

namespace erg::cli {

namespace {

bool parse_number(const std::string& s, double& out) {
  char* end = nullptr;
  out = std::strtod(s.c_str(), &end);
  return !s.empty() && end == s.c_str() + s.size() && std::isfinite(out);
}

/// "52.52,13.405" -> coordinates; anything else is a zone.
bool parse_coordinates(const std::string& s, double& lat, double& lon) {
  const auto comma = s.find(',');
  return comma != std::string::npos && parse_number(s.substr(0, comma), lat) && parse_number(s.substr(comma + 1), lon);
}

nlohmann::json strings(const std::vector<std::string>& v) { return nlohmann::json(v); }

}  // namespace

void CarbonCli::add_options(CLI::App& cmd) {
  cmd.add_option("--carbon", carbon,
                 "Report the run's emissions (carbon_g, gCO2eq) for a grid ZONE (e.g. DE, US-CAL-CISO) or LAT,LON: "
                 "energy split at UTC hours × each hour's carbon intensity");
  cmd.add_option("--carbon-source", carbon_source,
                 "Where intensities come from: auto (ElectricityMaps when ELECTRICITYMAPS_TOKEN is set, else offline; "
                 "default), offline (erg's yearly averages, with sources), electricitymaps, or a CSV file "
                 "(datetime,carbon_intensity). A failing service falls back to the offline average with a warning");
  cmd.add_option("--carbon-url", carbon_url,
                 "ElectricityMaps API base URL (default https://api.electricitymaps.com/v3)");
  cmd.add_option("--price", price,
                 "Report the run's electricity cost: a flat price per kWh (0.30, 0.30EUR; currency default USD) or "
                 "openei:LABEL (an OpenEI URDB rate; key from OPENEI_API_KEY)");
  cmd.add_option("--price-tz", price_tz,
                 "The utility's time zone for an OpenEI rate's schedules (IANA name; default the machine's)");
  cmd.add_option("--price-url", price_url, "OpenEI API base URL (default https://api.openei.org)");
  cmd.add_option("--provider-timeout", timeout_s, "Seconds each carbon/price request may take (default 5)")
      ->check(CLI::PositiveNumber);
}

void CarbonCli::setup() {
  const auto timeout = std::chrono::milliseconds(static_cast<long long>(timeout_s * 1000.0));
  if (carbon.empty() && (!carbon_source.empty() || !carbon_url.empty()))
    throw CliError{kExitUsage, "--carbon-source and --carbon-url need --carbon ZONE or --carbon LAT,LON"};
  if (!carbon.empty()) {
    double lat = 0, lon = 0;
    const bool coords = parse_coordinates(carbon, lat, lon);
    std::string source = carbon_source.empty() ? "auto" : carbon_source;
    if (source == "auto") source = std::getenv("ELECTRICITYMAPS_TOKEN") != nullptr ? "electricitymaps" : "offline";
    if (source == "offline") {
      if (coords)
        throw CliError{kExitUsage,
                       "offline intensities need a zone (e.g. --carbon DE); coordinates need "
                       "ElectricityMaps (--carbon-source electricitymaps, ELECTRICITYMAPS_TOKEN)"};
      auto o = carbon::OfflineIntensity::create(carbon);
      if (!o) throw CliError{kExitUsage, o.error().message};
      intensity = std::move(*o);
    } else if (source == "electricitymaps") {
      carbon::ElectricityMapsOptions o;
      if (coords) {
        o.lat = lat;
        o.lon = lon;
      } else {
        o.zone = carbon;
      }
      if (!carbon_url.empty()) o.base_url = carbon_url;
      o.timeout = timeout;
      auto p = carbon::ElectricityMaps::create(o);
      if (!p) throw CliError{kExitUsage, p.error().message};
      intensity = std::move(*p);
      if (!coords)
        if (auto f = carbon::OfflineIntensity::create(carbon); f) fallback = std::move(*f);
    } else {
      auto f = carbon::FileIntensity::open(source);
      if (!f) throw CliError{kExitUsage, "--carbon-source: " + f.error().message};
      intensity = std::move(*f);
      if (!coords)
        if (auto o = carbon::OfflineIntensity::create(carbon); o) fallback = std::move(*o);
    }
  }
  if (!price.empty()) {
    if (price.starts_with("openei:")) {
      carbon::OpenEiOptions o;
      o.label = price.substr(7);
      o.time_zone = price_tz;
      if (!price_url.empty()) o.base_url = price_url;
      o.timeout = timeout;
      auto p = carbon::OpenEi::create(o);
      if (!p) throw CliError{kExitUsage, "--price: " + p.error().message};
      price_provider = std::move(*p);
    } else {
      std::size_t end = 0;
      while (end < price.size() && (std::isdigit(static_cast<unsigned char>(price[end])) || price[end] == '.')) ++end;
      double amount = 0;
      std::string currency = price.substr(end);
      while (!currency.empty() && currency.front() == ' ') currency.erase(currency.begin());
      if (!parse_number(price.substr(0, end), amount) || amount < 0 ||
          (!currency.empty() && (currency.size() != 3 || !std::isalpha(static_cast<unsigned char>(currency[0])))))
        throw CliError{kExitUsage,
                       "--price takes a price per kWh such as 0.30 or 0.30EUR, or openei:LABEL, not '" + price + "'"};
      price_provider = std::make_shared<carbon::FixedPrice>(amount, currency.empty() ? "USD" : currency);
    }
  } else if (!price_tz.empty() || !price_url.empty()) {
    throw CliError{kExitUsage, "--price-tz and --price-url need --price openei:LABEL"};
  }
}

void CarbonCli::on_hour_end(carbon::UtcHour hour) const {
  if (intensity) (void)intensity->intensity(hour);
  if (price_provider) (void)price_provider->cost(hour, 0.0, 0.0);
}

void CarbonCli::attribute(const carbon::HourlyMeasurement& m) {
  if (intensity) carbon_result = carbon::attribute_carbon(m, *intensity, fallback.get());
  if (price_provider) cost_result = carbon::attribute_cost(m, *price_provider);
}

void CarbonCli::add_json(nlohmann::json& out) const {
  if (carbon_result) {
    const auto& c = *carbon_result;
    out["carbon_g"] = c.carbon_g ? nlohmann::json(*c.carbon_g) : nlohmann::json(nullptr);
    nlohmann::json d;
    d["zone"] = carbon;
    d["providers"] = strings(c.providers);
    d["resolution"] = c.resolution ? nlohmann::json(carbon::to_string(*c.resolution)) : nlohmann::json(nullptr);
    d["estimated"] = c.estimated;
    d["sources"] = strings(c.sources);
    d["warnings"] = strings(c.warnings);
    d["carbon_g_by_device"] = c.carbon_g_by_device;
    d["hours"] = nlohmann::json::array();
    for (const auto& h : c.hours) {
      nlohmann::json j;
      j["hour"] = carbon::format_utc(h.hour);
      j["time_s"] = h.time.count();
      j["energy_j"] = h.total_energy_j;
      j["intensity_g_per_kwh"] = h.intensity ? nlohmann::json(h.intensity->g_per_kwh) : nlohmann::json(nullptr);
      j["provider"] = h.intensity ? nlohmann::json(h.intensity->provider) : nlohmann::json(nullptr);
      j["estimated"] = h.intensity && h.intensity->estimated;
      j["carbon_g"] = h.carbon_g ? nlohmann::json(*h.carbon_g) : nlohmann::json(nullptr);
      d["hours"].push_back(j);
    }
    out["carbon"] = d;
  }
  if (cost_result) {
    const auto& c = *cost_result;
    out["cost"] = c.cost ? nlohmann::json(*c.cost) : nlohmann::json(nullptr);
    nlohmann::json d;
    d["currency"] = c.currency;
    d["providers"] = strings(c.providers);
    d["resolution"] = c.resolution ? nlohmann::json(carbon::to_string(*c.resolution)) : nlohmann::json(nullptr);
    d["sources"] = strings(c.sources);
    d["warnings"] = strings(c.warnings);
    d["cost_by_device"] = c.cost_by_device;
    d["hours"] = nlohmann::json::array();
    for (const auto& h : c.hours) {
      nlohmann::json j;
      j["hour"] = carbon::format_utc(h.hour);
      j["energy_j"] = h.total_energy_j;
      j["price_per_kwh"] = h.price ? nlohmann::json(h.price->per_kwh) : nlohmann::json(nullptr);
      j["cost"] = h.cost ? nlohmann::json(*h.cost) : nlohmann::json(nullptr);
      d["hours"].push_back(j);
    }
    out["price"] = d;
  }
}

std::string CarbonCli::table() const {
  std::string out;
  char line[512];
  if (carbon_result) {
    const auto& c = *carbon_result;
    std::string how;
    for (const auto& p : c.providers) how += (how.empty() ? "" : "+") + p;
    if (c.resolution) how += ", " + std::string(carbon::to_string(*c.resolution));
    if (c.estimated) how += ", estimated";
    if (c.carbon_g)
      std::snprintf(line, sizeof line, "  carbon   %.6g gCO2eq  (%s %s)\n", *c.carbon_g, carbon.c_str(), how.c_str());
    else
      std::snprintf(line, sizeof line, "  carbon   unknown  (%s)\n", carbon.c_str());
    out += line;
    for (const auto& s : c.sources) out += "           source: " + s + "\n";
    for (const auto& w : c.warnings) out += "           warning: " + w + "\n";
  }
  if (cost_result) {
    const auto& c = *cost_result;
    if (c.cost)
      std::snprintf(line, sizeof line, "  cost     %.6g %s\n", *c.cost, c.currency.c_str());
    else
      std::snprintf(line, sizeof line, "  cost     unknown\n");
    out += line;
    for (const auto& s : c.sources) out += "           source: " + s + "\n";
    for (const auto& w : c.warnings) out += "           warning: " + w + "\n";
  }
  return out;
}

}  // namespace erg::cli
