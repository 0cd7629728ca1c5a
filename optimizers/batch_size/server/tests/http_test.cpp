// The server over loopback HTTP: Zeus's request bodies and answers, bad input, 32 concurrent
// clients on two servers sharing one database, and a SIGKILL in the middle of reports.

#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "erg/optimizers/batch_size/server/http_server.hpp"
#include "helpers.hpp"
#ifdef ERG_BSO_POSTGRES
#include "postgres.hpp"
#endif

namespace erg::batch_size::server {
namespace {

using json = nlohmann::json;
using testing::job_body;
using testing::report_body;
using testing::TempDir;

/// A store, service and server on a free loopback port, serving on a thread.
class Running {
 public:
  explicit Running(const std::string& url, ServiceOptions options = {}) {
    auto s = open_store(url);
    EXPECT_TRUE(s) << s.error().message;
    store_ = std::move(*s);
    service_ = std::make_unique<Service>(*store_, std::move(options));
    auto h = HttpServer::bind(*service_, HttpOptions{});
    EXPECT_TRUE(h) << h.error().message;
    http_ = std::move(*h);
    thread_ = std::thread([this] { http_->run(); });
    http_->wait_until_ready();
  }
  ~Running() {
    http_->stop();
    thread_.join();
  }
  [[nodiscard]] int port() const { return http_->port(); }

