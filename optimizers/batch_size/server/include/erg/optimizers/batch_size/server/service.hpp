#pragma once
/// The batch-size optimizer service of Zeus's REST API (reference/zeus.md §5), free of HTTP: each
/// method takes a request's body or query value and answers a status and a JSON body. Every call
/// is one database transaction on the job it names, so calls may come from any number of threads
/// (and servers sharing the database) at once.
///
/// Errors are `{"message": "..."}` with 400 (bad operation, unknown job on GET /jobs/batch_size
/// and POST /report), 404 (unknown job or trial on PATCH /trials and DELETE /jobs), 409 (a job id
/// registered with a different spec), 500 (database). Request bodies that are not JSON, have
/// missing, mistyped or unknown fields, or values outside their ranges answer 422 with FastAPI's
/// shape, `{"detail": [{"loc": [...], "msg": "...", "type": "..."}], "message": "..."}`.

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "erg/optimizers/batch_size/server/store.hpp"
#include "erg/optimizers/http_guard.hpp"

namespace erg::batch_size::server {

struct Reply {
  int status = 200;
  std::string body;       ///< JSON text.
  std::string job_token;  ///< A new job's secret, for the X-Erg-Job-Token answer header.
};

/// How long a Dispatched trial may go without a report before the server marks it Failed: a
/// day. A trial reports after each evaluation (Zeus's client: each epoch), so a live trial is
/// silent for at most one epoch plus start-up; failing a live one costs that whole training run
/// (its next report answers 400), so the default is far above any epoch a recurring job has.
inline constexpr std::chrono::seconds kDefaultTrialTimeout{24 * 3600};

struct ServiceOptions {
  /// A Dispatched trial that was dispatched or last reported longer ago than this is marked
  /// Failed, exactly as PATCH /trials would mark it (a client killed before its end-of-trial
  /// PATCH). Checked in the transaction of every request on its job, so several servers on one
  /// database agree; their clocks should agree too (skew adds to the timeout). Zero disables.
  std::chrono::seconds trial_timeout = kDefaultTrialTimeout;
  /// The wall clock the timeout reads (tests substitute their own). Called from many threads.
  std::function<std::chrono::system_clock::time_point()> clock = [] { return std::chrono::system_clock::now(); };
  /// Lets any caller write any job (Zeus's server: no authentication). Off: a job is written only
  /// by root, the local user that registered it, or a request presenting its secret.
  bool allow_anonymous_writes = false;
};

using http_guard::Caller;

class Service {
 public:
  /// `store` must outlive the service.
  explicit Service(Store& store, ServiceOptions options = {}) : store_(store), options_(std::move(options)) {}

  /// POST /jobs with a JobSpecFromClient: 201 created, 200 the same job exists, 409 a job with
  /// this id and another spec exists, 422 invalid. The body answers the job with its id (a
  /// missing id becomes "<job_id_prefix>-<8 hex digits>"). A new job belongs to the caller's
  /// local user (if known) and gets a secret: the caller's token if it presented one, else a
  /// new one answered in Reply::job_token. A job without an owner (registered before erg kept
  /// them) is claimed by the first local user that registers it again.
  Reply register_job(std::string_view body, const Caller& caller = {});
  /// GET /jobs/batch_size?job_id=: the next trial, TrialId {job_id, batch_size, trial_number}.
  /// This and the calls below write the job: 403 unless the caller may (ServiceOptions).
  Reply get_batch_size(const std::optional<std::string>& job_id, const Caller& caller = {});
  /// POST /report with a TrainingResult: ReportResponse {stop_train, converged, message}.
  Reply report(std::string_view body, const Caller& caller = {});
  /// PATCH /trials with a TrialId: a still-dispatched trial becomes Failed.
  Reply end_trial(std::string_view body, const Caller& caller = {});
  /// DELETE /jobs?job_id=: 200, or 404 for an unknown job.
  Reply delete_job(const std::optional<std::string>& job_id, const Caller& caller = {});

 private:
  template <class Op>
  Reply with_job(const std::string& job_id, int unknown_job_status, const Caller& caller, Op op);
  /// 403 when `caller` may not write the job whose access record is `access`.
  std::optional<Reply> refuse_write(const Caller& caller, const std::optional<JobAccess>& access,
                                    const std::string& job_id) const;

  Store& store_;
  ServiceOptions options_;
};

/// `{"message": message}` with `status`.
Reply error_reply(int status, std::string_view message);
/// A 422 naming the field at `loc` (e.g. "body", "batch_sizes") as FastAPI does.
Reply validation_reply(std::string_view field, std::string_view message, std::string_view location = "body");

}  // namespace erg::batch_size::server
