// The PostgreSQL store over libpqxx: a pool of connections, one READ COMMITTED transaction per
// request, and the job's row locked with SELECT ... FOR UPDATE before the optimizer is restored.
// Requests on one job — from the threads of one server or from several servers sharing the
// database — therefore queue on that row lock in PostgreSQL; requests on other jobs run in
// parallel. A lock held longer than lock_timeout answers kTimeout (503).

#include <mutex>
#include <optional>
#include <pqxx/pqxx>
#include <string>
#include <vector>

#include "erg/optimizers/batch_size/server/store.hpp"
#include "schema.hpp"

namespace erg::batch_size::server {
namespace {

using detail::JobState;

/// Idle connections kept for reuse; more are opened while requests overlap.
constexpr std::size_t kMaxIdle = 16;
/// Any transaction-level advisory lock id, taken while migrating so two servers starting on one
/// empty database do not both create the tables.
constexpr long long kMigrationLock = 0x6572'6762'736f;  // "ergbso"

Error to_error(const std::exception& e, const std::string& what) {
  if (dynamic_cast<const pqxx::broken_connection*>(&e) != nullptr)
    return Error{ErrorCode::kUnavailable, "postgresql: " + what + ": " + e.what()};
  if (const auto* sql = dynamic_cast<const pqxx::sql_error*>(&e)) {
    // 55P03 lock_not_available (lock_timeout), 40001 serialization, 40P01 deadlock, 57014 timeout.
    const std::string& state = sql->sqlstate();
    if (state == "55P03" || state == "40001" || state == "40P01" || state == "57014")
      return Error{ErrorCode::kTimeout, "postgresql: " + what + ": " + e.what()};
  }
  return Error{ErrorCode::kIo, "postgresql: " + what + ": " + e.what()};
}

/// A nullable parameter as libpq text (nullptr is SQL NULL).
const char* nullable(const std::optional<std::string>& v) { return v ? v->c_str() : nullptr; }
std::optional<std::string> text_of(const std::optional<double>& v) {
  return v ? std::optional<std::string>(pqxx::to_string(*v)) : std::nullopt;
}

class PostgresStore;

class PostgresTransaction final : public Transaction {
 public:
  PostgresTransaction(PostgresStore& store, std::unique_ptr<pqxx::connection> conn);
  ~PostgresTransaction() override;

  Result<std::optional<JobRecord>> load_job(std::string_view job_id) override try {
    const auto rows = work_->exec_params(
        "SELECT job_id_prefix, max_power, number_of_gpus, gpu_model, optimizer_state FROM Job WHERE job_id = $1"
        " FOR UPDATE",
        std::string(job_id));
    if (rows.empty()) return std::optional<JobRecord>();
    JobRecord job;
    job.job_id = std::string(job_id);
    job.job_id_prefix = rows[0][0].as<std::string>();
    job.max_power_w = rows[0][1].as<double>();
    job.number_of_gpus = rows[0][2].as<int>();
    job.gpu_model = rows[0][3].as<std::string>();
    job.optimizer_state = rows[0][4].as<std::string>();
    auto opt = Optimizer::restore(job.optimizer_state);
    if (!opt) return fail(ErrorCode::kInternal, "job " + job.job_id + ": " + opt.error().message);
    job.spec = opt->spec();
    return std::optional<JobRecord>(std::move(job));
  } catch (const std::exception& e) {
    return fail(broken(e, "load job"));
  }

  Result<void> insert_job(const JobRecord& job) override try {
    auto opt = Optimizer::restore(job.optimizer_state);
    if (!opt) return fail(opt.error());
    const JobState st = detail::job_state(*opt);
    const JobSpec& sp = job.spec;
    const auto seed = detail::seed_column(sp.mab_seed);
    const std::optional<std::string> seed_text =
        seed ? std::optional<std::string>(std::to_string(*seed)) : std::nullopt;
    const std::optional<std::string> rng = sp.mab_seed ? std::optional<std::string>(st.rng_state) : std::nullopt;
    // ON CONFLICT DO NOTHING: a duplicate id must not abort the transaction (a concurrent
    // register of the same id waits on the unique index, then inserts nothing).
    const auto r = work_->exec_params(
        "INSERT INTO Job (job_id, job_id_prefix, default_batch_size, higher_is_better_metric, eta_knob, beta_knob,"
        " target_metric, max_epochs, num_pruning_rounds, window_size, max_power, number_of_gpus, gpu_model,"
        " mab_prior_mean, mab_prior_precision, mab_num_explorations, mab_seed, mab_random_generator_state,"
        " exp_default_batch_size, stage, min_cost, min_cost_batch_size, optimizer_state)"
        " VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14,$15,$16,$17,$18,$19,$20,$21,$22,$23)"
        " ON CONFLICT (job_id) DO NOTHING",
        job.job_id, job.job_id_prefix, sp.default_batch_size, sp.higher_is_better_metric, sp.eta_knob,
        nullable(text_of(sp.beta_knob)), sp.target_metric, sp.max_epochs, sp.num_pruning_rounds, sp.window_size,
        job.max_power_w, job.number_of_gpus, job.gpu_model, sp.mab_prior_mean, sp.mab_prior_precision,
        sp.mab_num_explorations, nullable(seed_text), nullable(rng), st.exp_default_batch_size, st.stage,
        nullable(text_of(st.min_cost)), st.min_cost_batch_size, job.optimizer_state);
    if (r.affected_rows() == 0) return fail(ErrorCode::kAlreadyExists, "job " + job.job_id + " exists");
    for (int b : sp.batch_sizes)
      work_->exec_params("INSERT INTO BatchSize (job_id, batch_size) VALUES ($1, $2)", job.job_id, b);
    return ok();
  } catch (const std::exception& e) {
    return fail(broken(e, "insert job"));
  }

