// Cost of the PowerMonitor's background sampler (simulated NVML driver; not a hardware figure).
//   BM_SamplerCpu1kHz8Gpu: sample 8 simulated GPUs (device_instant) at 1 kHz for 5 s and report
//     the sampler thread's CPU time as % of one core, and the achieved sampling rate.
//   BM_TimerFloor1kHz: a bare thread that only wakes at 1 kHz for 5 s, with the same wait
//     mechanism, measured in the same run: the floor any 1 kHz sampler pays on this machine.
//   BM_SamplerBytesPerSample: heap bytes per stored sample of a full timeline.
//   BM_SamplerStartRss: resident memory a PowerMonitor adds at start (default options: the period
//     inferred, unbounded storage) on 8 simulated GPUs + 2 CPU packages with DRAM.
//   BM_SamplerGrownBytesPerSample: resident growth per stored sample over 10^6 samples per series
//     (8 GPUs + 2 packages with DRAM: 12 series; fake devices whose power changes every round, so
//     nothing is deduplicated away).

#include <benchmark/benchmark.h>
#include <malloc.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdio>
#include <memory>
#include <mutex>
#include <thread>

#include "erg/measure/power_monitor.hpp"
#include "erg/measure/timeline.hpp"
#include "erg/sim/fake_devices.hpp"
#include "sim_gpus.hpp"

