// Selectors and the profile file: Zeus's picks on hand-made profiles, its validation messages,
// the JSON it writes and reads.

#include "erg/optimizers/power_limit/selector.hpp"

#include <gtest/gtest.h>

#include <fstream>

namespace erg::power_limit {
namespace {

std::vector<PowerLimitMeasurement> profile() {
  // Descending limits, as the optimizer measures them. Time grows and energy has an interior
  // minimum at 200 W, as on real GPUs.
  return {{Watts(300), Joules(3000), Seconds(10.0)}, {Watts(275), Joules(2800), Seconds(10.2)},
          {Watts(250), Joules(2600), Seconds(10.6)}, {Watts(225), Joules(2450), Seconds(11.3)},
          {Watts(200), Joules(2400), Seconds(12.5)}, {Watts(175), Joules(2500), Seconds(14.9)}};
}

TEST(Selectors, EnergyAndTimePickTheirMinimum) {
  EXPECT_EQ(energy_selector()->select(profile())->value(), 200.0);
  EXPECT_EQ(time_selector()->select(profile())->value(), 300.0);
}

TEST(Selectors, TiesGoToTheHigherLimitLikeZeus) {
  std::vector<PowerLimitMeasurement> m = {{Watts(300), Joules(100), Seconds(1.0)},
                                          {Watts(250), Joules(100), Seconds(1.0)}};
  EXPECT_EQ(energy_selector()->select(m)->value(), 300.0);
  EXPECT_EQ(time_selector()->select(m)->value(), 300.0);
  EXPECT_EQ((*zeus_cost_selector(0.5, 1))->select(m)->value(), 300.0);
}

TEST(Selectors, ZeusCostIsArgminOfTheCostWithMaxPowerTimesWorldSize) {
  for (double eta : {0.0, 0.25, 0.5, 0.75, 1.0})
    for (unsigned world : {1u, 4u}) {
      auto s = zeus_cost_selector(eta, world);
      ASSERT_TRUE(s);
      const auto m = profile();
      double best_cost = 1e300;
      double best = 0;
      for (const auto& x : m) {
        const double c = eta * x.energy.value() + (1 - eta) * 300.0 * world * x.time.count();
        if (c < best_cost) best_cost = c, best = x.power_limit.value();
      }
      EXPECT_EQ((*s)->select(m)->value(), best) << "eta " << eta << " world " << world;
    }
  // η = 1 is the energy pick, η = 0 the time pick.
  EXPECT_EQ((*zeus_cost_selector(1.0, 1))->select(profile())->value(), 200.0);
  EXPECT_EQ((*zeus_cost_selector(0.0, 1))->select(profile())->value(), 300.0);
  EXPECT_EQ(zeus_cost(Joules(10), Seconds(2.0), 0.25, Watts(100)), 0.25 * 10 + 0.75 * 100 * 2);
}

TEST(Selectors, MaxSlowdownIsTheLowestLimitWithinTheFactorOfTheMaxLimitsTime) {
  auto pick = [](double f) { return (*max_slowdown_selector(f))->select(profile())->value(); };
  EXPECT_EQ(pick(1.0), 300.0);
  EXPECT_EQ(pick(1.02), 275.0);
  EXPECT_EQ(pick(1.1), 250.0);
  EXPECT_EQ(pick(1.25), 200.0);
  EXPECT_EQ(pick(100.0), 175.0);
  // Measured against the time at the highest limit, not the fastest (Zeus's rule).
  std::vector<PowerLimitMeasurement> m = {{Watts(300), Joules(1), Seconds(10.0)},
                                          {Watts(250), Joules(1), Seconds(9.0)},
                                          {Watts(200), Joules(1), Seconds(10.5)}};
  EXPECT_EQ((*max_slowdown_selector(1.05))->select(m)->value(), 200.0);
}

TEST(Selectors, ValidationMessagesAreZeuss) {
  EXPECT_EQ(zeus_cost_selector(-0.1, 1).error().message, "eta_knob must be between 0 and 1, inclusive both sides.");
  EXPECT_EQ(zeus_cost_selector(1.1, 1).error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(zeus_cost_selector(0.5, 0).error().message, "world_size must be greater than or equal to 1.");
  EXPECT_EQ(max_slowdown_selector(0.9).error().message,
            "max_slowdown_factor must be greater than or equal to 1.0. Got 0.9.");
  EXPECT_EQ(energy_selector()->select({}).error().code, ErrorCode::kInvalidArgument);
}

TEST(Selectors, UserDefined) {
  auto lowest = function_selector(
      [](const std::vector<PowerLimitMeasurement>& m) -> Result<Watts> { return m.back().power_limit; }, "lowest");
  EXPECT_EQ(lowest->select(profile())->value(), 175.0);
  EXPECT_EQ(lowest->describe(), "lowest");
}

TEST(Profile, SavedAndLoadedAsZeusWritesIt) {
  const auto path = std::filesystem::path(::testing::TempDir()) / "erg_pl_profile.json";
  ASSERT_TRUE(save_profile(path, profile()));
  std::ifstream in(path);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text.substr(0, 45), "{\n    \"measurements\": [\n        {\n           ");
  EXPECT_NE(text.find("\"power_limit\": 300,"), std::string::npos) << text;
  auto back = load_profile(path);
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(*back, profile());
  std::filesystem::remove(path);
}

TEST(Profile, BadFilesAreNamedErrors) {
  const auto path = std::filesystem::path(::testing::TempDir()) / "erg_pl_bad.json";
  auto load_text = [&](const std::string& text) {
    std::ofstream(path) << text;
    return load_profile(path);
  };
  EXPECT_EQ(load_profile("/nonexistent/erg.json").error().code, ErrorCode::kNotFound);
  EXPECT_EQ(load_text("not json").error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(load_text("{}").error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(load_text(R"({"measurements":[{"power_limit":250.5,"energy":1,"time":1}]})").error().code,
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(load_text(R"({"measurements":[{"power_limit":250,"energy":0,"time":1}]})").error().code,
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(load_text(R"({"measurements":[{"power_limit":250,"energy":1}]})").error().code,
            ErrorCode::kInvalidArgument);
  auto ok = load_text(R"({"measurements":[{"power_limit":250,"energy":1.5,"time":2,"note":"x"}],"extra":1})");
  ASSERT_TRUE(ok) << ok.error().message;
  EXPECT_EQ(ok->size(), 1u);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace erg::power_limit
