#include "erg/backends/nvml/errors.hpp"

#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "erg/backends/nvml/discovery.hpp"

namespace erg::nvml {
namespace {

TEST(NvmlErrors, MappingTable) {
  const std::vector<std::pair<nvmlReturn_t, ErrorCode>> table = {
      {NVML_ERROR_NOT_SUPPORTED, ErrorCode::kNotSupported},
      {NVML_ERROR_NO_PERMISSION, ErrorCode::kNoPermission},
      {NVML_ERROR_INVALID_ARGUMENT, ErrorCode::kInvalidArgument},
      {NVML_ERROR_NOT_FOUND, ErrorCode::kNotFound},
      {NVML_ERROR_GPU_IS_LOST, ErrorCode::kGpuLost},
      {NVML_ERROR_RESET_REQUIRED, ErrorCode::kGpuLost},
      {NVML_ERROR_DRIVER_NOT_LOADED, ErrorCode::kUnavailable},
      {NVML_ERROR_LIBRARY_NOT_FOUND, ErrorCode::kUnavailable},
      {NVML_ERROR_TIMEOUT, ErrorCode::kTimeout},
      {NVML_ERROR_UNINITIALIZED, ErrorCode::kDriverError},
      {NVML_ERROR_UNKNOWN, ErrorCode::kDriverError},
      {NVML_ERROR_INSUFFICIENT_SIZE, ErrorCode::kDriverError},
      {NVML_ERROR_CORRUPTED_INFOROM, ErrorCode::kDriverError},
      {NVML_ERROR_LIB_RM_VERSION_MISMATCH, ErrorCode::kDriverError},
      {static_cast<nvmlReturn_t>(500), ErrorCode::kDriverError},
  };
  for (const auto& [code, expected] : table) {
    EXPECT_EQ(map_error_code(code), expected) << return_code_name(code);
    EXPECT_EQ(map_error(code, "nvmlX").code, expected) << return_code_name(code);
  }
}

TEST(NvmlErrors, MessageNamesGpuFunctionAndDriverText) {
  Error e = map_error(NVML_ERROR_TIMEOUT, "nvmlDeviceGetTotalEnergyConsumption",
                      ErrorContext{.index = 1, .physical_index = 3});
  EXPECT_EQ(e.code, ErrorCode::kTimeout);
  EXPECT_EQ(e.message,
            "GPU 1 (NVML index 3): nvmlDeviceGetTotalEnergyConsumption failed: Timeout (NVML_ERROR_TIMEOUT)");

  Error no_gpu = map_error(NVML_ERROR_UNINITIALIZED, "nvmlDeviceGetCount_v2");
  EXPECT_EQ(no_gpu.message, "nvmlDeviceGetCount_v2 failed: Uninitialized (NVML_ERROR_UNINITIALIZED)");

  Error unknown = map_error(static_cast<nvmlReturn_t>(500), "nvmlX");
  EXPECT_NE(unknown.message.find("500"), std::string::npos) << unknown.message;
}

const char* fake_error_string(nvmlReturn_t) { return "Driver says no"; }

TEST(NvmlErrors, UsesTheLibrarysErrorString) {
  Error e = map_error(NVML_ERROR_NOT_SUPPORTED, "nvmlDeviceGetPowerUsage",
                      ErrorContext{.index = 0, .physical_index = 0, .error_string = &fake_error_string});
  EXPECT_EQ(e.message,
            "GPU 0 (NVML index 0): nvmlDeviceGetPowerUsage failed: Driver says no (NVML_ERROR_NOT_SUPPORTED)");
}

TEST(NvmlErrors, NoPermissionSaysHowToFixIt) {
  Error e = map_error(NVML_ERROR_NO_PERMISSION, "nvmlDeviceSetPowerManagementLimit", ErrorContext{.index = 0});
  EXPECT_EQ(e.code, ErrorCode::kNoPermission);
  EXPECT_NE(e.message.find("Insufficient Permissions"), std::string::npos) << e.message;
  EXPECT_NE(e.message.find("root or CAP_SYS_ADMIN"), std::string::npos) << e.message;
  EXPECT_NE(e.message.find("ergd"), std::string::npos) << e.message;
}

TEST(NvmlErrors, NamesAndTextsCoverEveryCode) {
  for (int c = 0; c <= 30; ++c) {
    EXPECT_EQ(return_code_name(static_cast<nvmlReturn_t>(c)).rfind("NVML_", 0), 0u) << c;
    EXPECT_FALSE(builtin_error_string(static_cast<nvmlReturn_t>(c)).empty()) << c;
  }
  EXPECT_EQ(return_code_name(NVML_ERROR_UNKNOWN), "NVML_ERROR_UNKNOWN");
  EXPECT_EQ(builtin_error_string(NVML_ERROR_GPU_IS_LOST), "GPU is lost");
}

TEST(NvmlArchitecture, Names) {
  EXPECT_EQ(architecture_name(NVML_DEVICE_ARCH_KEPLER), "kepler");
  EXPECT_EQ(architecture_name(NVML_DEVICE_ARCH_MAXWELL), "maxwell");
  EXPECT_EQ(architecture_name(NVML_DEVICE_ARCH_PASCAL), "pascal");
  EXPECT_EQ(architecture_name(NVML_DEVICE_ARCH_VOLTA), "volta");
  EXPECT_EQ(architecture_name(NVML_DEVICE_ARCH_TURING), "turing");
  EXPECT_EQ(architecture_name(NVML_DEVICE_ARCH_AMPERE), "ampere");
  EXPECT_EQ(architecture_name(NVML_DEVICE_ARCH_ADA), "ada");
  EXPECT_EQ(architecture_name(NVML_DEVICE_ARCH_HOPPER), "hopper");
  EXPECT_EQ(architecture_name(NVML_DEVICE_ARCH_BLACKWELL), "blackwell");
  EXPECT_EQ(architecture_name(NVML_DEVICE_ARCH_RUBIN), "rubin");
  EXPECT_EQ(architecture_name(NVML_DEVICE_ARCH_UNKNOWN), "unknown");
  EXPECT_EQ(architecture_name(12), "unknown");
  EXPECT_EQ(architecture_name(0), "unknown");
}

}  // namespace
}  // namespace erg::nvml
