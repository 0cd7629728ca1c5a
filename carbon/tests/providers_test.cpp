// ElectricityMaps and OpenEI against a loopback server speaking their documented formats:
// parsing, HTTP errors, unknown zone, slow server and timeout, malformed JSON. Each gives a clear
// error or the documented fallback; none loses an energy figure.

#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>

#include "erg/carbon/electricity_maps.hpp"
#include "erg/carbon/monitor.hpp"
#include "erg/carbon/offline.hpp"
#include "erg/carbon/openei.hpp"
#include "loopback_http.hpp"

namespace erg::carbon {
namespace {

using namespace std::chrono;
using nlohmann::json;
using testing::LoopbackHttp;
using testing::Reply;
using testing::Request;

sys_seconds at(int y, unsigned mo, unsigned d, int h, int mi = 0) {
  return sys_days{year{y} / month{mo} / day{d}} + hours{h} + minutes{mi};
}
nanoseconds ns(sys_seconds t) { return duration_cast<nanoseconds>(t.time_since_epoch()); }

json point(const std::string& zone, double value, sys_seconds hour, bool estimated) {
  return {{"zone", zone},
          {"carbonIntensity", value},
          {"datetime", format_utc(hour).substr(0, 19) + ".000Z"},
          {"updatedAt", "2026-01-15T10:12:00.000Z"},
          {"createdAt", "2026-01-12T10:00:00.000Z"},
          {"emissionFactorType", "lifecycle"},
          {"isEstimated", estimated},
          {"estimationMethod", estimated ? json("TIME_SLICER_AVERAGE") : json(nullptr)}};
}

/// The documented ElectricityMaps v3 answers, for DE, at 2026-01-15 10:30 UTC: latest is 10:00,
/// the history the 24 hours before it (10:00 of the 14th up to `history_last`).
struct EmapsServer {
  sys_seconds history_last = at(2026, 1, 15, 9);
  int status = 200;
  std::string raw;  // a body to send instead
  milliseconds delay{0};
  std::unique_ptr<LoopbackHttp> http = std::make_unique<LoopbackHttp>([this](const Request& r) { return answer(r); });

