#include "erg/daemon/config.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include "erg/daemon/daemon.hpp"

namespace erg::daemon {
namespace {

Result<Config> parse(std::vector<std::string> args) {
  args.insert(args.begin(), "ergd");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  return parse_command_line(static_cast<int>(argv.size()), argv.data());
}

TEST(Config, DefaultsLikeTheIssue) {
  auto c = parse({});
  ASSERT_TRUE(c);
  EXPECT_EQ(c->socket_path, "/run/ergd/ergd.sock");
  EXPECT_EQ(c->socket_mode, 0660u);
  EXPECT_EQ(c->enabled.size(), 3u);
  EXPECT_FALSE(c->tcp);
}

TEST(Config, FlagsParsed) {
  auto c = parse({"--socket-path", "/tmp/x.sock", "--socket-mode", "0600", "--tcp", "127.0.0.1:4938", "--enable",
                  "gpu-read,cpu-read", "--allow-uid", "gpu-control=1000,1001", "--allow-gid", "50"});
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->socket_mode, 0600u);
  EXPECT_EQ(*c->tcp, "127.0.0.1:4938");
  EXPECT_EQ(c->enabled, (std::set<protocol::ApiGroup>{protocol::ApiGroup::kGpuRead, protocol::ApiGroup::kCpuRead}));
  EXPECT_EQ(c->allow_uid[protocol::ApiGroup::kGpuControl], (std::set<uid_t>{1000, 1001}));
  EXPECT_EQ(c->allow_gid[protocol::ApiGroup::kCpuRead], (std::set<gid_t>{50}));
}

TEST(Config, BadFlagsAreClearErrors) {
  EXPECT_NE(parse({"--enable", "gpu-write"}).error().message.find("unknown API group 'gpu-write'"), std::string::npos);
  EXPECT_NE(parse({"--socket-mode", "999"}).error().message.find("octal"), std::string::npos);
  EXPECT_NE(parse({"--allow-uid", "gpu-read=abc"}).error().message.find("invalid id 'abc'"), std::string::npos);
  EXPECT_FALSE(parse({"--no-such-flag"}));
}

TEST(Config, PrivilegedGroupsRefusedWithoutPrivilege) {
  if (::geteuid() == 0) GTEST_SKIP() << "runs as root; the cross-process test covers this as user nobody";
  Config c;
  c.enabled = {protocol::ApiGroup::kGpuControl};
  auto d = Daemon::create(c, Inventory{});
  ASSERT_FALSE(d);
  EXPECT_EQ(d.error().code, ErrorCode::kNoPermission);
}

TEST(Config, CpuReadRefusedWhenRaplUnreadable) {
  Config c;
  c.enabled = {protocol::ApiGroup::kCpuRead};
  Inventory inv;
  inv.unavailable.push_back({"rapl", ErrorCode::kNoPermission, "cannot read .../energy_uj: permission denied"});
  auto d = Daemon::create(c, std::move(inv));
  ASSERT_FALSE(d);
  EXPECT_NE(d.error().message.find("cpu-read"), std::string::npos);
  c.enabled = {protocol::ApiGroup::kGpuRead};
  Inventory inv2;
  inv2.unavailable.push_back({"rapl", ErrorCode::kNoPermission, "x"});
  EXPECT_TRUE(Daemon::create(c, std::move(inv2)));
}

}  // namespace
}  // namespace erg::daemon
