#include "erg/sim/spec.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "erg/sim/sku.hpp"

namespace erg::sim {
namespace {

TEST(Spec, CountAndSku) {
  auto s = parse_spec("4xA100");
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(s->text, "4xA100");
  ASSERT_EQ(s->gpus.size(), 4u);
  for (const auto& g : s->gpus) EXPECT_EQ(g.sku, "A100");
  ASSERT_EQ(s->cpus.size(), 1u);  // default: one package with DRAM
  EXPECT_TRUE(s->cpus[0].dram);
  EXPECT_FALSE(s->psys);
}

TEST(Spec, MixedWithCpusAndPsys) {
  auto s = parse_spec("2xH100, 1xV100,cpus=2,psys");
  ASSERT_TRUE(s) << s.error().message;
  ASSERT_EQ(s->gpus.size(), 3u);
  EXPECT_EQ(s->gpus[0].sku, "H100");
  EXPECT_EQ(s->gpus[2].sku, "V100");
  EXPECT_EQ(s->cpus.size(), 2u);
  EXPECT_TRUE(s->psys);
}

TEST(Spec, SingleAndCaseInsensitiveNames) {
  for (const char* t : {"A100", "a100", "1xa100"}) {
    auto s = parse_spec(t);
    ASSERT_TRUE(s) << t;
    ASSERT_EQ(s->gpus.size(), 1u);
    EXPECT_EQ(s->gpus[0].sku, "A100");
  }
  for (const char* t : {"rtx6000", "RTX6000", "RTX 6000", "1xRTX 6000"}) {
    auto s = parse_spec(t);
    ASSERT_TRUE(s) << t << ": " << s.error().message;
    EXPECT_EQ(s->gpus[0].sku, "RTX6000");
  }
  EXPECT_EQ(lookup_sku("Tesla V100-PCIE-32GB")->key, "V100");
  EXPECT_EQ(lookup_sku("nvidia a40")->key, "A40");
  EXPECT_EQ(lookup_sku("B200"), nullptr);
}

TEST(Spec, ZeusSquaredMixedFleet) {
  // The heterogeneous pair of issue 21.
  auto s = parse_spec("1xA10,1xT4");
  ASSERT_TRUE(s) << s.error().message;
  ASSERT_EQ(s->gpus.size(), 2u);
  EXPECT_EQ(s->gpus[0].sku, "A10");
  EXPECT_EQ(s->gpus[1].sku, "T4");
  const Sku* a10 = lookup_sku("NVIDIA A10");
  const Sku* t4 = lookup_sku("Tesla T4");
  ASSERT_TRUE(a10 && t4);
  EXPECT_EQ(a10->min_limit_w, 100u);
  EXPECT_EQ(a10->max_limit_w, 150u);
  EXPECT_EQ(t4->min_limit_w, 60u);
  EXPECT_EQ(t4->max_limit_w, 70u);
  // "A10" must not be taken for "A100" (nor the reverse).
  EXPECT_EQ(lookup_sku("A100")->key, "A100");
}

TEST(Spec, CpusZeroAndGpuless) {
  auto s = parse_spec("A100,cpus=0");
  ASSERT_TRUE(s);
  EXPECT_TRUE(s->cpus.empty());
  auto c = parse_spec("cpus=2");
  ASSERT_TRUE(c);
  EXPECT_TRUE(c->gpus.empty());
  EXPECT_EQ(c->cpus.size(), 2u);
}

TEST(Spec, BadTokensAreNamed) {
  for (const char* t : {"4xB200", "x", "0xA100", "4yA100", "A100,,V100", "", "cpus=abc", "cpus=9", "17xA100",
                        "9xA100,8xV100", "A100,"}) {
    auto s = parse_spec(t);
    ASSERT_FALSE(s) << t;
    EXPECT_EQ(s.error().code, ErrorCode::kInvalidArgument) << t;
  }
  auto s = parse_spec("2xA100,3xB200");
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message.find("3xB200"), std::string::npos) << s.error().message;
  EXPECT_NE(s.error().message.find("RTX6000"), std::string::npos) << "lists known SKUs: " << s.error().message;
}

TEST(Spec, InlineJson) {
  auto s = parse_spec(R"({"gpus":[{"sku":"A100"},{"sku":"P100","uuid":"GPU-11111111-2222-3333-4444-555555555555"}],)"
                      R"("cpus":[{"dram":true,"max_energy_range_uj":1000000},{"dram":false}],"psys":true})");
  ASSERT_TRUE(s) << s.error().message;
  ASSERT_EQ(s->gpus.size(), 2u);
  EXPECT_EQ(s->gpus[1].sku, "P100");
  EXPECT_EQ(*s->gpus[1].uuid, "GPU-11111111-2222-3333-4444-555555555555");
  ASSERT_EQ(s->cpus.size(), 2u);
  EXPECT_EQ(s->cpus[0].max_energy_range_uj, 1000000u);
  EXPECT_FALSE(s->cpus[1].dram);
  EXPECT_TRUE(s->psys);
}

TEST(Spec, JsonFileAndErrors) {
  const std::string path = ::testing::TempDir() + "/erg_sim_spec_test.json";
  {
    std::ofstream f(path);
    f << R"({"gpus":[{"sku":"h100"}]})";
  }
  auto s = parse_spec(path);
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(s->text, path);
  ASSERT_EQ(s->gpus.size(), 1u);
  EXPECT_EQ(s->gpus[0].sku, "H100");
  EXPECT_EQ(s->cpus.size(), 1u);
  std::remove(path.c_str());

  EXPECT_EQ(parse_spec("/nonexistent/x.json").error().code, ErrorCode::kNotFound);
  for (const char* t :
       {R"({"gpus":[{"sku":"Z9"}]})", R"({"gpus":[{"sku":"A100","color":1}]})", R"({"bogus":1})", R"({"gpus":[)",
        R"({"cpus":[{"dram":"yes"}]})", R"({"gpus":[{"sku":"A100","uuid":"GPU-1"},{"sku":"A100","uuid":"GPU-1"}]})"}) {
    auto r = parse_spec(t);
    ASSERT_FALSE(r) << t;
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument) << t;
  }
}

