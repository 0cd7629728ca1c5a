// Dump folders over loopback HTTP (issue 31): a client's job_metadata is part of the job id, and
// the server, which may run as root, must never let it choose where dump files are written. Jobs
// with hostile metadata run one round; every file that appears must lie in a folder directly
// under the dump folder, one folder per job, and nothing may appear beside the dump folder or
// through a symlink planted in it.

#include <gtest/gtest.h>
#include <httplib.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <ctime>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "erg/optimizers/pipeline_frequency/server/http_server.hpp"

namespace erg::pipeline_frequency::server {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

/// A fixed wall clock, so the job ids (and a planted folder's name) are known in advance.
constexpr std::int64_t kNow = 1'795'000'000;

/// root/srv/run/dump is the dump folder, so "../.." from a job's folder stays inside root.
class Tree {
 public:
  Tree() {
    std::string tmpl = (fs::temp_directory_path() / "erg-perseus-dumpdir-XXXXXX").string();
    root_ = mkdtemp(tmpl.data());
    fs::create_directories(dump());
  }
  ~Tree() { fs::remove_all(root_); }
  [[nodiscard]] const fs::path& root() const { return root_; }
  [[nodiscard]] fs::path dump() const { return root_ / "srv" / "run" / "dump"; }

 private:
  fs::path root_;
};

/// A service dumping into `dump` and its server on a free loopback port, serving on a thread.
class Running {
 public:
  /// `zeus_ids`: job ids in Zeus's predictable format (no random part), as an older server or
  /// a guessed id would be.
  explicit Running(const fs::path& dump, bool zeus_ids = false) : service_(options(dump, zeus_ids)) {
    auto s = HttpServer::bind(service_, HttpOptions{});
    EXPECT_TRUE(s) << s.error().message;
    server_ = std::move(*s);
    thread_ = std::thread([this] { server_->run(); });
    server_->wait_until_ready();
  }
  ~Running() {
    server_->stop();
    thread_.join();
  }
  [[nodiscard]] int port() const { return server_->port(); }

 private:
  static ServiceOptions options(const fs::path& dump, bool zeus_ids) {
    ServiceOptions o;
    if (zeus_ids) o.id_nonce = {};
    o.scheduler = {SchedulerKind::kPointSolution3D, {{{Instruction::kForward, 1410}, {Instruction::kBackward, 1200}}}};
    o.dump_data = true;
    o.dump_dir = dump;
    o.clock = [] { return std::chrono::system_clock::time_point(std::chrono::seconds(kNow)); };
    return o;
  }
  Service service_;
  std::unique_ptr<HttpServer> server_;
  std::thread thread_;
};

/// Every byte but RFC 3986's unreserved ones percent-encoded: a job id holds whatever the
/// metadata held ('/', '?', '#', '%', spaces, UTF-8), and the server decodes the path.
std::string path_encode(const std::string& s) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

/// Registers a one-rank job with `metadata` over HTTP and runs its round 0, so that ranks.json,
/// 0.sched.json and 0.prof.json are dumped; returns the job id ("" after a failed step).
std::string run_job(int port, const std::string& metadata) {
  httplib::Client c("127.0.0.1", port);
  c.set_connection_timeout(5);
  c.set_read_timeout(30);
  c.set_url_encode(false);
  const json job{{"job_id", ""},   {"dp_degree", 1},  {"pp_degree", 1},
                 {"tp_degree", 1}, {"world_size", 1}, {"job_metadata", metadata}};
  auto res = c.Post("/register_job", job.dump(), "application/json");
  if (!res || res->status != 200) {
    ADD_FAILURE() << "register_job with metadata '" << metadata.substr(0, 40)
                  << "': " << (res ? std::to_string(res->status) + " " + res->body : httplib::to_string(res.error()));
    return "";
  }
  const auto id = json::parse(res->body).get<std::string>();
  const auto enc = path_encode(id);
  const json rank{{"rank", 0}, {"dp_rank", 0}, {"pp_rank", 0}, {"tp_rank", 0}, {"available_frequencies", {1410}}};
  const json result{{"rank", 0}, {"iter_time", {1.0}}, {"iter_energy", {100.0}}};
  const std::vector<std::pair<std::string, httplib::Result>> steps = [&] {
    std::vector<std::pair<std::string, httplib::Result>> v;
    v.emplace_back("register_rank", c.Post(("/register_rank/" + enc).c_str(), rank.dump(), "application/json"));
    v.emplace_back("schedule", c.Get(("/schedule/" + enc + "?rank=0").c_str()));
    v.emplace_back("result", c.Post(("/result/" + enc).c_str(), result.dump(), "application/json"));
    return v;
  }();
  for (const auto& [what, r] : steps) {
    if (!r || r->status != 200) {
      ADD_FAILURE() << what << " of job " << id.substr(0, 120) << ": "
                    << (r ? std::to_string(r->status) + " " + r->body : httplib::to_string(r.error()));
      return "";
    }
  }
  return id;
}

/// Every path under `root`, relative to it; symlinks are listed, never followed.
std::set<fs::path> walk(const fs::path& root) {
  std::set<fs::path> out;
  for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator(); ++it)
    out.insert(it->path().lexically_relative(root));
  return out;
}