 private:
  std::unique_ptr<Store> store_;
  std::unique_ptr<Service> service_;
  std::unique_ptr<HttpServer> http_;
  std::thread thread_;
};

httplib::Client client(int port) {
  httplib::Client c("127.0.0.1", port);
  c.set_connection_timeout(5);
  c.set_read_timeout(30);
  c.set_write_timeout(30);
  return c;
}

/// Rows of one column of a query, as text.
std::vector<std::string> column(const std::filesystem::path& db_path, const std::string& sql) {
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open(db_path.c_str(), &db), SQLITE_OK);
  sqlite3_busy_timeout(db, 10000);
  sqlite3_stmt* s = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(db, sql.c_str(), -1, &s, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
  std::vector<std::string> out;
  while (sqlite3_step(s) == SQLITE_ROW) {
    const auto* t = sqlite3_column_text(s, 0);
    out.emplace_back(t ? reinterpret_cast<const char*>(t) : "NULL");
  }
  sqlite3_finalize(s);
  sqlite3_close(db);
  return out;
}

TEST(BsoHttp, ZeusClientBodiesStatusesAndErrorShape) {
  TempDir dir;
  Running server("sqlite://" + (dir.path() / "bso.db").string());
  auto c = client(server.port());
  auto body = job_body("");
  body["job_id"] = nullptr;  // Zeus's client lets the server name the job
  auto r = c.Post("/jobs", body.dump(), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 201) << r->body;
  const std::string id = json::parse(r->body)["job_id"];
  EXPECT_EQ(json::parse(r->body)["batch_sizes"], body["batch_sizes"]);
  r = c.Get(("/jobs/batch_size?job_id=" + id).c_str());
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200);
  const auto trial = json::parse(r->body);
  EXPECT_EQ(trial, (json{{"job_id", id}, {"batch_size", 128}, {"trial_number", 1}}));
  r = c.Post("/report", report_body(id, 128, 1, 10, true).dump(), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200);
  EXPECT_EQ(json::parse(r->body), (json{{"stop_train", true}, {"converged", true}, {"message", "Train succeeded"}}));
  // Re-reporting the finished trial: stop with the stored outcome.
  r = c.Post("/report", report_body(id, 128, 1, 99, false).dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(json::parse(r->body)["converged"], true);
  // The client's end-of-trial PATCH.
  r = c.Patch("/trials", trial.dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  // Errors are {"message": ...}.
  r = c.Get("/jobs/batch_size?job_id=nope");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_TRUE(json::parse(r->body).contains("message"));
  r = c.Patch("/trials", json{{"job_id", "nope"}, {"batch_size", 1}, {"trial_number", 1}}.dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  EXPECT_TRUE(json::parse(r->body).contains("message"));
  r = c.Delete(("/jobs?job_id=" + id).c_str());
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  r = c.Delete(("/jobs?job_id=" + id).c_str());
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  EXPECT_TRUE(json::parse(r->body).contains("message"));
}

TEST(BsoHttp, BadInputGetsItsStatusAndNeverTouchesTheJob) {
  TempDir dir;
  Running server("sqlite://" + (dir.path() / "bso.db").string());
  auto c = client(server.port());
  ASSERT_EQ(c.Post("/jobs", job_body("test-x").dump(), "application/json")->status, 201);
  ASSERT_EQ(c.Get("/jobs/batch_size?job_id=test-x")->status, 200);
  const auto before = column(dir.path() / "bso.db", "SELECT optimizer_state FROM Job");
  const std::vector<std::pair<std::string, int>> bodies = {
      {"{", 422},
      {"not json", 422},
      {R"({"job_id":"test-x","batch_size":128,"trial_number":1,"time":1,"energy":1,"metric":0.5})", 422},
      {R"({"job_id":"test-x","batch_size":"128","trial_number":1,"time":1,"energy":1,"metric":0.5,"current_epoch":1})",
       422},
      {R"({"job_id":"test-x","batch_size":128,"trial_number":1,"time":1,"energy":1,"metric":0.5,"current_epoch":1,"x":0})",
       422},
      {R"({"job_id":"nope","batch_size":128,"trial_number":1,"time":1,"energy":1,"metric":0.5,"current_epoch":1})",
       400},
      {R"({"job_id":"test-x","batch_size":128,"trial_number":7,"time":1,"energy":1,"metric":0.5,"current_epoch":1})",
       404},
      {std::string(1 << 20, ' '), 413},
  };
  for (const auto& [text, status] : bodies) {
    auto r = c.Post("/report", text, "application/json");
    ASSERT_TRUE(r) << text.substr(0, 80);
    EXPECT_EQ(r->status, status) << text.substr(0, 80) << " -> " << r->body;
  }
  // PATCH /trials: the same classes of bad input; unknown jobs and trials are 404 here.
  const std::vector<std::pair<std::string, int>> trial_ids = {
      {"", 422},
      {"[]", 422},
      {R"({"job_id":"test-x","batch_size":128})", 422},
      {R"({"job_id":"test-x","batch_size":128,"trial_number":1.0})", 422},
      {R"({"job_id":"test-x","batch_size":128,"trial_number":0})", 422},
      {R"({"job_id":"test-x","batch_size":128,"trial_number":1,"status":"Failed"})", 422},
      {R"({"job_id":"test-x","batch_size":64,"trial_number":1})", 404},
      {R"({"job_id":"test-x","batch_size":128,"trial_number":2})", 404},
      {R"({"job_id":"nope","batch_size":128,"trial_number":1})", 404},
      {std::string(1 << 20, '['), 413},
  };
  for (const auto& [text, status] : trial_ids) {
    auto r = c.Patch("/trials", text, "application/json");
    ASSERT_TRUE(r) << text.substr(0, 80);
    EXPECT_EQ(r->status, status) << text.substr(0, 80) << " -> " << r->body;
    if (status == 422) {
      // FastAPI's validation shape, which Zeus's client surfaces as is.
      const auto j = json::parse(r->body);
      ASSERT_TRUE(j["detail"].is_array()) << r->body;
      EXPECT_EQ(j["detail"][0]["loc"][0], "body");
      EXPECT_TRUE(j["detail"][0]["msg"].is_string());
      EXPECT_TRUE(j["detail"][0]["type"].is_string());
    } else if (status != 413) {
      EXPECT_TRUE(json::parse(r->body)["message"].is_string()) << r->body;
    }
  }
  // POST /jobs over the limit, and an existing id with an unknown field, change nothing either.
  auto r = c.Post("/jobs", std::string(1 << 20, 'x'), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 413);
  auto extra = job_body("test-x");
  extra["priority"] = 1;
  r = c.Post("/jobs", extra.dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 422);
  EXPECT_EQ(json::parse(r->body)["detail"][0]["loc"], (json{"body", "priority"}));
  // A query value that is not UTF-8 names no job, and the answer is still JSON.
  r = c.Get("/jobs/batch_size?job_id=test-x%FF");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_TRUE(json::parse(r->body)["message"].is_string());
  r = c.Delete("/jobs?job_id=%00");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  r = c.Get("/no/such/route");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  EXPECT_EQ(json::parse(r->body)["detail"], "Not Found");
  r = c.Get("/jobs/batch_size");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 422);
  EXPECT_EQ(json::parse(r->body)["detail"][0]["loc"], (json{"query", "job_id"}));
  EXPECT_EQ(column(dir.path() / "bso.db", "SELECT optimizer_state FROM Job"), before);
  EXPECT_EQ(column(dir.path() / "bso.db", "SELECT trial_number || ':' || status FROM Trial"),
            std::vector<std::string>{"1:Dispatched"});
  EXPECT_EQ(column(dir.path() / "bso.db", "SELECT COUNT(*) FROM Job"), std::vector<std::string>{"1"});
}

/// Clients run get_batch_size + report on one job through `ports` (round robin) until `reports`
/// reports were acknowledged; returns the trial numbers handed out.
std::vector<int> hammer(const std::vector<int>& ports, const std::string& job, int clients, int reports) {
  std::atomic<int> acknowledged{0};
  std::mutex mutex;
  std::vector<int> numbers;
  std::vector<std::thread> threads;
  for (int i = 0; i < clients; ++i) {
    threads.emplace_back([&, i] {
      auto c = client(ports[static_cast<std::size_t>(i) % ports.size()]);
      while (acknowledged.load() < reports) {
        auto g = c.Get(("/jobs/batch_size?job_id=" + job).c_str());
        if (!g || g->status != 200) {
          ADD_FAILURE() << (g ? g->body : "no answer");
          return;
        }
        const auto t = json::parse(g->body);
        {
          std::lock_guard lock(mutex);
          numbers.push_back(t["trial_number"]);
        }
        const double cost = 10.0 + (t["batch_size"].get<int>() % 7);
        auto r = c.Post("/report", report_body(job, t["batch_size"], t["trial_number"], cost, true).dump(),
                        "application/json");
        if (!r || r->status != 200) {
          ADD_FAILURE() << (r ? r->body : "no answer");
          return;
        }
        ++acknowledged;
      }
    });
  }
  for (auto& t : threads) t.join();
  return numbers;
}

/// One column of a query on the shared database, as text.
using Query = std::function<std::vector<std::string>(const std::string&)>;

void expect_consistent(const Query& column, const std::string& job, const std::vector<int>& handed_out) {
  // No duplicate trial number, none lost: the table holds exactly the numbers handed out.
  std::set<int> unique(handed_out.begin(), handed_out.end());
  EXPECT_EQ(unique.size(), handed_out.size()) << "a trial number was handed out twice";
  const auto rows = column("SELECT trial_number FROM Trial WHERE job_id = '" + job + "' ORDER BY trial_number");
  ASSERT_EQ(rows.size(), handed_out.size());
  for (std::size_t i = 0; i < rows.size(); ++i) EXPECT_EQ(rows[i], std::to_string(i + 1));
  // Every report landed: each handed-out trial finished (no lost update).
  EXPECT_EQ(column("SELECT COUNT(*) FROM Trial WHERE status = 'Succeeded' AND job_id = '" + job + "'"),
            std::vector<std::string>{std::to_string(handed_out.size())});
  // The optimizer's state agrees with the mirror.
  const auto state = json::parse(column("SELECT optimizer_state FROM Job WHERE job_id = '" + job + "'").at(0));
  EXPECT_EQ(state["trials"].size(), handed_out.size());
}

TEST(BsoHttp, ThirtyTwoClientsOnTwoServersSharingOneSqliteFile) {
  TempDir dir;
  const auto db = dir.path() / "bso.db";
  Running a("sqlite://" + db.string());
  Running b("sqlite://" + db.string());  // its own connection: serialization is SQLite's lock
  auto c = client(a.port());
  ASSERT_EQ(c.Post("/jobs", job_body("test-c").dump(), "application/json")->status, 201);
  const auto numbers = hammer({a.port(), b.port()}, "test-c", 32, 200);
  EXPECT_GE(numbers.size(), 200U);
  expect_consistent([&](const std::string& sql) { return column(db, sql); }, "test-c", numbers);
}

/// Forks a server on `url`; returns its pid and port.
std::pair<pid_t, int> fork_server(const std::string& url) {
  int fds[2];
  EXPECT_EQ(pipe(fds), 0);
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    auto s = open_store(url);
    if (!s) _exit(2);
    Service service(**s);
    auto h = HttpServer::bind(service, HttpOptions{});
    if (!h) _exit(3);
    const int port = (*h)->port();
    if (write(fds[1], &port, sizeof port) != sizeof port) _exit(4);
    close(fds[1]);
    (*h)->run();
    _exit(0);
  }
  close(fds[1]);
  int port = 0;
  EXPECT_EQ(read(fds[0], &port, sizeof port), static_cast<ssize_t>(sizeof port));
  close(fds[0]);
  return {pid, port};
}

TEST(BsoHttp, SigkillMidReportLosesNothingAndRestartContinuesTheSequence) {
  TempDir dir;
  const auto db = dir.path() / "bso.db";
  const std::string url = "sqlite://" + db.string();
  auto [pid, port] = fork_server(url);
  ASSERT_GT(pid, 0);
  {
    auto c = client(port);
    auto body = job_body("test-k");
    body["num_pruning_rounds"] = 1;
    ASSERT_EQ(c.Post("/jobs", body.dump(), "application/json")->status, 201);
  }
  // Eight clients report as fast as they can; the server dies under them.
  std::atomic<bool> stop{false};
  std::atomic<int> acknowledged{0};
  std::mutex mutex;
  std::map<int, bool> acked;  // trial number -> its report was acknowledged
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, p = port] {
      auto c = client(p);
      c.set_read_timeout(5);
      while (!stop) {
        auto g = c.Get("/jobs/batch_size?job_id=test-k");
        if (!g || g->status != 200) return;
        const auto t = json::parse(g->body);
        {
          std::lock_guard lock(mutex);
          acked[t["trial_number"]] = false;
        }
        auto r = c.Post("/report", report_body("test-k", t["batch_size"], t["trial_number"], 10, true).dump(),
                        "application/json");
        if (!r || r->status != 200) return;
        std::lock_guard lock(mutex);
        acked[t["trial_number"]] = true;
        ++acknowledged;
      }
    });
  }
  while (acknowledged < 100) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  stop = true;
  for (auto& t : threads) t.join();
  EXPECT_TRUE(WIFSIGNALED(status));

  // Every acknowledged answer is in the database; the mirror agrees with the optimizer's state.
  const auto state = json::parse(column(db, "SELECT optimizer_state FROM Job").at(0));
  std::map<int, std::string> status_of;
  for (const auto& t : state["trials"]) status_of[t["trial_number"]] = t["status"];
  for (const auto& [number, reported] : acked) {
    ASSERT_TRUE(status_of.contains(number)) << "trial " << number << " was handed out but is lost";
    if (reported) {
      EXPECT_EQ(status_of[number], "succeeded") << number;
    }
  }
  const auto rows = column(db, "SELECT trial_number || ':' || status FROM Trial ORDER BY trial_number");
  ASSERT_EQ(rows.size(), status_of.size());
  for (const auto& row : rows) {
    const int n = std::stoi(row.substr(0, row.find(':')));
    std::string table_status = row.substr(row.find(':') + 1);  // Zeus's enum: "Succeeded"
    table_status[0] = static_cast<char>(std::tolower(table_status[0]));
    EXPECT_EQ(table_status, status_of[n]) << n;
  }
  // The restarted server continues from the persisted state: its next batch size is what the
  // optimizer restored from the database predicts.
  auto expected = Optimizer::restore(state.dump());
  ASSERT_TRUE(expected) << expected.error().message;
  auto next = expected->predict();
  ASSERT_TRUE(next);
  auto [pid2, port2] = fork_server(url);
  auto c = client(port2);
  auto g = c.Get("/jobs/batch_size?job_id=test-k");
  ASSERT_TRUE(g);
  ASSERT_EQ(g->status, 200) << g->body;
  const auto t = json::parse(g->body);
  EXPECT_EQ(t["trial_number"], next->trial_number);
  EXPECT_EQ(t["batch_size"], next->batch_size);
  kill(pid2, SIGKILL);
  waitpid(pid2, &status, 0);
}

