// The SQLite store: one connection, writes serialized twice — an in-process mutex (so threads
// do not spin on SQLite's busy handler) and BEGIN IMMEDIATE (so several processes on one file
// do). WAL with group commit: a transaction commits with synchronous=NORMAL (its WAL frames are
// written, not yet synced), releases the database, and then waits for an fsync of the WAL file
// that began after its commit; one fsync covers every transaction that committed before it
// started. So a request is on disk when it answers, as with synchronous=FULL, but concurrent
// requests share fsyncs and the next transaction runs while the last one's fsync is under way.

#include <fcntl.h>
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <string>
#include <type_traits>

#include "erg/optimizers/batch_size/server/store.hpp"
#include "schema.hpp"

namespace erg::batch_size::server {
namespace {

using detail::JobState;

class Db {
 public:
  explicit Db(sqlite3* db) : db_(db) {}
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;
  ~Db() {
    for (auto& [sql, stmt] : cache_) sqlite3_finalize(stmt);
    sqlite3_close_v2(db_);
  }

  Error error(const std::string& what) const {
    const int code = sqlite3_errcode(db_);
    const auto ec = (code == SQLITE_BUSY || code == SQLITE_LOCKED) ? ErrorCode::kTimeout : ErrorCode::kIo;
    return Error{ec, "sqlite: " + what + ": " + sqlite3_errmsg(db_)};
  }

  Result<void> exec(const std::string& sql) {
    char* msg = nullptr;
    if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &msg) != SQLITE_OK) {
      std::string m = msg ? msg : "";
      sqlite3_free(msg);
      return fail(error(m));
    }
    return ok();
  }

  /// A cached prepared statement, reset and with bindings cleared.
  Result<sqlite3_stmt*> prepare(const char* sql) {
    auto it = cache_.find(sql);
    if (it != cache_.end()) {
      sqlite3_reset(it->second);
      sqlite3_clear_bindings(it->second);
      return it->second;
    }
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v3(db_, sql, -1, SQLITE_PREPARE_PERSISTENT, &stmt, nullptr) != SQLITE_OK)
      return fail(error("prepare"));
    cache_.emplace(sql, stmt);
    return stmt;
  }

  sqlite3* get() const { return db_; }

 private:
  sqlite3* db_;
  std::map<const char*, sqlite3_stmt*> cache_;  // keyed by the literal's address
};

