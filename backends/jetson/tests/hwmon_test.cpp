// The hwmon seam: parsers, the classification of rail labels, and the scan over hand-written
// INA3221 trees (unconnected, disabled and unlabelled channels; other hwmon devices).

#include "erg/backends/jetson/hwmon.hpp"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <string>

#include "erg/sim/hwmon_tree.hpp"

namespace erg::jetson {
namespace {

namespace fs = std::filesystem;

struct TempDir {
  fs::path path;
  TempDir() {
    std::string t = "/tmp/erg-jetson-test-XXXXXX";
    if (::mkdtemp(t.data()) == nullptr) std::abort();
    path = t;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

TEST(Hwmon, ParsesValuesAsSysfsWritesThem) {
  EXPECT_EQ(*parse_value("19088\n"), 19088);
  EXPECT_EQ(*parse_value("     528\n"), 528);  // the simulator's fixed-width files
  EXPECT_EQ(*parse_value("-4\n"), -4);
  EXPECT_FALSE(parse_value(""));
  EXPECT_FALSE(parse_value("12 mA"));
  EXPECT_FALSE(parse_value("0x10"));
  EXPECT_EQ(parse_label(" VDD_GPU_SOC\n"), "VDD_GPU_SOC");
}

TEST(Hwmon, ClassifiesTheRailsOfEveryLayout) {
  // AGX Orin
  EXPECT_EQ(classify_rail("VDD_GPU_SOC"), RailKind::kGpu);
  EXPECT_EQ(classify_rail("VDD_CPU_CV"), RailKind::kCpu);
  EXPECT_EQ(classify_rail("VIN_SYS_5V0"), RailKind::kOther);
  EXPECT_EQ(classify_rail("VDDQ_VDD2_1V8AO"), RailKind::kOther);
  // Orin Nano / NX
  EXPECT_EQ(classify_rail("VDD_IN"), RailKind::kTotal);
  EXPECT_EQ(classify_rail("VDD_CPU_GPU_CV"), RailKind::kCpuGpu);
  EXPECT_EQ(classify_rail("VDD_SOC"), RailKind::kOther);
  // AGX Xavier
  EXPECT_EQ(classify_rail("GPU"), RailKind::kGpu);
  EXPECT_EQ(classify_rail("CPU"), RailKind::kCpu);
  for (const char* l : {"SOC", "CV", "VDDRQ", "SYS5V"}) EXPECT_EQ(classify_rail(l), RailKind::kOther) << l;
  // Older modules (TX2/Nano) and case.
  EXPECT_EQ(classify_rail("POM_5V_IN"), RailKind::kTotal);
  EXPECT_EQ(classify_rail("pom_5v_gpu"), RailKind::kGpu);
}

TEST(Hwmon, ScanFindsConnectedEnabledIna3221ChannelsOnly) {
  TempDir dir;
  sim::HwmonTree tree(dir.path / "sys");
  ASSERT_TRUE(tree.add_other(0, "soc_thermal"));
  ASSERT_TRUE(tree.add_ina3221(1, 0x40, {{1, "VDD_GPU_SOC", 5000}, {2, "VDD_CPU_CV", 5000}, {3, "NC", 5000}}, 1, 7));
  ASSERT_TRUE(tree.add_ina3221(2, 0x41, {{1, "", 5000}, {2, "VDDQ_VDD2_1V8AO", 5000}, {3, "", 5000}}, 1, 2));
  ASSERT_TRUE(tree.add_other(3, "ina3221x"));  // not the hwmon driver's name: skipped
  ASSERT_TRUE(tree.set_value(1, "in1_input", 19088));
  ASSERT_TRUE(tree.set_value(1, "curr1_input", 528));
  // A labelled channel that is disabled.
  ASSERT_TRUE(tree.add_ina3221(4, 0x42, {{1, "VDD_OFF", 5000}}, 1, 2));
  {
    std::FILE* f = std::fopen((tree.device_dir(4) / "in1_enable").c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs("0\n", f);
    std::fclose(f);
  }
  std::vector<Error> problems;
  const auto rails = scan_rails(tree.root(), &problems);
  EXPECT_TRUE(problems.empty());
  ASSERT_EQ(rails.size(), 3u);
  EXPECT_EQ(rails[0].label, "VDD_GPU_SOC");
  EXPECT_EQ(rails[0].kind, RailKind::kGpu);
  EXPECT_EQ(rails[0].voltage_mv, tree.device_dir(1) / "in1_input");
  EXPECT_EQ(rails[0].current_ma, tree.device_dir(1) / "curr1_input");
  EXPECT_TRUE(rails[0].power_uw.empty());
  ASSERT_TRUE(rails[0].update_interval);
  EXPECT_EQ(rails[0].update_interval->count(), 7);
  EXPECT_EQ(rails[1].label, "VDD_CPU_CV");
  EXPECT_EQ(rails[2].label, "VDDQ_VDD2_1V8AO");
  EXPECT_EQ(rails[2].voltage_mv, tree.device_dir(2) / "in2_input");
}

TEST(Hwmon, NoTreeMeansNoRails) {
  TempDir dir;
  std::vector<Error> problems;
  EXPECT_TRUE(scan_rails(dir.path / "missing", &problems).empty());
  EXPECT_TRUE(problems.empty());
  sim::HwmonTree tree(dir.path / "sys");
  ASSERT_TRUE(tree.create_root());
  EXPECT_TRUE(scan_rails(tree.root(), &problems).empty());
  EXPECT_TRUE(problems.empty());
}

TEST(Hwmon, AnUnreadableRailIsReportedNotUsed) {
  TempDir dir;
  sim::HwmonTree tree(dir.path / "sys");
  ASSERT_TRUE(tree.add_ina3221(1, 0x40, {{1, "GPU", 5000}, {2, "CPU", 5000}}, 1, 4));
  fs::remove(tree.device_dir(1) / "curr2_input");
  std::vector<Error> problems;
  const auto rails = scan_rails(tree.root(), &problems);
  ASSERT_EQ(rails.size(), 1u);
  EXPECT_EQ(rails[0].label, "GPU");
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].code, ErrorCode::kNotFound);
  EXPECT_NE(problems[0].message.find("curr2_input"), std::string::npos);
}

}  // namespace
}  // namespace erg::jetson