  Result<void> save_job(const JobRecord& job, const Optimizer& optimizer, const std::vector<int>& touched_trials,
                        std::string_view now_text) override try {
    const JobState st = detail::job_state(optimizer);
    const std::optional<std::string> rng =
        optimizer.spec().mab_seed ? std::optional<std::string>(st.rng_state) : std::nullopt;
    const auto r = work_->exec_params(
        "UPDATE Job SET mab_random_generator_state = $1, exp_default_batch_size = $2, stage = $3, min_cost = $4,"
        " min_cost_batch_size = $5, optimizer_state = $6 WHERE job_id = $7",
        nullable(rng), st.exp_default_batch_size, st.stage, nullable(text_of(st.min_cost)), st.min_cost_batch_size,
        job.optimizer_state, job.job_id);
    if (r.affected_rows() != 1) return fail(ErrorCode::kNotFound, "job " + job.job_id + " is gone");
    const std::string now(now_text);
    for (int number : touched_trials) {
      if (number < 1 || number > static_cast<int>(optimizer.trials().size())) continue;
      const Trial& t = optimizer.trials()[static_cast<std::size_t>(number - 1)];
      const std::optional<std::string> end =
          t.status == TrialStatus::kDispatched ? std::nullopt : std::optional<std::string>(now);
      const std::optional<std::string> converged =
          t.converged ? std::optional<std::string>(*t.converged ? "true" : "false") : std::nullopt;
      work_->exec_params(
          "INSERT INTO Trial (job_id, trial_number, batch_size, start_timestamp, type, status, end_timestamp, time,"
          " energy, converged, last_seen_timestamp) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$4)"
          " ON CONFLICT (job_id, trial_number) DO UPDATE SET status = excluded.status,"
          " end_timestamp = COALESCE(Trial.end_timestamp, excluded.end_timestamp), time = excluded.time,"
          " energy = excluded.energy, converged = excluded.converged,"
          " last_seen_timestamp = excluded.last_seen_timestamp",
          job.job_id, t.trial_number, t.batch_size, now, std::string(detail::trial_type_name(t.type)),
          std::string(detail::trial_status_name(t.status)), nullable(end), nullable(text_of(t.time_s)),
          nullable(text_of(t.energy_j)), nullable(converged));
    }
    if (const GaussianTs* mab = optimizer.mab()) {
      for (const auto& [arm, a] : mab->states()) {
        work_->exec_params(
            "INSERT INTO GaussianTsArmState (job_id, batch_size, param_mean, param_precision, reward_precision,"
            " num_observations) VALUES ($1,$2,$3,$4,$5,$6) ON CONFLICT (job_id, batch_size) DO UPDATE SET"
            " param_mean = excluded.param_mean, param_precision = excluded.param_precision,"
            " reward_precision = excluded.reward_precision, num_observations = excluded.num_observations",
            job.job_id, arm, a.param_mean, a.param_precision, a.reward_precision, a.num_observations);
      }
    }
    return ok();
  } catch (const std::exception& e) {
    return fail(broken(e, "save job"));
  }

  Result<std::vector<int>> stale_trials(std::string_view job_id, std::string_view seen_before) override try {
    // COLLATE "C": the timestamps compare byte by byte, whatever the database's collation.
    // Rows from schema version 1 have no last-seen time: their start time stands in for it.
    const auto rows = work_->exec_params(
        "SELECT trial_number FROM Trial WHERE job_id = $1 AND status = 'Dispatched'"
        " AND COALESCE(last_seen_timestamp, start_timestamp) COLLATE \"C\" < $2 ORDER BY trial_number",
        std::string(job_id), std::string(seen_before));
    std::vector<int> out;
    for (const auto& row : rows) out.push_back(row[0].as<int>());
    return out;
  } catch (const std::exception& e) {
    return fail(broken(e, "stale trials"));
  }

  Result<std::optional<JobAccess>> load_access(std::string_view job_id) override try {
    const auto rows =
        work_->exec_params("SELECT owner_uid, token_sha256 FROM erg_job_access WHERE job_id = $1", std::string(job_id));
    if (rows.empty()) return std::optional<JobAccess>();
    JobAccess a;
    if (!rows[0][0].is_null()) a.owner_uid = rows[0][0].as<std::int64_t>();
    a.token_sha256 = rows[0][1].as<std::string>();
    return std::optional<JobAccess>(std::move(a));
  } catch (const std::exception& e) {
    return fail(broken(e, "load job access"));
  }