TEST(Spec, SensorZooFields) {
  auto s = parse_spec(R"({"gpus":[
      {"sku":"A100","schedule":"random_walk","publish_delay_ms":12.5,"stamps":"interval_start"},
      {"sku":"A100","schedule":"phase_jumps","phase_jump_s":2,"increment":"partial_nominal","average":"exponential"},
      {"sku":"H100","schedule":"skips","skip_share":0.1,"stamps":"floored","stamp_unit_ms":250},
      {"sku":"V100","schedule":"period-change","change_at_s":3,"period_after_ms":170,"stamps":"unrelated"},
      {"sku":"A100","partial_sampling":true,"increment":"partial"},
      {"sku":"A40"}],"cpus":0})");
  ASSERT_TRUE(s) << s.error().message;
  ASSERT_EQ(s->gpus.size(), 6u);
  const auto& g = s->gpus;
  EXPECT_EQ(g[0].schedule, Schedule::kRandomWalk);
  EXPECT_EQ(g[0].publish_delay_ms, 12.5);
  EXPECT_EQ(g[0].stamps, StampMode::kIntervalStart);
  EXPECT_EQ(g[1].schedule, Schedule::kPhaseJumps);
  EXPECT_EQ(g[1].phase_jump_s, 2.0);
  EXPECT_EQ(g[1].increment, Increment::kPartialNominal);
  EXPECT_EQ(g[1].average, AverageMode::kExponential);
  EXPECT_EQ(g[2].schedule, Schedule::kSkips);
  EXPECT_EQ(g[2].skip_share, 0.1);
  EXPECT_EQ(g[2].stamps, StampMode::kFloored);
  EXPECT_EQ(g[2].stamp_unit_ms, 250.0);
  EXPECT_EQ(g[3].schedule, Schedule::kPeriodChange) << "'-' and '_' are the same in names";
  EXPECT_EQ(g[3].change_at_s, 3.0);
  EXPECT_EQ(g[3].period_after_ms, 170.0);
  EXPECT_EQ(g[3].stamps, StampMode::kUnrelated);
  EXPECT_EQ(g[4].increment, Increment::kPartial);
  // Nothing given: nothing set (the machine keeps today's behaviour).
  EXPECT_FALSE(g[5].schedule || g[5].phase_jump_s || g[5].skip_share || g[5].change_at_s || g[5].period_after_ms ||
               g[5].publish_delay_ms || g[5].stamps || g[5].stamp_unit_ms || g[5].increment || g[5].average);
  const std::string head = R"({"gpus":[{"sku":"A100",)";
  for (auto m :
       {Schedule::kGrid, Schedule::kRandomWalk, Schedule::kPhaseJumps, Schedule::kSkips, Schedule::kPeriodChange}) {
    auto r = parse_spec(head + R"("schedule":")" + std::string(to_string(m)) + R"("}]})");
    ASSERT_TRUE(r) << to_string(m);
    EXPECT_EQ(r->gpus[0].schedule, m);
  }
  for (auto m :
       {StampMode::kUpdate, StampMode::kRead, StampMode::kIntervalStart, StampMode::kFloored, StampMode::kUnrelated}) {
    auto r = parse_spec(head + R"("stamps":")" + std::string(to_string(m)) + R"("}]})");
    ASSERT_TRUE(r) << to_string(m);
    EXPECT_EQ(r->gpus[0].stamps, m);
  }
  for (auto m : {Increment::kWhole, Increment::kPartial, Increment::kPartialNominal}) {
    auto r = parse_spec(head + R"("increment":")" + std::string(to_string(m)) + R"("}]})");
    ASSERT_TRUE(r) << to_string(m);
    EXPECT_EQ(r->gpus[0].increment, m);
  }
  for (auto m : {AverageMode::kBoxcar, AverageMode::kExponential}) {
    auto r = parse_spec(head + R"("average":")" + std::string(to_string(m)) + R"("}]})");
    ASSERT_TRUE(r) << to_string(m);
    EXPECT_EQ(r->gpus[0].average, m);
  }
}