/// A client process killed after it got its batch size — a training job SIGKILLed (or its node
/// lost) before it could send its end-of-trial PATCH — leaves its trial Dispatched until the
/// trial timeout; then the next request on the job reads it Failed and pruning explores its
/// batch size again. `query` reads the database at `url`.
void killed_client_trial_fails_after_the_timeout(const std::string& url, const Query& query) {
  auto now = std::make_shared<std::atomic<long long>>(1893456000);  // 2030, settable
  ServiceOptions options;
  options.trial_timeout = std::chrono::seconds(600);
  options.clock = [now] { return std::chrono::system_clock::time_point(std::chrono::seconds(now->load())); };
  Running server(url, options);
  auto c = client(server.port());
  ASSERT_EQ(c.Post("/jobs", job_body("test-kill").dump(), "application/json")->status, 201);

  // The client: curl asks for the batch size, then the "training" runs until SIGKILL.
  TempDir dir;
  const auto answer = dir.path() / "trial.json";
  const std::string script = "curl -sS 'http://127.0.0.1:" + std::to_string(server.port()) +
                             "/jobs/batch_size?job_id=test-kill' > '" + answer.string() + ".part' && mv '" +
                             answer.string() + ".part' '" + answer.string() + "' && exec sleep 600";
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    execl("/bin/sh", "sh", "-c", script.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  while (!std::filesystem::exists(answer)) {
    ASSERT_EQ(waitpid(pid, &status, WNOHANG), 0) << "the client exited before it got its batch size";
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  std::ifstream in(answer);
  const auto trial = json::parse(in);
  EXPECT_EQ(trial, (json{{"job_id", "test-kill"}, {"batch_size", 128}, {"trial_number", 1}}));
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);

  // Within the timeout the trial is still running: another node's run of the job is concurrent.
  now->fetch_add(599);
  auto g = c.Get("/jobs/batch_size?job_id=test-kill");
  ASSERT_TRUE(g);
  ASSERT_EQ(g->status, 200) << g->body;
  EXPECT_EQ(json::parse(g->body), (json{{"job_id", "test-kill"}, {"batch_size", 128}, {"trial_number", 2}}));
  EXPECT_EQ(query("SELECT type || ':' || status FROM Trial ORDER BY trial_number"),
            (std::vector<std::string>{"Exploration:Dispatched", "Concurrent:Dispatched"}));
  // Past it: the next request fails trial 1 in its transaction, and explores 128 again.
  now->fetch_add(2);
  g = c.Get("/jobs/batch_size?job_id=test-kill");
  ASSERT_TRUE(g);
  ASSERT_EQ(g->status, 200) << g->body;
  EXPECT_EQ(json::parse(g->body), (json{{"job_id", "test-kill"}, {"batch_size", 128}, {"trial_number", 3}}));
  EXPECT_EQ(query("SELECT type || ':' || status FROM Trial ORDER BY trial_number"),
            (std::vector<std::string>{"Exploration:Failed", "Concurrent:Dispatched", "Exploration:Dispatched"}));
  // The killed client's report, had it come back, is one on a failed trial.
  auto r = c.Post("/report", report_body("test-kill", 128, 1, 10, true).dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400) << r->body;
}

TEST(BsoHttp, KilledClientsTrialIsFailedAfterTheTrialTimeoutSqlite) {
  TempDir dir;
  const auto db = dir.path() / "bso.db";
  killed_client_trial_fails_after_the_timeout("sqlite://" + db.string(),
                                              [&](const std::string& sql) { return column(db, sql); });
}

#ifdef ERG_BSO_POSTGRES
TEST(BsoHttp, KilledClientsTrialIsFailedAfterTheTrialTimeoutPostgres) {
  auto& pg = testing::Postgres::shared();
  ASSERT_EQ(pg.error(), "");
  const std::string url = pg.fresh_database();
  killed_client_trial_fails_after_the_timeout(
      url, [&](const std::string& sql) { return testing::Postgres::column(url, sql); });
}

TEST(BsoHttp, ThirtyTwoClientsOnTwoServerProcessesSharingOnePostgresDatabase) {
  auto& pg = testing::Postgres::shared();
  ASSERT_EQ(pg.error(), "");
  const std::string url = pg.fresh_database();
  // Two processes, each with its own connections: serialization is PostgreSQL's row lock.
  auto [pid_a, port_a] = fork_server(url);
  auto [pid_b, port_b] = fork_server(url);
  ASSERT_GT(port_a, 0);
  ASSERT_GT(port_b, 0);
  {
    auto c = client(port_a);
    auto r = c.Post("/jobs", job_body("test-pg").dump(), "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 201) << r->body;
  }
  const auto numbers = hammer({port_a, port_b}, "test-pg", 32, 200);
  EXPECT_GE(numbers.size(), 200U);
  expect_consistent([&](const std::string& sql) { return testing::Postgres::column(url, sql); }, "test-pg", numbers);
  for (pid_t pid : {pid_a, pid_b}) {
    kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
  }
}
#endif

}  // namespace
}  // namespace erg::batch_size::server
