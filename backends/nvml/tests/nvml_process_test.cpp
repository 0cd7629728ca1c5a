// GPU processes through the NVML backend and the simulated driver: the running-process list, the
// per-process utilization samples with their real sampling behaviour (period, whole percent,
// lastSeenTimeStamp filtering, NOT_FOUND, the count protocol, a bounded buffer), MIG reported as
// not supported, and the simulator's truth of the per-process energy adding up.

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "erg/backends/nvml/discovery.hpp"
#include "erg/backends/nvml/nvml_abi.h"
#include "erg/sim/machine.hpp"
#include "erg/sim/spec.hpp"

namespace erg::nvml {
namespace {

using namespace std::chrono_literals;
using std::chrono::microseconds;
using std::chrono::nanoseconds;

class NvmlProcesses : public ::testing::Test {
 protected:
  void start(const std::string& spec_text, bool virtual_clock = true) {
    auto spec = sim::parse_spec(spec_text);
    ASSERT_TRUE(spec) << spec.error().message;
    auto machine = sim::Machine::create_temp(*spec, virtual_clock);
    ASSERT_TRUE(machine) << machine.error().message;
    machine_ = std::move(*machine);
    ASSERT_TRUE(machine_->export_env());
    auto path = sim::Machine::driver_library_path();
    ASSERT_TRUE(path) << path.error().message;
    library_path_ = path->string();
    DiscoveryOptions opts;
    opts.library_path = library_path_;
    opts.cuda_visible_devices = std::nullopt;
    auto found = discover(opts);
    ASSERT_TRUE(found) << found.error().message;
    gpus_ = found->gpus;
  }

