#include "erg/backends/nvml/visible_devices.hpp"

#include <gtest/gtest.h>

namespace erg::nvml {
namespace {

using List = std::vector<VisibleDevice>;

List parse_ok(std::string_view value) {
  auto r = parse_cuda_visible_devices(value);
  EXPECT_TRUE(r) << value << ": " << r.error().message;
  if (!r || !*r) return {};
  return **r;
}

Error parse_err(std::string_view value) {
  auto r = parse_cuda_visible_devices(value);
  EXPECT_FALSE(r) << value;
  return r ? Error{} : r.error();
}

TEST(CudaVisibleDevices, UnsetMeansAllGpus) {
  auto r = parse_cuda_visible_devices(std::nullopt);
  ASSERT_TRUE(r);
  EXPECT_FALSE(r->has_value());
}

TEST(CudaVisibleDevices, IntegersSelectAndOrder) {
  EXPECT_EQ(parse_ok("0"), (List{VisibleDevice::by_index(0)}));
  EXPECT_EQ(parse_ok("2,1"), (List{VisibleDevice::by_index(2), VisibleDevice::by_index(1)}));
  EXPECT_EQ(parse_ok(" 3 , 0 "), (List{VisibleDevice::by_index(3), VisibleDevice::by_index(0)}));
  EXPECT_EQ(parse_ok("10"), (List{VisibleDevice::by_index(10)}));
}

TEST(CudaVisibleDevices, UuidsAndPrefixes) {
  const std::string a = "GPU-431ab665-6377-3138-3e5a-89f61ebd0a72";
  const std::string b = "GPU-8A1B0000-0000-0000-0000-000000000001";
  EXPECT_EQ(parse_ok(a + "," + b), (List{VisibleDevice::by_uuid(a), VisibleDevice::by_uuid(b)}));
  EXPECT_EQ(parse_ok("GPU-431a"), (List{VisibleDevice::by_uuid("GPU-431a")}));
  // Mixed kinds are allowed; the driver resolves them.
  EXPECT_EQ(parse_ok("1," + a), (List{VisibleDevice::by_index(1), VisibleDevice::by_uuid(a)}));
  EXPECT_EQ(VisibleDevice::by_uuid(a).to_string(), a);
  EXPECT_EQ(VisibleDevice::by_index(7).to_string(), "7");
}

TEST(CudaVisibleDevices, EmptyMeansNoGpuAndIsAnError) {
  for (std::string_view v : {"", "   "}) {
    Error e = parse_err(v);
    EXPECT_EQ(e.code, ErrorCode::kInvalidArgument);
    EXPECT_EQ(e.message, "CUDA_VISIBLE_DEVICES is set but empty, so no GPU is visible; unset it to use all GPUs");
  }
}

TEST(CudaVisibleDevices, MigIsNotSupported) {
  for (std::string_view v : {"MIG-4f6c7a52-1b2c-5d3e-8f90-0a1b2c3d4e5f", "0,MIG-GPU-431ab665/1/0"}) {
    Error e = parse_err(v);
    EXPECT_EQ(e.code, ErrorCode::kNotSupported) << v;
    EXPECT_EQ(e.message.rfind("MIG devices in CUDA_VISIBLE_DEVICES are not supported: ", 0), 0u) << e.message;
  }
}

TEST(CudaVisibleDevices, GarbageIsInvalid) {
  for (std::string_view v :
       {"abc", "0,x", "1.5", "-1", "+1", "0,,1", "0,", ",0", "GPU-", "GPU-xyz", "2 3", "99999999999999999999"}) {
    Error e = parse_err(v);
    EXPECT_EQ(e.code, ErrorCode::kInvalidArgument) << v;
    EXPECT_NE(e.message.find("CUDA_VISIBLE_DEVICES"), std::string::npos) << e.message;
    EXPECT_EQ(e.message.find('\n'), std::string::npos) << e.message;
  }
}

TEST(CudaVisibleDevices, DuplicatesAreInvalid) {
  for (std::string_view v : {"1,1", "0,2,0", "GPU-abc,GPU-ABC"}) {
    Error e = parse_err(v);
    EXPECT_EQ(e.code, ErrorCode::kInvalidArgument) << v;
    EXPECT_NE(e.message.find("twice"), std::string::npos) << e.message;
  }
}

}  // namespace
}  // namespace erg::nvml
