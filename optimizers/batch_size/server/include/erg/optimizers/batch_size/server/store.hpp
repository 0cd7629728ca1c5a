#pragma once
/// Where the batch-size optimizer server keeps its jobs: one small interface, one implementation
/// per database (SQLite through its C API, PostgreSQL through libpqxx). Every request runs in one
/// database transaction that locks the job it touches, so concurrent requests — from the threads
/// of one server or from several servers sharing a database — are serialized in the database.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "erg/core/result.hpp"
#include "erg/optimizers/batch_size/optimizer.hpp"

namespace erg::batch_size::server {

/// A job as the server stores it: what the client registered, and the optimizer's whole state.
struct JobRecord {
  std::string job_id;
  std::string job_id_prefix;
  JobSpec spec;
  double max_power_w = 0;  ///< All the job's GPUs' maximum power limits together, W.
  int number_of_gpus = 0;
  std::string gpu_model;
  /// Optimizer::save_state() text: the source of truth the server restores each request from.
  /// The Trial, BatchSize and GaussianTsArmState tables mirror it for people and queries.
  std::string optimizer_state;
};

/// Who may write a job besides root (docs/security.md): the local user that registered it, and
/// whoever presents its secret. Jobs registered before erg kept owners (or by Zeus's own server
/// on a shared database) have none.
struct JobAccess {
  std::optional<std::int64_t> owner_uid;
  std::string token_sha256;  ///< SHA-256 of the job's secret, hex; empty: none.
  bool operator==(const JobAccess&) const = default;
};

/// One open transaction. Its locks last until commit() or destruction (which rolls back).
/// Not thread-safe: one request owns it.
class Transaction {
 public:
  virtual ~Transaction() = default;
  /// The job, locked until the end of the transaction; nullopt if there is none.
  virtual Result<std::optional<JobRecord>> load_job(std::string_view job_id) = 0;
  /// Inserts a new job and its batch sizes. kAlreadyExists if the id is taken.
  virtual Result<void> insert_job(const JobRecord& job) = 0;
  /// Writes the job's optimizer state back, with the trials numbered in `touched_trials`
  /// and every bandit arm mirrored into their tables. `now` (detail::iso8601) is the touched
  /// trials' last-seen time, and the start time of new ones.
  virtual Result<void> save_job(const JobRecord& job, const Optimizer& optimizer,
                                const std::vector<int>& touched_trials, std::string_view now) = 0;
  /// The numbers of the job's Dispatched trials last seen (dispatched or reported) before
  /// `seen_before` (detail::iso8601), in ascending order.
  virtual Result<std::vector<int>> stale_trials(std::string_view job_id, std::string_view seen_before) = 0;
  /// The job's access record (call after load_job, whose lock covers it); nullopt if none.
  virtual Result<std::optional<JobAccess>> load_access(std::string_view job_id) = 0;
  /// Sets the job's access record (the job must exist).
  virtual Result<void> save_access(std::string_view job_id, const JobAccess& access) = 0;
  /// Deletes the job and everything of it; false if there was none.
  virtual Result<bool> delete_job(std::string_view job_id) = 0;
  /// Makes the transaction durable (the database's fsync on commit).
  virtual Result<void> commit() = 0;
};

/// A database of jobs. Thread-safe: begin() may be called from many threads at once.
class Store {
 public:
  virtual ~Store() = default;
  /// Opens a transaction that may write (SQLite: BEGIN IMMEDIATE). kUnavailable / kTimeout
  /// when the database cannot be reached or stays locked.
  virtual Result<std::unique_ptr<Transaction>> begin() = 0;
  /// The schema version the database is at after migrations.
  [[nodiscard]] virtual int schema_version() const = 0;
};

/// The schema version this build migrates databases to.
inline constexpr int kSchemaVersion = 3;

/// Opens `url` — `sqlite:///absolute/path.db`, `sqlite://relative.db`, or
/// `postgresql://user@host:port/dbname` — creating or migrating its schema. kInvalidArgument for
/// an unknown scheme; kUnavailable when the database cannot be opened or is newer than this build.
Result<std::unique_ptr<Store>> open_store(std::string_view url);

/// SQLite at `path`; `pool` connections are kept open for concurrent requests.
Result<std::unique_ptr<Store>> open_sqlite_store(const std::string& path);
/// PostgreSQL at a libpq connection string (a `postgresql://` URL is one).
Result<std::unique_ptr<Store>> open_postgres_store(const std::string& conninfo);

}  // namespace erg::batch_size::server
