#include "erg/carbon/electricity_maps.hpp"

#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <sstream>

#include "http.hpp"

namespace erg::carbon {

using namespace std::chrono;
using nlohmann::json;

namespace {

constexpr auto kHistoryRefetch = seconds(60);
const char* const kWhat = "ElectricityMaps";

Result<std::pair<UtcHour, Intensity>> parse_point(const json& j, const std::string& fallback_zone) {
  if (!j.is_object()) return fail(ErrorCode::kInvalidArgument, "ElectricityMaps answer is not a JSON object");
  auto dt = j.find("datetime");
  if (dt == j.end() || !dt->is_string())
    return fail(ErrorCode::kInvalidArgument, "ElectricityMaps answer has no 'datetime' string");
  auto t = parse_utc(dt->get<std::string>());
  if (!t) return fail(ErrorCode::kInvalidArgument, "ElectricityMaps 'datetime': " + t.error().message);
  auto ci = j.find("carbonIntensity");
  if (ci == j.end()) return fail(ErrorCode::kInvalidArgument, "ElectricityMaps answer has no 'carbonIntensity' field");
  if (ci->is_null())
    return fail(ErrorCode::kNotFound,
                "ElectricityMaps has no carbon intensity for " + format_utc(*t) + " (null; estimations disabled?)");
  if (!ci->is_number() || !std::isfinite(ci->get<double>()) || ci->get<double>() < 0)
    return fail(ErrorCode::kInvalidArgument, "ElectricityMaps 'carbonIntensity' is not a non-negative number");
  Intensity i;
  i.g_per_kwh = ci->get<double>();
  i.resolution = Resolution::kHourly;
  auto est = j.find("isEstimated");
  i.estimated = est != j.end() && est->is_boolean() && est->get<bool>();
  i.provider = "electricitymaps";
  auto z = j.find("zone");
  i.zone = z != j.end() && z->is_string() ? z->get<std::string>() : fallback_zone;
  std::string factor;
  if (auto f = j.find("emissionFactorType"); f != j.end() && f->is_string()) factor = " " + f->get<std::string>();
  i.source = "ElectricityMaps API v3" + factor + " hourly value for " + (i.zone.empty() ? "?" : i.zone);
  return std::make_pair(utc_hour_of(*t), std::move(i));
}

Result<json> parse_json(const std::string& body) {
  auto j = json::parse(body, nullptr, false);
  if (j.is_discarded()) return fail(ErrorCode::kInvalidArgument, "ElectricityMaps answered with malformed JSON");
  return j;
}

}  // namespace

Result<std::pair<UtcHour, Intensity>> parse_electricity_maps_point(const std::string& json_text) {
  auto j = parse_json(json_text);
  if (!j) return fail(j.error());
  return parse_point(*j, "");
}

Result<std::unique_ptr<ElectricityMaps>> ElectricityMaps::create(ElectricityMapsOptions o) {
  const bool coords = o.lat.has_value() || o.lon.has_value();
  if (o.zone.empty() && !coords)
    return fail(ErrorCode::kInvalidArgument, "ElectricityMaps needs a zone (e.g. DE) or coordinates (LAT,LON)");
  if (!o.zone.empty() && coords)
    return fail(ErrorCode::kInvalidArgument, "give ElectricityMaps a zone or coordinates, not both");
  if (coords && (!o.lat || !o.lon || !(std::fabs(*o.lat) <= 90.0) || !(std::fabs(*o.lon) <= 180.0)))
    return fail(ErrorCode::kInvalidArgument, "coordinates need latitude in [-90, 90] and longitude in [-180, 180]");
  if (!o.emission_factor_type.empty() && o.emission_factor_type != "lifecycle" && o.emission_factor_type != "direct")
    return fail(ErrorCode::kInvalidArgument,
                "emission factor type must be lifecycle or direct, not '" + o.emission_factor_type + "'");
  if (o.timeout <= milliseconds(0)) return fail(ErrorCode::kInvalidArgument, "the request timeout must be positive");
  if (o.token.empty())
    if (const char* t = std::getenv("ELECTRICITYMAPS_TOKEN"); t != nullptr) o.token = t;
  while (!o.base_url.empty() && o.base_url.back() == '/') o.base_url.pop_back();
  return std::unique_ptr<ElectricityMaps>(new ElectricityMaps(std::move(o)));
}

std::string ElectricityMaps::zone() const {
  std::lock_guard lock(mu_);
  return options_.zone.empty() ? zone_seen_ : options_.zone;
}

std::string ElectricityMaps::query() const {
  std::ostringstream q;
  if (!options_.zone.empty()) {
    q << "zone=" << detail::url_encode(options_.zone);
  } else {
    q.precision(10);
    q << "lat=" << *options_.lat << "&lon=" << *options_.lon;
  }
  q << "&disableEstimations=" << (options_.estimations ? "false" : "true");
  if (!options_.emission_factor_type.empty()) q << "&emissionFactorType=" << options_.emission_factor_type;
  return q.str();
}

Result<std::string> ElectricityMaps::get(const std::string& endpoint) {
  std::vector<std::string> headers{"Accept: application/json"};
  if (!options_.token.empty()) headers.push_back("auth-token: " + options_.token);
  const std::string what = std::string(kWhat) + " " + endpoint;
  auto r =
      detail::http_get(options_.base_url + "/carbon-intensity/" + endpoint + "?" + query(), headers, options_.timeout);
  if (!r) return fail(r.error().code, what + ": " + r.error().message);
  if (r->status != 200) {
    Error e = detail::http_status_error(*r, what);
    if (r->status == 404 && !options_.zone.empty()) e.message += " (unknown zone '" + options_.zone + "'?)";
    return fail(std::move(e));
  }
  return std::move(r->body);
}

Result<Intensity> ElectricityMaps::latest() {
  auto p = latest_point();
  if (!p) return fail(p.error());
  return p->second;
}

Result<std::pair<UtcHour, Intensity>> ElectricityMaps::latest_point() {
  auto body = get("latest");
  if (!body) return fail(body.error());
  auto j = parse_json(*body);
  if (!j) return fail(j.error());
  auto p = parse_point(*j, options_.zone);
  if (!p) return fail(p.error());
  std::lock_guard lock(mu_);
  if (zone_seen_.empty()) zone_seen_ = p->second.zone;
  return p;
}

Result<std::map<UtcHour, Intensity>> ElectricityMaps::history() {
  auto body = get("history");
  if (!body) return fail(body.error());
  auto j = parse_json(*body);
  if (!j) return fail(j.error());
  if (!j->is_object() || !j->contains("history") || !(*j)["history"].is_array())
    return fail(ErrorCode::kInvalidArgument, "ElectricityMaps history answer has no 'history' array");
  const std::string zone =
      j->contains("zone") && (*j)["zone"].is_string() ? (*j)["zone"].get<std::string>() : options_.zone;
  std::map<UtcHour, Intensity> out;
  for (const auto& entry : (*j)["history"]) {
    auto p = parse_point(entry, zone);
    if (!p) {
      if (p.error().code == ErrorCode::kNotFound) continue;  // a null hour: others may still serve
      return fail(p.error());
    }
    out[p->first] = std::move(p->second);
  }
  std::lock_guard lock(mu_);
  if (zone_seen_.empty()) zone_seen_ = zone;
  return out;
}

Result<Intensity> ElectricityMaps::intensity(UtcHour hour) {
  const Clock& clock = options_.clock != nullptr ? *options_.clock : SteadyClock::instance();
  const UtcHour now = utc_hour_of(floor<seconds>(sys_time<nanoseconds>(clock.wall_now())));
  {
    std::lock_guard lock(mu_);
    if (auto it = hours_.find(hour); it != hours_.end()) return it->second;
  }
  if (hour > now) return fail(ErrorCode::kInvalidArgument, "the hour " + format_utc(hour) + " has not begun");
  auto from_latest = [&]() -> Result<Intensity> {
    auto l = latest_point();
    if (!l) return fail(l.error());
    // `latest` is for the current hour; standing in for another it is an estimate.
    if (l->first != hour) {
      l->second.estimated = true;
      l->second.source += " (latest, " + format_utc(l->first) + ", standing in for " + format_utc(hour) + ")";
    }
    return l->second;
  };
  if (hour == now) return from_latest();  // not kept: the hour's value may still change
  if (hour < now - hours(24))
    return fail(ErrorCode::kNotFound,
                "ElectricityMaps' history covers the last 24 hours; " + format_utc(hour) + " is older");
  bool fetch = true;
  {
    std::lock_guard lock(mu_);
    if (history_fetched_at_ && clock.now() - *history_fetched_at_ < kHistoryRefetch) fetch = false;
  }
  if (fetch) {
    auto h = history();
    if (!h) return fail(h.error());
    std::lock_guard lock(mu_);
    history_fetched_at_ = clock.now();
    for (auto& [t, v] : *h) hours_[t] = std::move(v);
    if (auto it = hours_.find(hour); it != hours_.end()) return it->second;
  }
  // The history lags by an hour or two at times: the latest value stands in for a recent hour.
  if (hour >= now - hours(2)) return from_latest();
  return fail(ErrorCode::kNotFound, "ElectricityMaps' history has no value for " + format_utc(hour));
}

}  // namespace erg::carbon
