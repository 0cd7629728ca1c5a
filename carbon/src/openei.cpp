#include "erg/carbon/openei.hpp"

#include <cmath>
#include <cstdlib>
#include <limits>
#include <nlohmann/json.hpp>

#include "http.hpp"

namespace erg::carbon {

using namespace std::chrono;
using nlohmann::json;

namespace {

constexpr auto kRetryAfter = seconds(60);

Result<double> number(const json& tier, const char* key, const std::string& where) {
  auto it = tier.find(key);
  if (it == tier.end() || it->is_null()) return 0.0;
  if (it->is_number() && std::isfinite(it->get<double>())) return it->get<double>();
  if (it->is_string()) {  // some URDB records carry numbers as strings
    char* end = nullptr;
    const std::string s = it->get<std::string>();
    const double v = std::strtod(s.c_str(), &end);
    if (end != s.c_str() && *end == '\0' && std::isfinite(v)) return v;
  }
  return fail(ErrorCode::kInvalidArgument, "OpenEI rate: " + where + " '" + key + "' is not a number");
}

Result<void> parse_schedule(const json& item, const char* key, int (&out)[12][24], std::size_t periods) {
  auto it = item.find(key);
  if (it == item.end() || !it->is_array() || it->size() != 12)
    return fail(ErrorCode::kInvalidArgument, std::string("OpenEI rate: '") + key + "' is not 12 months");
  for (std::size_t m = 0; m < 12; ++m) {
    const auto& row = (*it)[m];
    if (!row.is_array() || row.size() != 24)
      return fail(ErrorCode::kInvalidArgument,
                  std::string("OpenEI rate: '") + key + "' month " + std::to_string(m + 1) + " is not 24 hours");
    for (std::size_t h = 0; h < 24; ++h) {
      if (!row[h].is_number_integer() || row[h].get<long>() < 0 ||
          static_cast<std::size_t>(row[h].get<long>()) >= periods)
        return fail(ErrorCode::kInvalidArgument, std::string("OpenEI rate: '") + key + "' month " +
                                                     std::to_string(m + 1) + " hour " + std::to_string(h) +
                                                     " is not a period of energyratestructure");
      out[m][h] = static_cast<int>(row[h].get<long>());
    }
  }
  return ok();
}

}  // namespace

Result<UtilityRate> parse_openei_rate(const std::string& json_text, const std::string& label) {
  auto j = json::parse(json_text, nullptr, false);
  if (j.is_discarded()) return fail(ErrorCode::kInvalidArgument, "OpenEI answered with malformed JSON");
  if (!j.is_object() || !j.contains("items") || !j["items"].is_array())
    return fail(ErrorCode::kInvalidArgument, "OpenEI answer has no 'items' array");
  const json* item = nullptr;
  for (const auto& i : j["items"])
    if (i.is_object() && i.value("label", std::string()) == label) item = &i;
  if (item == nullptr) return fail(ErrorCode::kNotFound, "OpenEI has no rate with label '" + label + "'");
  UtilityRate r;
  r.label = label;
  r.name = item->value("name", std::string());
  r.utility = item->value("utility", std::string());
  auto s = item->find("energyratestructure");
  if (s == item->end() || !s->is_array() || s->empty())
    return fail(ErrorCode::kInvalidArgument,
                "OpenEI rate '" + label + "' has no energyratestructure (no energy prices)");
  for (std::size_t p = 0; p < s->size(); ++p) {
    const auto& period = (*s)[p];
    if (!period.is_array() || period.empty())
      return fail(ErrorCode::kInvalidArgument, "OpenEI rate: period " + std::to_string(p) + " has no tiers");
    std::vector<RateTier> tiers;
    for (std::size_t t = 0; t < period.size(); ++t) {
      const auto& tier = period[t];
      const std::string where = "period " + std::to_string(p) + " tier " + std::to_string(t);
      if (!tier.is_object()) return fail(ErrorCode::kInvalidArgument, "OpenEI rate: " + where + " is not an object");
      RateTier rt;
      auto rate = number(tier, "rate", where);
      auto adj = number(tier, "adj", where);
      if (!rate) return fail(rate.error());
      if (!adj) return fail(adj.error());
      rt.rate = *rate;
      rt.adj = *adj;
      if (tier.contains("max") && !tier["max"].is_null()) {
        auto max = number(tier, "max", where);
        if (!max) return fail(max.error());
        rt.max_kwh = *max;
      }
      if (tier.contains("unit") && tier["unit"].is_string()) rt.unit = tier["unit"].get<std::string>();
      tiers.push_back(rt);
    }
    r.periods.push_back(std::move(tiers));
  }
  if (auto ok1 = parse_schedule(*item, "energyweekdayschedule", r.weekday, r.periods.size()); !ok1)
    return fail(ok1.error());
  if (auto ok2 = parse_schedule(*item, "energyweekendschedule", r.weekend, r.periods.size()); !ok2)
    return fail(ok2.error());
  return r;
}

Price price_energy(const UtilityRate& rate, sys_seconds local, double kwh_before, double kwh) {
  const auto day = floor<days>(local);
  const year_month_day ymd{day};
  const weekday wd{day};
  const auto hour = static_cast<std::size_t>(floor<hours>(local - day).count());
  const auto month = static_cast<std::size_t>(static_cast<unsigned>(ymd.month()) - 1);
  const bool weekend = wd == Saturday || wd == Sunday;
  const int period = weekend ? rate.weekend[month][hour] : rate.weekday[month][hour];
  const auto& tiers = rate.periods[static_cast<std::size_t>(period)];
  Price p;
  p.provider = "openei";
  p.resolution = Resolution::kHourly;
  p.source = "OpenEI URDB rate " + rate.label + (rate.name.empty() ? "" : " (" + rate.name + ")");
  bool kwh_units = true;
  for (const auto& t : tiers)
    if (t.max_kwh && t.unit != "kWh") kwh_units = false;
  if (!kwh_units || tiers.size() == 1) {
    p.per_kwh = tiers[0].rate + tiers[0].adj;
    p.cost = kwh * p.per_kwh;
    if (!kwh_units)
      p.note = "OpenEI rate " + rate.label + ": tier limits in '" + tiers[0].unit +
               "' cannot be placed by energy alone; the first tier's rate + adj was applied";
    return p;
  }
  double lo = 0.0, cost = 0.0;
  const double from = kwh_before, to = kwh_before + kwh;
  double marginal = tiers.back().rate + tiers.back().adj;
  bool marginal_set = false;
  for (std::size_t i = 0; i < tiers.size(); ++i) {
    const double hi = tiers[i].max_kwh && i + 1 < tiers.size() ? std::max(*tiers[i].max_kwh, lo)
                                                               : std::numeric_limits<double>::infinity();
    const double price = tiers[i].rate + tiers[i].adj;
    const double overlap = std::max(0.0, std::min(hi, to) - std::max(lo, from));
    cost += overlap * price;
    if (!marginal_set && from < hi) {
      marginal = price;
      marginal_set = true;
    }
    lo = hi;
  }
  p.cost = cost;
  p.per_kwh = kwh > 0 ? cost / kwh : marginal;
  return p;
}

Result<std::unique_ptr<OpenEi>> OpenEi::create(OpenEiOptions o) {
  if (o.label.empty()) return fail(ErrorCode::kInvalidArgument, "OpenEI needs the rate's URDB label");
  if (o.timeout <= milliseconds(0)) return fail(ErrorCode::kInvalidArgument, "the request timeout must be positive");
  if (o.api_key.empty())
    if (const char* k = std::getenv("OPENEI_API_KEY"); k != nullptr) o.api_key = k;
  while (!o.base_url.empty() && o.base_url.back() == '/') o.base_url.pop_back();
  auto tz = TimeZone::load(o.time_zone);
  if (!tz) return fail(tz.error());
  return std::unique_ptr<OpenEi>(new OpenEi(std::move(o), std::move(*tz)));
}

Result<UtilityRate> OpenEi::rate() {
  std::lock_guard lock(mu_);  // one fetch at a time; later callers get the kept rate
  if (rate_) return *rate_;
  if (failure_ && steady_clock::now() - failed_at_ < kRetryAfter) return fail(*failure_);
  const std::string url = options_.base_url + "/utility_rates?version=" + detail::url_encode(options_.version) +
                          "&format=json&detail=full&getpage=" + detail::url_encode(options_.label) +
                          "&api_key=" + detail::url_encode(options_.api_key);
  auto result = [&]() -> Result<UtilityRate> {
    auto r = detail::http_get(url, {"Accept: application/json"}, options_.timeout);
    if (!r) return fail(r.error().code, "OpenEI utility_rates: " + r.error().message);
    if (r->status != 200) return fail(detail::http_status_error(*r, "OpenEI utility_rates"));
    // OpenEI reports some errors (a bad key) in a 200 answer's "error" object.
    auto j = json::parse(r->body, nullptr, false);
    if (!j.is_discarded() && j.is_object() && j.contains("error")) {
      const auto& e = j["error"];
      std::string code_text, message;
      if (e.is_string()) message = e.get<std::string>();
      if (e.is_object()) {
        code_text = e.value("code", std::string());
        message = e.value("message", std::string());
      }
      const bool key = code_text.find("API_KEY") != std::string::npos;
      return fail(key ? ErrorCode::kNoPermission : ErrorCode::kUnavailable,
                  "OpenEI utility_rates reported an error" + (code_text.empty() ? "" : " " + code_text) +
                      (message.empty() ? "" : ": " + message) + (key ? " (is the API key right?)" : ""));
    }
    return parse_openei_rate(r->body, options_.label);
  }();
  if (!result) {
    failure_ = result.error();
    failed_at_ = steady_clock::now();
    return result;
  }
  rate_ = *result;
  failure_.reset();
  return result;
}

Result<Price> OpenEi::cost(UtcHour hour, double kwh_before, double kwh) {
  auto r = rate();
  if (!r) return fail(r.error());
  const auto mid = hour + minutes(30);
  Price p = price_energy(*r, mid + tz_.offset_at(mid), kwh_before, kwh);
  p.currency = options_.currency;
  p.source += ", schedule in " + tz_.name() + " time";
  return p;
}

}  // namespace erg::carbon
