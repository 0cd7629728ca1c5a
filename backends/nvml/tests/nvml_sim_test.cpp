// The NVML backend against the simulated machine. The backend reaches the simulated
// libnvidia-ml.so.1 only through dlopen, as it would the real driver; erg::sim is linked for the
// control API (create the machine, inject faults, set privilege, count calls).

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "erg/backends/nvml/discovery.hpp"
#include "erg/backends/nvml/nvml_abi.h"
#include "erg/sim/machine.hpp"
#include "erg/sim/spec.hpp"

namespace erg::nvml {
namespace {

using sim::Privilege;
using sim::SimCall;

bool has_domain(const Gpu& gpu, PowerDomain d) {
  const auto& domains = gpu.capabilities().power_domains;
  return std::find(domains.begin(), domains.end(), d) != domains.end();
}

class NvmlSim : public ::testing::Test {
 protected:
  void start(const std::string& spec_text) {
    auto spec = sim::parse_spec(spec_text);
    ASSERT_TRUE(spec) << spec.error().message;
    auto machine = sim::Machine::create_temp(*spec);
    ASSERT_TRUE(machine) << machine.error().message;
    machine_ = std::move(*machine);
    auto exported = machine_->export_env();  // ERG_SIM_STATE for the driver, ERG_NVML_LIBRARY, ...
    ASSERT_TRUE(exported) << exported.error().message;
    auto path = sim::Machine::driver_library_path();
    ASSERT_TRUE(path) << path.error().message;
    library_path_ = path->string();
  }

  Result<Discovery> discover_with(std::optional<std::string> cuda_visible_devices) {
    DiscoveryOptions opts;
    opts.library_path = library_path_;
    opts.cuda_visible_devices = std::move(cuda_visible_devices);
    return discover(opts);
  }

  std::vector<std::shared_ptr<Gpu>> all_gpus() {
    auto found = discover_with(std::nullopt);
    EXPECT_TRUE(found) << found.error().message;
    if (!found) return {};
    EXPECT_TRUE(found->unavailable.empty()) << found->unavailable.front().reason;
    return found->gpus;
  }

