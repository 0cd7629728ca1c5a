#include "erg/optimizers/batch_size/explorer.hpp"

#include <gtest/gtest.h>

#include <tuple>

namespace erg::batch_size {
namespace {

const std::vector<int> kSizes = {8, 16, 32, 64, 128, 256};

struct Outcome {
  int batch_size;
  double cost;
  bool converged;
};

/// Drives the explorer through `outcomes`, checking it asks for each batch size in that order,
/// and returns the survivors once it says pruning is over.
std::vector<int> drive(int default_bs, const std::vector<Outcome>& outcomes) {
  auto e = PruningExplorer::create(kSizes, default_bs, 2);
  EXPECT_TRUE(e);
  for (std::size_t i = 0; i < outcomes.size(); ++i) {
    auto next = e->next();
    EXPECT_TRUE(next) << next.error().message;
    EXPECT_EQ(next->action, PruningExplorer::Action::kExplore) << "step " << i;
    EXPECT_EQ(next->batch_size, outcomes[i].batch_size) << "step " << i;
    EXPECT_TRUE(e->report(outcomes[i].batch_size, outcomes[i].cost, outcomes[i].converged));
  }
  auto next = e->next();
  EXPECT_TRUE(next);
  EXPECT_EQ(next->action, PruningExplorer::Action::kDone);
  EXPECT_TRUE(e->done());
  return e->batch_sizes();
}

// The acceptance examples of the Zeus test suite (reference §9 item 8).
TEST(PruningExplorer, TypicalDefault128KeepsArms32To128) {
  // Round 1 walks 128, 64, 32, 16, 8 (fails: down ends), then 256. The cheapest survivor, 32,
  // is round 2's b0: down 32, 16 (fails), then up 64, 128, 256 (fails).
  const auto arms = drive(128, {{128, 10, true},
                                {64, 9, true},
                                {32, 8, true},
                                {16, 12, true},
                                {8, 21, false},
                                {256, 15, true},
                                {32, 8, true},
                                {16, 12, false},
                                {64, 9, true},
                                {128, 10, true},
                                {256, 17, false}});
  EXPECT_EQ(arms, (std::vector<int>{32, 64, 128}));
}

TEST(PruningExplorer, DefaultLargestKeepsArms32To256) {
  const auto arms = drive(256, {{256, 7, true},
                                {128, 8, true},
                                {64, 9, true},
                                {32, 13, true},
                                {16, 22, false},
                                {256, 8, true},
                                {128, 8.5, true},
                                {64, 9, true},
                                {32, 12, true}});
  EXPECT_EQ(arms, (std::vector<int>{32, 64, 128, 256}));
}

TEST(PruningExplorer, DefaultSmallestWalksUpOnly) {
  const auto arms =
      drive(8, {{8, 10, true}, {16, 17, true}, {32, 20, true}, {64, 25, false}, {8, 10, true}, {16, 21, false}});
  EXPECT_EQ(arms, (std::vector<int>{8}));
}

TEST(PruningExplorer, AllConvergeKeepsAll) {
  const auto arms = drive(64, {{64, 10, true},
                               {32, 8, true},
                               {16, 12, true},
                               {8, 15, true},
                               {128, 12, true},
                               {256, 13, true},
                               {32, 7, true},
                               {16, 10, true},
                               {8, 15, true},
                               {64, 10, true},
                               {128, 12, true},
                               {256, 13, true}});
  EXPECT_EQ(arms, kSizes);
}

TEST(PruningExplorer, OnlyDefaultConverges) {
  const auto arms = drive(64, {{64, 10, true}, {32, 22, false}, {128, 25, false}, {64, 9, true}});
  EXPECT_EQ(arms, (std::vector<int>{64}));
}

TEST(PruningExplorer, NoneConvergedIsAnError) {
  auto e = PruningExplorer::create(kSizes, 64, 2);
  ASSERT_TRUE(e);
  ASSERT_EQ(e->next()->batch_size, 64);
  ASSERT_TRUE(e->report(64, 10, false));
  ASSERT_EQ(e->next()->batch_size, 128);
  ASSERT_TRUE(e->report(128, 10, false));
  auto n = e->next();
  ASSERT_FALSE(n);
  EXPECT_EQ(n.error().code, ErrorCode::kNotFound);
  EXPECT_NE(n.error().message.find("no batch size converged"), std::string::npos);
}

TEST(PruningExplorer, ConcurrentSubmissionsWaitForTheOutstandingExploration) {
  auto e = PruningExplorer::create(kSizes, 128, 2);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->next()->batch_size, 128);
  EXPECT_TRUE(e->dispatched(128));
  EXPECT_EQ(e->next()->action, PruningExplorer::Action::kConcurrent);
  EXPECT_EQ(e->next()->action, PruningExplorer::Action::kConcurrent);
  // Only the outstanding exploration may be reported.
  EXPECT_FALSE(e->report(64, 1, true));
  ASSERT_TRUE(e->report(128, 10, true));
  EXPECT_EQ(e->next()->batch_size, 64);
}

TEST(PruningExplorer, CancelledExplorationIsExploredAgain) {
  auto e = PruningExplorer::create(kSizes, 128, 1);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->next()->batch_size, 128);
  ASSERT_TRUE(e->cancel(128));
  EXPECT_FALSE(e->cancel(128));
  EXPECT_EQ(e->next()->batch_size, 128);
}

TEST(PruningExplorer, ZeroRoundsIsDoneAtOnce) {
  auto e = PruningExplorer::create(kSizes, 128, 0);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->next()->action, PruningExplorer::Action::kDone);
  EXPECT_EQ(e->batch_sizes(), kSizes);
}

TEST(PruningExplorer, RejectsBadArguments) {
  EXPECT_FALSE(PruningExplorer::create({}, 8, 2));
  EXPECT_FALSE(PruningExplorer::create({8, 16}, 32, 2));
  EXPECT_FALSE(PruningExplorer::create({8, 8}, 8, 2));
  EXPECT_FALSE(PruningExplorer::create({8, 16}, 8, -1));
}

}  // namespace
}  // namespace erg::batch_size
