// The pure parts of the AMD SMI backend: status mapping, the visible-devices parser, the
// per-ABI reading of amdsmi_power_info_t, the architecture from the market name.

#include <gtest/gtest.h>

#include <cstring>

#include "erg/backends/amdsmi/discovery.hpp"
#include "erg/backends/amdsmi/errors.hpp"
#include "erg/backends/amdsmi/library.hpp"

namespace erg::amdsmi {
namespace {

TEST(AmdsmiErrors, MapsLikeZeus) {
  EXPECT_EQ(map_error_code(AMDSMI_STATUS_INVAL), ErrorCode::kInvalidArgument);
  EXPECT_EQ(map_error_code(AMDSMI_STATUS_ARG_PTR_NULL), ErrorCode::kInvalidArgument);
  EXPECT_EQ(map_error_code(AMDSMI_STATUS_NOT_SUPPORTED), ErrorCode::kNotSupported);
  EXPECT_EQ(map_error_code(AMDSMI_STATUS_NO_PERM), ErrorCode::kNoPermission);
  EXPECT_EQ(map_error_code(AMDSMI_STATUS_TIMEOUT), ErrorCode::kTimeout);
  EXPECT_EQ(map_error_code(AMDSMI_STATUS_HSMP_TIMEOUT), ErrorCode::kTimeout);
  EXPECT_EQ(map_error_code(AMDSMI_STATUS_NOT_FOUND), ErrorCode::kNotFound);
  EXPECT_EQ(map_error_code(AMDSMI_STATUS_DRIVER_NOT_LOADED), ErrorCode::kUnavailable);
  EXPECT_EQ(map_error_code(AMDSMI_STATUS_NO_DRV), ErrorCode::kUnavailable);
  EXPECT_EQ(map_error_code(AMDSMI_STATUS_NOT_INIT), ErrorCode::kDriverError);
  EXPECT_EQ(map_error_code(AMDSMI_STATUS_UNKNOWN_ERROR), ErrorCode::kDriverError);
  const Error e =
      map_error(AMDSMI_STATUS_NO_PERM, "amdsmi_set_power_cap", ErrorContext{.index = 1, .physical_index = 3});
  EXPECT_EQ(e.message.rfind("GPU 1 (AMD SMI index 3): amdsmi_set_power_cap failed: AMDSMI_STATUS_NO_PERM", 0), 0u)
      << e.message;
  EXPECT_NE(e.message.find("root"), std::string::npos);
  EXPECT_EQ(status_name(static_cast<amdsmi_status_t>(12345)), "unrecognized AMD SMI status");
}

TEST(AmdsmiVisibleDevices, ParsesHipIndices) {
  auto all = parse_visible_devices(std::nullopt, "HIP_VISIBLE_DEVICES");
  ASSERT_TRUE(all);
  EXPECT_FALSE(*all);
  auto two = parse_visible_devices(" 2, 0 ", "HIP_VISIBLE_DEVICES");
  ASSERT_TRUE(two && *two);
  EXPECT_EQ(**two, (std::vector<unsigned>{2, 0}));
  for (const char* bad : {"", " ", "1,,2", "-1", "GPU-abc", "1,1", "0x1"}) {
    auto r = parse_visible_devices(bad, "HIP_VISIBLE_DEVICES");
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument) << bad;
    EXPECT_NE(r.error().message.find("HIP_VISIBLE_DEVICES"), std::string::npos);
  }
}

TEST(AmdsmiPowerInfo, EachAbiLayoutAndBothNotAvailableValues) {
  erg_amdsmi_power_info_any_t info{};
  info.v24.current_socket_power = 700;
  info.v24.average_socket_power = ERG_AMDSMI_NA_U16;
  auto p24 = read_socket_power(info, 24);
  EXPECT_EQ(p24.current_w, 700u);
  EXPECT_FALSE(p24.average_w);

  info = {};
  info.v25.socket_power = 123;  // host-only field, never read
  info.v25.current_socket_power = ERG_AMDSMI_NA_U32;
  info.v25.average_socket_power = 94;
  auto p25 = read_socket_power(info, 25);
  EXPECT_FALSE(p25.current_w);
  EXPECT_EQ(p25.average_w, 94u);

  // ABI 26: current at byte 8, average at 12 (not ABI 24's 0 and 4).
  info = {};
  unsigned char* bytes = reinterpret_cast<unsigned char*>(&info);
  const std::uint32_t w = 650, na = ERG_AMDSMI_NA_U32;
  std::memcpy(bytes + 8, &w, 4);
  std::memcpy(bytes + 12, &na, 4);
  auto p26 = read_socket_power(info, 26);
  EXPECT_EQ(p26.current_w, 650u);
  EXPECT_FALSE(p26.average_w);
}

TEST(AmdsmiArchitecture, FromMarketName) {
  EXPECT_EQ(architecture_from_name("AMD Instinct MI300X"), "cdna3");
  EXPECT_EQ(architecture_from_name("AMD Instinct MI250X / MI250"), "cdna2");
  EXPECT_EQ(architecture_from_name("AMD Instinct MI210"), "cdna2");
  EXPECT_EQ(architecture_from_name("AMD Instinct MI100"), "cdna");
  EXPECT_EQ(architecture_from_name("Radeon RX 7900 XTX"), "unknown");
}

TEST(AmdsmiLibrary, MissingLibraryIsUnavailable) {
  auto lib = Library::open("/nonexistent/libamd_smi.so");
  ASSERT_FALSE(lib);
  EXPECT_EQ(lib.error().code, ErrorCode::kUnavailable);
  DiscoveryOptions o;
  o.library_path = "/nonexistent/libamd_smi.so";
  o.visible_devices = std::optional<std::string>();
  auto found = discover(o);
  ASSERT_TRUE(found);
  EXPECT_TRUE(found->gpus.empty());
  ASSERT_EQ(found->unavailable.size(), 1u);
  EXPECT_EQ(found->unavailable[0].source, "amdsmi");
}

}  // namespace
}  // namespace erg::amdsmi