  std::unique_ptr<sim::Machine> machine_;
  std::string library_path_;
};

TEST_F(NvmlSim, DescribesEachGpu) {
  start("2xA100,1xP100");
  auto gpus = all_gpus();
  ASSERT_EQ(gpus.size(), 3u);
  for (unsigned i = 0; i < 3; ++i) {
    EXPECT_EQ(gpus[i]->index(), i);
    EXPECT_EQ(gpus[i]->physical_index(), i);
    EXPECT_EQ(gpus[i]->vendor(), GpuVendor::kNvidia);
    EXPECT_EQ(gpus[i]->uuid().rfind("GPU-", 0), 0u) << gpus[i]->uuid();
    EXPECT_TRUE(gpus[i]->capabilities().setters_need_privilege);
  }
  // Nominal per-architecture priors (nvml_gpu.cpp): instant power ~100 ms on Ampere, ~20 ms on
  // Pascal; the energy counter ~100 ms on both. measure/ learns the actual schedule.
  EXPECT_EQ(gpus[0]->capabilities().power_update_period, std::chrono::microseconds(100000));
  EXPECT_EQ(gpus[2]->capabilities().power_update_period, std::chrono::microseconds(20000));
  EXPECT_EQ(gpus[0]->capabilities().energy_update_period, std::chrono::microseconds(100000));
  EXPECT_NE(gpus[0]->uuid(), gpus[1]->uuid());
  EXPECT_NE(gpus[0]->name().find("A100"), std::string::npos) << gpus[0]->name();
  EXPECT_NE(gpus[2]->name().find("P100"), std::string::npos) << gpus[2]->name();
  EXPECT_EQ(gpus[0]->architecture(), "ampere");
  EXPECT_EQ(gpus[2]->architecture(), "pascal");
  // PCI addresses from nvmlDeviceGetPciInfo_v3, lowercase as sysfs writes them.
  EXPECT_EQ(gpus[0]->pci_address(), "0000:07:00.0");
  EXPECT_EQ(gpus[1]->pci_address(), "0000:0f:00.0");
  EXPECT_EQ(gpus[2]->pci_address(), "0000:47:00.0");

  // Energy counter: Volta and newer.
  for (unsigned i : {0u, 1u}) {
    const auto& caps = gpus[i]->capabilities();
    EXPECT_TRUE(caps.energy_counter);
    ASSERT_TRUE(caps.energy_update_period);
    EXPECT_EQ(*caps.energy_update_period, std::chrono::milliseconds(100));
    auto energy = gpus[i]->total_energy();
    ASSERT_TRUE(energy) << energy.error().message;
    EXPECT_GE(energy->value(), 0.0);
    EXPECT_TRUE(caps.power_limit);
    EXPECT_TRUE(caps.clocks);
    EXPECT_TRUE(caps.persistence_mode);
    EXPECT_TRUE(caps.default_power_limit);
    EXPECT_TRUE(caps.temperature);
    EXPECT_TRUE(caps.reading_timestamps);  // field values with timestamps
  }
  EXPECT_FALSE(gpus[2]->capabilities().energy_counter);
  EXPECT_FALSE(gpus[2]->capabilities().energy_update_period);
  auto p100_energy = gpus[2]->total_energy();
  ASSERT_FALSE(p100_energy);
  EXPECT_EQ(p100_energy.error().code, ErrorCode::kNotSupported);
  EXPECT_NE(p100_energy.error().message.find("GPU 2"), std::string::npos) << p100_energy.error().message;
}

TEST_F(NvmlSim, PciInfoV3FillsTheVendorStruct) {
  start("9xH100");
  void* lib = ::dlopen(library_path_.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(lib, nullptr) << ::dlerror();
  auto init = reinterpret_cast<nvmlInit_v2_fn>(::dlsym(lib, "nvmlInit_v2"));
  auto handle = reinterpret_cast<nvmlDeviceGetHandleByIndex_v2_fn>(::dlsym(lib, "nvmlDeviceGetHandleByIndex_v2"));
  auto pci_info = reinterpret_cast<nvmlDeviceGetPciInfo_v3_fn>(::dlsym(lib, "nvmlDeviceGetPciInfo_v3"));
  auto shutdown = reinterpret_cast<nvmlShutdown_fn>(::dlsym(lib, "nvmlShutdown"));
  ASSERT_TRUE(init && handle && pci_info && shutdown);
  ASSERT_EQ(init(), NVML_SUCCESS);
  nvmlDevice_t dev = nullptr;
  ASSERT_EQ(handle(8, &dev), NVML_SUCCESS);
  nvmlPciInfo_t pci;
  std::memset(&pci, 0xab, sizeof pci);
  ASSERT_EQ(pci_info(dev, &pci), NVML_SUCCESS);
  EXPECT_EQ(pci.domain, 1u);  // the ninth GPU: next domain, first bus again
  EXPECT_EQ(pci.bus, 0x07u);
  EXPECT_EQ(pci.device, 0u);
  EXPECT_EQ(pci.pciDeviceId, 0x233010deu);  // H100 SXM5, NVIDIA's vendor id in the low half
  EXPECT_STREQ(pci.busIdLegacy, "0001:07:00.0");
  EXPECT_STREQ(pci.busId, "00000001:07:00.0");
  EXPECT_EQ(pci_info(dev, nullptr), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(machine_->call_count(8, SimCall::kGetPciInfo).value_or(0), 2u);
  EXPECT_EQ(shutdown(), NVML_SUCCESS);
  ::dlclose(lib);
}

TEST_F(NvmlSim, EnergyCounterFollowsTheModel) {
  start("1xA100");
  machine_->use_virtual_clock(true);
  auto gpus = all_gpus();
  ASSERT_EQ(gpus.size(), 1u);
  ASSERT_TRUE(machine_->set_utilization(0, 1.0));
  auto before = gpus[0]->total_energy();
  ASSERT_TRUE(before) << before.error().message;
  ASSERT_TRUE(machine_->advance(std::chrono::seconds(2)));
  auto after = gpus[0]->total_energy();
  ASSERT_TRUE(after);
  EXPECT_GT(after->value(), before->value());
}

TEST_F(NvmlSim, PowerDomainsPerSku) {
  start("1xA100,1xP100,1xH100,1xA40");
  auto gpus = all_gpus();
  ASSERT_EQ(gpus.size(), 4u);
  // Instant power: every architecture. Average: Ampere except GA100, and newer. Memory: H100
  // (Zeus: works on H100, not on A40).
  for (const auto& gpu : gpus) EXPECT_TRUE(has_domain(*gpu, PowerDomain::kDeviceInstant)) << gpu->name();
  EXPECT_FALSE(has_domain(*gpus[0], PowerDomain::kDeviceAverage)) << "GA100";
  EXPECT_FALSE(has_domain(*gpus[1], PowerDomain::kDeviceAverage)) << "P100";
  EXPECT_TRUE(has_domain(*gpus[2], PowerDomain::kDeviceAverage)) << "H100";
  EXPECT_TRUE(has_domain(*gpus[3], PowerDomain::kDeviceAverage)) << "A40";
  EXPECT_TRUE(has_domain(*gpus[2], PowerDomain::kMemoryAverage)) << "H100";
  EXPECT_FALSE(has_domain(*gpus[3], PowerDomain::kMemoryAverage)) << "A40";

  for (const auto& gpu : gpus) {
    for (auto d : {PowerDomain::kDeviceInstant, PowerDomain::kDeviceAverage, PowerDomain::kMemoryAverage}) {
      auto p = gpu->power(d);
      if (has_domain(*gpu, d)) {
        ASSERT_TRUE(p) << gpu->name() << " " << to_string(d) << ": " << p.error().message;
        EXPECT_GT(p->value(), 0.0) << gpu->name() << " " << to_string(d);
      } else {
        ASSERT_FALSE(p);
        EXPECT_EQ(p.error().code, ErrorCode::kNotSupported);
      }
    }
  }
}

TEST_F(NvmlSim, PowerLimitAsRoot) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root: the simulated driver lets only euid 0 set limits by default";
  start("2xA100");
  machine_->set_privilege(Privilege::kRootOnly);
  auto gpus = all_gpus();
  ASSERT_EQ(gpus.size(), 2u);
  Gpu& gpu = *gpus[1];

  auto range = gpu.power_limit_constraints();
  ASSERT_TRUE(range) << range.error().message;
  EXPECT_LT(range->min, range->max);
  auto def = gpu.default_power_limit();
  ASSERT_TRUE(def);
  auto limit = gpu.power_limit();
  ASSERT_TRUE(limit);
  EXPECT_EQ(limit->value(), def->value());

  ASSERT_TRUE(gpu.set_power_limit(range->min));
  EXPECT_EQ(gpu.power_limit()->value(), range->min.value());
  auto status = machine_->status(1);
  ASSERT_TRUE(status);
  EXPECT_EQ(status->power_limit.value(), range->min.value());

  // The same limit again: no driver call.
  auto sets_before = machine_->call_count(1, SimCall::kSetPowerManagementLimit);
  ASSERT_TRUE(sets_before);
  ASSERT_TRUE(gpu.set_power_limit(range->min));
  EXPECT_EQ(*machine_->call_count(1, SimCall::kSetPowerManagementLimit), *sets_before);

  // Out of range: the driver's INVALID_ARGUMENT, nothing changes.
  auto too_high = gpu.set_power_limit(range->max + MilliWatts(1000.0));
  ASSERT_FALSE(too_high);
  EXPECT_EQ(too_high.error().code, ErrorCode::kInvalidArgument) << too_high.error().message;
  EXPECT_EQ(gpu.power_limit()->value(), range->min.value());
  auto negative = gpu.set_power_limit(MilliWatts(-5.0));
  ASSERT_FALSE(negative);
  EXPECT_EQ(negative.error().code, ErrorCode::kInvalidArgument);

  ASSERT_TRUE(gpu.reset_power_limit());
  EXPECT_EQ(gpu.power_limit()->value(), def->value());
  // The other GPU was never touched.
  EXPECT_EQ(gpus[0]->power_limit()->value(), gpus[0]->default_power_limit()->value());
}

TEST_F(NvmlSim, SettersWithoutPrivilegeAreNoPermission) {
  start("1xA100");
  machine_->set_privilege(Privilege::kNobody);
  auto gpus = all_gpus();
  ASSERT_EQ(gpus.size(), 1u);
  Gpu& gpu = *gpus[0];
  auto range = gpu.power_limit_constraints();
  ASSERT_TRUE(range);
  const auto before = gpu.power_limit();
  ASSERT_TRUE(before);

  auto denied = gpu.set_power_limit(range->min);
  ASSERT_FALSE(denied);
  EXPECT_EQ(denied.error().code, ErrorCode::kNoPermission);
  EXPECT_NE(denied.error().message.find("nvmlDeviceSetPowerManagementLimit"), std::string::npos);
  EXPECT_NE(denied.error().message.find("CAP_SYS_ADMIN"), std::string::npos) << denied.error().message;
  EXPECT_NE(denied.error().message.find("GPU 0"), std::string::npos);
  EXPECT_EQ(gpu.power_limit()->value(), before->value());

  // Setting the limit that is already in place needs no privilege: the call is skipped.
  EXPECT_TRUE(gpu.set_power_limit(*before));

  auto persistence = gpu.persistence_mode();
  ASSERT_TRUE(persistence);
  auto set_persistence = gpu.set_persistence_mode(!*persistence);
  ASSERT_FALSE(set_persistence);
  EXPECT_EQ(set_persistence.error().code, ErrorCode::kNoPermission);

  auto mem = gpu.supported_memory_clocks();
  ASSERT_TRUE(mem && !mem->empty());
  auto gfx = gpu.supported_graphics_clocks(mem->front());
  ASSERT_TRUE(gfx && !gfx->empty());
  auto lock = gpu.set_gpu_locked_clocks(gfx->back(), gfx->front());
  ASSERT_FALSE(lock);
  EXPECT_EQ(lock.error().code, ErrorCode::kNoPermission);
}

TEST_F(NvmlSim, ClocksPersistenceTemperature) {
  start("1xA100");
  machine_->set_privilege(Privilege::kEveryone);
  auto gpus = all_gpus();
  ASSERT_EQ(gpus.size(), 1u);
  Gpu& gpu = *gpus[0];
  auto mem = gpu.supported_memory_clocks();
  ASSERT_TRUE(mem) << mem.error().message;
  ASSERT_FALSE(mem->empty());
  auto gfx = gpu.supported_graphics_clocks(mem->front());
  ASSERT_TRUE(gfx) << gfx.error().message;
  ASSERT_FALSE(gfx->empty());
  for (auto c : *gfx) EXPECT_GT(c.value(), 0.0);
  auto bogus = gpu.supported_graphics_clocks(Megahertz(1.0));
  ASSERT_FALSE(bogus);
  EXPECT_EQ(bogus.error().code, ErrorCode::kNotFound) << bogus.error().message;

  const auto low = *std::min_element(gfx->begin(), gfx->end());
  const auto high = *std::max_element(gfx->begin(), gfx->end());
  EXPECT_TRUE(gpu.set_gpu_locked_clocks(low, high));
  EXPECT_TRUE(gpu.reset_gpu_locked_clocks());
  EXPECT_TRUE(gpu.set_memory_locked_clocks(mem->front(), mem->front()));
  EXPECT_TRUE(gpu.reset_memory_locked_clocks());

  ASSERT_TRUE(gpu.set_persistence_mode(true));
  EXPECT_TRUE(*gpu.persistence_mode());
  ASSERT_TRUE(gpu.set_persistence_mode(false));
  EXPECT_FALSE(*gpu.persistence_mode());

  auto t = gpu.temperature();
  ASSERT_TRUE(t) << t.error().message;
  EXPECT_GT(*t, 0);
  EXPECT_LT(*t, 120);
}

TEST_F(NvmlSim, CudaVisibleDevicesSelectsAndOrders) {
  start("2xA100,1xP100");
  auto found = discover_with(std::optional<std::string>("2,1"));
  ASSERT_TRUE(found) << found.error().message;
  ASSERT_EQ(found->gpus.size(), 2u);
  EXPECT_EQ(found->gpus[0]->index(), 0u);
  EXPECT_EQ(found->gpus[0]->physical_index(), 2u);
  EXPECT_NE(found->gpus[0]->name().find("P100"), std::string::npos);
  EXPECT_EQ(found->gpus[1]->index(), 1u);
  EXPECT_EQ(found->gpus[1]->physical_index(), 1u);
}

TEST_F(NvmlSim, CudaVisibleDevicesFromTheEnvironment) {
  start("2xA100,1xP100");
  ASSERT_EQ(setenv("CUDA_VISIBLE_DEVICES", "1", 1), 0);
  DiscoveryOptions opts;
  opts.library_path = library_path_;
  auto found = discover(opts);
  unsetenv("CUDA_VISIBLE_DEVICES");
  ASSERT_TRUE(found) << found.error().message;
  ASSERT_EQ(found->gpus.size(), 1u);
  EXPECT_EQ(found->gpus[0]->physical_index(), 1u);
}

TEST_F(NvmlSim, CudaVisibleDevicesByUuid) {
  start("2xA100,1xP100");
  auto all = all_gpus();
  ASSERT_EQ(all.size(), 3u);
  auto found = discover_with(all[2]->uuid() + "," + all[0]->uuid());
  ASSERT_TRUE(found) << found.error().message;
  ASSERT_EQ(found->gpus.size(), 2u);
  EXPECT_EQ(found->gpus[0]->physical_index(), 2u);
  EXPECT_EQ(found->gpus[0]->uuid(), all[2]->uuid());
  EXPECT_EQ(found->gpus[1]->physical_index(), 0u);

  auto unknown = discover_with(std::optional<std::string>("GPU-00000000-dead-beef-0000-000000000000"));
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error().code, ErrorCode::kNotFound);
  EXPECT_NE(unknown.error().message.find("GPU-00000000-dead-beef"), std::string::npos) << unknown.error().message;

  auto same_gpu_twice = discover_with("0," + all[0]->uuid());
  ASSERT_FALSE(same_gpu_twice);
  EXPECT_EQ(same_gpu_twice.error().code, ErrorCode::kInvalidArgument);
}

TEST_F(NvmlSim, CudaVisibleDevicesErrors) {
  start("2xA100,1xP100");
  auto empty = discover_with(std::optional<std::string>(""));
  ASSERT_FALSE(empty);
  EXPECT_EQ(empty.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(empty.error().message,
            "CUDA_VISIBLE_DEVICES is set but empty, so no GPU is visible; unset it to use all GPUs");

  auto mig = discover_with(std::optional<std::string>("MIG-4f6c7a52-1b2c-5d3e-8f90-0a1b2c3d4e5f"));
  ASSERT_FALSE(mig);
  EXPECT_EQ(mig.error().code, ErrorCode::kNotSupported);
  EXPECT_NE(mig.error().message.find("MIG devices in CUDA_VISIBLE_DEVICES are not supported"), std::string::npos);

  auto out_of_range = discover_with(std::optional<std::string>("0,3"));
  ASSERT_FALSE(out_of_range);
  EXPECT_EQ(out_of_range.error().code, ErrorCode::kNotFound);
  EXPECT_NE(out_of_range.error().message.find("GPU 3"), std::string::npos) << out_of_range.error().message;

  auto twice = discover_with(std::optional<std::string>("1,1"));
  ASSERT_FALSE(twice);
  EXPECT_EQ(twice.error().code, ErrorCode::kInvalidArgument);
}

TEST_F(NvmlSim, InjectedErrorHitsOnlyThatGpu) {
  start("2xA100,1xP100");
  auto gpus = all_gpus();
  ASSERT_EQ(gpus.size(), 3u);
  ASSERT_TRUE(machine_->inject_error(1, SimCall::kGetTotalEnergyConsumption, NVML_ERROR_TIMEOUT));
  auto e1 = gpus[1]->total_energy();
  ASSERT_FALSE(e1);
  EXPECT_EQ(e1.error().code, ErrorCode::kTimeout);
  EXPECT_NE(e1.error().message.find("GPU 1"), std::string::npos) << e1.error().message;
  EXPECT_NE(e1.error().message.find("nvmlDeviceGetTotalEnergyConsumption"), std::string::npos);
  EXPECT_NE(e1.error().message.find("Timeout"), std::string::npos) << e1.error().message;
  EXPECT_TRUE(gpus[0]->total_energy());
  EXPECT_TRUE(gpus[1]->power(PowerDomain::kDeviceInstant)) << "only the energy call is failing";

  // Per-field status of nvmlDeviceGetFieldValues is checked too.
  ASSERT_TRUE(machine_->inject_error(0, SimCall::kGetFieldValues, NVML_ERROR_UNKNOWN, 1));
  auto p0 = gpus[0]->power(PowerDomain::kDeviceInstant);
  ASSERT_FALSE(p0);
  EXPECT_EQ(p0.error().code, ErrorCode::kDriverError);
  EXPECT_TRUE(gpus[0]->power(PowerDomain::kDeviceInstant)) << "count was 1";

  ASSERT_TRUE(machine_->clear_faults(1));
  EXPECT_TRUE(gpus[1]->total_energy());
}

TEST_F(NvmlSim, LostGpuIsGpuLost) {
  start("2xA100");
  auto gpus = all_gpus();
  ASSERT_EQ(gpus.size(), 2u);
  ASSERT_TRUE(machine_->set_lost(0, true));
  auto energy = gpus[0]->total_energy();
  ASSERT_FALSE(energy);
  EXPECT_EQ(energy.error().code, ErrorCode::kGpuLost);
  auto power = gpus[0]->power(PowerDomain::kDeviceInstant);
  ASSERT_FALSE(power);
  EXPECT_EQ(power.error().code, ErrorCode::kGpuLost);
  auto limit = gpus[0]->power_limit();
  ASSERT_FALSE(limit);
  EXPECT_EQ(limit.error().code, ErrorCode::kGpuLost);
  EXPECT_TRUE(gpus[1]->total_energy());
  EXPECT_TRUE(gpus[1]->power(PowerDomain::kDeviceInstant));

  // A GPU lost before discovery is reported as unavailable; the others are listed.
  auto found = discover_with(std::nullopt);
  ASSERT_TRUE(found) << found.error().message;
  ASSERT_EQ(found->gpus.size(), 1u);
  EXPECT_EQ(found->gpus[0]->physical_index(), 1u);
  ASSERT_EQ(found->unavailable.size(), 1u);
  EXPECT_EQ(found->unavailable[0].code, ErrorCode::kGpuLost);

  ASSERT_TRUE(machine_->set_lost(0, false));
  EXPECT_TRUE(gpus[0]->total_energy());
}

TEST_F(NvmlSim, GpuWhoseHandleIsRefusedIsUnavailable) {
  start("3xA100");
  ASSERT_TRUE(machine_->inject_error(1, SimCall::kGetHandle, NVML_ERROR_NO_PERMISSION));
  auto found = discover_with(std::nullopt);
  ASSERT_TRUE(found) << found.error().message;
  ASSERT_EQ(found->gpus.size(), 2u);
  EXPECT_EQ(found->gpus[0]->physical_index(), 0u);
  EXPECT_EQ(found->gpus[1]->physical_index(), 2u);
  ASSERT_EQ(found->unavailable.size(), 1u);
  EXPECT_EQ(found->unavailable[0].source, "nvml");
  EXPECT_EQ(found->unavailable[0].code, ErrorCode::kNoPermission);
  EXPECT_NE(found->unavailable[0].reason.find("NVML index 1"), std::string::npos) << found->unavailable[0].reason;
}

}  // namespace
}  // namespace erg::nvml