namespace {

constexpr auto kRun = std::chrono::seconds(5);

double thread_cpu_seconds(pthread_t t) {
  clockid_t cid;
  pthread_getcpuclockid(t, &cid);
  timespec ts{};
  clock_gettime(cid, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

void BM_SamplerCpu1kHz8Gpu(benchmark::State& state) {
  auto sim = erg::bench::sim_gpus("8xA100,cpus=0", 8);
  if (!sim) return state.SkipWithError(sim.error().message.c_str());
  for (unsigned i = 0; i < 8; ++i) (void)sim->machine->set_utilization(i, 0.3 + 0.08 * i);
  for (auto _ : state) {
    erg::measure::PowerMonitorOptions o;
    o.period = std::chrono::milliseconds(1);
    o.domains = {erg::PowerDomain::kDeviceInstant};
    o.cpus = false;
    auto monitor = erg::measure::PowerMonitor::create(sim->gpus, {}, o);
    if (!monitor) return state.SkipWithError(monitor.error().message.c_str());
    auto cpu0 = (*monitor)->sampler_cpu_time().value_or(std::chrono::nanoseconds(0));
    auto rounds0 = (*monitor)->rounds();
    auto t0 = std::chrono::steady_clock::now();
    std::this_thread::sleep_for(kRun);
    auto cpu1 = (*monitor)->sampler_cpu_time().value_or(std::chrono::nanoseconds(0));
    auto rounds1 = (*monitor)->rounds();
    double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    (*monitor)->stop();
    state.counters["cpu_pct"] = 100.0 * std::chrono::duration<double>(cpu1 - cpu0).count() / wall;
    state.counters["rate_hz"] = static_cast<double>(rounds1 - rounds0) / wall;
  }
}
BENCHMARK(BM_SamplerCpu1kHz8Gpu)->Iterations(1)->Unit(benchmark::kMillisecond);

void BM_TimerFloor1kHz(benchmark::State& state) {
  for (auto _ : state) {
    std::mutex mu;
    std::condition_variable cv;
    bool stop = false;
    long wakes = 0;
    std::thread th([&] {
      auto next = std::chrono::steady_clock::now();
      std::unique_lock lock(mu);
      while (!stop) {
        ++wakes;
        next += std::chrono::milliseconds(1);
        cv.wait_until(lock, next, [&] { return stop; });
      }
    });
    double c0 = thread_cpu_seconds(th.native_handle());
    auto t0 = std::chrono::steady_clock::now();
    std::this_thread::sleep_for(kRun);
    double c1 = thread_cpu_seconds(th.native_handle());
    double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    {
      std::lock_guard lock(mu);
      stop = true;
    }
    cv.notify_all();
    th.join();
    state.counters["cpu_pct"] = 100.0 * (c1 - c0) / wall;
    state.counters["rate_hz"] = static_cast<double>(wakes) / wall;
  }
}
BENCHMARK(BM_TimerFloor1kHz)->Iterations(1)->Unit(benchmark::kMillisecond);

void BM_SamplerBytesPerSample(benchmark::State& state) {
  // Marginal heap bytes per stored sample: two full timelines of N and 2N samples, so the
  // constant per-timeline overhead (object, allocator header) cancels out.
  constexpr std::size_t kSamples = 1 << 16;
  auto heap_for = [](std::size_t n) {
    auto heap = [] {
      auto mi = mallinfo2();
      return mi.uordblks + mi.hblkhd;
    };  // small + mmapped
    auto before = heap();
    auto timeline = std::make_unique<erg::measure::Timeline>(n);
    for (std::size_t i = 0; i < n; ++i)
      timeline->add_power(std::chrono::microseconds(1000 * i), 100.0 + static_cast<double>(i % 7));
    if (timeline->size() != n) return 0.0;
    return static_cast<double>(heap() - before);
  };
  for (auto _ : state) {
    double one = heap_for(kSamples);
    double two = heap_for(2 * kSamples);
    state.counters["bytes_per_sample"] = (two - one) / static_cast<double>(kSamples);
    state.counters["bytes_per_sample_with_overhead"] = two / static_cast<double>(2 * kSamples);
  }
}
BENCHMARK(BM_SamplerBytesPerSample)->Iterations(1);

/// Resident set size, bytes (/proc/self/statm).
double rss_bytes() {
  long pages_total = 0, pages_resident = 0;
  if (FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld %ld", &pages_total, &pages_resident) != 2) pages_resident = 0;
    std::fclose(f);
  }
  return static_cast<double>(pages_resident) * static_cast<double>(sysconf(_SC_PAGESIZE));
}

void BM_SamplerStartRss(benchmark::State& state) {
  auto sim = erg::bench::sim_gpus("8xA100,cpus=2", 8);
  if (!sim) return state.SkipWithError(sim.error().message.c_str());
  const auto& cpus = sim->cpus;
  if (cpus.size() != 2) return state.SkipWithError("simulated CPU packages not found");
  for (auto _ : state) {
    malloc_trim(0);
    const double before = rss_bytes();
    auto monitor = erg::measure::PowerMonitor::create(sim->gpus, cpus, erg::measure::PowerMonitorOptions{});
    if (!monitor) return state.SkipWithError(monitor.error().message.c_str());
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // sampling under way
    state.counters["start_rss_mib"] = (rss_bytes() - before) / (1024.0 * 1024.0);
    state.counters["series"] = 8 + 2 * 2;
    (*monitor)->stop();
  }
}
BENCHMARK(BM_SamplerStartRss)->Iterations(1)->Unit(benchmark::kMillisecond);

void BM_SamplerGrownBytesPerSample(benchmark::State& state) {
  constexpr int kRounds = 1'000'000;
  std::vector<std::shared_ptr<erg::sim::FakeGpu>> fakes;
  std::vector<std::shared_ptr<erg::Gpu>> gpus;
  for (unsigned i = 0; i < 8; ++i)
    fakes.push_back(std::make_shared<erg::sim::FakeGpu>(i)), gpus.push_back(fakes.back());
  std::vector<std::shared_ptr<erg::sim::FakeCpu>> fake_cpus;
  std::vector<std::shared_ptr<erg::Cpu>> cpus;
  for (unsigned c = 0; c < 2; ++c)
    fake_cpus.push_back(std::make_shared<erg::sim::FakeCpu>(c)), cpus.push_back(fake_cpus.back());
  for (auto _ : state) {
    erg::VirtualClock clock;
    erg::measure::PowerMonitorOptions o;
    o.period = std::chrono::milliseconds(1);
    o.domains = {erg::PowerDomain::kDeviceInstant};
    o.start_thread = false;
    o.clock = &clock;
    auto monitor = erg::measure::PowerMonitor::create(gpus, cpus, o);
    if (!monitor) return state.SkipWithError(monitor.error().message.c_str());
    malloc_trim(0);
    const double before = rss_bytes();
    const std::size_t stored_before = (*monitor)->stored_samples();
    double uj = 0;
    for (int r = 0; r < kRounds; ++r) {
      clock.advance(std::chrono::milliseconds(1));
      for (unsigned i = 0; i < 8; ++i) fakes[i]->set_power_mw(100000.0 + (r % 97) * 10.0 + i);
      uj += 1000.0 + (r % 13);
      for (auto& c : fake_cpus) c->set_energy_uj(uj, uj / 5);
      (*monitor)->sample_once();
    }
    const double samples = static_cast<double>((*monitor)->stored_samples() - stored_before);
    state.counters["grown_bytes_per_sample"] = (rss_bytes() - before) / samples;
    state.counters["samples_per_series"] = samples / 12.0;
  }
}
BENCHMARK(BM_SamplerGrownBytesPerSample)->Iterations(1)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
