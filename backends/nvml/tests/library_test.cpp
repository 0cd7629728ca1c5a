// The loader against libraries that are not the simulated driver: a path that does not exist, a
// library without an init symbol, and a partial NVML that exports only the required symbols plus
// nvmlDeviceGetName/nvmlErrorString (every other capability must be NotSupported, no crash).

#include "erg/backends/nvml/library.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <set>
#include <string>

#include "erg/backends/nvml/discovery.hpp"

namespace erg::nvml {
namespace {

/// Sets an environment variable for the scope of a test.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value != nullptr)
      setenv(name, value, 1);
    else
      unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_)
      setenv(name_, old_->c_str(), 1);
    else
      unsetenv(name_);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

DiscoveryOptions options(std::string path) {
  DiscoveryOptions opts;
  opts.library_path = std::move(path);
  opts.cuda_visible_devices = std::optional<std::string>();  // all GPUs, whatever the environment says
  return opts;
}

TEST(NvmlSymbolTable, NamesAreUniqueAndRequiredOnesAreTheMinimum) {
  std::set<std::string_view> names;
  std::set<std::string_view> required;
  for (const auto& entry : symbol_table()) {
    EXPECT_TRUE(names.insert(entry.name).second) << entry.name;
    EXPECT_EQ(entry.name.rfind("nvml", 0), 0u) << entry.name;
    if (entry.required) required.insert(entry.name);
  }
  EXPECT_EQ(required,
            (std::set<std::string_view>{"nvmlShutdown", "nvmlDeviceGetCount_v2", "nvmlDeviceGetHandleByIndex_v2"}));
  EXPECT_TRUE(names.count("nvmlInit_v2") && names.count("nvmlInitWithFlags"));
}

TEST(NvmlLibrary, MissingLibraryIsUnavailableNotAnError) {
  auto found = discover(options("/nonexistent/libnvidia-ml.so.1"));
  ASSERT_TRUE(found) << found.error().message;
  EXPECT_TRUE(found->gpus.empty());
  ASSERT_EQ(found->unavailable.size(), 1u);
  const auto& u = found->unavailable.front();
  EXPECT_EQ(u.source, "nvml");
  EXPECT_EQ(u.code, ErrorCode::kUnavailable);
  EXPECT_EQ(u.reason.rfind("no NVIDIA driver found: cannot load /nonexistent/libnvidia-ml.so.1 (", 0), 0u) << u.reason;
  EXPECT_EQ(u.reason.find('\n'), std::string::npos);
}

TEST(NvmlLibrary, LibraryPathFromEnvironment) {
  ScopedEnv lib("ERG_NVML_LIBRARY", "/nonexistent/from-env/libnvidia-ml.so.1");
  DiscoveryOptions opts;
  opts.cuda_visible_devices = std::optional<std::string>();
  auto found = discover(opts);
  ASSERT_TRUE(found);
  ASSERT_EQ(found->unavailable.size(), 1u);
  EXPECT_NE(found->unavailable.front().reason.find("/nonexistent/from-env/"), std::string::npos);
}

TEST(NvmlLibrary, BadVisibleDevicesIsAnErrorEvenWithoutDriver) {
  DiscoveryOptions opts = options("/nonexistent/libnvidia-ml.so.1");
  opts.cuda_visible_devices = std::optional<std::string>("");
  auto found = discover(opts);
  ASSERT_FALSE(found);
  EXPECT_EQ(found.error().code, ErrorCode::kInvalidArgument);

  ScopedEnv cvd("CUDA_VISIBLE_DEVICES", "MIG-4f6c7a52-1b2c-5d3e-8f90-0a1b2c3d4e5f");
  DiscoveryOptions from_env;
  from_env.library_path = "/nonexistent/libnvidia-ml.so.1";
  auto mig = discover(from_env);
  ASSERT_FALSE(mig);
  EXPECT_EQ(mig.error().code, ErrorCode::kNotSupported);
}

TEST(NvmlLibrary, LibraryWithoutInitIsUnavailable) {
  auto lib = Library::open(ERG_NVML_NOINIT_LIBRARY);
  ASSERT_FALSE(lib);
  EXPECT_EQ(lib.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(lib.error().message.find("neither nvmlInit_v2 nor nvmlInitWithFlags"), std::string::npos)
      << lib.error().message;

  auto found = discover(options(ERG_NVML_NOINIT_LIBRARY));
  ASSERT_TRUE(found);
  EXPECT_TRUE(found->gpus.empty());
  ASSERT_EQ(found->unavailable.size(), 1u);
  EXPECT_EQ(found->unavailable.front().code, ErrorCode::kUnavailable);
}

TEST(NvmlLibrary, InitFailureIsReportedWithTheMappedCode) {
  {
    ScopedEnv rc("ERG_FAKE_NVML_INIT_RETURN", "9");  // NVML_ERROR_DRIVER_NOT_LOADED
    auto found = discover(options(ERG_NVML_PARTIAL_LIBRARY));
    ASSERT_TRUE(found);
    EXPECT_TRUE(found->gpus.empty());
    ASSERT_EQ(found->unavailable.size(), 1u);
    EXPECT_EQ(found->unavailable.front().code, ErrorCode::kUnavailable);
    EXPECT_NE(found->unavailable.front().reason.find("nvmlInit_v2"), std::string::npos);
    EXPECT_NE(found->unavailable.front().reason.find("Driver Not Loaded (fake)"), std::string::npos)
        << found->unavailable.front().reason;
  }
  {
    ScopedEnv rc("ERG_FAKE_NVML_INIT_RETURN", "4");  // NVML_ERROR_NO_PERMISSION
    auto found = discover(options(ERG_NVML_PARTIAL_LIBRARY));
    ASSERT_TRUE(found);
    ASSERT_EQ(found->unavailable.size(), 1u);
    EXPECT_EQ(found->unavailable.front().code, ErrorCode::kNoPermission);
  }
}

TEST(NvmlLibrary, PartialLibraryGivesNotSupportedNeverACrash) {
  auto found = discover(options(ERG_NVML_PARTIAL_LIBRARY));
  ASSERT_TRUE(found) << found.error().message;
  EXPECT_TRUE(found->unavailable.empty());
  ASSERT_EQ(found->gpus.size(), 1u);
  Gpu& gpu = *found->gpus.front();
  EXPECT_EQ(gpu.index(), 0u);
  EXPECT_EQ(gpu.physical_index(), 0u);
  EXPECT_EQ(gpu.vendor(), GpuVendor::kNvidia);
  EXPECT_EQ(gpu.name(), "Fake Partial GPU 0");
  EXPECT_EQ(gpu.uuid(), "");  // unknown
  EXPECT_EQ(gpu.architecture(), "unknown");

  const auto& caps = gpu.capabilities();
  EXPECT_FALSE(caps.energy_counter);
  EXPECT_TRUE(caps.power_domains.empty());
  EXPECT_FALSE(caps.power_limit);
  EXPECT_FALSE(caps.clocks);
  EXPECT_FALSE(caps.persistence_mode);
  EXPECT_FALSE(caps.default_power_limit);
  EXPECT_FALSE(caps.temperature);
  EXPECT_FALSE(caps.reading_timestamps);
  EXPECT_TRUE(caps.setters_need_privilege);
  EXPECT_FALSE(caps.energy_update_period);
  EXPECT_FALSE(caps.power_update_period);

  auto expect_not_supported = [](const auto& result, const char* what) {
    ASSERT_FALSE(result) << what;
    EXPECT_EQ(result.error().code, ErrorCode::kNotSupported) << what << ": " << result.error().message;
    EXPECT_NE(result.error().message.find("GPU 0"), std::string::npos) << result.error().message;
  };
  expect_not_supported(gpu.total_energy(), "total_energy");
  for (auto d : {PowerDomain::kDeviceInstant, PowerDomain::kDeviceAverage, PowerDomain::kMemoryAverage})
    expect_not_supported(gpu.power(d), "power");
  expect_not_supported(gpu.power_limit(), "power_limit");
  expect_not_supported(gpu.power_limit_constraints(), "power_limit_constraints");
  expect_not_supported(gpu.default_power_limit(), "default_power_limit");
  expect_not_supported(gpu.set_power_limit(MilliWatts(200000.0)), "set_power_limit");
  expect_not_supported(gpu.reset_power_limit(), "reset_power_limit");
  expect_not_supported(gpu.persistence_mode(), "persistence_mode");
  expect_not_supported(gpu.set_persistence_mode(true), "set_persistence_mode");
  expect_not_supported(gpu.supported_memory_clocks(), "supported_memory_clocks");
  expect_not_supported(gpu.supported_graphics_clocks(Megahertz(1215.0)), "supported_graphics_clocks");
  expect_not_supported(gpu.set_gpu_locked_clocks(Megahertz(1000.0), Megahertz(1400.0)), "set_gpu_locked_clocks");
  expect_not_supported(gpu.reset_gpu_locked_clocks(), "reset_gpu_locked_clocks");
  expect_not_supported(gpu.set_memory_locked_clocks(Megahertz(1215.0), Megahertz(1215.0)), "set_memory_locked_clocks");
  expect_not_supported(gpu.reset_memory_locked_clocks(), "reset_memory_locked_clocks");
  expect_not_supported(gpu.temperature(), "temperature");
  EXPECT_NE(gpu.temperature().error().message.find("nvmlDeviceGetTemperature"), std::string::npos);
}

TEST(NvmlLibrary, GpusOutliveTheDiscoveryResult) {
  std::shared_ptr<Gpu> gpu;
  {
    auto found = discover(options(ERG_NVML_PARTIAL_LIBRARY));
    ASSERT_TRUE(found);
    ASSERT_FALSE(found->gpus.empty());
    gpu = found->gpus.front();
  }
  EXPECT_EQ(gpu->name(), "Fake Partial GPU 0");  // the library is still loaded
}

TEST(NvmlLibrary, GpuWithoutHandleIsUnavailableOthersListed) {
  ScopedEnv count("ERG_FAKE_NVML_COUNT", "3");
  ScopedEnv deny("ERG_FAKE_NVML_DENY_INDEX", "1");
  auto found = discover(options(ERG_NVML_PARTIAL_LIBRARY));
  ASSERT_TRUE(found) << found.error().message;
  ASSERT_EQ(found->gpus.size(), 2u);
  EXPECT_EQ(found->gpus[0]->physical_index(), 0u);
  EXPECT_EQ(found->gpus[1]->physical_index(), 2u);
  EXPECT_EQ(found->gpus[1]->index(), 2u);  // erg index = position in the visible list
  ASSERT_EQ(found->unavailable.size(), 1u);
  EXPECT_EQ(found->unavailable[0].source, "nvml");
  EXPECT_EQ(found->unavailable[0].code, ErrorCode::kNoPermission);
  EXPECT_NE(found->unavailable[0].reason.find("GPU 1 (NVML index 1)"), std::string::npos)
      << found->unavailable[0].reason;
  EXPECT_NE(found->unavailable[0].reason.find("nvmlDeviceGetHandleByIndex_v2"), std::string::npos);
}

TEST(NvmlLibrary, VisibleDevicesResolvedAgainstTheDriver) {
  ScopedEnv count("ERG_FAKE_NVML_COUNT", "3");
  DiscoveryOptions opts = options(ERG_NVML_PARTIAL_LIBRARY);
  opts.cuda_visible_devices = std::optional<std::string>("2,0");
  auto found = discover(opts);
  ASSERT_TRUE(found) << found.error().message;
  ASSERT_EQ(found->gpus.size(), 2u);
  EXPECT_EQ(found->gpus[0]->index(), 0u);
  EXPECT_EQ(found->gpus[0]->physical_index(), 2u);
  EXPECT_EQ(found->gpus[0]->name(), "Fake Partial GPU 2");
  EXPECT_EQ(found->gpus[1]->physical_index(), 0u);

  opts.cuda_visible_devices = std::optional<std::string>("0,3");
  auto out_of_range = discover(opts);
  ASSERT_FALSE(out_of_range);
  EXPECT_EQ(out_of_range.error().code, ErrorCode::kNotFound);
  EXPECT_NE(out_of_range.error().message.find("GPU 3 does not exist"), std::string::npos)
      << out_of_range.error().message;

  // This library cannot tell UUIDs.
  opts.cuda_visible_devices = std::optional<std::string>("GPU-1234");
  auto by_uuid = discover(opts);
  ASSERT_FALSE(by_uuid);
  EXPECT_EQ(by_uuid.error().code, ErrorCode::kNotSupported);
}

}  // namespace
}  // namespace erg::nvml
