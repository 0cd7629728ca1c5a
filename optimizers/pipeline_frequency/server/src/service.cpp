#include "erg/optimizers/pipeline_frequency/server/service.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <nlohmann/json.hpp>
#include <set>
#include <system_error>

#include "erg/optimizers/http_guard.hpp"

namespace erg::pipeline_frequency::server {

using json = nlohmann::json;

/// One job's state; guarded by Service::mu_.
struct Service::Job {
  JobInfo info;
  std::vector<std::optional<RankInfo>> ranks;  ///< Indexed by rank.
  int registered = 0;
  std::unique_ptr<FrequencyScheduler> scheduler;        ///< Made when the last rank registers.
  std::vector<int> asked;                               ///< Per rank: GETs so far (its next round).
  std::vector<bool> waiting;                            ///< Per rank: a GET of it is waiting.
  int round = -1;                                       ///< The latest round whose schedules exist.
  std::vector<FrequencySchedule> schedules;             ///< Of `round`.
  std::vector<std::optional<ProfilingResult>> results;  ///< Of `round`.
  int result_count = 0;
  int waiters = 0;
  std::optional<Reply> failure;  ///< Set when evicted: what its waiting GETs answer.
  std::chrono::system_clock::time_point last_seen;
  std::filesystem::path dump;  ///< Its dump folder, made new at registration; empty when not dumping.
  std::condition_variable cv;
  std::optional<std::uint32_t> owner;  ///< The local user that registered it, when known.
};

namespace {

std::string answer_text(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

/// A body's field that is missing, mistyped or out of range, for a 422.
struct Invalid {
  std::string field;
  std::string message;
};

std::optional<Invalid> only_fields(const json& j, std::initializer_list<std::string_view> known) {
  for (const auto& [key, value] : j.items())
    if (std::find(known.begin(), known.end(), key) == known.end()) return Invalid{key, "extra fields not permitted"};
  return std::nullopt;
}

std::optional<Invalid> get_int(const json& j, const char* key, int& out, bool required = true) {
  if (!j.contains(key)) return required ? std::optional<Invalid>(Invalid{key, "field required"}) : std::nullopt;
  const auto& v = j[key];
  if (!v.is_number_integer() || v.get<long long>() < INT32_MIN || v.get<long long>() > INT32_MAX)
    return Invalid{key, "value is not a valid integer"};
  out = v.get<int>();
  return std::nullopt;
}

std::optional<Invalid> get_numbers(const json& j, const char* key, std::vector<double>& out) {
  if (!j.contains(key)) return Invalid{key, "field required"};
  if (!j[key].is_array()) return Invalid{key, "value is not a valid list"};
  for (const auto& v : j[key]) {
    if (!v.is_number()) return Invalid{key, "value is not a valid float"};
    out.push_back(v.get<double>());
  }
  return std::nullopt;
}

std::optional<Invalid> get_breakdown(const json& j, const char* key,
                                     std::map<std::string, std::vector<std::vector<double>>>& out) {
  if (!j.contains(key)) return std::nullopt;  // Zeus defaults both breakdowns to {}.
  if (!j[key].is_object()) return Invalid{key, "value is not a valid dict"};
  for (const auto& [instruction, lists] : j[key].items()) {
    if (!lists.is_array()) return Invalid{key, "value is not a valid list"};
    auto& o = out[instruction];
    for (const auto& list : lists) {
      if (!list.is_array()) return Invalid{key, "value is not a valid list"};
      auto& row = o.emplace_back();
      for (const auto& v : list) {
        if (!v.is_number()) return Invalid{key, "value is not a valid float"};
        row.push_back(v.get<double>());
      }
    }
  }
  return std::nullopt;
}

template <class T>
using Parsed = tl::expected<T, Invalid>;

Parsed<json> object_body(std::string_view body) {
  json j = json::parse(body, nullptr, false);
  if (j.is_discarded()) return tl::unexpected(Invalid{"body", "not valid JSON"});
  if (!j.is_object()) return tl::unexpected(Invalid{"body", "value is not a valid dict"});
  return j;
}

#define ERG_PF_CHECK(expr) \
  if (auto bad = (expr)) return tl::unexpected(*bad)

Parsed<JobInfo> parse_job(std::string_view body) {
  auto j = object_body(body);
  if (!j) return tl::unexpected(j.error());
  JobInfo job;
  ERG_PF_CHECK(only_fields(*j, {"job_id", "pp_degree", "dp_degree", "tp_degree", "world_size", "job_metadata"}));
  if (j->contains("job_id") && !(*j)["job_id"].is_string())
    return tl::unexpected(Invalid{"job_id", "str type expected"});
  ERG_PF_CHECK(get_int(*j, "pp_degree", job.pp_degree));
  ERG_PF_CHECK(get_int(*j, "dp_degree", job.dp_degree));
  ERG_PF_CHECK(get_int(*j, "tp_degree", job.tp_degree));
  ERG_PF_CHECK(get_int(*j, "world_size", job.world_size));
  if (j->contains("job_metadata") && !(*j)["job_metadata"].is_null()) {
    if (!(*j)["job_metadata"].is_string()) return tl::unexpected(Invalid{"job_metadata", "str type expected"});
    job.job_metadata = (*j)["job_metadata"].get<std::string>();
  }
  for (auto [name, v] : {std::pair{"pp_degree", job.pp_degree}, std::pair{"dp_degree", job.dp_degree},
                         std::pair{"tp_degree", job.tp_degree}})
    if (v < 1) return tl::unexpected(Invalid{name, "must be at least 1"});
  // Bounded so the product cannot overflow and one request cannot ask for millions of ranks.
  if (static_cast<long long>(job.pp_degree) * job.dp_degree * job.tp_degree > 65536)
    return tl::unexpected(Invalid{"world_size", "dp_degree * pp_degree * tp_degree must be at most 65536"});
  if (job.world_size != job.pp_degree * job.dp_degree * job.tp_degree)
    return tl::unexpected(Invalid{"world_size", "must equal dp_degree * pp_degree * tp_degree"});
  return job;
}

Parsed<RankInfo> parse_rank(std::string_view body) {
  auto j = object_body(body);
  if (!j) return tl::unexpected(j.error());
  RankInfo r;
  ERG_PF_CHECK(only_fields(*j, {"rank", "dp_rank", "pp_rank", "tp_rank", "available_frequencies"}));
  ERG_PF_CHECK(get_int(*j, "rank", r.rank));
  ERG_PF_CHECK(get_int(*j, "dp_rank", r.dp_rank));
  ERG_PF_CHECK(get_int(*j, "pp_rank", r.pp_rank));
  ERG_PF_CHECK(get_int(*j, "tp_rank", r.tp_rank));
  if (!j->contains("available_frequencies")) return tl::unexpected(Invalid{"available_frequencies", "field required"});
  const auto& f = (*j)["available_frequencies"];
  if (!f.is_array()) return tl::unexpected(Invalid{"available_frequencies", "value is not a valid list"});
  for (const auto& v : f) {
    if (!v.is_number_integer() || v.get<long long>() < 0 || v.get<long long>() > INT32_MAX)
      return tl::unexpected(Invalid{"available_frequencies", "value is not a valid integer"});
    r.available_frequencies.push_back(v.get<int>());
  }
  return r;
}

Parsed<ProfilingResult> parse_result(std::string_view body) {
  auto j = object_body(body);
  if (!j) return tl::unexpected(j.error());
  ProfilingResult r;
  ERG_PF_CHECK(only_fields(*j, {"rank", "iter_time", "iter_energy", "time_breakdown", "energy_breakdown",
                                "coarse_energy_windows", "extrapolated_energy_windows"}));
  ERG_PF_CHECK(get_int(*j, "rank", r.rank));
  ERG_PF_CHECK(get_numbers(*j, "iter_time", r.iter_time));
  ERG_PF_CHECK(get_numbers(*j, "iter_energy", r.iter_energy));
  ERG_PF_CHECK(get_breakdown(*j, "time_breakdown", r.time_breakdown));
  ERG_PF_CHECK(get_breakdown(*j, "energy_breakdown", r.energy_breakdown));
  if (j->contains("coarse_energy_windows")) {
    ERG_PF_CHECK(get_int(*j, "coarse_energy_windows", r.coarse_energy_windows));
    if (r.coarse_energy_windows < 0) return tl::unexpected(Invalid{"coarse_energy_windows", "must not be negative"});
  }
  if (j->contains("extrapolated_energy_windows")) {
    ERG_PF_CHECK(get_int(*j, "extrapolated_energy_windows", r.extrapolated_energy_windows));
    if (r.extrapolated_energy_windows < 0)
      return tl::unexpected(Invalid{"extrapolated_energy_windows", "must not be negative"});
  }
  return r;
}

#undef ERG_PF_CHECK

Reply from_invalid(const Invalid& bad) {
  return bad.field == "body" ? validation_reply("body", bad.message) : validation_reply(bad.field, bad.message);
}

Reply null_reply() { return Reply{200, "null"}; }

json rank_json(const RankInfo& r) {
  return {{"rank", r.rank},
          {"dp_rank", r.dp_rank},
          {"pp_rank", r.pp_rank},
          {"tp_rank", r.tp_rank},
          {"available_frequencies", r.available_frequencies}};
}
json schedule_json(const FrequencySchedule& s) {
  json f = json::array();
  for (const auto& [instruction, mhz] : s.frequencies) f.push_back(json::array({instruction, mhz}));
  return {{"rank", s.rank}, {"frequencies", f}};
}
json result_json(const ProfilingResult& r) {
  json j = {{"rank", r.rank},
            {"iter_time", r.iter_time},
            {"iter_energy", r.iter_energy},
            {"time_breakdown", r.time_breakdown},
            {"energy_breakdown", r.energy_breakdown}};
  if (r.coarse_energy_windows > 0) j["coarse_energy_windows"] = r.coarse_energy_windows;
  if (r.extrapolated_energy_windows > 0) j["extrapolated_energy_windows"] = r.extrapolated_energy_windows;
  return j;
}

/// Writes `text` to the file `name` in the job's folder `dir`, following no symlink: neither the
/// folder nor the file may be one (someone who can write to the dump folder could swap one in).
/// `exclusive` leaves a file that exists as it is. Dump files are a record for later study;
/// failing to write one must not stop training, so a failure is left out of the reply (the
/// folder itself is checked when the job registers).
void dump_text(const std::filesystem::path& dir, const char* name, const std::string& text, bool exclusive = false) {
  if (dir.empty()) return;
  const int folder = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (folder < 0) return;
  const int flags = O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC | (exclusive ? O_EXCL : O_TRUNC);
  const int fd = ::openat(folder, name, flags, 0644);
  ::close(folder);
  if (fd < 0) return;
  for (std::size_t at = 0; at < text.size();) {
    const auto n = ::write(fd, text.data() + at, text.size() - at);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    at += static_cast<std::size_t>(n);
  }
  ::close(fd);
}
void dump_file(const std::filesystem::path& dir, const std::string& name, const json& j) {
  dump_text(dir, name.c_str(), j.dump(2) + "\n");
}

/// A byte of a dump folder's name that is kept as it is; every other becomes '_'.
bool folder_char(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
         c == '-' || c == '+';
}

/// Makes a new folder for a job's dumps directly under `dump_dir`: dump_folder_name of the id, or
/// that name with "~2", "~3", … when a file, folder or link of the name exists (one is never
/// reused, so a link planted under a predictable job id is never followed).
Result<std::filesystem::path> make_dump_folder(const std::filesystem::path& dump_dir, std::string_view job_id) {
  std::error_code ec;
  std::filesystem::create_directories(dump_dir, ec);
  if (ec) return fail(ErrorCode::kIo, "cannot create dump folder " + dump_dir.string() + ": " + ec.message());
  const std::string name = dump_folder_name(job_id);
  constexpr int kTries = 100;
  for (int n = 1; n <= kTries; ++n) {
    const std::string candidate = n == 1 ? name : name + "~" + std::to_string(n);
    const auto path = dump_dir / candidate;
    // dump_folder_name makes one path component; checked again here, where it matters: the
    // path's lexical parent must be the dump folder.
    if (candidate == "." || candidate == ".." || candidate.find('/') != std::string::npos ||
        path.parent_path() != (dump_dir / "_").parent_path())
      return fail(ErrorCode::kInternal,
                  "dump folder name " + candidate + " is not a folder directly under " + dump_dir.string());
    // mkdir follows no link in its last component: an existing name of any kind is EEXIST.
    if (::mkdir(path.c_str(), 0755) == 0) return path;
    if (errno != EEXIST)
      return fail(ErrorCode::kIo, "cannot create dump folder " + path.string() + ": " + std::strerror(errno));
  }
  return fail(ErrorCode::kIo, "cannot create dump folder " + (dump_dir / name).string() + ": it and " +
                                  std::to_string(kTries - 1) + " numbered ones exist");
}

std::string ranks_list(const std::vector<int>& ranks) {
  std::string s = "[";
  for (std::size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s + "]";
}

}  // namespace

std::string dump_folder_name(std::string_view job_id) {
  constexpr std::size_t kMaxKept = 128;
  bool kept = !job_id.empty() && job_id.size() <= kMaxKept && job_id.front() != '.' && job_id.front() != '-';
  std::string name;
  for (std::size_t i = 0; i < job_id.size() && i < kMaxKept; ++i) {
    const auto c = static_cast<unsigned char>(job_id[i]);
    const bool keep = folder_char(c) && !(i == 0 && (c == '.' || c == '-'));
    kept = kept && keep;
    name += keep ? static_cast<char>(c) : '_';
  }
  if (kept) return name;
  // FNV-1a (64-bit) of the whole id, its low 32 bits as 8 hex digits: ids that sanitize alike
  // (or share their first 128 bytes) get different names. '~' is in no kept id.
  std::uint64_t h = 14695981039346656037ull;
  for (unsigned char c : job_id) h = (h ^ c) * 1099511628211ull;
  char suffix[16];
  std::snprintf(suffix, sizeof suffix, "~%08x", static_cast<unsigned>(h & 0xffffffffu));
  return name + suffix;
}

Reply error_reply(int status, std::string_view message) {
  return Reply{status, answer_text(json{{"message", message}})};
}

Reply validation_reply(std::string_view field, std::string_view message, std::string_view location) {
  json loc = json::array({location});
  if (field != location) loc.push_back(field);
  json detail = json::array({json{{"loc", loc}, {"msg", message}, {"type", "value_error"}}});
  return Reply{422,
               answer_text(json{{"detail", detail}, {"message", std::string(field) + ": " + std::string(message)}})};
}

std::string to_json(const FrequencySchedule& schedule) { return answer_text(schedule_json(schedule)); }
std::string to_json(const RankInfo& rank) { return answer_text(rank_json(rank)); }
std::string to_json(const ProfilingResult& result) { return answer_text(result_json(result)); }

Service::Service(ServiceOptions options) : options_(std::move(options)) {}
Service::~Service() { close(); }

std::size_t Service::evict_idle() {
  std::lock_guard lock(mu_);
  return evict_idle_locked();
}

std::size_t Service::evict_idle_locked() {
  if (options_.max_job_idle_time.count() <= 0) return 0;
  const auto now = options_.clock();
  std::size_t evicted = 0;
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    auto& job = *it->second;
    if (job.waiters == 0 && now - job.last_seen > options_.max_job_idle_time) {
      it = jobs_.erase(it);
      ++evicted;
    } else {
      ++it;
    }
  }
  return evicted;
}

void Service::evict_locked(const std::string& job_id, std::shared_ptr<Job> job, Reply why) {
  job->failure = std::move(why);
  // Only this job: a job registered since under the same id (same second) is another one.
  if (auto it = jobs_.find(job_id); it != jobs_.end() && it->second == job) jobs_.erase(it);
  job->cv.notify_all();
}

bool Service::has_job(const std::string& job_id) const {
  std::lock_guard lock(mu_);
  return jobs_.contains(job_id);
}

void Service::close() {
  std::lock_guard lock(mu_);
  closed_ = true;
  for (auto& [id, job] : jobs_) {
    if (!job->failure) job->failure = error_reply(503, "the server is shutting down");
    job->cv.notify_all();
  }
}

std::string random_id_nonce() { return http_guard::random_hex(8); }

namespace {
/// 403 when `caller` is a local user other than the job's owner (root may act on any job).
std::optional<Reply> refuse_caller(const Caller& caller, const std::optional<std::uint32_t>& owner,
                                   const std::string& job_id) {
  if (caller.in_process || !owner || !caller.uid || *caller.uid == 0 || *caller.uid == *owner) return std::nullopt;
  return error_reply(403, "job " + job_id + " belongs to another user");
}
}  // namespace

Reply Service::register_job(std::string_view body, const Caller& caller) {
  auto info = parse_job(body);
  if (!info) return from_invalid(info.error());
  if (auto ok = check_plan(options_.scheduler, *info); !ok) return error_reply(400, ok.error().message);
  std::lock_guard lock(mu_);
  if (closed_) return error_reply(503, "the server is shutting down");
  evict_idle_locked();
  const auto now = options_.clock();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  std::tm local{};
  localtime_r(&t, &local);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%F-%H-%M-%S", &local);
  info->job_id = std::string(stamp) + "+dp" + std::to_string(info->dp_degree) + "+pp" +
                 std::to_string(info->pp_degree) + "+tp" + std::to_string(info->tp_degree) + "+" +
                 std::string(scheduler_name(options_.scheduler.kind));
  if (options_.id_nonce) {
    if (const std::string nonce = options_.id_nonce(); !nonce.empty()) info->job_id += "+" + nonce;
  }
  if (info->job_metadata) info->job_id += "+" + *info->job_metadata;
  if (jobs_.contains(info->job_id))
    return error_reply(409, "job " + info->job_id + " is already registered (same configuration within a second)");
  auto job = std::make_shared<Job>();
  job->info = *info;
  const auto n = static_cast<std::size_t>(info->world_size);
  job->ranks.resize(n);
  job->asked.assign(n, 0);
  job->waiting.assign(n, false);
  job->results.resize(n);
  job->last_seen = now;
  if (!caller.in_process) job->owner = caller.uid;
  if (options_.dump_data) {
    // Never dump_dir / job_id: the id holds the client's job_metadata ("/../../x", a link's name).
    auto folder = make_dump_folder(options_.dump_dir, info->job_id);
    if (!folder) return error_reply(500, folder.error().message);
    job->dump = std::move(*folder);
  }
  jobs_.emplace(info->job_id, std::move(job));
  return Reply{200, answer_text(json(info->job_id))};
}

Reply Service::register_rank(const std::string& job_id, std::string_view body, const Caller& caller) {
  auto info = parse_rank(body);
  if (!info) return from_invalid(info.error());
  std::lock_guard lock(mu_);
  if (closed_) return error_reply(503, "the server is shutting down");
  evict_idle_locked();
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return error_reply(404, "unknown job " + job_id);
  if (auto refused = refuse_caller(caller, it->second->owner, job_id)) return *refused;
  auto job = it->second;
  job->last_seen = options_.clock();
  const auto& ji = job->info;
  auto out_of = [](const char* what, int v, int n) {
    return error_reply(400,
                       std::string(what) + " " + std::to_string(v) + " is out of range [0, " + std::to_string(n) + ")");
  };
  if (info->rank < 0 || info->rank >= ji.world_size) return out_of("rank", info->rank, ji.world_size);
  if (info->dp_rank < 0 || info->dp_rank >= ji.dp_degree) return out_of("dp_rank", info->dp_rank, ji.dp_degree);
  if (info->pp_rank < 0 || info->pp_rank >= ji.pp_degree) return out_of("pp_rank", info->pp_rank, ji.pp_degree);
  if (info->tp_rank < 0 || info->tp_rank >= ji.tp_degree) return out_of("tp_rank", info->tp_rank, ji.tp_degree);
  auto& slot = job->ranks[static_cast<std::size_t>(info->rank)];
  if (slot) {
    // A rank that restarts its client re-registers; the same values change nothing.
    if (*slot == *info) return null_reply();
    return error_reply(409, "rank " + std::to_string(info->rank) + " is already registered with other values");
  }
  slot = *info;
  if (++job->registered < ji.world_size) return null_reply();
  std::vector<RankInfo> ranks;
  for (const auto& r : job->ranks) ranks.push_back(*r);
  auto scheduler = make_scheduler(options_.scheduler, ji, ranks);
  if (!scheduler) {
    Reply why = error_reply(500, "job " + job_id + " evicted: " + scheduler.error().message);
    evict_locked(job_id, job, why);
    return why;
  }
  job->scheduler = std::move(*scheduler);
  json all = json::array();
  for (const auto& r : ranks) all.push_back(rank_json(r));
  dump_file(job->dump, "ranks.json", all);
  job->cv.notify_all();
  return null_reply();
}

Reply Service::get_schedule(const std::string& job_id, const std::optional<std::string>& rank_text,
                            const std::function<bool()>& client_gone, const Caller& caller) {
  if (!rank_text) return validation_reply("rank", "field required", "query");
  int rank = 0;
  try {
    std::size_t used = 0;
    rank = std::stoi(*rank_text, &used);
    if (used != rank_text->size()) throw std::invalid_argument("rank");
  } catch (const std::exception&) {
    return validation_reply("rank", "value is not a valid integer", "query");
  }
  std::unique_lock lock(mu_);
  if (closed_) return error_reply(503, "the server is shutting down");
  evict_idle_locked();
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return error_reply(404, "unknown job " + job_id);
  if (auto refused = refuse_caller(caller, it->second->owner, job_id)) return *refused;
  auto job = it->second;
  const int n = job->info.world_size;
  if (rank < 0 || rank >= n)
    return error_reply(400, "rank " + std::to_string(rank) + " is out of range [0, " + std::to_string(n) + ")");
  const auto r = static_cast<std::size_t>(rank);
  if (!job->ranks[r]) return error_reply(400, "rank " + std::to_string(rank) + " has not registered");
  if (job->waiting[r]) return error_reply(409, "rank " + std::to_string(rank) + " is already waiting for its schedule");
  const int round = job->asked[r];
  if (round > 0 && !job->results[r])
    return error_reply(409, "rank " + std::to_string(rank) + " must post its result of round " +
                                std::to_string(round - 1) + " before asking again");
  job->last_seen = options_.clock();
  ++job->asked[r];
  const bool everyone =
      job->scheduler && std::all_of(job->asked.begin(), job->asked.end(), [&](int a) { return a == round + 1; });
  if (everyone) {
    auto schedules = job->scheduler->next_schedule();
    if (!schedules || static_cast<int>(schedules->size()) != n) {
      Reply why = error_reply(500, "job " + job_id + " evicted: the scheduler failed: " +
                                       (schedules ? "wrong number of schedules" : schedules.error().message));
      evict_locked(job_id, job, why);
      return why;
    }
    job->round = round;
    job->schedules = std::move(*schedules);
    job->results.assign(static_cast<std::size_t>(n), std::nullopt);
    job->result_count = 0;
    json all = json::array();
    for (const auto& s : job->schedules) all.push_back(schedule_json(s));
    dump_file(job->dump, std::to_string(round) + ".sched.json", all);
    job->cv.notify_all();
  } else {
    job->waiting[r] = true;
    ++job->waiters;
    const auto deadline = std::chrono::steady_clock::now() + options_.rank_timeout;
    const auto done = [&] { return job->failure || job->round >= round; };
    bool ready = false, left = false;
    // Waits in slices so a client that left is noticed: its ask is withdrawn (the rank may ask
    // again) and its connection freed, instead of holding both until rank_timeout.
    while (!(ready = done()) && std::chrono::steady_clock::now() < deadline) {
      const auto slice = std::min(deadline, std::chrono::steady_clock::now() + std::chrono::milliseconds(200));
      ready = job->cv.wait_until(lock, slice, done);
      if (ready) break;
      if (client_gone && client_gone()) {
        left = true;
        break;
      }
    }
    --job->waiters;
    job->waiting[r] = false;
    if (left) {
      --job->asked[r];
      return error_reply(499, "rank " + std::to_string(rank) + "'s client left while waiting");
    }
    if (!ready) {
      // The dead-rank rule (service.hpp): the first waiter whose wait runs out evicts the job.
      std::vector<int> missing;
      for (int k = 0; k < n; ++k)
        if (!job->ranks[static_cast<std::size_t>(k)] || job->asked[static_cast<std::size_t>(k)] <= round)
          missing.push_back(k);
      evict_locked(job_id, job,
                   error_reply(504, "job " + job_id + " evicted: rank(s) " + ranks_list(missing) +
                                        " did not ask for round " + std::to_string(round) + "'s schedule within " +
                                        std::to_string(options_.rank_timeout.count()) + " ms"));
    }
    if (job->failure) return *job->failure;
  }
  job->last_seen = options_.clock();
  return Reply{200, to_json(job->schedules[r])};
}

Reply Service::post_result(const std::string& job_id, std::string_view body, const Caller& caller) {
  auto result = parse_result(body);
  if (!result) return from_invalid(result.error());
  std::lock_guard lock(mu_);
  if (closed_) return error_reply(503, "the server is shutting down");
  evict_idle_locked();
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return error_reply(404, "unknown job " + job_id);
  if (auto refused = refuse_caller(caller, it->second->owner, job_id)) return *refused;
  auto job = it->second;
  const int n = job->info.world_size;
  const int rank = result->rank;
  if (rank < 0 || rank >= n)
    return error_reply(400, "rank " + std::to_string(rank) + " is out of range [0, " + std::to_string(n) + ")");
  const auto r = static_cast<std::size_t>(rank);
  job->last_seen = options_.clock();
  if (job->round < 0 || job->asked[r] != job->round + 1 || job->waiting[r])
    return error_reply(409, "rank " + std::to_string(rank) + " has no schedule to report on");
  if (job->results[r])
    return error_reply(
        409, "rank " + std::to_string(rank) + " already posted its result of round " + std::to_string(job->round));
  if (auto bad = job->scheduler->check_result(*result))
    return validation_reply(
        bad->field, "rank " + std::to_string(rank) + ", round " + std::to_string(job->round) + ": " + bad->message);
  job->results[r] = std::move(*result);
  if (++job->result_count < n) return null_reply();
  std::vector<ProfilingResult> all;
  json dumped = json::array();
  for (const auto& res : job->results) {
    all.push_back(*res);
    dumped.push_back(result_json(*res));
  }
  dump_file(job->dump, std::to_string(job->round) + ".prof.json", dumped);
  auto observed = job->scheduler->observe(all);
  if (!job->dump.empty()) {
    const json state = json::parse(job->scheduler->state_json(), nullptr, false);
    if (!state.is_discarded() && !state.is_null()) dump_file(job->dump, "scheduler.json", state);
    if (auto csv = job->scheduler->profile_csv()) dump_text(job->dump, "profile.csv", *csv, /*exclusive=*/true);
  }
  if (!observed) {
    Reply why = error_reply(500, "job " + job_id + " evicted: the scheduler failed after round " +
                                     std::to_string(job->round) + ": " + observed.error().message);
    evict_locked(job_id, job, why);
    return why;
  }
  return null_reply();
}

Reply Service::get_state(const std::string& job_id, const Caller& caller) {
  std::lock_guard lock(mu_);
  if (closed_) return error_reply(503, "the server is shutting down");
  evict_idle_locked();
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return error_reply(404, "unknown job " + job_id);
  if (auto refused = refuse_caller(caller, it->second->owner, job_id)) return *refused;
  const auto& job = *it->second;
  json state = nullptr;
  if (job.scheduler) {
    state = json::parse(job.scheduler->state_json(), nullptr, false);
    if (state.is_discarded()) state = nullptr;
  }
  return Reply{200, answer_text(json{{"job_id", job_id}, {"round", job.round}, {"scheduler", state}})};
}

}  // namespace erg::pipeline_frequency::server
