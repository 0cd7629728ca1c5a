// ergd's connection limits and file limit as configuration: flags, defaults, and the plan for
// RLIMIT_NOFILE (raise the soft limit, or lower the cap and say so).

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <string>
#include <vector>

#include "erg/daemon/config.hpp"
#include "parse_args.hpp"

namespace erg::daemon {
namespace {

using test_support::parse;

TEST(Config, ConnectionLimitFlagsAndDefaults) {
  auto d = parse({});
  ASSERT_TRUE(d);
  EXPECT_EQ(d->write_timeout, std::chrono::milliseconds(5000));
  EXPECT_FALSE(d->allow_insecure_socket_dir);
  auto l = connection_limits(*d);
  EXPECT_EQ(l.total, 1024u);
  EXPECT_EQ(l.per_uid, 256u);   // a quarter
  EXPECT_EQ(l.reserved, 128u);  // an eighth

  auto c = parse({"--max-connections", "100", "--max-connections-per-uid", "10", "--reserved-connections", "5",
                  "--write-timeout", "0.5", "--allow-insecure-socket-dir"});
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->write_timeout, std::chrono::milliseconds(500));
  EXPECT_TRUE(c->allow_insecure_socket_dir);
  l = connection_limits(*c);
  EXPECT_EQ(l.total, 100u);
  EXPECT_EQ(l.per_uid, 10u);
  EXPECT_EQ(l.reserved, 5u);

  // Out of range values are clamped so that someone can always connect.
  Config odd;
  odd.max_connections = 2;
  odd.max_connections_per_uid = 50;
  odd.reserved_connections = 50;
  l = connection_limits(odd);
  EXPECT_EQ(l.per_uid, 2u);
  EXPECT_EQ(l.reserved, 1u);
  odd.max_connections = 1;
  odd.max_connections_per_uid.reset();
  odd.reserved_connections.reset();
  l = connection_limits(odd);
  EXPECT_EQ(l.per_uid, 1u);
  EXPECT_EQ(l.reserved, 0u);

  EXPECT_FALSE(parse({"--max-connections", "0"}));
  EXPECT_FALSE(parse({"--write-timeout", "0"}));
}

TEST(Config, FileLimitRaisedToFitOrCapLoweredWithANote) {
  // Fits already: nothing changes.
  auto p = plan_file_limit(1024, 65536, 65536, 10);
  EXPECT_EQ(p.soft, 65536u);
  EXPECT_EQ(p.max_connections, 1024u);
  EXPECT_FALSE(p.note);
  // The soft limit is raised as far as needed, within the hard limit.
  p = plan_file_limit(4096, 1024, 524288, 10);
  EXPECT_EQ(p.soft, 4096u + 10 + kFileHeadroom);
  EXPECT_EQ(p.max_connections, 4096u);
  EXPECT_FALSE(p.note);
  p = plan_file_limit(4096, 1024, RLIM_INFINITY, 10);
  EXPECT_EQ(p.soft, 4096u + 10 + kFileHeadroom);
  // The hard limit is too low: the cap is lowered to fit, and said in one line.
  p = plan_file_limit(4096, 1024, 1024, 10);
  EXPECT_EQ(p.soft, 1024u);
  EXPECT_EQ(p.max_connections, 1024u - 10 - kFileHeadroom);
  ASSERT_TRUE(p.note);
  EXPECT_EQ(*p.note, "file limit 1024 allows " + std::to_string(1024 - 10 - kFileHeadroom) +
                         " connections; --max-connections lowered from 4096 (raise the hard limit: LimitNOFILE= "
                         "in the systemd unit, or ulimit -Hn)");
  // Absurdly low: still one connection.
  p = plan_file_limit(100, 20, 20, 10);
  EXPECT_EQ(p.max_connections, 1u);
}

}  // namespace
}  // namespace erg::daemon