  std::unique_ptr<sim::Machine> machine_;
  std::string library_path_;
  std::vector<std::shared_ptr<Gpu>> gpus_;
};

TEST_F(NvmlProcesses, ListsRunningProcesses) {
  start("1xA100");
  auto none = gpus_[0]->running_processes();
  ASSERT_TRUE(none) << none.error().message;
  EXPECT_TRUE(none->empty());
  ASSERT_TRUE(machine_->set_process(0, {101, 0.2, 1ull << 30, false, std::nullopt}));
  ASSERT_TRUE(machine_->set_process(0, {202, 0.5, 3ull << 30, false, std::nullopt}));
  auto procs = gpus_[0]->running_processes();
  ASSERT_TRUE(procs) << procs.error().message;
  ASSERT_EQ(procs->size(), 2u);
  std::map<std::uint32_t, GpuProcess> by_pid;
  for (const auto& p : *procs) by_pid[p.pid] = p;
  ASSERT_TRUE(by_pid.count(101) && by_pid.count(202));
  EXPECT_EQ(by_pid[202].used_memory_bytes, std::optional<std::uint64_t>(3ull << 30));
  EXPECT_FALSE(by_pid[101].gpu_instance.has_value());  // not MIG: 0xFFFFFFFF → nullopt
  EXPECT_FALSE(by_pid[101].compute_instance.has_value());
  // The load is the processes': utilization = Σ share.
  auto st = machine_->status(0);
  ASSERT_TRUE(st);
  EXPECT_NEAR(st->utilization, 0.7, 1e-12);
  ASSERT_TRUE(machine_->remove_process(0, 101));
  procs = gpus_[0]->running_processes();
  ASSERT_TRUE(procs);
  ASSERT_EQ(procs->size(), 1u);
  EXPECT_EQ(procs->front().pid, 202u);
  EXPECT_FALSE(machine_->remove_process(0, 101));  // NotFound
  EXPECT_FALSE(machine_->set_process(0, {0, 0.2, 0, false, std::nullopt}));
  EXPECT_FALSE(machine_->set_process(0, {5, 1.5, 0, false, std::nullopt}));
}

TEST_F(NvmlProcesses, UtilizationSamplesFollowTheShares) {
  start("1xV100");
  ASSERT_TRUE(machine_->set_process(0, {11, 0.25, 0, false, std::nullopt}));
  ASSERT_TRUE(machine_->set_process(0, {22, 0.6, 0, false, std::nullopt}));
  ASSERT_TRUE(machine_->advance(3s));
  auto samples = gpus_[0]->process_utilization(microseconds(0));
  ASSERT_TRUE(samples) << samples.error().message;
  std::map<std::uint32_t, std::vector<ProcessUtilizationSample>> by_pid;
  for (const auto& s : *samples) by_pid[s.pid].push_back(s);
  ASSERT_EQ(by_pid.size(), 2u);
  auto info = machine_->sensor_info(0);
  ASSERT_TRUE(info);
  const double period_us = static_cast<double>(info->utilization_period.count()) / 1000.0;
  EXPECT_NEAR(period_us, 1e6 / 6.0, 1e6 / 6.0 * 0.001);
  // One sample per period per process; every full period reports the share in whole percent.
  for (auto& [pid, list] : by_pid) {
    EXPECT_GE(list.size(), 17u);
    EXPECT_LE(list.size(), 18u);
    const unsigned want = pid == 11 ? 25u : 60u;
    for (std::size_t k = 1; k < list.size(); ++k) {
      EXPECT_EQ(list[k].sm_percent, want) << "pid " << pid << " sample " << k;
      const double gap = static_cast<double>((list[k].timestamp - list[k - 1].timestamp).count());
      EXPECT_NEAR(gap, period_us, 0.1 * period_us);  // jitter ≪ period
    }
  }
  // lastSeenTimeStamp: only newer samples; none newer → empty (NOT_FOUND).
  const microseconds last = samples->back().timestamp;
  auto newer = gpus_[0]->process_utilization(last);
  ASSERT_TRUE(newer) << newer.error().message;
  EXPECT_TRUE(newer->empty());
  ASSERT_TRUE(machine_->advance(500ms));
  newer = gpus_[0]->process_utilization(last);
  ASSERT_TRUE(newer);
  EXPECT_GE(newer->size(), 4u);  // 3 periods × 2 processes, give or take the phase
  EXPECT_LE(newer->size(), 8u);
  for (const auto& s : *newer) EXPECT_GT(s.timestamp, last);
}

TEST_F(NvmlProcesses, OversubscribedGpuIsTimeSliced) {
  start("1xA100");
  ASSERT_TRUE(machine_->set_process(0, {1, 0.8, 0, false, std::nullopt}));
  ASSERT_TRUE(machine_->set_process(0, {2, 0.6, 0, false, std::nullopt}));
  ASSERT_TRUE(machine_->advance(2s));
  auto samples = gpus_[0]->process_utilization(microseconds(0));
  ASSERT_TRUE(samples);
  std::map<std::uint32_t, unsigned> last_pct;
  for (const auto& s : *samples) last_pct[s.pid] = s.sm_percent;
  EXPECT_EQ(last_pct[1], 57u);  // 0.8 / 1.4
  EXPECT_EQ(last_pct[2], 43u);  // 0.6 / 1.4
}

TEST_F(NvmlProcesses, SampleBufferIsBounded) {
  start("1xA100");
  for (std::uint32_t pid = 1; pid <= 4; ++pid)
    ASSERT_TRUE(machine_->set_process(0, {pid, 0.2, 0, false, std::nullopt}));
  ASSERT_TRUE(machine_->advance(40s));  // 4 × 240 samples made
  auto samples = gpus_[0]->process_utilization(microseconds(0));
  ASSERT_TRUE(samples);
  EXPECT_EQ(samples->size(), 512u);  // the driver's buffer: the oldest are gone
  const auto span = samples->back().timestamp - samples->front().timestamp;
  EXPECT_LT(span, 33s);
}

TEST_F(NvmlProcesses, MigReportsProcessUtilizationAsNotSupported) {
  start("1xA100,1xV100");
  ASSERT_TRUE(machine_->set_process(0, {7, 0.5, 0, false, 3u}));
  ASSERT_TRUE(machine_->set_mig_mode(0, true));
  ASSERT_TRUE(machine_->advance(1s));
  auto util = gpus_[0]->process_utilization(microseconds(0));
  ASSERT_FALSE(util);
  EXPECT_EQ(util.error().code, ErrorCode::kNotSupported);
  EXPECT_NE(util.error().message.find("MIG is enabled"), std::string::npos) << util.error().message;
  auto procs = gpus_[0]->running_processes();
  ASSERT_TRUE(procs);
  ASSERT_EQ(procs->size(), 1u);
  EXPECT_EQ(procs->front().gpu_instance, std::optional<unsigned>(3u));
  EXPECT_EQ(procs->front().compute_instance, std::optional<unsigned>(0u));
  auto v100 = machine_->set_mig_mode(1, true);
  ASSERT_FALSE(v100);
  EXPECT_EQ(v100.error().code, ErrorCode::kNotSupported);
  ASSERT_TRUE(machine_->set_mig_mode(0, false));
  util = gpus_[0]->process_utilization(microseconds(0));
  ASSERT_TRUE(util) << util.error().message;
}

// The stride hazard: a driver that writes 32-byte entries into the 24-byte `_v3` array (535.43–
// 535.86) still gives the right pids and memory.
TEST_F(NvmlProcesses, ReadsADriverThatWrites32ByteEntries) {
  start("1xA100");
  ASSERT_TRUE(machine_->set_process_info_stride(32));
  EXPECT_FALSE(machine_->set_process_info_stride(28));
  for (std::uint32_t pid = 500; pid < 505; ++pid)
    ASSERT_TRUE(machine_->set_process(0, {pid, 0.1, pid * 1000ull, false, std::nullopt}));
  auto procs = gpus_[0]->running_processes();
  ASSERT_TRUE(procs) << procs.error().message;
  ASSERT_EQ(procs->size(), 5u);
  for (std::uint32_t k = 0; k < 5; ++k) {
    EXPECT_EQ((*procs)[k].pid, 500 + k);
    EXPECT_EQ((*procs)[k].used_memory_bytes, std::optional<std::uint64_t>((500 + k) * 1000ull));
    EXPECT_FALSE((*procs)[k].gpu_instance);
  }
  ASSERT_TRUE(machine_->set_process_info_stride(24));
  procs = gpus_[0]->running_processes();
  ASSERT_TRUE(procs);
  ASSERT_EQ(procs->size(), 5u);
  EXPECT_EQ((*procs)[4].pid, 504u);
}

// The vendor ABI byte for byte: the count protocols, the 24-byte process stride and the
// 32-byte sample stride, NOT_FOUND, and nothing written past what the driver reports.
TEST_F(NvmlProcesses, DriverFollowsTheVendorProtocols) {
  start("1xH100");
  void* lib = ::dlopen(library_path_.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(lib, nullptr) << ::dlerror();
  auto init = reinterpret_cast<nvmlInit_v2_fn>(::dlsym(lib, "nvmlInit_v2"));
  auto handle = reinterpret_cast<nvmlDeviceGetHandleByIndex_v2_fn>(::dlsym(lib, "nvmlDeviceGetHandleByIndex_v2"));
  auto running = reinterpret_cast<nvmlDeviceGetComputeRunningProcesses_v3_fn>(
      ::dlsym(lib, "nvmlDeviceGetComputeRunningProcesses_v3"));
  auto util = reinterpret_cast<nvmlDeviceGetProcessUtilization_fn>(::dlsym(lib, "nvmlDeviceGetProcessUtilization"));
  auto shutdown = reinterpret_cast<nvmlShutdown_fn>(::dlsym(lib, "nvmlShutdown"));
  ASSERT_TRUE(init && handle && running && util && shutdown);
  ASSERT_EQ(init(), NVML_SUCCESS);
  nvmlDevice_t dev = nullptr;
  ASSERT_EQ(handle(0, &dev), NVML_SUCCESS);

  unsigned count = 0;
  EXPECT_EQ(running(dev, &count, nullptr), NVML_SUCCESS);  // no processes: success, count 0
  EXPECT_EQ(count, 0u);
  unsigned samples_count = 0;
  EXPECT_EQ(util(dev, nullptr, &samples_count, 0), NVML_ERROR_NOT_FOUND);  // nothing sampled yet

  ASSERT_TRUE(machine_->set_process(0, {4242, 0.3, 12345, false, std::nullopt}));
  ASSERT_TRUE(machine_->set_process(0, {4343, 0.4, 0, false, std::nullopt}));
  count = 0;
  EXPECT_EQ(running(dev, &count, nullptr), NVML_ERROR_INSUFFICIENT_SIZE);
  EXPECT_EQ(count, 2u);
  unsigned char raw[3 * sizeof(nvmlProcessInfo_t)];
  std::memset(raw, 0xAA, sizeof raw);
  count = 3;
  ASSERT_EQ(running(dev, &count, reinterpret_cast<nvmlProcessInfo_t*>(raw)), NVML_SUCCESS);
  EXPECT_EQ(count, 2u);
  nvmlProcessInfo_t first;
  std::memcpy(&first, raw, sizeof first);
  EXPECT_EQ(first.pid, 4242u);
  EXPECT_EQ(first.usedGpuMemory, 12345u);
  EXPECT_EQ(first.gpuInstanceId, NVML_INSTANCE_ID_NONE);
  EXPECT_EQ(first.computeInstanceId, NVML_INSTANCE_ID_NONE);
  std::uint32_t second_pid = 0;
  std::memcpy(&second_pid, raw + 24, 4);  // the 24-byte stride
  EXPECT_EQ(second_pid, 4343u);
  for (std::size_t i = 2 * sizeof(nvmlProcessInfo_t); i < sizeof raw; ++i) ASSERT_EQ(raw[i], 0xAA) << i;

  ASSERT_TRUE(machine_->advance(1s));
  samples_count = 0;
  EXPECT_EQ(util(dev, nullptr, &samples_count, 0), NVML_ERROR_INSUFFICIENT_SIZE);
  EXPECT_GE(samples_count, 10u);  // 6 periods × 2 processes, less the phase
  std::vector<unsigned char> buf((samples_count + 1) * 32, 0xAA);
  unsigned n = samples_count + 1;
  ASSERT_EQ(util(dev, reinterpret_cast<nvmlProcessUtilizationSample_t*>(buf.data()), &n, 0), NVML_SUCCESS);
  EXPECT_EQ(n, samples_count);
  nvmlProcessUtilizationSample_t s0, s1;
  std::memcpy(&s0, buf.data(), 32);
  std::memcpy(&s1, buf.data() + 32, 32);  // the 32-byte stride
  EXPECT_TRUE(s0.pid == 4242u || s0.pid == 4343u);
  EXPECT_TRUE(s1.pid == 4242u || s1.pid == 4343u);
  EXPECT_LE(s0.timeStamp, s1.timeStamp);
  EXPECT_EQ(s0.encUtil, 0u);
  for (std::size_t i = n * 32; i < buf.size(); ++i) ASSERT_EQ(buf[i], 0xAA) << i;
  // A too-small buffer: INSUFFICIENT_SIZE and the count needed.
  unsigned small = 1;
  EXPECT_EQ(util(dev, reinterpret_cast<nvmlProcessUtilizationSample_t*>(buf.data()), &small, 0),
            NVML_ERROR_INSUFFICIENT_SIZE);
  EXPECT_EQ(small, samples_count);
  // lastSeenTimeStamp at the newest sample: NOT_FOUND.
  unsigned long long newest = 0;
  for (unsigned i = 0; i < n; ++i) {
    nvmlProcessUtilizationSample_t s;
    std::memcpy(&s, buf.data() + i * 32, 32);
    newest = std::max(newest, s.timeStamp);
  }
  unsigned none = 8;
  EXPECT_EQ(util(dev, reinterpret_cast<nvmlProcessUtilizationSample_t*>(buf.data()), &none, newest),
            NVML_ERROR_NOT_FOUND);
  EXPECT_EQ(util(dev, nullptr, nullptr, 0), NVML_ERROR_INVALID_ARGUMENT);
  shutdown();
  ::dlclose(lib);
}

// The simulator's truth: idle + Σ processes + unattributed = the physical energy, and a process
// with twice the share gets twice the energy above idle.
TEST_F(NvmlProcesses, TruthAddsUpToThePhysicalEnergy) {
  start("1xA100");
  auto before = machine_->true_energy(0);
  ASSERT_TRUE(before);
  auto truth0 = machine_->process_truth(0);
  ASSERT_TRUE(truth0);
  ASSERT_TRUE(machine_->set_process(0, {1, 0.2, 0, false, std::nullopt}));
  ASSERT_TRUE(machine_->set_process(0, {2, 0.4, 0, false, std::nullopt}));
  ASSERT_TRUE(machine_->advance(5s));
  auto truth = machine_->process_truth(0);
  auto after = machine_->true_energy(0);
  ASSERT_TRUE(truth && after);
  double sum = truth->idle.value() + truth->unattributed.value();
  std::map<std::uint32_t, double> e;
  for (const auto& p : truth->processes) sum += p.energy.value(), e[p.pid] = p.energy.value();
  EXPECT_NEAR(sum, after->value(), 1e-9 * after->value());
  EXPECT_NEAR(e[2] / e[1], 2.0, 1e-9);
  EXPECT_GT(e[1], 0.0);
  EXPECT_NEAR(truth->processes[0].busy_time.count() / 1e9, 1.0, 1e-6);  // 0.2 × 5 s
  // A process whose kernels draw half the power per unit of activity: its samples say 40 %, its
  // truth is that of a 20 % process at full intensity.
  ASSERT_TRUE(machine_->set_process(0, {3, 0.4, 0, false, std::nullopt, 0.5}));
  EXPECT_FALSE(machine_->set_process(0, {4, 0.4, 0, false, std::nullopt, 0.0}));
  auto st = machine_->status(0);
  ASSERT_TRUE(st);
  EXPECT_NEAR(st->utilization, 0.2 + 0.4 + 0.4 * 0.5, 1e-12);
  auto mid = machine_->process_truth(0);
  ASSERT_TRUE(machine_->advance(2s));
  auto end = machine_->process_truth(0);
  ASSERT_TRUE(mid && end);
  std::map<std::uint32_t, double> d;
  for (const auto& p : end->processes) d[p.pid] += p.energy.value();
  for (const auto& p : mid->processes) d[p.pid] -= p.energy.value();
  EXPECT_NEAR(d[3] / d[1], 1.0, 1e-9);
  EXPECT_NEAR(d[2] / d[1], 2.0, 1e-9);
  auto samples = machine_->utilization_samples(0);
  ASSERT_TRUE(samples);
  unsigned last3 = 0;
  for (const auto& s : *samples)
    if (s.pid == 3) last3 = s.sm_percent;
  EXPECT_EQ(last3, 40u);
  (void)truth0;
  (void)before;
}

}  // namespace
}  // namespace erg::nvml
