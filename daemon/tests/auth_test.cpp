// HS256 bearer tokens on TCP: the zeusd auth matrix (404 disabled group regardless of token,
// 401 missing/invalid/expired/wrong-key, 403 wrong scope, 200 correct, whoami).

#include "erg/daemon/auth.hpp"

#include <cstdio>
#include <ctime>
#include <fstream>

#include "fixture.hpp"

namespace erg::daemon {
namespace {

using testing::body_json;
const std::string kKey = "0123456789abcdef-signing-key";

struct AuthDaemon : testing::FakeDaemon {
  static Config make() {
    static std::string path = "/tmp/ergd-test-key-" + std::to_string(::getpid());
    std::ofstream(path) << kKey << "\n";
    Config c;
    c.signing_key_path = path;
    c.enabled = {protocol::ApiGroup::kGpuRead, protocol::ApiGroup::kCpuRead};
    return c;
  }
  AuthDaemon() : testing::FakeDaemon(make()) {}
  Reply tcp(const std::string& method, const std::string& target, const std::string& token) {
    std::vector<std::pair<std::string, std::string>> h;
    if (!token.empty()) h.emplace_back("Authorization", "Bearer " + token);
    return call(method, target, Peer{false, std::nullopt, std::nullopt}, h);
  }
};

std::string token(const std::string& key, std::vector<std::string> scopes, std::optional<std::int64_t> exp) {
  auto t = issue_token(key, TokenClaims{"alice", std::move(scopes), exp});
  EXPECT_TRUE(t) << t.error().message;
  return *t;
}

TEST(Auth, VerifyRoundTripAndRejections) {
  auto c = verify_token(token(kKey, {"gpu-read"}, std::nullopt), kKey);
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->sub, "alice");
  EXPECT_EQ(c->scopes, (std::vector<std::string>{"gpu-read"}));
  EXPECT_FALSE(c->exp);
  EXPECT_FALSE(verify_token(token("another-key-0123456789", {"gpu-read"}, std::nullopt), kKey));
  auto expired = verify_token(token(kKey, {"gpu-read"}, std::time(nullptr) - 10), kKey);
  ASSERT_FALSE(expired);
  EXPECT_EQ(expired.error().message, "token expired");
  EXPECT_FALSE(verify_token("not.a.token", kKey));
  EXPECT_FALSE(verify_token("", kKey));
  // alg "none" is refused.
  EXPECT_FALSE(verify_token("eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0.eyJzdWIiOiJ4Iiwic2NvcGVzIjpbImdwdS1yZWFkIl19.", kKey));
}

TEST(Auth, Matrix) {
  AuthDaemon f;
  const std::string read = "/gpu/get_power_limit";
  EXPECT_EQ(body_json(f.tcp("GET", "/discover", ""))["auth_required"], true);
  EXPECT_EQ(f.tcp("GET", "/time", "").response.status, 200);
  auto none = f.tcp("GET", read, "");
  EXPECT_EQ(none.response.status, 401);
  ASSERT_EQ(none.response.headers.size(), 1u);
  EXPECT_EQ(none.response.headers[0].second, "Bearer realm=\"zeusd\"");
  EXPECT_EQ(f.tcp("GET", read, "garbage").response.status, 401);
  EXPECT_EQ(f.tcp("GET", read, token("wrong-key-0123456789", {"gpu-read"}, std::nullopt)).response.status, 401);
  EXPECT_EQ(f.tcp("GET", read, token(kKey, {"gpu-read"}, std::time(nullptr) - 1)).response.status, 401);
  EXPECT_EQ(f.tcp("GET", read, token(kKey, {"cpu-read"}, std::nullopt)).response.status, 403);
  EXPECT_EQ(f.tcp("GET", read, token(kKey, {"gpu-read"}, std::time(nullptr) + 3600)).response.status, 200);
  EXPECT_EQ(f.tcp("GET", read, token(kKey, {"gpu-read"}, std::nullopt)).response.status, 200);
  // Disabled group: 404 regardless of the token.
  EXPECT_EQ(f.tcp("POST", "/gpu/set_power_limit?gpu_ids=0&power_limit_mw=200000&block=true",
                  token(kKey, {"gpu-control"}, std::nullopt))
                .response.status,
            404);
  auto who = f.tcp("GET", "/auth/whoami", token(kKey, {"gpu-read", "cpu-read"}, 4102444800));
  ASSERT_EQ(who.response.status, 200);
  EXPECT_EQ(body_json(who),
            (nlohmann::json{{"sub", "alice"}, {"scopes", {"gpu-read", "cpu-read"}}, {"exp", 4102444800}}));
  EXPECT_EQ(f.tcp("GET", "/auth/whoami", "").response.status, 401);
}

// /metrics over TCP with a signing key: a token's read scopes decide which series it shows.
TEST(Auth, MetricsNeedATokenAndShowItsReadScopes) {
  AuthDaemon f;
  auto none = f.tcp("GET", "/metrics", "");
  EXPECT_EQ(none.response.status, 401);
  EXPECT_EQ(none.response.body.find("erg_"), std::string::npos);
  auto gpu = f.tcp("GET", "/metrics", token(kKey, {"gpu-read"}, std::nullopt));
  ASSERT_EQ(gpu.response.status, 200);
  EXPECT_NE(gpu.response.body.find("erg_gpu_energy_joules_total{"), std::string::npos);
  EXPECT_EQ(gpu.response.body.find("erg_cpu_"), std::string::npos);
  auto cpu = f.tcp("GET", "/metrics", token(kKey, {"cpu-read"}, std::nullopt));
  ASSERT_EQ(cpu.response.status, 200);
  EXPECT_NE(cpu.response.body.find("erg_cpu_energy_joules_total{"), std::string::npos);
  EXPECT_EQ(cpu.response.body.find("erg_gpu_energy"), std::string::npos);
  EXPECT_EQ(f.tcp("GET", "/metrics", token(kKey, {"gpu-control"}, std::nullopt)).response.status, 403);
}

}  // namespace
}  // namespace erg::daemon
