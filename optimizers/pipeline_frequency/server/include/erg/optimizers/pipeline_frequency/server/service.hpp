#pragma once
/// The Perseus server of Zeus's pipeline-frequency optimizer (reference/zeus.md §6), free of HTTP:
/// each method takes a request's path value, query value or body and answers a status and a JSON
/// body. Methods may be called from any number of threads at once; get_schedule blocks.
///
/// A job goes: POST /register_job → every rank POSTs /register_rank (the scheduler is made when
/// the last of world_size = dp·pp·tp ranks registers) → rounds: every rank GETs /schedule (each
/// GET waits until all ranks asked for this round), then POSTs its /result; when all results are
/// in the scheduler observes them, and the next GETs are the next round. A rank must post its
/// result before asking again (409 otherwise).
///
/// Dead-rank rule: a GET /schedule waits at most `rank_timeout` for the other ranks. When one
/// waiter's wait runs out, the job is evicted: that GET and every other GET waiting on the job
/// answer 504 naming the ranks that had not asked for the round, and later requests on the job
/// id answer 404 (the training job re-registers when it restarts).
///
/// Errors are `{"message": "..."}`: 400 (a value out of range, a plan that does not fit the job),
/// 404 (unknown or evicted job), 409 (a request out of turn: registering a rank twice with other
/// values, asking twice without posting a result, posting a result twice or before the schedule),
/// 500 (the scheduler or the dump directory failed), 503 (the server is shutting down), 504
/// (dead rank, above). Bodies that are not JSON or have missing, mistyped or unknown fields answer
/// 422 with FastAPI's shape, `{"detail": [{"loc": [...], "msg": "...", "type": "..."}],
/// "message": "..."}`.

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "erg/core/result.hpp"
#include "erg/optimizers/http_guard.hpp"
#include "erg/optimizers/pipeline_frequency/planner.hpp"