TEST(Spec, SensorZooErrorsNameTheFieldAndTheAllowedValues) {
  struct Case {
    const char* gpu;
    std::vector<const char*> wanted;  // in the message
  };
  const Case cases[] = {
      {R"("schedule":"wobbly")",
       {"schedule", "wobbly", "grid", "random_walk", "phase_jumps", "skips", "period_change"}},
      {R"("schedule":3)", {"schedule", "random_walk"}},
      {R"("stamps":"sometimes")", {"stamps", "update", "read", "interval_start", "floored", "unrelated"}},
      {R"("increment":"most")", {"increment", "whole", "partial", "partial_nominal"}},
      {R"("average":"median")", {"average", "boxcar", "exponential"}},
      {R"("publish_delay_ms":-1)", {"publish_delay_ms", "0..5000"}},
      {R"("publish_delay_ms":"5")", {"publish_delay_ms"}},
      {R"("schedule":"phase_jumps","phase_jump_s":0)", {"phase_jump_s", "0.01..3600"}},
      {R"("schedule":"skips","skip_share":0.6)", {"skip_share", "0..0.5"}},
      {R"("schedule":"period_change","period_after_ms":0.5)", {"period_after_ms", "1..10000"}},
      {R"("schedule":"period_change","change_at_s":-2)", {"change_at_s"}},
      {R"("stamps":"floored","stamp_unit_ms":0)", {"stamp_unit_ms"}},
      // Fields of one mode without that mode.
      {R"("phase_jump_s":2)", {"phase_jump_s", "phase_jumps"}},
      {R"("schedule":"grid","skip_share":0.1)", {"skip_share", "skips"}},
      {R"("change_at_s":2)", {"change_at_s", "period_change"}},
      {R"("schedule":"skips","period_after_ms":120)", {"period_after_ms", "period_change"}},
      {R"("stamps":"update","stamp_unit_ms":10)", {"stamp_unit_ms", "floored"}},
      // partial_sampling and increment must agree.
      {R"("partial_sampling":false,"increment":"partial")", {"partial_sampling", "increment", "partial"}},
      {R"("partial_sampling":true,"increment":"whole")", {"partial_sampling", "whole"}},
      {R"("wobble":1)", {"wobble", "schedule", "publish_delay_ms", "stamps", "increment", "average"}},
  };
  for (const auto& c : cases) {
    const std::string text = std::string(R"({"gpus":[{"sku":"A100",)") + c.gpu + "}]}";
    auto r = parse_spec(text);
    ASSERT_FALSE(r) << text;
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument) << text;
    for (const char* w : c.wanted)
      EXPECT_NE(r.error().message.find(w), std::string::npos) << w << " in " << r.error().message;
  }
}

}  // namespace
}  // namespace erg::sim
