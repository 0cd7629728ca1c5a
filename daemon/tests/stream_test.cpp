// ergd's SSE streams over a real Unix socket with fake devices: events, demand-driven polling,
// and a prompt stop with streams and idle connections open.

#include <atomic>
#include <filesystem>
#include <thread>

#include "erg/client/connection.hpp"
#include "socket_helpers.hpp"

namespace erg::daemon {
namespace {

using testing::connect_raw;
using testing::serve;
using testing::temp_socket;

TEST(Server, SseDeliversEventsAndPollsOnlyWhileSubscribed) {
  std::string path = temp_socket("sse");
  auto f = serve(path);
  EXPECT_EQ(f->daemon->subscribers(true, 1), 0u);
  client::Connection c(client::Endpoint{path});
  std::vector<nlohmann::json> events;
  // The first value before the stream opens (its first event may come before the changer runs).
  f->gpus[1]->set_power_mw(100000.0);
  std::thread changer([&] {
    for (int i = 0; i < 20; ++i) {
      f->gpus[1]->set_power_mw(100000.0 + 1000.0 * i);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  auto st = c.stream("/gpu/stream_power?gpu_ids=1", [&](std::string_view data) {
    events.push_back(nlohmann::json::parse(data));
    return events.size() < 3;
  });
  changer.join();
  ASSERT_TRUE(st) << st.error().message;
  EXPECT_EQ(*st, 200);
  ASSERT_EQ(events.size(), 3u);
  for (auto& e : events) {
    EXPECT_EQ(e["gpu_id"], 1);
    EXPECT_TRUE(e.contains("timestamp_ms"));
    EXPECT_GE(e["power_mw"].get<unsigned>(), 100000u);
  }
  EXPECT_NE(events[0]["power_mw"], events[1]["power_mw"]);  // only changed samples
  // The subscriber left: the poller goes idle.
  for (int i = 0; i < 100 && f->daemon->subscribers(true, 1) != 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(f->daemon->subscribers(true, 1), 0u);

  std::vector<nlohmann::json> cpu_events;
  f->cpus[0]->set_energy_uj(0, 0);
  std::atomic<bool> done{false};
  std::thread cpu_changer([&] {
    double e = 0;
    while (!done) {
      e += 1e5;
      f->cpus[0]->set_energy_uj(e, e / 2);
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  });
  auto cs = c.stream("/cpu/stream_power?cpu_ids=0", [&](std::string_view data) {
    cpu_events.push_back(nlohmann::json::parse(data));
    return cpu_events.size() < 2;
  });
  done = true;
  cpu_changer.join();
  ASSERT_TRUE(cs);
  ASSERT_EQ(cpu_events.size(), 2u);
  EXPECT_EQ(cpu_events[0]["cpu_id"], 0);
  EXPECT_GT(cpu_events[0]["cpu_mw"].get<double>(), 0.0);
  EXPECT_FALSE(cpu_events[0]["dram_mw"].is_null());
}

TEST(Server, StopWithOpenStreamAndIdleConnectionsIsPrompt) {
  std::string path = temp_socket("stop");
  auto f = serve(path);
  int idle = connect_raw(path);
  std::thread streamer([&] {
    client::Connection c(client::Endpoint{path});
    (void)c.stream("/gpu/stream_power", [](std::string_view) { return true; });
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  auto t0 = std::chrono::steady_clock::now();
  f->daemon->stop();
  streamer.join();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
  ::close(idle);
  EXPECT_FALSE(std::filesystem::exists(path));
}

}  // namespace
}  // namespace erg::daemon
