#include "erg/optimizers/pipeline_frequency/pipeline_dag.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

namespace erg::pipeline_frequency {
namespace {

std::string order_of(const PipelineDag& dag, int stage) {
  std::string s;
  for (int id : dag.stage_order(stage)) {
    const auto& a = dag.activities()[static_cast<std::size_t>(id)];
    s += (s.empty() ? "" : " ") + std::string(a.instruction == Instruction::kForward ? "F" : "B") +
         std::to_string(a.micro_batch);
  }
  return s;
}

TEST(PipelineDag, TwoStagesThreeMicroBatchesHandChecked) {
  const auto dag = PipelineDag::synchronous_1f1b(2, 3);
  ASSERT_TRUE(dag);
  ASSERT_EQ(dag->activities().size(), 12u);
  // Stage 0 warms up with one forward; the last stage alternates from the start.
  EXPECT_EQ(order_of(*dag, 0), "F0 F1 B0 F2 B1 B2");
  EXPECT_EQ(order_of(*dag, 1), "F0 B0 F1 B1 F2 B2");
  auto F = [&](int s, int m) { return dag->id(s, Instruction::kForward, m); };
  auto B = [&](int s, int m) { return dag->id(s, Instruction::kBackward, m); };
  std::vector<Edge> expected = {// stage order
                                {F(0, 0), F(0, 1)},
                                {F(0, 1), B(0, 0)},
                                {B(0, 0), F(0, 2)},
                                {F(0, 2), B(0, 1)},
                                {B(0, 1), B(0, 2)},
                                {F(1, 0), B(1, 0)},
                                {B(1, 0), F(1, 1)},
                                {F(1, 1), B(1, 1)},
                                {B(1, 1), F(1, 2)},
                                {F(1, 2), B(1, 2)},
                                // activations down, gradients up
                                {F(0, 0), F(1, 0)},
                                {F(0, 1), F(1, 1)},
                                {F(0, 2), F(1, 2)},
                                {B(1, 0), B(0, 0)},
                                {B(1, 1), B(0, 1)},
                                {B(1, 2), B(0, 2)}};
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(dag->edges(), expected);
  EXPECT_EQ(dag->id(2, Instruction::kForward, 0), -1);
  EXPECT_EQ(dag->id(0, Instruction::kForward, 3), -1);
}

TEST(PipelineDag, LongestPathIsTheKnown1F1BMakespan) {
  // Uniform forward F and backward B: a 1F1B iteration takes (M + S − 1)(F + B).
  for (int S : {1, 2, 3, 4})
    for (int M : {1, 2, 3, 8}) {
      const auto dag = PipelineDag::synchronous_1f1b(S, M);
      ASSERT_TRUE(dag);
      std::vector<int> d;
      for (const auto& a : dag->activities()) d.push_back(a.instruction == Instruction::kForward ? 1 : 2);
      const auto l = longest_path(d, dag->edges());
      ASSERT_TRUE(l);
      EXPECT_EQ(*l, (M + S - 1) * 3) << S << "x" << M;
    }
}

TEST(PipelineDag, CountsOneSourceOneSinkOnTheBenchmarkShape) {
  const auto dag = PipelineDag::synchronous_1f1b(4, 8);
  ASSERT_TRUE(dag);
  EXPECT_EQ(dag->activities().size(), 64u);
  // 4 stages × 15 in-stage edges + 3 × 8 forward + 3 × 8 backward hand-offs.
  EXPECT_EQ(dag->edges().size(), 108u);
  std::vector<int> in(64, 0), out(64, 0);
  for (const auto& [a, b] : dag->edges()) ++out[static_cast<std::size_t>(a)], ++in[static_cast<std::size_t>(b)];
  std::vector<int> sources, sinks;
  for (int i = 0; i < 64; ++i) {
    if (in[static_cast<std::size_t>(i)] == 0) sources.push_back(i);
    if (out[static_cast<std::size_t>(i)] == 0) sinks.push_back(i);
  }
  EXPECT_EQ(sources, std::vector<int>{dag->id(0, Instruction::kForward, 0)});
  EXPECT_EQ(sinks, std::vector<int>{dag->id(0, Instruction::kBackward, 7)});
  // Every (stage, instruction, micro-batch) exactly once.
  for (int s = 0; s < 4; ++s)
    for (int m = 0; m < 8; ++m)
      for (auto i : {Instruction::kForward, Instruction::kBackward}) {
        const int id = dag->id(s, i, m);
        ASSERT_GE(id, 0);
        EXPECT_EQ(dag->activities()[static_cast<std::size_t>(id)], (Activity{s, i, m}));
      }
}

TEST(PipelineDag, RejectsEmptyShapesAndCycles) {
  EXPECT_FALSE(PipelineDag::synchronous_1f1b(0, 4));
  EXPECT_FALSE(PipelineDag::synchronous_1f1b(4, 0));
  const std::vector<int> d = {1, 1};
  const std::vector<Edge> cycle = {{0, 1}, {1, 0}};
  EXPECT_FALSE(longest_path(d, cycle));
  const std::vector<Edge> bad = {{0, 2}};
  EXPECT_FALSE(longest_path(d, bad));
}

}  // namespace
}  // namespace erg::pipeline_frequency
