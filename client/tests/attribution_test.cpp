// parse_attribution: ergd's /attribution body — a full answer, and zeusd's error shape with the
// GPUs that answered in `partial` — into erg::client::DaemonAttribution.

#include "erg/client/attribution.hpp"

#include <gtest/gtest.h>

namespace erg::client {
namespace {

TEST(ClientAttribution, ParsesABodyWithOwnProcessesAndOtherUsers) {
  auto a = parse_attribution(R"({"uid": 65534, "sees_all_processes": false, "daemon_started_ms": 5,
    "gpus": {"1": {"attributable": false, "error": "MIG is enabled", "measured_j": 80.0},
             "0": {"attributable": true, "start_ms": 10, "end_ms": 2010, "duration_s": 2.0, "measured_j": 500.0,
                   "idle_j": 100.0, "unattributed_j": 0.0, "idle_calibrated": true,
                   "processes": [{"pid": 7, "uid": 65534, "comm": "python3", "container": null, "pod": "p-1",
                                  "energy_j": 300.0, "bound_j": 20.0, "power_w": 150.0, "busy_s": 1.2, "share": 0.75}],
                   "other_users": {"processes": 1, "energy_j": 100.0, "bound_j": 9.0, "power_w": 50.0}}}})");
  ASSERT_TRUE(a) << a.error().message;
  EXPECT_EQ(a->uid, 65534u);
  EXPECT_FALSE(a->sees_all_processes);
  ASSERT_EQ(a->gpus.size(), 2u);
  const auto& g = a->gpus[0];
  EXPECT_EQ(g.gpu, 0u);
  ASSERT_EQ(g.processes.size(), 1u);
  EXPECT_EQ(g.processes[0].pid, 7u);
  EXPECT_EQ(g.processes[0].uid, 65534u);
  EXPECT_FALSE(g.processes[0].container);
  EXPECT_EQ(g.processes[0].pod, "p-1");
  EXPECT_EQ(g.other_users.processes, 1u);
  EXPECT_DOUBLE_EQ(g.sum_j(), 500.0);
  EXPECT_FALSE(a->gpus[1].attributable);
  EXPECT_EQ(a->gpus[1].error, "MIG is enabled");
  EXPECT_TRUE(a->gpus[1].processes.empty());
}

TEST(ClientAttribution, ParsesPartialAnswersAndRefusesJunk) {
  auto a = parse_attribution(R"({"errors": {"2": "no counter update in the window yet"},
    "error_codes": {"2": "unavailable"},
    "partial": {"uid": 0, "sees_all_processes": true, "gpus": {"0": {"attributable": true, "measured_j": 1.0}}}})");
  ASSERT_TRUE(a) << a.error().message;
  ASSERT_EQ(a->errors.count(2), 1u);
  EXPECT_EQ(a->errors.at(2).code, ErrorCode::kUnavailable);
  ASSERT_EQ(a->gpus.size(), 1u);
  EXPECT_TRUE(a->sees_all_processes);
  EXPECT_FALSE(parse_attribution("not json"));
  EXPECT_FALSE(parse_attribution(R"({"uid": 0})"));
}

}  // namespace
}  // namespace erg::client