void bind_value(sqlite3_stmt* s, int i, int v) { sqlite3_bind_int(s, i, v); }
void bind_value(sqlite3_stmt* s, int i, double v) { sqlite3_bind_double(s, i, v); }
void bind_value(sqlite3_stmt* s, int i, bool v) { sqlite3_bind_int(s, i, v ? 1 : 0); }
void bind_value(sqlite3_stmt* s, int i, const std::string& v) {
  sqlite3_bind_text(s, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
}
void bind_value(sqlite3_stmt* s, int i, std::string_view v) {
  sqlite3_bind_text(s, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
}
template <class T>
void bind_value(sqlite3_stmt* s, int i, const std::optional<T>& v) {
  if (!v)
    sqlite3_bind_null(s, i);
  else if constexpr (std::is_same_v<T, std::int64_t>)
    sqlite3_bind_int64(s, i, *v);
  else
    bind_value(s, i, *v);
}

std::string text(sqlite3_stmt* s, int col) {
  const auto* p = sqlite3_column_text(s, col);
  return p ? std::string(reinterpret_cast<const char*>(p), sqlite3_column_bytes(s, col)) : std::string();
}

/// Group commit over the WAL file: transactions take a ticket once their COMMIT (or ROLLBACK)
/// returned and wait until an fsync that started after their ticket completed. The first waiter
/// that finds no fsync running does one for everybody waiting; the others sleep. Thread-safe.
class GroupSync {
 public:
  /// `wal_fd`: an open descriptor of the database's -wal file (owned; closed on destruction).
  explicit GroupSync(int wal_fd) : fd_(wal_fd) {}
  GroupSync(const GroupSync&) = delete;
  GroupSync& operator=(const GroupSync&) = delete;
  ~GroupSync() { ::close(fd_); }

  /// A ticket for writes (this process's, or another's that this one read) done before the call.
  std::uint64_t ticket() {
    std::lock_guard lock(mutex_);
    return ++issued_;
  }

  /// Returns once the writes before `ticket` are on disk. kIo if an fsync that began after them
  /// failed: after a failed fsync Linux may report a retry as successful although the pages were
  /// dropped, so every ticket the failed fsync covered fails, and only later ones may succeed.
  Result<void> wait(std::uint64_t ticket) {
    std::unique_lock lock(mutex_);
    while (true) {
      // Failure first: a later fsync's success says nothing of pages an earlier one dropped (and
      // a ticket already synced before the failure may be refused too: conservative, and rare).
      if (ticket <= failed_through_) return fail(ErrorCode::kIo, "sqlite: fsync of the WAL failed: " + failure_);
      if (synced_ >= ticket) return ok();
      if (syncing_) {
        cv_.wait(lock);
        continue;
      }
      syncing_ = true;
      const std::uint64_t target = issued_;
      lock.unlock();
      // fdatasync: the WAL's data and its size, as SQLite syncs it itself.
      const int rc = ::fdatasync(fd_);
      const int err = errno;
      lock.lock();
      syncing_ = false;
      if (rc == 0) {
        synced_ = std::max(synced_, target);
      } else {
        failed_through_ = std::max(failed_through_, target);
        failure_ = std::strerror(err);
      }
      cv_.notify_all();
    }
  }

 private:
  int fd_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::uint64_t issued_ = 0;
  std::uint64_t synced_ = 0;
  std::uint64_t failed_through_ = 0;
  std::string failure_;
  bool syncing_ = false;
};

class SqliteStore;

class SqliteTransaction final : public Transaction {
 public:
  SqliteTransaction(Db& db, GroupSync& sync, std::unique_lock<std::mutex> lock)
      : db_(db), sync_(sync), lock_(std::move(lock)) {}
  ~SqliteTransaction() override {
    if (done_) return;
    (void)db_.exec("ROLLBACK");
    // What this transaction read (another request's commit, maybe another server's) may not be
    // on disk yet: its answer waits for that too. An fsync error cannot be reported from here;
    // it only concerns an answer that changed nothing.
    const std::uint64_t t = sync_.ticket();
    lock_.unlock();
    (void)sync_.wait(t);
  }

  Result<std::optional<JobRecord>> load_job(std::string_view job_id) override {
    auto s = db_.prepare(
        "SELECT job_id_prefix, max_power, number_of_gpus, gpu_model, optimizer_state FROM Job WHERE job_id = ?");
    if (!s) return fail(s.error());
    bind_value(*s, 1, job_id);
    const int rc = sqlite3_step(*s);
    if (rc == SQLITE_DONE) return std::optional<JobRecord>();
    if (rc != SQLITE_ROW) return fail(db_.error("load job"));
    JobRecord job;
    job.job_id = std::string(job_id);
    job.job_id_prefix = text(*s, 0);
    job.max_power_w = sqlite3_column_double(*s, 1);
    job.number_of_gpus = sqlite3_column_int(*s, 2);
    job.gpu_model = text(*s, 3);
    job.optimizer_state = text(*s, 4);
    sqlite3_reset(*s);
    auto opt = Optimizer::restore(job.optimizer_state);
    if (!opt) return fail(ErrorCode::kInternal, "job " + job.job_id + ": " + opt.error().message);
    job.spec = opt->spec();
    return std::optional<JobRecord>(std::move(job));
  }

  Result<void> insert_job(const JobRecord& job) override {
    auto opt = Optimizer::restore(job.optimizer_state);
    if (!opt) return fail(opt.error());
    const JobState st = detail::job_state(*opt);
    auto s = db_.prepare(
        "INSERT INTO Job (job_id, job_id_prefix, default_batch_size, higher_is_better_metric, eta_knob, beta_knob,"
        " target_metric, max_epochs, num_pruning_rounds, window_size, max_power, number_of_gpus, gpu_model,"
        " mab_prior_mean, mab_prior_precision, mab_num_explorations, mab_seed, mab_random_generator_state,"
        " exp_default_batch_size, stage, min_cost, min_cost_batch_size, optimizer_state)"
        " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)");
    if (!s) return fail(s.error());
    const JobSpec& sp = job.spec;
    int i = 1;
    bind_value(*s, i++, job.job_id);
    bind_value(*s, i++, job.job_id_prefix);
    bind_value(*s, i++, sp.default_batch_size);
    bind_value(*s, i++, sp.higher_is_better_metric);
    bind_value(*s, i++, sp.eta_knob);
    bind_value(*s, i++, sp.beta_knob);
    bind_value(*s, i++, sp.target_metric);
    bind_value(*s, i++, sp.max_epochs);
    bind_value(*s, i++, sp.num_pruning_rounds);
    bind_value(*s, i++, sp.window_size);
    bind_value(*s, i++, job.max_power_w);
    bind_value(*s, i++, job.number_of_gpus);
    bind_value(*s, i++, job.gpu_model);
    bind_value(*s, i++, sp.mab_prior_mean);
    bind_value(*s, i++, sp.mab_prior_precision);
    bind_value(*s, i++, sp.mab_num_explorations);
    bind_value(*s, i++, detail::seed_column(sp.mab_seed));
    bind_value(*s, i++, sp.mab_seed ? std::optional<std::string>(st.rng_state) : std::nullopt);
    bind_value(*s, i++, st.exp_default_batch_size);
    bind_value(*s, i++, st.stage);
    bind_value(*s, i++, st.min_cost);
    bind_value(*s, i++, st.min_cost_batch_size);
    bind_value(*s, i++, job.optimizer_state);
    const int rc = sqlite3_step(*s);
    if (rc == SQLITE_CONSTRAINT) return fail(ErrorCode::kAlreadyExists, "job " + job.job_id + " exists");
    if (rc != SQLITE_DONE) return fail(db_.error("insert job"));
    for (int b : sp.batch_sizes) {
      auto bs = db_.prepare("INSERT INTO BatchSize (job_id, batch_size) VALUES (?, ?)");
      if (!bs) return fail(bs.error());
      bind_value(*bs, 1, job.job_id);
      bind_value(*bs, 2, b);
      if (sqlite3_step(*bs) != SQLITE_DONE) return fail(db_.error("insert batch size"));
    }
    return ok();
  }

  Result<void> save_job(const JobRecord& job, const Optimizer& optimizer, const std::vector<int>& touched_trials,
                        std::string_view now_text) override {
    const JobState st = detail::job_state(optimizer);
    auto s = db_.prepare(
        "UPDATE Job SET mab_random_generator_state = ?, exp_default_batch_size = ?, stage = ?, min_cost = ?,"
        " min_cost_batch_size = ?, optimizer_state = ? WHERE job_id = ?");
    if (!s) return fail(s.error());
    bind_value(*s, 1, optimizer.spec().mab_seed ? std::optional<std::string>(st.rng_state) : std::nullopt);
    bind_value(*s, 2, st.exp_default_batch_size);
    bind_value(*s, 3, st.stage);
    bind_value(*s, 4, st.min_cost);
    bind_value(*s, 5, st.min_cost_batch_size);
    bind_value(*s, 6, job.optimizer_state);
    bind_value(*s, 7, job.job_id);
    if (sqlite3_step(*s) != SQLITE_DONE) return fail(db_.error("update job"));
    if (sqlite3_changes(db_.get()) != 1) return fail(ErrorCode::kNotFound, "job " + job.job_id + " is gone");
    const std::string now(now_text);
    for (int number : touched_trials) {
      if (number < 1 || number > static_cast<int>(optimizer.trials().size())) continue;
      const Trial& t = optimizer.trials()[static_cast<std::size_t>(number - 1)];
      auto u = db_.prepare(
          "INSERT INTO Trial (job_id, trial_number, batch_size, start_timestamp, type, status, end_timestamp, time,"
          " energy, converged, last_seen_timestamp) VALUES (?,?,?,?,?,?,?,?,?,?,?)"
          " ON CONFLICT (job_id, trial_number) DO UPDATE SET status = excluded.status,"
          " end_timestamp = COALESCE(Trial.end_timestamp, excluded.end_timestamp), time = excluded.time,"
          " energy = excluded.energy, converged = excluded.converged,"
          " last_seen_timestamp = excluded.last_seen_timestamp");
      if (!u) return fail(u.error());
      bind_value(*u, 1, job.job_id);
      bind_value(*u, 2, t.trial_number);
      bind_value(*u, 3, t.batch_size);
      bind_value(*u, 4, now);
      bind_value(*u, 5, std::string(detail::trial_type_name(t.type)));
      bind_value(*u, 6, std::string(detail::trial_status_name(t.status)));
      bind_value(*u, 7, t.status == TrialStatus::kDispatched ? std::nullopt : std::optional<std::string>(now));
      bind_value(*u, 8, t.time_s);
      bind_value(*u, 9, t.energy_j);
      bind_value(*u, 10, t.converged);
      bind_value(*u, 11, now);
      if (sqlite3_step(*u) != SQLITE_DONE) return fail(db_.error("upsert trial"));
    }
    if (const GaussianTs* mab = optimizer.mab()) {
      for (const auto& [arm, a] : mab->states()) {
        auto u = db_.prepare(
            "INSERT INTO GaussianTsArmState (job_id, batch_size, param_mean, param_precision, reward_precision,"
            " num_observations) VALUES (?,?,?,?,?,?) ON CONFLICT (job_id, batch_size) DO UPDATE SET"
            " param_mean = excluded.param_mean, param_precision = excluded.param_precision,"
            " reward_precision = excluded.reward_precision, num_observations = excluded.num_observations");
        if (!u) return fail(u.error());
        bind_value(*u, 1, job.job_id);
        bind_value(*u, 2, arm);
        bind_value(*u, 3, a.param_mean);
        bind_value(*u, 4, a.param_precision);
        bind_value(*u, 5, a.reward_precision);
        bind_value(*u, 6, a.num_observations);
        if (sqlite3_step(*u) != SQLITE_DONE) return fail(db_.error("upsert arm"));
      }
    }
    return ok();
  }

  Result<std::vector<int>> stale_trials(std::string_view job_id, std::string_view seen_before) override {
    // Rows from schema version 1 have no last-seen time: their start time stands in for it.
    auto s = db_.prepare(
        "SELECT trial_number FROM Trial WHERE job_id = ? AND status = 'Dispatched'"
        " AND COALESCE(last_seen_timestamp, start_timestamp) < ? ORDER BY trial_number");
    if (!s) return fail(s.error());
    bind_value(*s, 1, job_id);
    bind_value(*s, 2, seen_before);
    std::vector<int> out;
    int rc = SQLITE_ROW;
    while ((rc = sqlite3_step(*s)) == SQLITE_ROW) out.push_back(sqlite3_column_int(*s, 0));
    if (rc != SQLITE_DONE) return fail(db_.error("stale trials"));
    sqlite3_reset(*s);
    return out;
  }

  Result<std::optional<JobAccess>> load_access(std::string_view job_id) override {
    auto s = db_.prepare("SELECT owner_uid, token_sha256 FROM erg_job_access WHERE job_id = ?");
    if (!s) return fail(s.error());
    bind_value(*s, 1, job_id);
    const int rc = sqlite3_step(*s);
    if (rc == SQLITE_DONE) return std::optional<JobAccess>();
    if (rc != SQLITE_ROW) return fail(db_.error("load job access"));
    JobAccess a;
    if (sqlite3_column_type(*s, 0) != SQLITE_NULL) a.owner_uid = sqlite3_column_int64(*s, 0);
    a.token_sha256 = text(*s, 1);
    sqlite3_reset(*s);
    return std::optional<JobAccess>(std::move(a));
  }

  Result<void> save_access(std::string_view job_id, const JobAccess& access) override {
    auto s = db_.prepare("INSERT OR REPLACE INTO erg_job_access (job_id, owner_uid, token_sha256) VALUES (?,?,?)");
    if (!s) return fail(s.error());
    bind_value(*s, 1, job_id);
    if (access.owner_uid)
      sqlite3_bind_int64(*s, 2, *access.owner_uid);
    else
      sqlite3_bind_null(*s, 2);
    bind_value(*s, 3, std::string_view(access.token_sha256));
    if (sqlite3_step(*s) != SQLITE_DONE) return fail(db_.error("save job access"));
    sqlite3_reset(*s);
    return ok();
  }

  Result<bool> delete_job(std::string_view job_id) override {
    auto s = db_.prepare("DELETE FROM Job WHERE job_id = ?");
    if (!s) return fail(s.error());
    bind_value(*s, 1, job_id);
    if (sqlite3_step(*s) != SQLITE_DONE) return fail(db_.error("delete job"));
    return sqlite3_changes(db_.get()) > 0;
  }

  Result<void> commit() override {
    auto r = db_.exec("COMMIT");
    if (!r) return r;
    done_ = true;
    const std::uint64_t t = sync_.ticket();
    lock_.unlock();  // the next transaction runs while this one's fsync is under way
    return sync_.wait(t);
  }

 private:
  Db& db_;
  GroupSync& sync_;
  std::unique_lock<std::mutex> lock_;
  bool done_ = false;
};

class SqliteStore final : public Store {
 public:
  SqliteStore(std::unique_ptr<Db> db, int wal_fd, int version) : db_(std::move(db)), sync_(wal_fd), version_(version) {}

  Result<std::unique_ptr<Transaction>> begin() override {
    std::unique_lock lock(mutex_);
    if (auto r = db_->exec("BEGIN IMMEDIATE"); !r) return fail(r.error());
    return std::unique_ptr<Transaction>(std::make_unique<SqliteTransaction>(*db_, sync_, std::move(lock)));
  }
  [[nodiscard]] int schema_version() const override { return version_; }

 private:
  std::mutex mutex_;
  std::unique_ptr<Db> db_;
  GroupSync sync_;
  int version_;
};

/// SQLite's busy handler: retry every millisecond for up to 10 s. A server that commits back to
/// back (its own threads queued on its mutex) frees the write lock only for the moment between
/// two transactions; SQLite's default handler sleeps up to 100 ms between tries and so can miss
/// every such moment for its whole timeout (seen: a second server on the file starved past 10 s
/// on a loaded machine). Trying often catches them. The time is counted from the first try.
int retry_while_busy(void* /*unused*/, int tries) {
  thread_local std::chrono::steady_clock::time_point since;
  const auto now = std::chrono::steady_clock::now();
  if (tries == 0) since = now;
  if (now - since >= std::chrono::seconds(10)) return 0;
  sqlite3_sleep(1);
  return 1;
}

/// fsyncs the directory holding `file`, so a file just created there survives a power loss.
Result<void> sync_directory(const std::string& file) {
  auto dir = std::filesystem::path(file).parent_path();
  if (dir.empty()) dir = ".";
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return fail(ErrorCode::kUnavailable, "cannot open " + dir.string() + ": " + std::strerror(errno));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) return fail(ErrorCode::kUnavailable, "cannot fsync " + dir.string() + ": " + std::strerror(err));
  return ok();
}

}  // namespace

