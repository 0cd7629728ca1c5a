#pragma once
/// A minimal client of the Perseus server: what one rank of a training job calls. Not
/// thread-safe; use one per thread (each holds its own kept-alive connection).

#include <chrono>
#include <memory>
#include <string>

#include "erg/core/result.hpp"
#include "erg/optimizers/pipeline_frequency/server/service.hpp"

namespace erg::pipeline_frequency::server {

class Client {
 public:
  /// `read_timeout` must outlast the server's rank_timeout: get_schedule waits for every rank.
  Client(const std::string& host, int port,
         std::chrono::seconds read_timeout = kDefaultRankTimeout + std::chrono::seconds(60));
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  /// Errors map the server's status: 400/422 kInvalidArgument, 404 kNotFound, 409
  /// kAlreadyExists, 503 kUnavailable, 504 kTimeout (a dead rank), others kIo; a connection
  /// failure is kUnavailable. The message is the server's.
  Result<std::string> register_job(const JobInfo& job);
  Result<void> register_rank(const std::string& job_id, const RankInfo& rank);
  /// Blocks until every rank of the job asked for this round.
  Result<FrequencySchedule> get_schedule(const std::string& job_id, int rank);
  Result<void> post_result(const std::string& job_id, const ProfilingResult& result);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace erg::pipeline_frequency::server
