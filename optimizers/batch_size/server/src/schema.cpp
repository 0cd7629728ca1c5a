#include "schema.hpp"

#include <chrono>
#include <cstring>
#include <ctime>

namespace erg::batch_size::server::detail {

std::vector<std::string> migrations(const std::string& real) {
  // Version 1: Zeus's four tables (server/database/schema.py), plus optimizer_state.
  // Version 2: Trial.last_seen_timestamp (when the trial was dispatched or last reported), for
  // the trial timeout, and an index of each job's dispatched trials to find the stale ones.
  // Version 3: erg_job_access, who may write each job (its owner's uid, its secret's SHA-256).
  return {
      "CREATE TABLE Job ("
      " job_id VARCHAR(400) PRIMARY KEY,"
      " job_id_prefix VARCHAR(300) NOT NULL,"
      " default_batch_size INTEGER NOT NULL,"
      " higher_is_better_metric BOOLEAN NOT NULL,"
      " eta_knob " +
          real +
          " NOT NULL,"
          " beta_knob " +
          real +
          ","
          " target_metric " +
          real +
          " NOT NULL,"
          " max_epochs INTEGER NOT NULL,"
          " num_pruning_rounds INTEGER NOT NULL,"
          " window_size INTEGER NOT NULL,"
          " max_power " +
          real +
          " NOT NULL,"
          " number_of_gpus INTEGER NOT NULL,"
          " gpu_model VARCHAR(30) NOT NULL,"
          " mab_prior_mean " +
          real +
          " NOT NULL,"
          " mab_prior_precision " +
          real +
          " NOT NULL,"
          " mab_num_explorations INTEGER NOT NULL,"
          " mab_seed BIGINT,"
          " mab_random_generator_state VARCHAR(10000),"
          " exp_default_batch_size INTEGER NOT NULL,"
          " stage VARCHAR(10) NOT NULL CHECK (stage IN ('Pruning', 'MAB')),"
          " min_cost " +
          real +
          ","
          " min_cost_batch_size INTEGER NOT NULL,"
          " optimizer_state TEXT NOT NULL);"
          "CREATE TABLE BatchSize ("
          " job_id VARCHAR(400) NOT NULL REFERENCES Job(job_id) ON DELETE CASCADE,"
          " batch_size INTEGER NOT NULL,"
          " PRIMARY KEY (job_id, batch_size));"
          "CREATE TABLE GaussianTsArmState ("
          " job_id VARCHAR(400) NOT NULL,"
          " batch_size INTEGER NOT NULL,"
          " param_mean " +
          real +
          " NOT NULL,"
          " param_precision " +
          real +
          " NOT NULL,"
          " reward_precision " +
          real +
          " NOT NULL,"
          " num_observations INTEGER NOT NULL,"
          " PRIMARY KEY (job_id, batch_size),"
          " FOREIGN KEY (job_id, batch_size) REFERENCES BatchSize(job_id, batch_size) ON DELETE CASCADE);"
          "CREATE TABLE Trial ("
          " job_id VARCHAR(400) NOT NULL,"
          " trial_number INTEGER NOT NULL,"
          " batch_size INTEGER NOT NULL,"
          " start_timestamp VARCHAR(40) NOT NULL,"
          " type VARCHAR(12) NOT NULL CHECK (type IN ('Exploration', 'Concurrent', 'MAB')),"
          " status VARCHAR(12) NOT NULL CHECK (status IN ('Dispatched', 'Succeeded', 'Failed')),"
          " end_timestamp VARCHAR(40),"
          " time " +
          real +
          ","
          " energy " +
          real +
          ","
          " converged BOOLEAN,"
          " PRIMARY KEY (job_id, trial_number),"
          " FOREIGN KEY (job_id, batch_size) REFERENCES BatchSize(job_id, batch_size) ON DELETE CASCADE);",
      "ALTER TABLE Trial ADD COLUMN last_seen_timestamp VARCHAR(40);"
      "CREATE INDEX trial_dispatched ON Trial (job_id) WHERE status = 'Dispatched';",
      "CREATE TABLE erg_job_access ("
      " job_id VARCHAR(400) PRIMARY KEY REFERENCES Job(job_id) ON DELETE CASCADE,"
      " owner_uid BIGINT,"
      " token_sha256 VARCHAR(64) NOT NULL);",
  };
}

JobState job_state(const Optimizer& optimizer) {
  return JobState{
      .stage = optimizer.stage() == Stage::kMab ? "MAB" : "Pruning",
      .min_cost = optimizer.min_cost(),
      .min_cost_batch_size = optimizer.min_cost_batch_size(),
      .exp_default_batch_size = optimizer.explorer().default_batch_size(),
      .rng_state = optimizer.rng().state(),
  };
}

const char* trial_type_name(TrialType type) {
  switch (type) {
    case TrialType::kExploration: return "Exploration";
    case TrialType::kConcurrent: return "Concurrent";
    case TrialType::kMab: return "MAB";
  }
  return "Exploration";
}

const char* trial_status_name(TrialStatus status) {
  switch (status) {
    case TrialStatus::kDispatched: return "Dispatched";
    case TrialStatus::kSucceeded: return "Succeeded";
    case TrialStatus::kFailed: return "Failed";
  }
  return "Failed";
}

std::optional<std::int64_t> seed_column(const std::optional<std::uint64_t>& seed) {
  if (!seed) return std::nullopt;
  std::int64_t v = 0;
  std::memcpy(&v, &*seed, sizeof v);
  return v;
}

std::string now_iso8601() { return iso8601(std::chrono::system_clock::now()); }

std::string iso8601(std::chrono::system_clock::time_point now) {
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count();
  const std::time_t secs = static_cast<std::time_t>(us / 1000000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[64];
  const auto n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  std::snprintf(buf + n, sizeof buf - n, ".%06lldZ", static_cast<long long>(us % 1000000));
  return buf;
}

}  // namespace erg::batch_size::server::detail