/// The job folders directly under `dump` (real directories, not symlinks) mapped to the files in
/// them; fails the test for anything else found anywhere under `dump`.
std::map<std::string, std::set<std::string>> job_folders(const fs::path& dump,
                                                         const std::set<std::string>& ignore = {}) {
  std::map<std::string, std::set<std::string>> out;
  for (const auto& rel : walk(dump)) {
    const auto parts = std::vector<fs::path>(rel.begin(), rel.end());
    const auto status = fs::symlink_status(dump / rel);
    if (ignore.contains(parts[0].string())) continue;
    if (parts.size() == 1) {
      EXPECT_TRUE(fs::is_directory(status)) << rel << " directly under the dump folder is not a directory";
      out[rel.string()];
    } else if (parts.size() == 2) {
      EXPECT_TRUE(fs::is_regular_file(status)) << rel << " is not a regular file";
      out[parts[0].string()].insert(parts[1].string());
    } else {
      ADD_FAILURE() << rel << " is nested deeper than <dump>/<job folder>/<file>";
    }
  }
  return out;
}

const std::set<std::string> kRoundZero{"ranks.json", "0.sched.json", "0.prof.json"};

bool safe_name(const std::string& name) {
  if (name.empty() || name == "." || name == ".." || name.size() > 255) return false;
  for (unsigned char c : name)
    if (!(std::isalnum(c) || c == '.' || c == '_' || c == '-' || c == '+' || c == '~')) return false;
  return true;
}

TEST(PerseusDumpDir, HostileMetadataNeverWritesOutsideTheDumpFolder) {
  Tree tree;
  const auto before = walk(tree.root());
  const std::vector<std::string> metadata{
      "/../../escape",         // dump/<id prefix>+/../../escape = root/srv/run/escape
      "/../../../escape2",     // root/srv/escape2
      "/../../../../escape4",  // root/escape4
      "..",
      ".",
      "a/b",
      "../c",
      "/abs/olute",
      "back\\slash",
      "sp ace?que#ry%25",
      "\xc3\xa9t\xc3\xa9\x01\x7f",  // UTF-8 and control bytes
      std::string(300, 'm'),        // longer than a file name may be
      "/../.." + std::string(300, 'l'),
  };
  std::vector<std::string> ids;
  {
    Running server(tree.dump());
    for (const auto& m : metadata) ids.push_back(run_job(server.port(), m));
  }
  for (const auto& id : ids) EXPECT_FALSE(id.empty());
  // Nothing new anywhere in the tree but under the dump folder.
  for (const auto& rel : walk(tree.root())) {
    if (before.contains(rel)) continue;
    const auto under = rel.lexically_relative(fs::path("srv") / "run" / "dump");
    EXPECT_TRUE(!under.empty() && *under.begin() != "..") << rel << " was written outside the dump folder";
  }
  for (const auto* escape : {"srv/run/escape", "srv/escape2", "escape4"})
    EXPECT_FALSE(fs::exists(fs::symlink_status(tree.root() / escape))) << escape;
  // One folder per job, directly under the dump folder, named only with safe characters, holding
  // the round's three dumps and nothing else.
  const auto folders = job_folders(tree.dump());
  EXPECT_EQ(folders.size(), metadata.size());
  for (const auto& [name, files] : folders) {
    EXPECT_TRUE(safe_name(name)) << "folder name " << name;
    EXPECT_EQ(files, kRoundZero) << name;
  }
}

TEST(PerseusDumpDir, JobsWhoseMetadataSanitizeAlikeGetTheirOwnFolders) {
  Tree tree;
  const std::vector<std::string> metadata{"x/y", "x?y", "x y", "x\xc3\xa9y"};
  {
    Running server(tree.dump());
    for (const auto& m : metadata) EXPECT_FALSE(run_job(server.port(), m).empty()) << m;
  }
  const auto folders = job_folders(tree.dump());
  EXPECT_EQ(folders.size(), metadata.size());
  for (const auto& [name, files] : folders) EXPECT_EQ(files, kRoundZero) << name;
}

TEST(PerseusDumpDir, APlantedSymlinkIsNotFollowed) {
  Tree tree;
  const auto outside = tree.root() / "outside";
  fs::create_directories(outside);
  // The id the server makes in Zeus's format (local time, as the server formats it) is
  // predictable, so anyone who can write to the dump folder can plant a link under it.
  const std::time_t t = kNow;
  std::tm local{};
  localtime_r(&t, &local);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%F-%H-%M-%S", &local);
  const std::string planted = std::string(stamp) + "+dp1+pp1+tp1+PointSolution3D+plain";
  fs::create_directory_symlink(outside, tree.dump() / planted);
  std::string id;
  {
    Running server(tree.dump(), /*zeus_ids=*/true);
    id = run_job(server.port(), "plain");
  }
  EXPECT_EQ(id, planted);
  EXPECT_TRUE(fs::is_empty(outside)) << "the server wrote through the planted link";
  EXPECT_TRUE(fs::is_symlink(tree.dump() / planted));
  const auto folders = job_folders(tree.dump(), {planted});
  ASSERT_EQ(folders.size(), 1u);
  EXPECT_EQ(folders.begin()->second, kRoundZero);
}

}  // namespace
}  // namespace erg::pipeline_frequency::server