namespace erg::pipeline_frequency::server {

struct Reply {
  int status = 200;
  std::string body;  ///< JSON text.
};

/// Zeus's JobInfo. job_id is ignored on input (the server names jobs, as Zeus does).
struct JobInfo {
  std::string job_id;
  int pp_degree = 1;
  int dp_degree = 1;
  int tp_degree = 1;
  int world_size = 1;  ///< Must equal dp·pp·tp.
  std::optional<std::string> job_metadata;
};

/// Zeus's RankInfo: where a rank sits and the SM clocks its GPU supports (MHz).
struct RankInfo {
  int rank = 0;
  int dp_rank = 0;
  int pp_rank = 0;
  int tp_rank = 0;
  std::vector<int> available_frequencies;
  bool operator==(const RankInfo&) const = default;
};

/// Zeus's FrequencySchedule: the (instruction, MHz) a rank runs, in its execution order.
struct FrequencySchedule {
  int rank = 0;
  std::vector<std::pair<std::string, int>> frequencies;
};

/// Zeus's ProfilingResult: per iteration time (s) and energy (J), and per instruction breakdowns
/// (Zeus's type, `dict[str, list[list[float]]]`). erg's shape of the breakdowns, which the online
/// scheduler requires while it profiles: keys "forward" and "backward"; per key one list per
/// iteration (parallel to iter_time), each holding that iteration's per-micro-batch values in
/// execution order — times in s (`time_breakdown`), GPU energies in J (`energy_breakdown`).
struct ProfilingResult {
  int rank = 0;
  std::vector<double> iter_time;
  std::vector<double> iter_energy;
  std::map<std::string, std::vector<std::vector<double>>> time_breakdown;
  std::map<std::string, std::vector<std::vector<double>>> energy_breakdown;
  /// erg's, not Zeus's (Zeus's server ignores it): how many of the instruction energies in
  /// `energy_breakdown` came from measurement windows shorter than about two updates of the GPU's
  /// energy counter (measure::GpuEnergy::short_window), i.e. are too coarse to profile from. In the
  /// JSON only when positive ("coarse_energy_windows"). The online scheduler refuses such results.
  int coarse_energy_windows = 0;
  /// erg's: how many of the instruction energies had their end edge extrapolated past the GPU
  /// counter's last update (measure::GpuEnergy::extrapolated > 0: a load change in that span is
  /// not in the figure). The step's own energy is settled and never counts. In the JSON only when
  /// positive ("extrapolated_energy_windows"); recorded, not refused.
  int extrapolated_energy_windows = 0;
};

/// Zeus's FrequencyScheduler: one schedule per rank each round, then that round's results.
class FrequencyScheduler {
 public:
  virtual ~FrequencyScheduler() = default;
  /// The next round's schedules, indexed by rank.
  virtual Result<std::vector<FrequencySchedule>> next_schedule() = 0;
  /// Every rank's result of the round just scheduled, indexed by rank. An error ends the job (the
  /// service evicts it and the last poster hears 500 with the message): a scheduler that cannot
  /// go on must not hand out a wrong schedule.
  virtual Result<void> observe(const std::vector<ProfilingResult>& results) = 0;
  /// Checked when a rank posts, before the result is accepted: a rejection for a result this
  /// scheduler cannot use (the service answers 422 naming the body's `field`; the rank may post
  /// again). Default: any result.
  struct Rejection {
    std::string field;
    std::string message;
  };
  virtual std::optional<Rejection> check_result(const ProfilingResult& result) const {
    (void)result;
    return std::nullopt;
  }
  /// The scheduler's state as JSON text, for GET /state and the dumps; "null" if it has none.
  virtual std::string state_json() const { return "null"; }
  /// A profile CSV (profiler.hpp's to_profile_csv) the scheduler built, for the dumps'
  /// `profile.csv`; nullopt when it has none (the point solutions; online before it plans).
  virtual std::optional<std::string> profile_csv() const { return std::nullopt; }
};

enum class SchedulerKind {
  kPointSolution,    ///< One plan entry per rank (#entries = world_size), repeated every round.
  kPointSolution3D,  ///< One entry per pipeline stage (#entries = pp_degree), copied to its dp/tp ranks.
  kOnline,           ///< Profiles during the first rounds, plans, then serves the plan (online_scheduler.hpp).
};
/// Zeus's class name: "PointSolution" or "PointSolution3D" (it appears in job ids); "Online".
std::string_view scheduler_name(SchedulerKind kind);

/// The online scheduler's settings (online_scheduler.hpp).
struct OnlineOptions {
  int micro_batches = 0;    ///< Per iteration; the stages are the job's pp_degree.
  double unit_s = 0.001;    ///< The planner's time unit.
  double p2p_power_w = 70;  ///< One GPU's power while blocked on P2P communication.
  /// Clocks to sweep (MHz); each must be available on every rank. Empty: the clocks every rank
  /// registered, highest first, every `frequency_step`-th one (starting at the highest).
  std::vector<int> frequencies_mhz;
  int frequency_step = 1;
  int stop_after_rises = 5;  ///< As SweepOptions (profiler.hpp); 0 sweeps every clock.
  /// Called with a line when a job's scheduler plans (or fails to); may be empty.
  std::function<void(const std::string&)> log;
};

struct SchedulerConfig {
  SchedulerKind kind = SchedulerKind::kPointSolution3D;
  StageFrequencies plan;  ///< The chosen plan (parse_plan); unused by kOnline.
  OnlineOptions online;   ///< kOnline only.
};

/// A plan as data: erg's plan JSON (`{"frequencies": [[["forward", MHz], ...] per stage], ...}`,
/// recognised by a leading `{`) or Zeus's `freqs_pipeline_NNNNN.py` (parse_zeus_plan_file).
/// kInvalidArgument says what is wrong.
Result<StageFrequencies> parse_plan(std::string_view text);

/// kInvalidArgument unless `config`'s plan has as many entries as the job needs.
Result<void> check_plan(const SchedulerConfig& config, const JobInfo& job);
/// The scheduler for a job whose ranks (indexed by rank) have all registered.
Result<std::unique_ptr<FrequencyScheduler>> make_scheduler(const SchedulerConfig& config, const JobInfo& job,
                                                           const std::vector<RankInfo>& ranks);
/// Zeus's 3-D-parallel aggregation: per pipeline stage, the iteration time is the slowest rank's
/// (max over its dp/tp ranks) and the energy the sum; breakdowns come from the stage's lowest
/// rank. Indexed by pp_rank; `rank` is the stage.
std::vector<ProfilingResult> aggregate_by_stage(const std::vector<ProfilingResult>& results,
                                                const std::vector<RankInfo>& ranks, int pp_degree);

/// A GET /schedule's default wait for the other ranks: ranks ask at start-up, and one may load a
/// large checkpoint minutes after the others; ten minutes covers that and still frees a crashed
/// job's waiting connections. Clients' read timeouts must be longer.
inline constexpr std::chrono::seconds kDefaultRankTimeout{600};
/// Zeus's max_job_idle_time: a week.
inline constexpr std::chrono::seconds kDefaultMaxJobIdle{7 * 24 * 3600};

using http_guard::Caller;

/// 16 hex digits from the kernel's random source (getrandom(2)).
std::string random_id_nonce();

struct ServiceOptions {
  SchedulerConfig scheduler;
  bool dump_data = false;  ///< Write ranks.json, {n}.prof.json, {n}.sched.json.
  /// Per job, a new folder directly under it that the server names (dump_folder_name); the
  /// dump_dir itself is created if missing.
  std::filesystem::path dump_dir = "dump";
  /// A job no request touched for longer is evicted (checked on every request and evict_idle()).
  /// Jobs with a waiting GET are never idle (their own rank_timeout ends them). Zero disables.
  std::chrono::seconds max_job_idle_time = kDefaultMaxJobIdle;
  std::chrono::milliseconds rank_timeout = kDefaultRankTimeout;  ///< The dead-rank rule's wait.
  /// Wall clock for job ids (local time) and idleness; tests substitute their own.
  std::function<std::chrono::system_clock::time_point()> clock = [] { return std::chrono::system_clock::now(); };
  /// A job id's unguessable part (docs/security.md): Zeus's id is the time and configuration
  /// only, so another local user could name a new job's id and take its ranks; erg adds
  /// "+" and this (default: 64 random bits in hex) before the job_metadata. Empty: Zeus's id.
  std::function<std::string()> id_nonce = random_id_nonce;
};

class Service {
 public:
  explicit Service(ServiceOptions options);
  ~Service();
  Service(const Service&) = delete;
  Service& operator=(const Service&) = delete;

