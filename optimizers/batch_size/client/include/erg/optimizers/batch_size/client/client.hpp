#pragma once
/// A client of the batch-size optimizer server's REST API (Zeus's, reference/zeus.md §5; erg's
/// server is `erg bso serve`, docs/bso-server.md): one method per request, over HTTP/1.1 with
/// cpp-httplib. The bodies are Zeus's JobSpecFromClient, TrialId and TrainingResult, so the same
/// client talks to Zeus's own server.
///
/// Errors name the request, the server's status and its message, e.g.
/// `POST /jobs: the server answered 409: Job 'x' exists with another configuration`, with the
/// code from the status: 400/413/422 kInvalidArgument, 404 kNotFound, 409 kAlreadyExists, 503
/// kUnavailable, 504 kTimeout, other statuses kIo. A server that cannot be reached is kUnavailable
/// (kTimeout when it stops answering).

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "erg/core/result.hpp"
#include "erg/core/units.hpp"
#include "erg/optimizers/batch_size/job_spec.hpp"
#include "erg/optimizers/batch_size/optimizer.hpp"

namespace erg::batch_size::client {

/// Zeus's JobSpec: who the job is, and the optimizer's parameters.
struct JobConfig {
  /// Must start with job_id_prefix; nullopt: the server makes one ("<prefix>-<8 hex digits>").
  std::optional<std::string> job_id;
  std::string job_id_prefix;
  JobSpec params;
};

/// The GPUs a job trains on (Zeus's GpuConfig): homogeneous, all of them together.
struct GpuConfig {
  Watts max_power;  ///< The GPUs' maximum power limits added up (the cost's max power).
  int number_of_gpus = 0;
  std::string gpu_model;
};

/// The job as the server registered it (Zeus's CreatedJob).
struct RegisteredJob {
  std::string job_id;
  JobConfig config;  ///< With the id and the batch sizes as the server keeps them (sorted).
  GpuConfig gpus;
  bool created = false;  ///< 201: new; false: 200, the same job was registered before.
};

/// One run of the job (Zeus's TrialId).
struct TrialId {
  std::string job_id;
  int batch_size = 0;
  int trial_number = 0;
  friend bool operator==(const TrialId&, const TrialId&) = default;
};

/// A trial's progress (Zeus's TrainingResult): cumulative since the trial started.
struct TrainingReport {
  TrialId trial;
  Seconds time{0.0};
  Joules energy;  ///< All the job's GPUs.
  double metric = 0;
  int current_epoch = 0;
};

struct ClientOptions {
  /// How long to wait for connecting and for each answer. A report is one database transaction
  /// (milliseconds); the server waits up to 10 s for a locked job before answering 503.
  std::chrono::milliseconds timeout{30'000};
  /// The secret to register jobs with and present on writes (X-Erg-Job-Token; docs/security.md):
  /// what a job's processes on other hosts share. Empty: the environment's ERG_BSO_JOB_TOKEN, or
  /// none, in which case the server's answer to the registration gives one this client keeps.
  std::string job_token;
};

/// Not thread-safe: one connection, kept alive between requests; use one Client per thread.
class Client {
 public:
  /// A client of the server at `url`: `http://HOST[:PORT]` (or https://) with an optional path prefix the
  /// routes are appended to. kInvalidArgument for another scheme or a malformed URL. Connects
  /// lazily, on the first request.
  static Result<Client> create(std::string_view url, ClientOptions options = {});
  Client(Client&&) noexcept;
  Client& operator=(Client&&) noexcept;
  ~Client();

  /// POST /jobs. kInvalidArgument (422) for a spec the server refuses; kAlreadyExists (409) for
  /// an id registered with another spec.
  Result<RegisteredJob> register_job(const JobConfig& job, const GpuConfig& gpus);
  /// GET /jobs/batch_size: the next trial of the job (a new trial number each call).
  Result<TrialId> get_batch_size(std::string_view job_id);
  /// POST /report: whether the trial goes on. kNotFound for an unknown trial; kInvalidArgument
  /// for an unknown job, a wrong batch size or a trial that was ended.
  Result<ReportResponse> report(const TrainingReport& report);
  /// PATCH /trials: a trial that is still out becomes Failed (a finished one stays as it is).
  /// kNotFound for an unknown job or trial.
  Result<void> end_trial(const TrialId& trial);
  /// DELETE /jobs. kNotFound for an unknown job.
  Result<void> delete_job(std::string_view job_id);

  /// The server's URL as given.
  [[nodiscard]] const std::string& url() const;

 private:
  struct Impl;
  explicit Client(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

/// The JSON body of POST /jobs (JobSpecFromClient, every field as Zeus sends it).
std::string job_body(const JobConfig& job, const GpuConfig& gpus);

}  // namespace erg::batch_size::client
