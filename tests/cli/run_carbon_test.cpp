// `erg run --carbon ... --price ...` end to end through the built binary on a simulated machine:
// carbon_g and cost equal the run's energy times the intensity and price used; providers that fail
// leave the energy and say so; bad options are usage errors before the command starts.

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "../../carbon/tests/loopback_http.hpp"
#include "erg/carbon/provider.hpp"
#include "process.hpp"

namespace erg {
namespace {

using nlohmann::json;
using testing::run_shell;
using testing::shell_quote;

std::string erg() { return shell_quote(ERG_CLI_PATH); }
std::string clean_env() {
  return "env -u ERG_SIMULATE -u ERG_SIM_STATE -u ERG_NVML_LIBRARY -u ERG_POWERCAP_ROOT -u CUDA_VISIBLE_DEVICES "
         "-u ELECTRICITYMAPS_TOKEN -u OPENEI_API_KEY ";
}

double hours_sum(const json& hours, const char* field) {
  double s = 0;
  for (const auto& h : hours) s += h[field].get<double>();
  return s;
}

TEST(ErgRunCarbon, OfflineZoneGivesEnergyTimesTheIntensityUsed) {
  // Acceptance: erg --simulate 1xA100 run --carbon DE --json -- erg simulate load --seconds 1
  auto r = run_shell(clean_env() + erg() + " --simulate 1xA100 run --carbon DE --json -- " + erg() +
                     " simulate load --seconds 1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json j = json::parse(r.out);
  const double energy = j["total_energy_j"].get<double>();
  ASSERT_GT(energy, 100.0);
  ASSERT_TRUE(j["carbon_g"].is_number());
  // DE's offline intensity is 341 gCO2eq/kWh (Electricity Maps, 2024); energy is printed to µJ.
  EXPECT_NEAR(j["carbon_g"].get<double>(), energy / 3.6e6 * 341.0, 1e-9);
  const json& c = j["carbon"];
  EXPECT_EQ(c["zone"], "DE");
  EXPECT_EQ(c["providers"], json::array({"offline"}));
  EXPECT_EQ(c["resolution"], "yearly");
  ASSERT_EQ(c["sources"].size(), 1u);
  EXPECT_NE(c["sources"][0].get<std::string>().find("2024"), std::string::npos);
  EXPECT_TRUE(c["warnings"].empty());
  EXPECT_NEAR(hours_sum(c["hours"], "energy_j"), energy, 1e-5);
  for (const auto& h : c["hours"]) EXPECT_EQ(h["intensity_g_per_kwh"], 341.0);
  EXPECT_NE(r.err.find("gCO2eq"), std::string::npos) << r.err;
}

TEST(ErgRunCarbon, FlatPriceGivesCost) {
  auto r = run_shell(clean_env() + erg() + " --simulate 1xA100 run --price 0.30EUR --json -- " + erg() +
                     " simulate load --seconds 1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json j = json::parse(r.out);
  EXPECT_NEAR(j["cost"].get<double>(), j["total_energy_j"].get<double>() / 3.6e6 * 0.30, 1e-12);
  EXPECT_EQ(j["price"]["currency"], "EUR");
  EXPECT_FALSE(j.contains("carbon_g"));
}

TEST(ErgRunCarbon, BadOptionsAreUsageErrorsBeforeTheCommandRuns) {
  auto zone = run_shell(clean_env() + erg() + " --simulate 1xA100 run --carbon ZZ -- sh -c 'echo ran'");
  EXPECT_EQ(zone.exit_code, 2);
  EXPECT_NE(zone.err.find("'ZZ'"), std::string::npos) << zone.err;
  EXPECT_EQ(zone.out.find("ran"), std::string::npos);
  auto price = run_shell(clean_env() + erg() + " --simulate 1xA100 run --price cheap -- true");
  EXPECT_EQ(price.exit_code, 2);
  EXPECT_NE(price.err.find("--price"), std::string::npos) << price.err;
  auto coords = run_shell(clean_env() + erg() + " --simulate 1xA100 run --carbon 52.5,13.4 -- true");
  EXPECT_EQ(coords.exit_code, 2);
  EXPECT_NE(coords.err.find("ElectricityMaps"), std::string::npos) << coords.err;
}

/// A loopback ElectricityMaps answering `g_per_kwh` for the real current hour (latest) and the
/// 24 before it (history), or `status` with an error body.
struct Emaps {
  double g_per_kwh = 500.0;
  int status = 200;
  carbon::testing::LoopbackHttp http{[this](const carbon::testing::Request& r) {
    carbon::testing::Reply reply;
    reply.status = status;
    if (status != 200) {
      reply.body = R"({"message":"upstream failure"})";
      return reply;
    }
    const auto now = carbon::utc_hour_of(std::chrono::floor<std::chrono::seconds>(std::chrono::system_clock::now()));
    auto point = [&](carbon::UtcHour h) {
      return json{
          {"zone", "DE"}, {"carbonIntensity", g_per_kwh}, {"datetime", carbon::format_utc(h)}, {"isEstimated", false}};
    };
    if (r.target.find("/latest") != std::string::npos) {
      reply.body = point(now).dump();
    } else {
      json h = json::array();
      for (int k = 24; k >= 1; --k) h.push_back(point(now - std::chrono::hours(k)));
      reply.body = json{{"zone", "DE"}, {"history", h}}.dump();
    }
    return reply;
  }};
};

TEST(ErgRunCarbon, ElectricityMapsHourlyValuesWithTheTokenSent) {
  Emaps emaps;
  auto r = run_shell(clean_env() + "ELECTRICITYMAPS_TOKEN=tok " + erg() +
                     " --simulate 1xA100 run --carbon DE --carbon-url " + emaps.http.url() + "/v3 --json -- " + erg() +
                     " simulate load --seconds 1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json j = json::parse(r.out);
  EXPECT_NEAR(j["carbon_g"].get<double>(), j["total_energy_j"].get<double>() / 3.6e6 * 500.0, 1e-9);
  EXPECT_EQ(j["carbon"]["providers"], json::array({"electricitymaps"}));
  EXPECT_EQ(j["carbon"]["resolution"], "hourly");
  ASSERT_FALSE(emaps.http.requests().empty());
  EXPECT_EQ(emaps.http.requests()[0].header("auth-token"), "tok");
}

TEST(ErgRunCarbon, FailingServiceFallsBackToOfflineWithAWarning) {
  Emaps emaps;
  emaps.status = 503;
  auto r = run_shell(clean_env() + erg() + " --simulate 1xA100 run --carbon DE --carbon-source electricitymaps " +
                     "--carbon-url " + emaps.http.url() + "/v3 --json -- " + erg() + " simulate load --seconds 1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json j = json::parse(r.out);
  EXPECT_GT(j["total_energy_j"].get<double>(), 100.0);
  EXPECT_NEAR(j["carbon_g"].get<double>(), j["total_energy_j"].get<double>() / 3.6e6 * 341.0, 1e-9);
  ASSERT_EQ(j["carbon"]["warnings"].size(), 1u);
  EXPECT_NE(j["carbon"]["warnings"][0].get<std::string>().find("HTTP 503"), std::string::npos);
  EXPECT_NE(r.err.find("warning"), std::string::npos);
}

}  // namespace
}  // namespace erg
