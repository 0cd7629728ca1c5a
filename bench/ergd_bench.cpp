// ergd throughput and latency over the Unix socket, against the floor of the machine:
//  BM_ErgdRps      GET /gpu/get_cumulative_energy, keep-alive, 16 concurrent C++ clients, ergd
//                  in-process over the simulated NVML driver (4xA100). Counters: rps, p99_us.
//  BM_UdsFloorRps  the same 16 clients doing a minimal 64-byte request/response echo over a Unix
//                  socket against a thread-per-connection echo server (ergd's threading model
//                  with no HTTP and no device). Counter: rps.
// Both run in the same process, one after the other, so they see the same machine.

#include <benchmark/benchmark.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "erg/client/connection.hpp"
#include "erg/daemon/daemon.hpp"
#include "sim_gpus.hpp"

namespace {

constexpr int kClients = 16;
constexpr auto kDuration = std::chrono::seconds(2);

struct Load {
  double rps = 0;
  double p99_us = 0;
};

/// Runs `one_request` (returns false on failure) from kClients threads for kDuration.
template <class MakeClient>
Load run_load(MakeClient make_client) {
  std::atomic<bool> go{false}, stop{false};
  std::vector<std::vector<float>> lat(kClients);
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int i = 0; i < kClients; ++i)
    threads.emplace_back([&, i] {
      auto one = make_client();
      lat[i].reserve(200000);
      while (!go.load()) std::this_thread::yield();
      while (!stop.load(std::memory_order_relaxed)) {
        auto t0 = std::chrono::steady_clock::now();
        if (!one()) {
          failures++;
          return;
        }
        lat[i].push_back(std::chrono::duration<float, std::micro>(std::chrono::steady_clock::now() - t0).count());
      }
    });
  auto t0 = std::chrono::steady_clock::now();
  go = true;
  std::this_thread::sleep_for(kDuration);
  stop = true;
  for (auto& t : threads) t.join();
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::vector<float> all;
  for (auto& l : lat) all.insert(all.end(), l.begin(), l.end());
  Load out;
  if (failures.load() > 0 || all.empty()) return out;
  out.rps = static_cast<double>(all.size()) / secs;
  std::size_t k = all.size() * 99 / 100;
  std::nth_element(all.begin(), all.begin() + static_cast<long>(k), all.end());
  out.p99_us = all[k];
  return out;
}

void BM_ErgdRps(benchmark::State& state) {
  auto sim = erg::bench::sim_gpus("4xA100", 4);
  if (!sim) return state.SkipWithError(sim.error().message.c_str());
  erg::Inventory inv;
  inv.gpus = sim->gpus;
  erg::daemon::Config config;
  config.socket_path = "/tmp/ergd-bench-" + std::to_string(::getpid()) + ".sock";
  config.skip_privilege_check = true;
  config.allow_insecure_socket_dir = true;  // a socket in /tmp itself (sticky, shared)
  auto d = erg::daemon::Daemon::create(config, std::move(inv));
  if (!d || !(*d)->start()) return state.SkipWithError("cannot start ergd");
  Load load;
  for (auto _ : state) {
    load = run_load([&] {
      auto conn = std::make_shared<erg::client::Connection>(erg::client::Endpoint{config.socket_path});
      return [conn] {
        auto r = conn->request("GET", "/gpu/get_cumulative_energy");
        return r && r->status == 200;
      };
    });
  }
  if (load.rps == 0) return state.SkipWithError("requests failed");
  state.counters["rps"] = load.rps;
  state.counters["p99_us"] = load.p99_us;
}
BENCHMARK(BM_ErgdRps)->Iterations(1)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_UdsFloorRps(benchmark::State& state) {
  std::string path = "/tmp/uds-floor-" + std::to_string(::getpid()) + ".sock";
  ::unlink(path.c_str());
  int lfd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::strncpy(a.sun_path, path.c_str(), sizeof a.sun_path - 1);
  if (::bind(lfd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(lfd, 64) != 0)
    return state.SkipWithError("cannot listen");
  std::vector<std::thread> servers;
  std::thread acceptor([&] {
    for (int i = 0; i < kClients; ++i) {
      int fd = ::accept(lfd, nullptr, nullptr);
      if (fd < 0) return;
      servers.emplace_back([fd] {
        char buf[64];
        for (;;) {
          ssize_t n = ::recv(fd, buf, sizeof buf, 0);
          if (n <= 0 || ::send(fd, buf, static_cast<std::size_t>(n), MSG_NOSIGNAL) != n) break;
        }
        ::close(fd);
      });
    }
  });
  Load load;
  std::vector<int> client_fds;
  std::mutex fds_mutex;
  for (auto _ : state) {
    load = run_load([&] {
      int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
      ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
      {
        std::lock_guard g(fds_mutex);
        client_fds.push_back(fd);
      }
      return [fd] {
        char msg[64] = "GET /gpu/get_cumulative_energy HTTP/1.1\r\n\r\n";
        if (::send(fd, msg, sizeof msg, MSG_NOSIGNAL) != sizeof msg) return false;
        std::size_t got = 0;
        while (got < sizeof msg) {
          ssize_t n = ::recv(fd, msg + got, sizeof msg - got, 0);
          if (n <= 0) return false;
          got += static_cast<std::size_t>(n);
        }
        return true;
      };
    });
  }
  for (int fd : client_fds) ::close(fd);
  acceptor.join();
  for (auto& t : servers) t.join();
  ::close(lfd);
  ::unlink(path.c_str());
  state.counters["rps"] = load.rps;
  state.counters["p99_us"] = load.p99_us;
}
BENCHMARK(BM_UdsFloorRps)->Iterations(1)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
