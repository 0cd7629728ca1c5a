#include "erg/daemon/config.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <set>

#include "erg/daemon/auth.hpp"
#include "erg/daemon/daemon.hpp"
#include "parse_args.hpp"

namespace erg::daemon {
namespace {

using test_support::parse;

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
  EXPECT_FALSE(c->tcp_insecure);
  EXPECT_TRUE(parse({"--tcp", "127.0.0.1:4938", "--tcp-insecure"})->tcp_insecure);
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

TEST(Config, AttributionFlags) {
  auto d = parse({});
  ASSERT_TRUE(d);
  EXPECT_TRUE(d->attribution_all_uids.empty());
  EXPECT_EQ(d->attribution_poll, std::chrono::milliseconds(500));
  EXPECT_EQ(d->attribution_retention, std::chrono::seconds(3600));
  auto c = parse({"--attribution-all-uids", "1000,1001", "--attribution-all-gids", "77", "--attribution-poll-s", "0",
                  "--attribution-retention-s", "60"});
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->attribution_all_uids, (std::set<uid_t>{1000, 1001}));
  EXPECT_EQ(c->attribution_all_gids, (std::set<gid_t>{77}));
  EXPECT_EQ(c->attribution_poll, std::chrono::milliseconds(0));
  EXPECT_EQ(c->attribution_retention, std::chrono::seconds(60));
  auto bad = parse({"--attribution-all-uids", "10,x"});
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("--attribution-all-uids: invalid id 'x'"), std::string::npos)
      << bad.error().message;
  auto fast = parse({"--attribution-poll-s", "0.01"});
  ASSERT_FALSE(fast);
  EXPECT_NE(fast.error().message.find("0.05"), std::string::npos) << fast.error().message;
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

Result<TokenIssueRequest> parse_token(std::vector<std::string> args) {
  args.insert(args.begin(), {"ergd", "token"});
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  return parse_token_command_line(static_cast<int>(argv.size()), argv.data());
}

TEST(Config, TimeoutFlags) {
  auto c = parse({"--idle-timeout", "2.5", "--request-timeout", "0.5"});
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->idle_timeout, std::chrono::milliseconds(2500));
  EXPECT_EQ(c->request_timeout, std::chrono::milliseconds(500));
  auto d = parse({});
  EXPECT_EQ(d->idle_timeout, std::chrono::seconds(60));
  EXPECT_EQ(d->request_timeout, std::chrono::seconds(10));
  EXPECT_FALSE(parse({"--request-timeout", "0"}));
  EXPECT_FALSE(parse({"--idle-timeout", "-1"}));
}

TEST(Config, TokenIssueCommandLine) {
  auto t = parse_token({"issue", "--signing-key-path", "/etc/ergd/key", "--user", "alice", "--scope",
                        "gpu-read,cpu-read", "--expires", "7d"});
  ASSERT_TRUE(t) << t.error().message;
  EXPECT_EQ(t->signing_key_path, "/etc/ergd/key");
  EXPECT_EQ(t->user, "alice");
  EXPECT_EQ(t->scopes, (std::vector<std::string>{"gpu-read", "cpu-read"}));
  EXPECT_EQ(t->lifetime_s, 7 * 86400);
  auto never = parse_token({"issue", "--signing-key-path", "k", "--user", "bob", "--scope", "gpu-control"});
  ASSERT_TRUE(never) << never.error().message;
  EXPECT_FALSE(never->lifetime_s);

  auto bad_scope = parse_token({"issue", "--signing-key-path", "k", "--user", "u", "--scope", "gpu-read,gpu-write"});
  ASSERT_FALSE(bad_scope);
  EXPECT_NE(bad_scope.error().message.find("gpu-write"), std::string::npos) << bad_scope.error().message;
  auto no_user = parse_token({"issue", "--signing-key-path", "k", "--scope", "gpu-read"});
  ASSERT_FALSE(no_user);
  EXPECT_NE(no_user.error().message.find("--user"), std::string::npos) << no_user.error().message;
  EXPECT_FALSE(parse_token({}));  // a subcommand is required
  auto bad_expiry =
      parse_token({"issue", "--signing-key-path", "k", "--user", "u", "--scope", "gpu-read", "--expires", "1y"});
  ASSERT_FALSE(bad_expiry);
  EXPECT_NE(bad_expiry.error().message.find("'1y'"), std::string::npos) << bad_expiry.error().message;
}

TEST(Config, TokenLifetimes) {
  EXPECT_EQ(*parse_token_lifetime("1h"), 3600);
  EXPECT_EQ(*parse_token_lifetime("30d"), 30 * 86400);
  EXPECT_EQ(*parse_token_lifetime("45s"), 45);
  EXPECT_EQ(*parse_token_lifetime("2w"), 14 * 86400);
  EXPECT_EQ(*parse_token_lifetime("15m"), 900);
  EXPECT_FALSE(*parse_token_lifetime("never"));
  EXPECT_FALSE(*parse_token_lifetime("0"));
  for (const char* bad : {"", "h", "1", "-1h", "0h", "1.5h", "1hh", "99999999999d", "never!"})
    EXPECT_FALSE(parse_token_lifetime(bad)) << bad;
}

TEST(Config, SigningKeyFile) {
  std::string path = "/tmp/ergd-key-test-" + std::to_string(::getpid());
  std::ofstream(path) << "0123456789abcdef-key\n";
  auto key = read_signing_key(path);
  ASSERT_TRUE(key) << key.error().message;
  EXPECT_EQ(*key, "0123456789abcdef-key");  // trailing newline dropped
  std::ofstream(path) << "short\n";
  auto short_key = read_signing_key(path);
  ASSERT_FALSE(short_key);
  EXPECT_NE(short_key.error().message.find("too short"), std::string::npos);
  std::remove(path.c_str());
  auto missing = read_signing_key(path);
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message.find(path), std::string::npos);
}

}  // namespace
}  // namespace erg::daemon