  Result<void> save_access(std::string_view job_id, const JobAccess& access) override try {
    const std::optional<std::string> owner =
        access.owner_uid ? std::optional<std::string>(std::to_string(*access.owner_uid)) : std::nullopt;
    work_->exec_params(
        "INSERT INTO erg_job_access (job_id, owner_uid, token_sha256) VALUES ($1, $2, $3)"
        " ON CONFLICT (job_id) DO UPDATE SET owner_uid = EXCLUDED.owner_uid, token_sha256 = EXCLUDED.token_sha256",
        std::string(job_id), nullable(owner), access.token_sha256);
    return ok();
  } catch (const std::exception& e) {
    return fail(broken(e, "save job access"));
  }

  Result<bool> delete_job(std::string_view job_id) override try {
    const auto r = work_->exec_params("DELETE FROM Job WHERE job_id = $1", std::string(job_id));
    return r.affected_rows() > 0;
  } catch (const std::exception& e) {
    return fail(broken(e, "delete job"));
  }

  Result<void> commit() override try {
    work_->commit();
    return ok();
  } catch (const std::exception& e) {
    return fail(broken(e, "commit"));
  }

 private:
  /// The error, and the connection is not returned to the pool if it is broken.
  Error broken(const std::exception& e, const std::string& what) {
    if (dynamic_cast<const pqxx::broken_connection*>(&e) != nullptr) healthy_ = false;
    return to_error(e, what);
  }

  PostgresStore& store_;
  std::unique_ptr<pqxx::connection> conn_;
  std::optional<pqxx::work> work_;
  bool healthy_ = true;
};

class PostgresStore final : public Store {
 public:
  PostgresStore(std::string conninfo, int version) : conninfo_(std::move(conninfo)), version_(version) {}

  Result<std::unique_ptr<Transaction>> begin() override {
    std::unique_ptr<pqxx::connection> conn;
    {
      std::lock_guard lock(mutex_);
      if (!idle_.empty()) {
        conn = std::move(idle_.back());
        idle_.pop_back();
      }
    }
    try {
      if (!conn) conn = connect(conninfo_);
      return std::unique_ptr<Transaction>(std::make_unique<PostgresTransaction>(*this, std::move(conn)));
    } catch (const std::exception& e) {
      return fail(to_error(e, "begin"));
    }
  }
  [[nodiscard]] int schema_version() const override { return version_; }

  void give_back(std::unique_ptr<pqxx::connection> conn) {
    std::lock_guard lock(mutex_);
    if (idle_.size() < kMaxIdle) idle_.push_back(std::move(conn));
  }

  static std::unique_ptr<pqxx::connection> connect(const std::string& conninfo) {
    auto conn = std::make_unique<pqxx::connection>(conninfo);
    // A request waits at most this long for another request's lock on its job.
    pqxx::nontransaction(*conn).exec("SET lock_timeout = '10s'");
    return conn;
  }

 private:
  std::string conninfo_;
  int version_;
  std::mutex mutex_;
  std::vector<std::unique_ptr<pqxx::connection>> idle_;
};

PostgresTransaction::PostgresTransaction(PostgresStore& store, std::unique_ptr<pqxx::connection> conn)
    : store_(store), conn_(std::move(conn)) {
  work_.emplace(*conn_);
}

PostgresTransaction::~PostgresTransaction() {
  work_.reset();  // rolls back unless committed
  if (healthy_ && conn_->is_open()) store_.give_back(std::move(conn_));
}

}  // namespace

Result<std::unique_ptr<Store>> open_postgres_store(const std::string& conninfo) {
  try {
    auto conn = PostgresStore::connect(conninfo);
    pqxx::work w(*conn);
    w.exec_params("SELECT pg_advisory_xact_lock($1)", kMigrationLock);
    w.exec("CREATE TABLE IF NOT EXISTS erg_schema_version (version INTEGER NOT NULL)");
    const auto rows = w.exec("SELECT version FROM erg_schema_version");
    int version = rows.empty() ? 0 : rows[0][0].as<int>();
    if (rows.empty()) w.exec("INSERT INTO erg_schema_version (version) VALUES (0)");
    const auto steps = detail::migrations("DOUBLE PRECISION");
    if (version > static_cast<int>(steps.size()))
      return fail(ErrorCode::kUnavailable, "postgresql: the database has schema version " + std::to_string(version) +
                                               ", newer than this erg (" + std::to_string(steps.size()) + ")");
    for (; version < static_cast<int>(steps.size()); ++version) {
      w.exec(steps[static_cast<std::size_t>(version)]);
      w.exec_params("UPDATE erg_schema_version SET version = $1", version + 1);
    }
    w.commit();
    return std::unique_ptr<Store>(std::make_unique<PostgresStore>(conninfo, version));
  } catch (const std::exception& e) {
    return fail(ErrorCode::kUnavailable, to_error(e, "open").message);
  }
}

}  // namespace erg::batch_size::server