Result<std::unique_ptr<Store>> open_sqlite_store(const std::string& path) {
  sqlite3* raw = nullptr;
  const int rc =
      sqlite3_open_v2(path.c_str(), &raw, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  auto db = std::make_unique<Db>(raw);
  if (rc != SQLITE_OK) return fail(ErrorCode::kUnavailable, "sqlite: cannot open " + path + ": " + sqlite3_errstr(rc));
  // Another process (a second server on the file) may hold the write lock for a while.
  sqlite3_busy_handler(raw, retry_while_busy, nullptr);
  for (const char* pragma : {"PRAGMA journal_mode = WAL", "PRAGMA synchronous = FULL", "PRAGMA foreign_keys = ON"}) {
    if (auto r = db->exec(pragma); !r) return fail(ErrorCode::kUnavailable, r.error().message);
  }
  if (auto r = db->exec("BEGIN IMMEDIATE"); !r) return fail(ErrorCode::kUnavailable, r.error().message);
  auto v = db->prepare("PRAGMA user_version");
  if (!v || sqlite3_step(*v) != SQLITE_ROW) return fail(ErrorCode::kUnavailable, "sqlite: cannot read user_version");
  int version = sqlite3_column_int(*v, 0);
  sqlite3_reset(*v);
  const auto steps = detail::migrations("REAL");
  if (version > static_cast<int>(steps.size())) {
    (void)db->exec("ROLLBACK");
    return fail(ErrorCode::kUnavailable, "sqlite: " + path + " has schema version " + std::to_string(version) +
                                             ", newer than this erg (" + std::to_string(steps.size()) + ")");
  }
  for (; version < static_cast<int>(steps.size()); ++version) {
    if (auto r = db->exec(steps[static_cast<std::size_t>(version)]); !r) {
      (void)db->exec("ROLLBACK");
      return fail(ErrorCode::kUnavailable, "migration " + std::to_string(version + 1) + ": " + r.error().message);
    }
    if (auto r = db->exec("PRAGMA user_version = " + std::to_string(version + 1)); !r) return fail(r.error());
  }
  if (auto r = db->exec("COMMIT"); !r) return fail(ErrorCode::kUnavailable, r.error().message);
  // From here commits are synced by GroupSync (see the top of this file): SQLite writes the WAL
  // without syncing it, and every request waits for an fsync of the WAL before it answers. The
  // -wal file exists while a connection (this one) is open, so the descriptor stays valid; the
  // directory is synced once so a -wal file created just now is found after a power loss.
  const std::string wal = path + "-wal";
  const int wal_fd = ::open(wal.c_str(), O_RDWR | O_CLOEXEC);
  if (wal_fd < 0) return fail(ErrorCode::kUnavailable, "sqlite: cannot open " + wal + ": " + std::strerror(errno));
  if (auto r = sync_directory(wal); !r) {
    ::close(wal_fd);
    return fail(r.error());
  }
  if (auto r = db->exec("PRAGMA synchronous = NORMAL"); !r) {
    ::close(wal_fd);
    return fail(ErrorCode::kUnavailable, r.error().message);
  }
  return std::unique_ptr<Store>(std::make_unique<SqliteStore>(std::move(db), wal_fd, version));
}

Result<std::unique_ptr<Store>> open_store(std::string_view url) {
  constexpr std::string_view kSqlite = "sqlite://";
  if (url.starts_with(kSqlite)) {
    std::string path(url.substr(kSqlite.size()));
    if (path.empty()) return fail(ErrorCode::kInvalidArgument, "sqlite:// URL without a path");
    return open_sqlite_store(path);
  }
  if (url.starts_with("postgresql://") || url.starts_with("postgres://")) return open_postgres_store(std::string(url));
  return fail(ErrorCode::kInvalidArgument,
              "database URL must start with sqlite:// or postgresql://: " + std::string(url));
}

}  // namespace erg::batch_size::server
