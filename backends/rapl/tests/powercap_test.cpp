#include "erg/backends/rapl/powercap.hpp"

#include <gtest/gtest.h>

#include <cerrno>
#include <limits>

#include "erg/core/file.hpp"
#include "erg/sim/powercap_tree.hpp"
#include "temp_dir.hpp"

namespace erg::rapl {
namespace {

TEST(ParseEnergyUj, AcceptsKernelFormat) {
  EXPECT_EQ(parse_energy_uj("0\n").value(), 0u);
  EXPECT_EQ(parse_energy_uj("262143328850\n").value(), 262143328850u);
  EXPECT_EQ(parse_energy_uj("  42 \t\n").value(), 42u);
  EXPECT_EQ(parse_energy_uj("18446744073709551615").value(), std::numeric_limits<std::uint64_t>::max());
}

TEST(ParseEnergyUj, RejectsMalformed) {
  for (const char* bad : {"", "\n", "-1", "+1", "abc", "12abc", "1 2", "0x10", "1.5"}) {
    auto r = parse_energy_uj(bad);
    ASSERT_FALSE(r) << "'" << bad << "'";
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument) << bad;
  }
  auto big = parse_energy_uj("18446744073709551616");
  ASSERT_FALSE(big);
  EXPECT_NE(big.error().message.find("out of 64-bit range"), std::string::npos);
}

TEST(ParseZoneName, Trims) {
  EXPECT_EQ(parse_zone_name("package-0\n").value(), "package-0");
  EXPECT_EQ(parse_zone_name("dram").value(), "dram");
  EXPECT_FALSE(parse_zone_name(" \n"));
}

TEST(ParseZoneId, TopLevelAndSubZones) {
  EXPECT_EQ(parse_zone_id("intel-rapl:0"), (ZoneId{0, std::nullopt}));
  EXPECT_EQ(parse_zone_id("intel-rapl:12"), (ZoneId{12, std::nullopt}));
  EXPECT_EQ(parse_zone_id("intel-rapl:1:0"), (ZoneId{1, 0u}));
  for (const char* other : {"intel-rapl", "intel-rapl:", "intel-rapl:x", "intel-rapl:0x",
                            "intel-rapl:0:", "intel-rapl:0:1:2", "intel-rapl-mmio:0", "dram", "intel-rapl:-1"}) {
    EXPECT_FALSE(parse_zone_id(other)) << other;
  }
}

TEST(IsPackageZoneName, PackagesOnly) {
  EXPECT_TRUE(is_package_zone_name("package-0"));
  EXPECT_TRUE(is_package_zone_name("package-1-die-1"));
  for (const char* other : {"psys", "dram", "core", "uncore", ""}) EXPECT_FALSE(is_package_zone_name(other)) << other;
}

TEST(ReadError, MapsErrnoOnce) {
  const std::filesystem::path p = "/x/intel-rapl:0/energy_uj";
  EXPECT_EQ(read_error(p, ENOENT).code, ErrorCode::kNotFound);
  EXPECT_EQ(read_error(p, ENOTDIR).code, ErrorCode::kNotFound);
  EXPECT_EQ(read_error(p, EACCES).code, ErrorCode::kNoPermission);
  EXPECT_EQ(read_error(p, EPERM).code, ErrorCode::kNoPermission);
  EXPECT_EQ(read_error(p, ENODATA).code, ErrorCode::kNotSupported);
  EXPECT_EQ(read_error(p, EIO).code, ErrorCode::kIo);
  for (int err : {ENOENT, EACCES, ENODATA, EIO}) {
    EXPECT_NE(read_error(p, err).message.find(p.string()), std::string::npos) << err;
  }
  const auto denied = read_error(p, EACCES).message;
  EXPECT_EQ(denied,
            "cannot read /x/intel-rapl:0/energy_uj: permission denied; RAPL energy needs root since "
            "CVE-2020-8694 — run as root or through ergd (ERG_DAEMON_SOCK)");
}

TEST(PosixSysfsReader, ReadsMissingAndReplacedFiles) {
  testing::TempDir dir;
  PosixSysfsReader reader;
  const auto file = dir.path() / "energy_uj";
  auto missing = reader.read(file);
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);

  ASSERT_TRUE(erg::write_file_atomic(file, "123\n", 0444));
  EXPECT_EQ(reader.read(file).value(), "123\n");
  // Replaced by rename: a reader that opens per read sees the new file, not the old inode.
  ASSERT_TRUE(erg::write_file_atomic(file, "456\n", 0444));
  EXPECT_EQ(reader.read(file).value(), "456\n");
  EXPECT_EQ(read_energy_file(reader, file).value(), 456u);
}

TEST(ReadEnergyFile, MalformedIsIoNamingTheFile) {
  testing::TempDir dir;
  const auto file = dir.path() / "energy_uj";
  ASSERT_TRUE(erg::write_file_atomic(file, "garbage\n", 0444));
  auto r = read_energy_file(PosixSysfsReader(), file);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kIo);
  EXPECT_NE(r.error().message.find(file.string()), std::string::npos);
}

}  // namespace
}  // namespace erg::rapl
