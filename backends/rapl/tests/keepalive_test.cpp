#include "erg/backends/rapl/keepalive.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

namespace erg::rapl {
namespace {

using namespace std::chrono_literals;

TEST(KeepalivePeriod, QuarterOfTheFastestWrapClamped) {
  // 65.5 kJ at 1000 W wraps in 65.5 s at the soonest: read every 16.4 s.
  EXPECT_EQ(keepalive_period(65'536'000'000, Watts(1000.0)), std::chrono::nanoseconds(16'384'000'000));
  // 262 kJ (a common max_energy_range_uj) would give 65.5 s: clamped to 60 s.
  EXPECT_EQ(keepalive_period(262'143'328'850, Watts(1000.0)), kMaxKeepalivePeriod);
  // A tiny range: clamped to RAPL's 1 ms update period.
  EXPECT_EQ(keepalive_period(1000, Watts(1000.0)), kMinKeepalivePeriod);
  EXPECT_EQ(keepalive_period(40'000'000, Watts(1000.0)), 10ms);
  // Unknown range or power: nothing to catch, the slowest period.
  EXPECT_EQ(keepalive_period(0, Watts(1000.0)), kMaxKeepalivePeriod);
  EXPECT_EQ(keepalive_period(1000, Watts(0.0)), kMaxKeepalivePeriod);
}

bool wait_for(const std::function<bool()>& done, std::chrono::milliseconds timeout = 5s) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

TEST(Keepalive, RunsEveryTaskEachRound) {
  std::atomic<int> a{0};
  std::atomic<int> b{0};
  Keepalive keepalive({[&] { ++a; }, [&] { ++b; }}, 1ms);
  EXPECT_EQ(keepalive.period(), 1ms);
  ASSERT_TRUE(wait_for([&] { return keepalive.rounds() >= 5; }));
  EXPECT_GE(a.load(), 5);
  EXPECT_GE(b.load(), 5);
}

TEST(Keepalive, StopsPromptlyWhenDestroyed) {
  std::atomic<int> runs{0};
  const auto start = std::chrono::steady_clock::now();
  {
    Keepalive keepalive({[&] { ++runs; }}, kMaxKeepalivePeriod);
    std::this_thread::sleep_for(5ms);
  }
  // Woken by the condition variable, not after the 60 s period.
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
  EXPECT_EQ(runs.load(), 0);
}

TEST(Keepalive, NoTaskRunsAfterDestruction) {
  auto runs = std::make_shared<std::atomic<int>>(0);
  int after = 0;
  {
    Keepalive keepalive({[runs] { ++*runs; }}, 1ms);
    ASSERT_TRUE(wait_for([&] { return keepalive.rounds() >= 2; }));
  }
  after = runs->load();
  std::this_thread::sleep_for(10ms);
  EXPECT_EQ(runs->load(), after);
}

}  // namespace
}  // namespace erg::rapl
