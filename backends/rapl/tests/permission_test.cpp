// Runs discovery as user `nobody` over a tree whose energy_uj is 0400 root, as the kernel has made
// it since CVE-2020-8694: the package must be unavailable with kNoPermission and the fix.

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "erg/sim/powercap_tree.hpp"
#include "temp_dir.hpp"

namespace erg::rapl {
namespace {

constexpr const char* kRunuser = "/usr/sbin/runuser";

struct Output {
  int status = -1;
  std::string text;
};

Output run(const std::string& command) {
  Output out;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return out;
  std::array<char, 512> buffer{};
  size_t n = 0;
  while ((n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0) out.text.append(buffer.data(), n);
  out.status = ::pclose(pipe);
  return out;
}

TEST(Permission, NonRootGetsNoPermissionWithTheFix) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to run the probe as user nobody";
  if (::access(kRunuser, X_OK) != 0) GTEST_SKIP() << kRunuser << " not found";

  testing::TempDir dir;  // 0755, like every directory below it: nobody can traverse the tree.
  sim::PowercapTree tree(dir.path());
  ASSERT_TRUE(tree.add_zone(0, "package-0", 262'143'328'850));
  ASSERT_TRUE(tree.add_zone(0, "dram", 65'712'999'613, 0));
  ASSERT_TRUE(tree.set_energy_mode(0, 0400));
  ASSERT_TRUE(tree.set_energy_mode(0, 0400, 0));
  const auto energy = tree.zone_dir(0) / "energy_uj";
  struct stat st {};
  ASSERT_EQ(::stat(energy.c_str(), &st), 0);
  ASSERT_EQ(st.st_uid, 0u);
  ASSERT_EQ(st.st_mode & 07777, 0400u);

  const std::string probe = ERG_RAPL_PROBE;
  // As root the same tree is readable: the probe works and the failure below is the mode's.
  auto as_root = run(probe + " " + dir.path().string() + " 2>&1");
  ASSERT_EQ(as_root.status, 0) << as_root.text;
  auto root_json = nlohmann::json::parse(as_root.text);
  ASSERT_EQ(root_json["cpus"].size(), 1u) << as_root.text;

  auto as_nobody = run(std::string(kRunuser) + " -u nobody -- " + probe + " " + dir.path().string() + " 2>&1");
  ASSERT_EQ(as_nobody.status, 0) << as_nobody.text;
  auto json = nlohmann::json::parse(as_nobody.text, nullptr, false);
  ASSERT_FALSE(json.is_discarded()) << as_nobody.text;
  EXPECT_TRUE(json["cpus"].empty()) << as_nobody.text;
  ASSERT_EQ(json["unavailable"].size(), 1u) << as_nobody.text;
  const auto& u = json["unavailable"][0];
  EXPECT_EQ(u["source"], "rapl");
  EXPECT_EQ(u["code"], "no_permission");
  EXPECT_EQ(u["reason"], "cannot read " + energy.string() +
                             ": permission denied; RAPL energy needs root since CVE-2020-8694 — run as root or "
                             "through ergd (ERG_DAEMON_SOCK)");
}

}  // namespace
}  // namespace erg::rapl