  /// POST /register_job with a JobInfo: 200 and the job id as a JSON string,
  /// "%F-%H-%M-%S+dp{d}+pp{p}+tp{t}+{Scheduler}[+{job_metadata}]"; 400 the plan does not fit,
  /// 409 that id exists (same configuration in the same second), 422 invalid.
  /// The job belongs to the caller's local user when known: the calls below answer 403 to
  /// another local user (root excepted). A peer on another host has no uid: the job id, which
  /// no one can guess (ServiceOptions::id_nonce), is what lets it in.
  Reply register_job(std::string_view body, const Caller& caller = {});
  /// POST /register_rank/{job_id} with a RankInfo: 200 null; re-registering the same values is
  /// 200, other values 409.
  Reply register_rank(const std::string& job_id, std::string_view body, const Caller& caller = {});
  /// GET /schedule/{job_id}?rank=: 200 FrequencySchedule once every rank asked for this round.
  /// While it waits, `client_gone` (when given) is asked every 200 ms; once true the rank's ask
  /// is withdrawn (it may ask again) and the call returns 499.
  Reply get_schedule(const std::string& job_id, const std::optional<std::string>& rank,
                     const std::function<bool()>& client_gone = {}, const Caller& caller = {});
  /// POST /result/{job_id} with a ProfilingResult: 200 null; 422 when the scheduler cannot use
  /// the result (the online scheduler while profiling: breakdowns missing or of the wrong shape);
  /// 500 when the last result of a round makes the scheduler fail (the job is evicted).
  Reply post_result(const std::string& job_id, std::string_view body, const Caller& caller = {});
  /// GET /state/{job_id} (erg's, not Zeus's): 200 `{"job_id", "round", "scheduler": state}` —
  /// round is the latest round scheduled (−1 before the first), scheduler the scheduler's
  /// state_json() (null before every rank registered).
  Reply get_state(const std::string& job_id, const Caller& caller = {});

  /// Evicts jobs idle longer than max_job_idle_time; returns how many.
  std::size_t evict_idle();
  /// Whether a job id is known (not evicted).
  bool has_job(const std::string& job_id) const;
  /// Wakes every waiting GET with 503 and refuses new ones; for a server shutting down.
  void close();

 private:
  struct Job;
  std::size_t evict_idle_locked();
  void evict_locked(const std::string& job_id, std::shared_ptr<Job> job, Reply why);

  ServiceOptions options_;
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<Job>> jobs_;
  bool closed_ = false;
};

/// The name of a job's dump folder under ServiceOptions::dump_dir. The job id holds the client's
/// job_metadata, so it is never used as a path: the name is the id itself when the id is at most
/// 128 bytes of ASCII letters, digits and `._+-` not starting with '.' or '-' (every id without
/// metadata, and with such metadata); otherwise the id's first 128 bytes with every other byte
/// (and a leading '.' or '-') replaced by '_', then '~' and 8 hex digits of a hash of the whole id,
/// so ids that read alike keep apart. Always one path component: never empty, "." or "..", no
/// '/'. register_job makes the folder new: when a file, folder or link of that name exists, the
/// job gets "<name>~2", "<name>~3", …, and a dump file is never written through a link.
std::string dump_folder_name(std::string_view job_id);

/// `{"message": message}` with `status`.
Reply error_reply(int status, std::string_view message);
/// A 422 naming the field at `loc` ("body", then the field) as FastAPI does.
Reply validation_reply(std::string_view field, std::string_view message, std::string_view location = "body");

std::string to_json(const FrequencySchedule& schedule);
std::string to_json(const RankInfo& rank);
std::string to_json(const ProfilingResult& result);

}  // namespace erg::pipeline_frequency::server