  Reply answer(const Request& r) {
    Reply reply;
    reply.status = status;
    reply.delay = delay;
    if (!raw.empty() || status != 200) {
      reply.body = raw;
      return reply;
    }
    if (r.target.find("zone=XX") != std::string::npos) {
      reply.status = 404;
      reply.body = R"({"status":"error","message":"Zone 'XX' does not exist."})";
      return reply;
    }
    if (r.target.starts_with("/v3/carbon-intensity/latest")) {
      reply.body = point("DE", 302, at(2026, 1, 15, 10), true).dump();
    } else if (r.target.starts_with("/v3/carbon-intensity/history")) {
      json h = json::array();
      for (sys_seconds t = at(2026, 1, 14, 10); t <= history_last; t += hours(1))
        h.push_back(point("DE", 200 + duration_cast<hours>(t - at(2026, 1, 14, 10)).count(), t, false));
      reply.body = json{{"zone", "DE"}, {"history", h}}.dump();
    } else {
      reply.status = 404;
      reply.body = R"({"message":"no such route"})";
    }
    return reply;
  }
};

struct EmapsFixture : ::testing::Test {
  VirtualClock clock{seconds(1), ns(at(2026, 1, 15, 10, 30))};
  EmapsServer server;
  std::unique_ptr<ElectricityMaps> provider(std::string zone = "DE", milliseconds timeout = milliseconds(3000)) {
    ElectricityMapsOptions o;
    o.zone = std::move(zone);
    o.token = "secret-token";
    o.base_url = server.http->url() + "/v3";
    o.clock = &clock;
    o.timeout = timeout;
    auto p = ElectricityMaps::create(o);
    EXPECT_TRUE(p) << p.error().message;
    return std::move(*p);
  }
};

TEST_F(EmapsFixture, LatestForTheCurrentHourSendsTheTokenHeader) {
  auto p = provider();
  auto i = p->intensity(at(2026, 1, 15, 10));
  ASSERT_TRUE(i) << i.error().message;
  EXPECT_DOUBLE_EQ(i->g_per_kwh, 302.0);
  EXPECT_TRUE(i->estimated);
  EXPECT_EQ(i->resolution, Resolution::kHourly);
  EXPECT_EQ(i->zone, "DE");
  auto reqs = server.http->requests();
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_EQ(reqs[0].target, "/v3/carbon-intensity/latest?zone=DE&disableEstimations=false");
  EXPECT_EQ(reqs[0].header("auth-token"), "secret-token");
}

TEST_F(EmapsFixture, HistoryHoursAreParsedAndKept) {
  auto p = provider();
  auto nine = p->intensity(at(2026, 1, 15, 9));
  ASSERT_TRUE(nine) << nine.error().message;
  EXPECT_DOUBLE_EQ(nine->g_per_kwh, 223.0);  // 200 + 23 hours after 10:00 on the 14th
  EXPECT_FALSE(nine->estimated);
  auto yesterday = p->intensity(at(2026, 1, 14, 12));
  ASSERT_TRUE(yesterday);
  EXPECT_DOUBLE_EQ(yesterday->g_per_kwh, 202.0);
  EXPECT_EQ(server.http->requests().size(), 1u);  // one history request served both
  EXPECT_TRUE(server.http->requests()[0].target.starts_with("/v3/carbon-intensity/history?zone=DE"));
  auto old = p->intensity(at(2026, 1, 13, 12));
  ASSERT_FALSE(old);
  EXPECT_EQ(old.error().code, ErrorCode::kNotFound);
  EXPECT_NE(old.error().message.find("24 hours"), std::string::npos);
}

TEST_F(EmapsFixture, HistoryMissingTheLastHourFallsBackToLatestMarkedEstimated) {
  server.history_last = at(2026, 1, 15, 8);  // lags: 09:00 is not there yet (Zeus hangs here)
  auto p = provider();
  auto nine = p->intensity(at(2026, 1, 15, 9));
  ASSERT_TRUE(nine) << nine.error().message;
  EXPECT_DOUBLE_EQ(nine->g_per_kwh, 302.0);
  EXPECT_TRUE(nine->estimated);
  EXPECT_NE(nine->source.find("standing in for 2026-01-15T09:00:00Z"), std::string::npos) << nine->source;
}

TEST_F(EmapsFixture, HttpErrorsAreClearErrors) {
  server.status = 401;
  server.raw = R"({"message":"Invalid auth-token"})";
  auto denied = provider()->intensity(at(2026, 1, 15, 10));
  ASSERT_FALSE(denied);
  EXPECT_EQ(denied.error().code, ErrorCode::kNoPermission);
  EXPECT_NE(denied.error().message.find("HTTP 401"), std::string::npos) << denied.error().message;
  EXPECT_NE(denied.error().message.find("Invalid auth-token"), std::string::npos);
  server.status = 503;
  server.raw = "upstream down";
  auto down = provider()->intensity(at(2026, 1, 15, 10));
  ASSERT_FALSE(down);
  EXPECT_EQ(down.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(down.error().message.find("HTTP 503"), std::string::npos);
}

TEST_F(EmapsFixture, UnknownZone) {
  auto r = provider("XX")->intensity(at(2026, 1, 15, 10));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kNotFound);
  EXPECT_NE(r.error().message.find("Zone 'XX' does not exist."), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("unknown zone"), std::string::npos);
}

TEST_F(EmapsFixture, SlowServerTimesOut) {
  server.delay = milliseconds(3000);
  auto r = provider("DE", milliseconds(200))->intensity(at(2026, 1, 15, 10));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kTimeout);
  EXPECT_NE(r.error().message.find("200 ms"), std::string::npos);
}

TEST_F(EmapsFixture, MalformedJsonAndFields) {
  server.raw = "{\"zone\": \"DE\", \"carbonIntensity\": ";
  auto broken = provider()->intensity(at(2026, 1, 15, 10));
  ASSERT_FALSE(broken);
  EXPECT_EQ(broken.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(broken.error().message.find("malformed JSON"), std::string::npos);
  server.raw = R"({"zone":"DE","carbonIntensity":"lots","datetime":"2026-01-15T10:00:00.000Z"})";
  auto wrong = provider()->intensity(at(2026, 1, 15, 10));
  ASSERT_FALSE(wrong);
  EXPECT_NE(wrong.error().message.find("carbonIntensity"), std::string::npos);
}

TEST_F(EmapsFixture, UnreachableServiceIsUnavailable) {
  const std::string url = server.http->url();
  server.http.reset();  // nothing listens there any more
  ElectricityMapsOptions o;
  o.zone = "DE";
  o.base_url = url + "/v3";
  o.clock = &clock;
  auto r = (*ElectricityMaps::create(o))->intensity(at(2026, 1, 15, 10));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kUnavailable);
}

TEST_F(EmapsFixture, CoordinatesAndOptionsInTheQuery) {
  ElectricityMapsOptions o;
  o.lat = 52.52;
  o.lon = 13.405;
  o.estimations = false;
  o.emission_factor_type = "direct";
  o.base_url = server.http->url() + "/v3/";
  o.clock = &clock;
  auto p = ElectricityMaps::create(o);
  ASSERT_TRUE(p);
  EXPECT_EQ((*p)->zone(), "");
  ASSERT_TRUE((*p)->intensity(at(2026, 1, 15, 10)));
  EXPECT_EQ((*p)->zone(), "DE");  // learned from the answer, for the offline fallback
  EXPECT_EQ(server.http->requests()[0].target,
            "/v3/carbon-intensity/latest?lat=52.52&lon=13.405&disableEstimations=true&emissionFactorType=direct");
  EXPECT_FALSE(ElectricityMaps::create(ElectricityMapsOptions{}));
  ElectricityMapsOptions bad;
  bad.lat = 100;
  bad.lon = 0;
  EXPECT_FALSE(ElectricityMaps::create(bad));
}

TEST_F(EmapsFixture, FailingServiceFallsBackToOfflineAndKeepsTheEnergy) {
  server.status = 500;
  server.raw = R"({"error":"internal"})";
  auto p = provider();
  HourlyMeasurement m;
  m.energy.time = Seconds(1800.0);
  measure::GpuEnergy g;
  g.index = 0;
  g.energy = Joules(720000.0);
  m.energy.gpus.push_back(g);
  HourShare s;
  s.hour = at(2026, 1, 15, 10);
  s.time = Seconds(1800.0);
  s.energy_j["gpu0"] = 720000.0;
  m.hours.push_back(s);
  auto offline = OfflineIntensity::create(p->zone());
  ASSERT_TRUE(offline);
  auto r = attribute_carbon(m, *p, offline->get());
  EXPECT_DOUBLE_EQ(r.energy.gpu_energy().value(), 720000.0);
  ASSERT_TRUE(r.carbon_g);
  EXPECT_NEAR(*r.carbon_g, 0.2 * 341.0, 1e-9);  // 0.2 kWh × DE 2024 yearly average
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_NE(r.warnings[0].find("HTTP 500"), std::string::npos) << r.warnings[0];
}

// ---- OpenEI ----

/// A rate with two periods (off-peak 0, peak 1 from 16:00 to 21:00 on weekdays), tiers with
/// limits and adjustments in the off-peak period.
json rate_item() {
  json weekday = json::array(), weekend = json::array();
  for (int m = 0; m < 12; ++m) {
    json day = json::array(), end = json::array();
    for (int h = 0; h < 24; ++h) {
      day.push_back(h >= 16 && h < 21 ? 1 : 0);
      end.push_back(0);
    }
    weekday.push_back(day);
    weekend.push_back(end);
  }
  return {
      {"label", "5b1f0c1e5457a3f25c7a4d01"},
      {"name", "E-TOU Residential"},
      {"utility", "Example Electric Co"},
      {"energyratestructure", json::array({json::array({{{"max", 10}, {"unit", "kWh"}, {"rate", 0.10}, {"adj", 0.02}},
                                                        {{"rate", 0.20}, {"adj", 0.01}}}),
                                           json::array({{{"rate", 0.40}, {"adj", 0.05}}})})},
      {"energyweekdayschedule", weekday},
      {"energyweekendschedule", weekend}};
}

TEST(OpenEiRate, TiersAndAdjustmentsAsDocumented) {
  auto r = parse_openei_rate(json{{"items", json::array({rate_item()})}}.dump(), "5b1f0c1e5457a3f25c7a4d01");
  ASSERT_TRUE(r) << r.error().message;
  const auto wednesday_noon = at(2026, 1, 14, 12);
  // 9 kWh used before: 1 kWh in tier 0 at 0.10 + 0.02, 1 kWh in tier 1 at 0.20 + 0.01.
  auto p = price_energy(*r, wednesday_noon, 9.0, 2.0);
  EXPECT_NEAR(p.cost, 0.12 + 0.21, 1e-12);
  EXPECT_NEAR(p.per_kwh, 0.165, 1e-12);
  EXPECT_NEAR(price_energy(*r, wednesday_noon, 0.0, 1.0).cost, 0.12, 1e-12);
  EXPECT_NEAR(price_energy(*r, wednesday_noon, 20.0, 1.0).cost, 0.21, 1e-12);
  // Peak on a weekday at 17:00; off-peak at 17:00 on a Saturday.
  EXPECT_NEAR(price_energy(*r, at(2026, 1, 14, 17), 0.0, 1.0).cost, 0.45, 1e-12);
  EXPECT_NEAR(price_energy(*r, at(2026, 1, 17, 17), 0.0, 1.0).cost, 0.12, 1e-12);
}

TEST(OpenEiRate, MalformedRatesAreClearErrors) {
  json item = rate_item();
  item["energyweekdayschedule"][3][5] = 7;  // no period 7
  auto bad_period = parse_openei_rate(json{{"items", json::array({item})}}.dump(), item["label"]);
  ASSERT_FALSE(bad_period);
  EXPECT_NE(bad_period.error().message.find("month 4 hour 5"), std::string::npos) << bad_period.error().message;
  auto no_label = parse_openei_rate(json{{"items", json::array({rate_item()})}}.dump(), "other");
  ASSERT_FALSE(no_label);
  EXPECT_EQ(no_label.error().code, ErrorCode::kNotFound);
  EXPECT_FALSE(parse_openei_rate("[1, 2", "x"));
  json daily = rate_item();
  daily["energyratestructure"][0][0]["unit"] = "kWh daily";
  auto r = parse_openei_rate(json{{"items", json::array({daily})}}.dump(), daily["label"]);
  ASSERT_TRUE(r);
  auto p = price_energy(*r, at(2026, 1, 14, 12), 9.0, 2.0);
  EXPECT_NEAR(p.cost, 2 * 0.12, 1e-12);
  EXPECT_NE(p.note.find("kWh daily"), std::string::npos);
}

struct OpenEiServer {
  int status = 200;
  std::string raw;
  milliseconds delay{0};
  LoopbackHttp http{[this](const Request&) {
    Reply r;
    r.status = status;
    r.delay = delay;
    r.body = raw.empty() ? json{{"items", json::array({rate_item()})}}.dump() : raw;
    return r;
  }};
};

std::unique_ptr<OpenEi> openei(const OpenEiServer& s, const std::string& tz,
                               milliseconds timeout = milliseconds(3000)) {
  OpenEiOptions o;
  o.label = "5b1f0c1e5457a3f25c7a4d01";
  o.api_key = "k3y";
  o.base_url = s.http.url();
  o.time_zone = tz;
  o.timeout = timeout;
  auto p = OpenEi::create(o);
  EXPECT_TRUE(p) << p.error().message;
  return std::move(*p);
}

TEST(OpenEi, ScheduleReadInTheUtilitysTimeZone) {
  if (!std::filesystem::exists("/usr/share/zoneinfo/America/Los_Angeles")) GTEST_SKIP() << "no tzdata";
  OpenEiServer s;
  auto p = openei(s, "America/Los_Angeles");
  // 01:00 UTC on Thursday 15 January is 17:00 on Wednesday in Los Angeles: peak. (Read in UTC,
  // as Zeus does, it would be 01:00 off-peak.)
  auto c = p->cost(at(2026, 1, 15, 1), 0.0, 2.0);
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_NEAR(c->cost, 0.90, 1e-12);
  EXPECT_EQ(c->currency, "USD");
  EXPECT_NE(c->source.find("America/Los_Angeles"), std::string::npos);
  // The rate is fetched once, with the label and key in the query.
  ASSERT_TRUE(p->cost(at(2026, 1, 15, 12), 0.0, 1.0));
  auto reqs = s.http.requests();
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_NE(
      reqs[0].target.find("/utility_rates?version=latest&format=json&detail=full&getpage=5b1f0c1e5457a3f25c7a4d01"),
      std::string::npos)
      << reqs[0].target;
  EXPECT_NE(reqs[0].target.find("api_key=k3y"), std::string::npos);
}

TEST(OpenEi, ErrorsAreClear) {
  OpenEiServer s;
  s.raw = R"({"error":{"code":"API_KEY_INVALID","message":"An invalid api_key was supplied."}})";
  s.status = 403;
  auto denied = openei(s, "UTC")->cost(at(2026, 1, 15, 1), 0.0, 1.0);
  ASSERT_FALSE(denied);
  EXPECT_EQ(denied.error().code, ErrorCode::kNoPermission);
  EXPECT_NE(denied.error().message.find("invalid api_key"), std::string::npos) << denied.error().message;
  s.status = 200;  // OpenEI also reports errors in a 200 answer
  auto denied200 = openei(s, "UTC")->cost(at(2026, 1, 15, 1), 0.0, 1.0);
  ASSERT_FALSE(denied200);
  EXPECT_EQ(denied200.error().code, ErrorCode::kNoPermission);
  s.raw = R"({"items": []})";
  auto none = openei(s, "UTC")->cost(at(2026, 1, 15, 1), 0.0, 1.0);
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().code, ErrorCode::kNotFound);
  s.raw = "<html>";
  auto malformed = openei(s, "UTC")->cost(at(2026, 1, 15, 1), 0.0, 1.0);
  ASSERT_FALSE(malformed);
  EXPECT_EQ(malformed.error().code, ErrorCode::kInvalidArgument);
  s.raw.clear();
  s.delay = milliseconds(3000);
  auto slow = openei(s, "UTC", milliseconds(200))->cost(at(2026, 1, 15, 1), 0.0, 1.0);
  ASSERT_FALSE(slow);
  EXPECT_EQ(slow.error().code, ErrorCode::kTimeout);
  OpenEiOptions o;
  EXPECT_FALSE(OpenEi::create(o));  // no label
  o.label = "x";
  o.time_zone = "Nowhere/Special";
  EXPECT_FALSE(OpenEi::create(o));
}

TEST(OpenEi, CostMonitorKeepsTheEnergyWhenThePriceFails) {
  OpenEiServer s;
  s.status = 500;
  s.raw = "{}";
  auto p = openei(s, "UTC");
  HourlyMeasurement m;
  measure::CpuEnergy c;
  c.index = 0;
  c.package = Joules(3.6e6);
  m.energy.cpus.push_back(c);
  HourShare share;
  share.hour = at(2026, 1, 15, 10);
  share.energy_j["cpu0"] = 3.6e6;
  m.hours.push_back(share);
  auto r = attribute_cost(m, *p);
  EXPECT_FALSE(r.cost);
  EXPECT_DOUBLE_EQ(r.energy.cpu_energy().value(), 3.6e6);
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_NE(r.warnings[0].find("HTTP 500"), std::string::npos);
}

}  // namespace
}  // namespace erg::carbon
