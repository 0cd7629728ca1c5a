// The simulated libnvidia-ml.so.1 through dlopen: init, errors, buffers, faults, call counts.

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <thread>
#include <vector>

#include "sim_fixture.hpp"

namespace erg::sim {
namespace {

using namespace std::chrono_literals;
using testing::Nvml;
using testing::SimTest;

class Driver : public SimTest {};

TEST(DriverInit, NoStateMeansDriverNotLoaded) {
  Nvml& n = Nvml::get();
  ASSERT_TRUE(n.missing.empty()) << n.missing;
  const char* saved = std::getenv("ERG_SIM_STATE");
  std::string keep = saved != nullptr ? saved : "";
  ::unsetenv("ERG_SIM_STATE");
  EXPECT_EQ(n.nvmlInit_v2(), NVML_ERROR_DRIVER_NOT_LOADED);
  const std::string junk = ::testing::TempDir() + "/erg_sim_junk_state";
  {
    std::ofstream f(junk);
    f << std::string(100000, 'x');
  }
  ::setenv("ERG_SIM_STATE", junk.c_str(), 1);
  EXPECT_EQ(n.nvmlInitWithFlags(0), NVML_ERROR_DRIVER_NOT_LOADED);
  ::setenv("ERG_SIM_STATE", "/nonexistent/state", 1);
  EXPECT_EQ(n.nvmlInit_v2(), NVML_ERROR_DRIVER_NOT_LOADED);
  std::remove(junk.c_str());
  // Nothing initialized: every call is UNINITIALIZED.
  unsigned count = 0;
  EXPECT_EQ(n.nvmlDeviceGetCount_v2(&count), NVML_ERROR_UNINITIALIZED);
  nvmlDevice_t d = nullptr;
  EXPECT_EQ(n.nvmlDeviceGetHandleByIndex_v2(0, &d), NVML_ERROR_UNINITIALIZED);
  char buf[80];
  EXPECT_EQ(n.nvmlSystemGetDriverVersion(buf, sizeof buf), NVML_ERROR_UNINITIALIZED);
  unsigned mw = 0;
  EXPECT_EQ(n.nvmlDeviceGetPowerUsage(d, &mw), NVML_ERROR_UNINITIALIZED);
  if (saved != nullptr) ::setenv("ERG_SIM_STATE", keep.c_str(), 1);
}

TEST(DriverInit, ErrorStrings) {
  Nvml& n = Nvml::get();
  EXPECT_STREQ(n.nvmlErrorString(NVML_SUCCESS), "Success");
  EXPECT_STREQ(n.nvmlErrorString(NVML_ERROR_NO_PERMISSION), "Insufficient Permissions");
  EXPECT_STREQ(n.nvmlErrorString(NVML_ERROR_GPU_IS_LOST), "GPU is lost");
  EXPECT_STREQ(n.nvmlErrorString(NVML_ERROR_LIBRARY_NOT_FOUND), "NVML Shared Library Not Found");
  EXPECT_STREQ(n.nvmlErrorString(NVML_ERROR_UNKNOWN), "Unknown Error");
  EXPECT_STREQ(n.nvmlErrorString(static_cast<nvmlReturn_t>(12345)), "Unknown Error");
}

TEST_F(Driver, RefcountedInit) {
  start("1xA100,cpus=0");
  ASSERT_EQ(nvml_.nvmlInitWithFlags(0), NVML_SUCCESS);  // refcount 2
  ASSERT_EQ(nvml_.nvmlShutdown(), NVML_SUCCESS);        // 1: still usable
  unsigned count = 0;
  ASSERT_EQ(nvml_.nvmlDeviceGetCount_v2(&count), NVML_SUCCESS);
  EXPECT_EQ(count, 1u);
  nvmlDevice_t d = dev(0);
  ASSERT_EQ(nvml_.nvmlShutdown(), NVML_SUCCESS);  // 0
  initialized_ = false;
  EXPECT_EQ(nvml_.nvmlDeviceGetCount_v2(&count), NVML_ERROR_UNINITIALIZED);
  unsigned mw = 0;
  EXPECT_EQ(nvml_.nvmlDeviceGetPowerUsage(d, &mw), NVML_ERROR_UNINITIALIZED);
  EXPECT_EQ(nvml_.nvmlShutdown(), NVML_SUCCESS);  // more shutdowns than inits: no error (header)
}

TEST_F(Driver, IdentityAndHandles) {
  start("1xA100,1xV100,1xP100,1xH100,1xA40,1xRTX6000,cpus=0");
  unsigned count = 0;
  ASSERT_EQ(nvml_.nvmlDeviceGetCount_v2(&count), NVML_SUCCESS);
  ASSERT_EQ(count, 6u);
  const char* names[] = {"NVIDIA A100-SXM4-80GB", "Tesla V100-PCIE-32GB", "Tesla P100-PCIE-16GB",
                         "NVIDIA H100 80GB HBM3", "NVIDIA A40",           "Quadro RTX 6000"};
  const unsigned arches[] = {NVML_DEVICE_ARCH_AMPERE, NVML_DEVICE_ARCH_VOLTA,  NVML_DEVICE_ARCH_PASCAL,
                             NVML_DEVICE_ARCH_HOPPER, NVML_DEVICE_ARCH_AMPERE, NVML_DEVICE_ARCH_TURING};
  std::set<std::string> uuids;
  for (unsigned i = 0; i < count; ++i) {
    char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
    ASSERT_EQ(nvml_.nvmlDeviceGetName(dev(i), name, sizeof name), NVML_SUCCESS);
    EXPECT_STREQ(name, names[i]);
    nvmlDeviceArchitecture_t arch = 0;
    ASSERT_EQ(nvml_.nvmlDeviceGetArchitecture(dev(i), &arch), NVML_SUCCESS);
    EXPECT_EQ(arch, arches[i]);
    char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
    ASSERT_EQ(nvml_.nvmlDeviceGetUUID(dev(i), uuid, sizeof uuid), NVML_SUCCESS);
    ASSERT_EQ(std::strlen(uuid), 40u) << uuid;
    EXPECT_EQ(std::string(uuid).rfind("GPU-", 0), 0u);
    for (int dash : {12, 17, 22, 27}) EXPECT_EQ(uuid[dash], '-') << uuid;
    uuids.insert(uuid);
    nvmlDevice_t by_uuid = nullptr;
    ASSERT_EQ(nvml_.nvmlDeviceGetHandleByUUID(uuid, &by_uuid), NVML_SUCCESS);
    EXPECT_EQ(by_uuid, dev(i));
    unsigned index = 99;
    ASSERT_EQ(nvml_.nvmlDeviceGetIndex(by_uuid, &index), NVML_SUCCESS);
    EXPECT_EQ(index, i);
    EXPECT_EQ(machine_->spec().gpus[i].uuid.value(), uuid);
  }
  EXPECT_EQ(uuids.size(), 6u);
  nvmlDevice_t d = nullptr;
  EXPECT_EQ(nvml_.nvmlDeviceGetHandleByIndex_v2(6, &d), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(nvml_.nvmlDeviceGetHandleByUUID("GPU-nope", &d), NVML_ERROR_NOT_FOUND);
  EXPECT_EQ(nvml_.nvmlDeviceGetHandleByIndex_v2(0, nullptr), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(nvml_.nvmlDeviceGetCount_v2(nullptr), NVML_ERROR_INVALID_ARGUMENT);
  unsigned mw = 0;
  int not_a_device = 0;
  EXPECT_EQ(nvml_.nvmlDeviceGetPowerUsage(reinterpret_cast<nvmlDevice_t>(&not_a_device), &mw),
            NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(nvml_.nvmlDeviceGetPowerUsage(dev(0), nullptr), NVML_ERROR_INVALID_ARGUMENT);
}

TEST_F(Driver, BufferProtocols) {
  start("1xA100,cpus=0");
  char small[8];
  EXPECT_EQ(nvml_.nvmlDeviceGetName(dev(0), small, sizeof small), NVML_ERROR_INSUFFICIENT_SIZE);
  EXPECT_EQ(nvml_.nvmlDeviceGetUUID(dev(0), small, sizeof small), NVML_ERROR_INSUFFICIENT_SIZE);
  EXPECT_EQ(nvml_.nvmlSystemGetDriverVersion(small, 4), NVML_ERROR_INSUFFICIENT_SIZE);
  char version[80];
  ASSERT_EQ(nvml_.nvmlSystemGetDriverVersion(version, sizeof version), NVML_SUCCESS);
  EXPECT_STREQ(version, "550.127.08");

  unsigned n = 0;
  ASSERT_EQ(nvml_.nvmlDeviceGetSupportedMemoryClocks(dev(0), &n, nullptr), NVML_ERROR_INSUFFICIENT_SIZE);
  ASSERT_EQ(n, 1u);
  unsigned mem[4] = {};
  ASSERT_EQ(nvml_.nvmlDeviceGetSupportedMemoryClocks(dev(0), &n, mem), NVML_SUCCESS);
  EXPECT_EQ(mem[0], 1593u);
  unsigned g = 0;
  ASSERT_EQ(nvml_.nvmlDeviceGetSupportedGraphicsClocks(dev(0), mem[0], &g, nullptr), NVML_ERROR_INSUFFICIENT_SIZE);
  ASSERT_EQ(g, 81u);  // 1410 down to 210 in 15 MHz steps
  std::vector<unsigned> clocks(g + 5);
  unsigned cap = static_cast<unsigned>(clocks.size());
  ASSERT_EQ(nvml_.nvmlDeviceGetSupportedGraphicsClocks(dev(0), mem[0], &cap, clocks.data()), NVML_SUCCESS);
  EXPECT_EQ(cap, g);
  EXPECT_EQ(clocks.front(), 1410u);
  EXPECT_EQ(clocks[g - 1], 210u);
  for (unsigned i = 1; i < g; ++i) EXPECT_LT(clocks[i], clocks[i - 1]);  // descending, like NVML
  unsigned one = 1;
  EXPECT_EQ(nvml_.nvmlDeviceGetSupportedGraphicsClocks(dev(0), mem[0], &one, clocks.data()),
            NVML_ERROR_INSUFFICIENT_SIZE);
  EXPECT_EQ(one, g);
  EXPECT_EQ(nvml_.nvmlDeviceGetSupportedGraphicsClocks(dev(0), 1, &cap, clocks.data()), NVML_ERROR_NOT_FOUND);
}

TEST_F(Driver, FieldSupportPerSku) {
  start("1xA100,1xA40,1xH100,1xV100,1xP100,1xRTX6000,cpus=0");
  struct Want {
    bool energy, average, memory;
  };
  const Want want[] = {{true, false, false}, {true, true, false},   {true, true, true},
                       {true, false, false}, {false, false, false}, {true, false, false}};
  for (unsigned i = 0; i < 6; ++i) {
    nvmlFieldValue_t v[8] = {};
    const unsigned ids[8] = {NVML_FI_DEV_POWER_INSTANT,
                             NVML_FI_DEV_POWER_AVERAGE,
                             NVML_FI_DEV_POWER_AVERAGE,
                             NVML_FI_DEV_POWER_INSTANT,
                             NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION,
                             NVML_FI_DEV_POWER_CURRENT_LIMIT,
                             NVML_FI_DEV_POWER_MAX_LIMIT,
                             9999};
    const unsigned scopes[8] = {0, 0, NVML_POWER_SCOPE_MEMORY, NVML_POWER_SCOPE_MODULE, 0, 0, 0, 0};
    for (int k = 0; k < 8; ++k) v[k].fieldId = ids[k], v[k].scopeId = scopes[k];
    ASSERT_EQ(nvml_.nvmlDeviceGetFieldValues(dev(i), 8, v), NVML_SUCCESS);
    EXPECT_EQ(v[0].nvmlReturn, NVML_SUCCESS) << i;
    EXPECT_GT(v[0].value.uiVal, 0u);
    EXPECT_GT(v[0].timestamp, 1'600'000'000'000'000LL);  // wall µs
    EXPECT_EQ(v[1].nvmlReturn, want[i].average ? NVML_SUCCESS : NVML_ERROR_NOT_SUPPORTED) << i;
    EXPECT_EQ(v[2].nvmlReturn, want[i].memory ? NVML_SUCCESS : NVML_ERROR_NOT_SUPPORTED) << i;
    if (want[i].memory) {
      EXPECT_LT(v[2].value.uiVal, v[1].value.uiVal);
    }
    EXPECT_EQ(v[3].nvmlReturn, NVML_ERROR_NOT_SUPPORTED) << "MODULE scope, " << i;
    EXPECT_EQ(v[4].nvmlReturn, want[i].energy ? NVML_SUCCESS : NVML_ERROR_NOT_SUPPORTED) << i;
    EXPECT_EQ(v[5].nvmlReturn, NVML_SUCCESS);
    EXPECT_EQ(v[6].nvmlReturn, NVML_SUCCESS);
    EXPECT_EQ(v[5].value.uiVal, v[6].value.uiVal) << "default limit = max limit";
    EXPECT_EQ(v[7].nvmlReturn, NVML_ERROR_NOT_SUPPORTED);
    unsigned long long e = 0;
    EXPECT_EQ(nvml_.nvmlDeviceGetTotalEnergyConsumption(dev(i), &e),
              want[i].energy ? NVML_SUCCESS : NVML_ERROR_NOT_SUPPORTED);
  }
  EXPECT_EQ(nvml_.nvmlDeviceGetFieldValues(dev(0), -1, nullptr), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(nvml_.nvmlDeviceGetFieldValues(dev(0), 1, nullptr), NVML_ERROR_INVALID_ARGUMENT);
}

TEST_F(Driver, LimitsAndPrivilege) {
  start("1xH100,1xP100,cpus=0");
  unsigned lo = 0, hi = 0, def = 0, cur = 0;
  ASSERT_EQ(nvml_.nvmlDeviceGetPowerManagementLimitConstraints(dev(0), &lo, &hi), NVML_SUCCESS);
  EXPECT_EQ(lo, 200000u);
  EXPECT_EQ(hi, 700000u);
  ASSERT_EQ(nvml_.nvmlDeviceGetPowerManagementDefaultLimit(dev(0), &def), NVML_SUCCESS);
  EXPECT_EQ(def, 700000u);
  machine_->set_privilege(Privilege::kNobody);
  EXPECT_EQ(nvml_.nvmlDeviceSetPowerManagementLimit(dev(0), 300000), NVML_ERROR_NO_PERMISSION);
  EXPECT_EQ(nvml_.nvmlDeviceSetPersistenceMode(dev(0), NVML_FEATURE_ENABLED), NVML_ERROR_NO_PERMISSION);
  EXPECT_EQ(nvml_.nvmlDeviceSetGpuLockedClocks(dev(0), 210, 1500), NVML_ERROR_NO_PERMISSION);
  EXPECT_EQ(nvml_.nvmlDeviceSetMemoryLockedClocks(dev(0), 2619, 2619), NVML_ERROR_NO_PERMISSION);
  EXPECT_EQ(nvml_.nvmlDeviceResetGpuLockedClocks(dev(0)), NVML_ERROR_NO_PERMISSION);
  machine_->set_privilege(Privilege::kRootOnly);
  EXPECT_EQ(nvml_.nvmlDeviceSetPowerManagementLimit(dev(0), 300000),
            ::geteuid() == 0 ? NVML_SUCCESS : NVML_ERROR_NO_PERMISSION);
  machine_->set_privilege(Privilege::kEveryone);
  ASSERT_EQ(nvml_.nvmlDeviceSetPowerManagementLimit(dev(0), 300000), NVML_SUCCESS);
  ASSERT_EQ(nvml_.nvmlDeviceGetPowerManagementLimit(dev(0), &cur), NVML_SUCCESS);
  EXPECT_EQ(cur, 300000u);
  EXPECT_EQ(nvml_.nvmlDeviceSetPowerManagementLimit(dev(0), 199999), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(nvml_.nvmlDeviceSetPowerManagementLimit(dev(0), 700001), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(field(0, NVML_FI_DEV_POWER_CURRENT_LIMIT).value.uiVal, 300000u);
  nvmlEnableState_t mode = NVML_FEATURE_ENABLED;
  ASSERT_EQ(nvml_.nvmlDeviceGetPersistenceMode(dev(0), &mode), NVML_SUCCESS);
  EXPECT_EQ(mode, NVML_FEATURE_DISABLED);
  ASSERT_EQ(nvml_.nvmlDeviceSetPersistenceMode(dev(0), NVML_FEATURE_ENABLED), NVML_SUCCESS);
  EXPECT_TRUE(machine_->status(0)->persistence);
  // Locked clocks: Volta+ (P100 has none); memory locks Ampere+; mixed symbolic/numeric invalid.
  EXPECT_EQ(nvml_.nvmlDeviceSetGpuLockedClocks(dev(1), 544, 1000), NVML_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(nvml_.nvmlDeviceSetMemoryLockedClocks(dev(1), 715, 715), NVML_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(nvml_.nvmlDeviceSetGpuLockedClocks(dev(0), 0xffffff01u, 1000), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(nvml_.nvmlDeviceSetGpuLockedClocks(dev(0), 1500, 1000), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(nvml_.nvmlDeviceSetMemoryLockedClocks(dev(0), 2619, 2619), NVML_SUCCESS);
  unsigned mem = 0;
  ASSERT_EQ(nvml_.nvmlDeviceGetClockInfo(dev(0), NVML_CLOCK_MEM, &mem), NVML_SUCCESS);
  EXPECT_EQ(mem, 2619u);
}

TEST_F(Driver, InjectedErrorsCountAndClear) {
  start("2xA100,cpus=0");
  ASSERT_TRUE(machine_->inject_error(0, SimCall::kGetTotalEnergyConsumption, NVML_ERROR_TIMEOUT, 2));
  unsigned long long e = 0;
  EXPECT_EQ(nvml_.nvmlDeviceGetTotalEnergyConsumption(dev(0), &e), NVML_ERROR_TIMEOUT);
  EXPECT_EQ(nvml_.nvmlDeviceGetTotalEnergyConsumption(dev(0), &e), NVML_ERROR_TIMEOUT);
  EXPECT_EQ(nvml_.nvmlDeviceGetTotalEnergyConsumption(dev(0), &e), NVML_SUCCESS);
  EXPECT_EQ(nvml_.nvmlDeviceGetTotalEnergyConsumption(dev(1), &e), NVML_SUCCESS) << "other GPU untouched";
  // Until cleared, on any call.
  nvmlDevice_t d1 = dev(1);  // handles stay valid
  ASSERT_TRUE(machine_->inject_error(1, SimCall::kAny, NVML_ERROR_UNKNOWN));
  unsigned mw = 0;
  nvmlDevice_t d = nullptr;
  ASSERT_EQ(nvml_.nvmlDeviceGetHandleByIndex_v2(1, &d), NVML_ERROR_UNKNOWN);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(nvml_.nvmlDeviceGetPowerUsage(d1, &mw), NVML_ERROR_UNKNOWN);
  ASSERT_TRUE(machine_->clear_faults(1));
  EXPECT_EQ(nvml_.nvmlDeviceGetPowerUsage(d1, &mw), NVML_SUCCESS);
  // Calls are counted, failing or not.
  EXPECT_EQ(*machine_->call_count(0, SimCall::kGetTotalEnergyConsumption), 3u);
  EXPECT_EQ(*machine_->call_count(1, SimCall::kGetPowerUsage), 6u);
  EXPECT_GE(*machine_->call_count(1, SimCall::kAny), 8u);
  EXPECT_EQ(*machine_->call_count(0, SimCall::kSetPowerManagementLimit), 0u);
}

TEST_F(Driver, LostGpu) {
  start("2xA100,cpus=0");
  nvmlDevice_t d = dev(0);
  ASSERT_TRUE(machine_->set_lost(0, true));
  EXPECT_TRUE(machine_->status(0)->lost);
  unsigned long long e = 0;
  EXPECT_EQ(nvml_.nvmlDeviceGetTotalEnergyConsumption(d, &e), NVML_ERROR_GPU_IS_LOST);
  nvmlFieldValue_t v{};
  v.fieldId = NVML_FI_DEV_POWER_INSTANT;
  EXPECT_EQ(nvml_.nvmlDeviceGetFieldValues(d, 1, &v), NVML_ERROR_GPU_IS_LOST);
  nvmlDevice_t again = nullptr;
  EXPECT_EQ(nvml_.nvmlDeviceGetHandleByIndex_v2(0, &again), NVML_ERROR_GPU_IS_LOST);
  EXPECT_EQ(nvml_.nvmlDeviceGetTotalEnergyConsumption(dev(1), &e), NVML_SUCCESS);
  ASSERT_TRUE(machine_->set_lost(0, false));
  EXPECT_EQ(nvml_.nvmlDeviceGetTotalEnergyConsumption(d, &e), NVML_SUCCESS);
}

TEST_F(Driver, CounterResetAndBackwards) {
  start("1xA100,cpus=0");
  ASSERT_TRUE(machine_->set_utilization(0, 1.0));
  ASSERT_TRUE(machine_->advance(3s));
  const auto before = counter_mj(0);
  EXPECT_GT(before, 500'000u);
  const double truth = machine_->true_energy(0)->value();
  ASSERT_TRUE(machine_->energy_counter_backwards(0, MilliJoules(1000.0)));
  EXPECT_EQ(counter_mj(0), before - 1000);
  ASSERT_TRUE(machine_->reset_energy_counter(0));
  EXPECT_EQ(counter_mj(0), 0u);
  ASSERT_TRUE(machine_->advance(1s));
  // The counter restarted: it holds about one second of the sensor's energy (within one 100 ms
  // update, the sensor's ≤ 2 % gain error and the load's noise).
  const double spent = machine_->true_energy(0)->value() - truth;
  EXPECT_NEAR(static_cast<double>(counter_mj(0)), spent * 1000.0, spent * 1000.0 * 0.13);
  EXPECT_NEAR(spent, machine_->status(0)->mean_power.value(), 0.01 * spent) << "true energy is unaffected";
}

// The lock-free read path (real clock only): a read between two sensor updates is answered from
// the GPU's published readings, with the same values, and any control event is seen by the very
// next read.
TEST_F(Driver, LockFreeReadsMatchAndYieldToControlEvents) {
  // Update-time stamps so two reads of one reading are identical byte for byte (with read-time
  // stamps only the timestamp differs: LockFreeReadsStampTheReadTime).
  start("1xA100,cpus=0,timestamps=update", /*virtual_clock=*/false);
  ASSERT_TRUE(machine_->set_utilization(0, 0.7));
  std::this_thread::sleep_for(250ms);  // a few counter ticks, so a reset is visible
  nvmlDevice_t d = dev(0);
  auto read = [&](nvmlFieldValue_t(&v)[2]) {
    v[0] = nvmlFieldValue_t{};
    v[1] = nvmlFieldValue_t{};
    v[0].fieldId = NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION;
    v[1].fieldId = NVML_FI_DEV_POWER_INSTANT;
    return nvml_.nvmlDeviceGetFieldValues(d, 2, v);
  };
  // Two reads within one sensor period: the second is lock-free and identical, byte for byte.
  bool seen = false;
  for (int attempt = 0; attempt < 50 && !seen; ++attempt) {
    nvmlFieldValue_t a[2], b[2];
    const auto before = *machine_->lock_free_reads(0);
    ASSERT_EQ(read(a), NVML_SUCCESS);
    ASSERT_EQ(read(b), NVML_SUCCESS);
    if (*machine_->lock_free_reads(0) == before + 1) {
      seen = true;
      EXPECT_EQ(std::memcmp(a, b, sizeof a), 0);
      EXPECT_EQ(a[0].valueType, NVML_VALUE_TYPE_UNSIGNED_LONG_LONG);
      EXPECT_EQ(a[1].valueType, NVML_VALUE_TYPE_UNSIGNED_INT);
    }
  }
  EXPECT_TRUE(seen) << "no read was answered lock-free";
  unsigned long long e1 = 0, e2 = 0;
  ASSERT_EQ(nvml_.nvmlDeviceGetTotalEnergyConsumption(d, &e1), NVML_SUCCESS);
  ASSERT_EQ(nvml_.nvmlDeviceGetTotalEnergyConsumption(d, &e2), NVML_SUCCESS);
  EXPECT_LE(e1, e2);
  EXPECT_GT(e2, 0u);
  EXPECT_EQ(*machine_->call_count(0, SimCall::kGetTotalEnergyConsumption), 2u) << "lock-free reads are counted";

  // Control events take effect on the next read, never hidden behind published readings.
  ASSERT_TRUE(machine_->inject_error(0, SimCall::kGetFieldValues, NVML_ERROR_TIMEOUT, 1));
  nvmlFieldValue_t v[2];
  EXPECT_EQ(read(v), NVML_ERROR_TIMEOUT);
  EXPECT_EQ(read(v), NVML_SUCCESS);
  ASSERT_TRUE(machine_->reset_energy_counter(0));
  ASSERT_EQ(read(v), NVML_SUCCESS);
  EXPECT_LT(v[0].value.ullVal, e2) << "the counter restarted from 0";
  ASSERT_TRUE(machine_->set_lost(0, true));
  EXPECT_EQ(read(v), NVML_ERROR_GPU_IS_LOST);
  EXPECT_EQ(nvml_.nvmlDeviceGetTotalEnergyConsumption(d, &e1), NVML_ERROR_GPU_IS_LOST);
  ASSERT_TRUE(machine_->set_lost(0, false));
  EXPECT_EQ(read(v), NVML_SUCCESS);

  // A new load shows once the sensor updates (100 ms on an A100), as before: the sensor's
  // average over its sampled window, with its gain error.
  ASSERT_TRUE(machine_->set_utilization(0, 0.0));
  std::this_thread::sleep_for(250ms);
  const double idle_w = machine_->status(0)->mean_power.value() * (1.0 + machine_->sensor_info(0)->gain);
  ASSERT_EQ(read(v), NVML_SUCCESS);
  EXPECT_NEAR(v[1].value.uiVal / 1000.0, idle_w, 0.03 * idle_w);
}

TEST_F(Driver, LockFreeReadsStampTheReadTime) {
  start("1xA100,cpus=0", /*virtual_clock=*/false);
  nvmlDevice_t d = dev(0);
  bool seen = false;
  // Most attempts qualify; under TSan on a loaded machine a read may fall back to the lock (a
  // writer mid-update) in many in a row, so allow plenty (each takes ~2 ms).
  for (int attempt = 0; attempt < 500 && !seen; ++attempt) {
    nvmlFieldValue_t a{}, b{};
    a.fieldId = b.fieldId = NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION;
    ASSERT_EQ(nvml_.nvmlDeviceGetFieldValues(d, 1, &a), NVML_SUCCESS);
    std::this_thread::sleep_for(2ms);
    const long long wall_us = machine_->wall_now().count() / 1000;
    // Whether `b` itself was answered lock-free (whatever path `a` took).
    const auto before_b = *machine_->lock_free_reads(0);
    ASSERT_EQ(nvml_.nvmlDeviceGetFieldValues(d, 1, &b), NVML_SUCCESS);
    if (*machine_->lock_free_reads(0) == before_b + 1 && a.value.ullVal == b.value.ullVal) {
      seen = true;
      EXPECT_GE(b.timestamp - a.timestamp, 2000) << "the same reading, stamped when read";
      EXPECT_GE(b.timestamp, wall_us);
      EXPECT_LT(b.timestamp - wall_us, 5000);
    }
  }
  EXPECT_TRUE(seen) << "no read was answered lock-free";
}

// Readers on several threads (mostly lock-free) while control events land: every read succeeds,
// each thread's counter never goes back, and the last readings agree with the model. Run under
// TSan by `./dev test-tsan`.
TEST_F(Driver, ConcurrentReadersAndControlEvents) {
  start("2xA100,cpus=0", /*virtual_clock=*/false);
  machine_->set_privilege(Privilege::kEveryone);
  std::atomic<bool> stop{false};
  std::atomic<int> failures{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 4; ++t) {
    readers.emplace_back([&, t] {
      nvmlDevice_t d = nullptr;
      if (nvml_.nvmlDeviceGetHandleByIndex_v2(static_cast<unsigned>(t % 2), &d) != NVML_SUCCESS) {
        failures++;
        return;
      }
      unsigned long long last = 0;
      while (!stop.load()) {
        nvmlFieldValue_t v[2]{};
        v[0].fieldId = NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION;
        v[1].fieldId = NVML_FI_DEV_POWER_INSTANT;
        if (nvml_.nvmlDeviceGetFieldValues(d, 2, v) != NVML_SUCCESS || v[0].nvmlReturn != NVML_SUCCESS ||
            v[0].value.ullVal < last)
          failures++;
        last = v[0].value.ullVal;
      }
    });
  }
  nvmlDevice_t d0 = dev(0);
  for (int i = 0; i < 30; ++i) {
    ASSERT_TRUE(machine_->set_utilization(static_cast<unsigned>(i % 2), (i % 5) / 4.0));
    EXPECT_EQ(nvml_.nvmlDeviceSetPowerManagementLimit(d0, 150'000u + 5'000u * static_cast<unsigned>(i % 10)),
              NVML_SUCCESS);
    std::this_thread::sleep_for(10ms);
  }
  stop = true;
  for (auto& r : readers) r.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_GT(*machine_->lock_free_reads(0), 0u);
  unsigned limit = 0;
  ASSERT_EQ(nvml_.nvmlDeviceGetPowerManagementLimit(d0, &limit), NVML_SUCCESS);
  EXPECT_EQ(limit, 150'000u + 5'000u * 9u);
}

TEST_F(Driver, PowerLimitLogKeepsEveryAnsweredCallInOrder) {
  start("2xA100,cpus=0");
  machine_->set_privilege(Privilege::kEveryone);
  EXPECT_TRUE(machine_->power_limit_log().empty());
  EXPECT_EQ(nvml_.nvmlDeviceSetPowerManagementLimit(dev(1), 300000), NVML_SUCCESS);
  ASSERT_TRUE(machine_->advance(5ms));
  EXPECT_EQ(nvml_.nvmlDeviceSetPowerManagementLimit(dev(0), 250000), NVML_SUCCESS);
  EXPECT_EQ(nvml_.nvmlDeviceSetPowerManagementLimit(dev(0), 50000), NVML_ERROR_INVALID_ARGUMENT);
  machine_->set_privilege(Privilege::kNobody);
  EXPECT_EQ(nvml_.nvmlDeviceSetPowerManagementLimit(dev(1), 200000), NVML_ERROR_NO_PERMISSION);
  // A call failed by an injected fault never reaches the setter: not logged.
  ASSERT_TRUE(machine_->inject_error(0, SimCall::kSetPowerManagementLimit, NVML_ERROR_UNKNOWN, 1));
  EXPECT_EQ(nvml_.nvmlDeviceSetPowerManagementLimit(dev(0), 200000), NVML_ERROR_UNKNOWN);

  std::uint64_t dropped = 99;
  const auto log = machine_->power_limit_log(&dropped);
  EXPECT_EQ(dropped, 0u);
  ASSERT_EQ(log.size(), 4u);
  EXPECT_EQ(log[0].gpu, 1u);
  EXPECT_EQ(log[0].limit.value(), 300000.0);
  EXPECT_TRUE(log[0].ok());
  EXPECT_EQ(log[1].gpu, 0u);
  EXPECT_EQ(log[1].limit.value(), 250000.0);
  EXPECT_EQ(log[1].time - log[0].time, 5ms);
  EXPECT_EQ(log[2].nvml_return, NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(log[3].nvml_return, NVML_ERROR_NO_PERMISSION);
  EXPECT_EQ(log[3].gpu, 1u);
  EXPECT_EQ(machine_->status(0)->power_limit.value(), 250000.0);

  // Another process attached to the same state sees the same log.
  auto other = Machine::attach(machine_->state_file());
  ASSERT_TRUE(other) << other.error().message;
  EXPECT_EQ((*other)->power_limit_log().size(), 4u);
  machine_->clear_power_limit_log();
  EXPECT_TRUE((*other)->power_limit_log().empty());

  // Only the latest 4096 calls are kept; the rest are counted as dropped.
  machine_->set_privilege(Privilege::kEveryone);
  for (unsigned k = 0; k < 4100; ++k)
    ASSERT_EQ(nvml_.nvmlDeviceSetPowerManagementLimit(dev(0), 100000 + (k % 300) * 1000), NVML_SUCCESS);
  const auto full = machine_->power_limit_log(&dropped);
  EXPECT_EQ(dropped, 4u);
  ASSERT_EQ(full.size(), 4096u);
  EXPECT_EQ(full.front().limit.value(), 100000.0 + 4 * 1000);
  EXPECT_EQ(full.back().limit.value(), 100000.0 + (4099 % 300) * 1000);
}

}  // namespace
}  // namespace erg::sim
