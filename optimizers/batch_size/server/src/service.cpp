#include "erg/optimizers/batch_size/server/service.hpp"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "schema.hpp"

namespace erg::batch_size::server {
namespace {

using json = nlohmann::json;

/// A 422 on its way out of a parser.
struct Invalid {
  std::string field;
  std::string message;
};

template <class T>
using Parsed = tl::expected<T, Invalid>;

tl::unexpected<Invalid> invalid(std::string field, std::string message) {
  return tl::unexpected<Invalid>(Invalid{std::move(field), std::move(message)});
}

/// Reads the fields of one JSON object strictly: types are not coerced, unknown fields and
/// duplicates are errors (check_unknown()).
class Fields {
 public:
  explicit Fields(const json& object) : object_(object) {}

  [[nodiscard]] const json* find(const std::string& name) {
    seen_.insert(name);
    auto it = object_.find(name);
    return it == object_.end() ? nullptr : &*it;
  }

  Parsed<std::optional<long long>> integer(const std::string& name, bool required, bool nullable = false) {
    const json* v = find(name);
    if (!v) {
      if (required) return invalid(name, "field required");
      return std::optional<long long>();
    }
    if (v->is_null() && nullable) return std::optional<long long>();
    if (v->is_number_integer()) {
      if (v->is_number_unsigned() && v->get<unsigned long long>() > static_cast<unsigned long long>(LLONG_MAX))
        return invalid(name, "integer out of range");
      return std::optional<long long>(v->get<long long>());
    }
    return invalid(name, "value is not a valid integer");
  }

  Parsed<std::optional<int>> int32(const std::string& name, bool required, bool nullable = false) {
    auto v = integer(name, required, nullable);
    if (!v) return tl::unexpected(v.error());
    if (!*v) return std::optional<int>();
    if (**v < INT_MIN || **v > INT_MAX) return invalid(name, "integer out of range");
    return std::optional<int>(static_cast<int>(**v));
  }

  Parsed<std::optional<double>> number(const std::string& name, bool required, bool nullable = false) {
    const json* v = find(name);
    if (!v) {
      if (required) return invalid(name, "field required");
      return std::optional<double>();
    }
    if (v->is_null() && nullable) return std::optional<double>();
    if (!v->is_number()) return invalid(name, "value is not a valid number");
    const double d = v->get<double>();
    if (!std::isfinite(d)) return invalid(name, "value is not a finite number");
    return std::optional<double>(d);
  }

  Parsed<std::optional<bool>> boolean(const std::string& name, bool required) {
    const json* v = find(name);
    if (!v) {
      if (required) return invalid(name, "field required");
      return std::optional<bool>();
    }
    if (!v->is_boolean()) return invalid(name, "value is not a valid boolean");
    return std::optional<bool>(v->get<bool>());
  }

  Parsed<std::optional<std::string>> string(const std::string& name, bool required, bool nullable = false) {
    const json* v = find(name);
    if (!v) {
      if (required) return invalid(name, "field required");
      return std::optional<std::string>();
    }
    if (v->is_null() && nullable) return std::optional<std::string>();
    if (!v->is_string()) return invalid(name, "value is not a valid string");
    return std::optional<std::string>(v->get<std::string>());
  }

  Parsed<void> check_unknown() const {
    for (const auto& [key, value] : object_.items())
      if (!seen_.contains(key)) return invalid(key, "extra fields not permitted");
    return {};
  }

 private:
  const json& object_;
  std::set<std::string> seen_;
};

#define ERG_TRY_FIELD(var, expr)                        \
  auto var##_r = (expr);                                \
  if (!var##_r) return tl::unexpected(var##_r.error()); \
  auto var = *var##_r

/// Whether `s` can be a job id in both databases: UTF-8 (PostgreSQL rejects other bytes in text)
/// without NUL (neither a libpq parameter nor a C string can hold one). Bodies' strings are
/// UTF-8 already (the JSON parser checks); query strings are raw bytes.
bool storable(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == 0) return false;
    if (c < 0x80) {
      ++i;
      continue;
    }
    // Lead byte: its length and the smallest code point it may encode (no overlong forms).
    std::size_t n = 0;
    std::uint32_t cp = 0;
    std::uint32_t min = 0;
    if ((c & 0xE0) == 0xC0) {
      n = 2;
      cp = c & 0x1FU;
      min = 0x80;
    } else if ((c & 0xF0) == 0xE0) {
      n = 3;
      cp = c & 0x0FU;
      min = 0x800;
    } else if ((c & 0xF8) == 0xF0) {
      n = 4;
      cp = c & 0x07U;
      min = 0x10000;
    } else {
      return false;
    }
    if (i + n > s.size()) return false;
    for (std::size_t k = 1; k < n; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += n;
  }
  return true;
}

/// Parses a body into a JSON object; a 422 if it is not one.
Parsed<json> object_body(std::string_view body) {
  json j = json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return invalid("body", "body is not valid JSON");
  if (!j.is_object()) return invalid("body", "body is not a JSON object");
  return j;
}

/// What POST /jobs carries (Zeus's JobSpecFromClient).
struct JobRequest {
  std::optional<std::string> job_id;
  std::string job_id_prefix;
  JobSpec spec;
  double max_power_w = 0;
  int number_of_gpus = 0;
  std::string gpu_model;
};

constexpr std::size_t kMaxJobIdBytes = 400;    // Job.job_id is VARCHAR(400)
constexpr std::size_t kMaxGpuModelBytes = 30;  // Job.gpu_model is VARCHAR(30)

Parsed<JobRequest> parse_job(std::string_view body) {
  auto j = object_body(body);
  if (!j) return tl::unexpected(j.error());
  Fields f(*j);
  JobRequest r;
  ERG_TRY_FIELD(job_id, f.string("job_id", false, true));
  ERG_TRY_FIELD(prefix, f.string("job_id_prefix", true));
  r.job_id = job_id;
  r.job_id_prefix = *prefix;
  if (!storable(r.job_id_prefix)) return invalid("job_id_prefix", "job_id_prefix must not contain NUL");
  if (r.job_id && !storable(*r.job_id)) return invalid("job_id", "job_id must not contain NUL");
  if (r.job_id_prefix.empty()) return invalid("job_id_prefix", "job_id_prefix must not be empty");
  if (r.job_id_prefix.size() > kMaxJobIdBytes - 9) return invalid("job_id_prefix", "job_id_prefix is too long");
  if (r.job_id) {
    if (!r.job_id->starts_with(r.job_id_prefix)) return invalid("job_id", "job_id must start with job_id_prefix");
    if (r.job_id->size() > kMaxJobIdBytes) return invalid("job_id", "job_id is longer than 400 bytes");
  }
  const json* sizes = f.find("batch_sizes");
  if (!sizes) return invalid("batch_sizes", "field required");
  if (!sizes->is_array()) return invalid("batch_sizes", "value is not a valid list");
  if (sizes->empty()) return invalid("batch_sizes", "batch_sizes must not be empty");
  if (sizes->size() > 4096) return invalid("batch_sizes", "too many batch sizes");
  for (const auto& b : *sizes) {
    if (!b.is_number_integer() || (b.is_number_unsigned() && b.get<unsigned long long>() > INT_MAX) ||
        b.get<long long>() < INT_MIN || b.get<long long>() > INT_MAX)
      return invalid("batch_sizes", "value is not a valid integer");
    r.spec.batch_sizes.push_back(b.get<int>());
  }
  std::sort(r.spec.batch_sizes.begin(), r.spec.batch_sizes.end());
  ERG_TRY_FIELD(b0, f.int32("default_batch_size", true));
  r.spec.default_batch_size = *b0;
  ERG_TRY_FIELD(eta, f.number("eta_knob", false));
  if (eta) r.spec.eta_knob = *eta;
  const json* beta = f.find("beta_knob");
  if (beta) {
    ERG_TRY_FIELD(b, f.number("beta_knob", false, true));
    r.spec.beta_knob = b;
  }
  ERG_TRY_FIELD(target, f.number("target_metric", false));
  if (target) r.spec.target_metric = *target;
  ERG_TRY_FIELD(higher, f.boolean("higher_is_better_metric", false));
  if (higher) r.spec.higher_is_better_metric = *higher;
  ERG_TRY_FIELD(max_epochs, f.int32("max_epochs", false));
  if (max_epochs) r.spec.max_epochs = *max_epochs;
  ERG_TRY_FIELD(rounds, f.int32("num_pruning_rounds", false));
  if (rounds) r.spec.num_pruning_rounds = *rounds;
  ERG_TRY_FIELD(window, f.int32("window_size", false));
  if (window) r.spec.window_size = *window;
  ERG_TRY_FIELD(prior_mean, f.number("mab_prior_mean", false));
  if (prior_mean) r.spec.mab_prior_mean = *prior_mean;
  ERG_TRY_FIELD(prior_precision, f.number("mab_prior_precision", false));
  if (prior_precision) r.spec.mab_prior_precision = *prior_precision;
  ERG_TRY_FIELD(explorations, f.int32("mab_num_explorations", false));
  if (explorations) r.spec.mab_num_explorations = *explorations;
  ERG_TRY_FIELD(seed, f.integer("mab_seed", false, true));
  if (seed) {
    if (*seed < 0) return invalid("mab_seed", "mab_seed must not be negative");
    r.spec.mab_seed = static_cast<std::uint64_t>(*seed);
  }
  ERG_TRY_FIELD(max_power, f.number("max_power", true));
  if (*max_power <= 0) return invalid("max_power", "max_power must be positive");
  r.max_power_w = *max_power;
  ERG_TRY_FIELD(gpus, f.int32("number_of_gpus", true));
  if (*gpus <= 0) return invalid("number_of_gpus", "number_of_gpus must be positive");
  r.number_of_gpus = *gpus;
  ERG_TRY_FIELD(model, f.string("gpu_model", true));
  if (model->empty() || model->size() > kMaxGpuModelBytes)
    return invalid("gpu_model", "gpu_model must be 1 to 30 bytes");
  if (!storable(*model)) return invalid("gpu_model", "gpu_model must not contain NUL");
  r.gpu_model = *model;
  if (auto u = f.check_unknown(); !u) return tl::unexpected(u.error());
  if (auto v = validate(r.spec); !v) return invalid("body", v.error().message);
  return r;
}

struct TrialIdRequest {
  std::string job_id;
  int batch_size = 0;
  int trial_number = 0;
};

Parsed<TrialIdRequest> parse_trial_id(const json& j, Fields& f) {
  (void)j;
  TrialIdRequest r;
  ERG_TRY_FIELD(job_id, f.string("job_id", true));
  ERG_TRY_FIELD(bs, f.int32("batch_size", true));
  ERG_TRY_FIELD(number, f.int32("trial_number", true));
  r.job_id = *job_id;
  r.batch_size = *bs;
  r.trial_number = *number;
  if (r.trial_number < 1) return invalid("trial_number", "trial_number must be at least 1");
  return r;
}

struct ReportRequest {
  TrialIdRequest trial;
  double time_s = 0;
  double energy_j = 0;
  double metric = 0;
  int current_epoch = 0;
};

Parsed<ReportRequest> parse_report(std::string_view body) {
  auto j = object_body(body);
  if (!j) return tl::unexpected(j.error());
  Fields f(*j);
  ReportRequest r;
  ERG_TRY_FIELD(trial, parse_trial_id(*j, f));
  r.trial = trial;
  ERG_TRY_FIELD(time, f.number("time", true));
  ERG_TRY_FIELD(energy, f.number("energy", true));
  ERG_TRY_FIELD(metric, f.number("metric", true));
  ERG_TRY_FIELD(epoch, f.int32("current_epoch", true));
  if (*time < 0) return invalid("time", "time must not be negative");
  if (*energy < 0) return invalid("energy", "energy must not be negative");
  if (*epoch < 0) return invalid("current_epoch", "current_epoch must not be negative");
  r.time_s = *time;
  r.energy_j = *energy;
  r.metric = *metric;
  r.current_epoch = *epoch;
  if (auto u = f.check_unknown(); !u) return tl::unexpected(u.error());
  return r;
}

Parsed<TrialIdRequest> parse_trial_body(std::string_view body) {
  auto j = object_body(body);
  if (!j) return tl::unexpected(j.error());
  Fields f(*j);
  ERG_TRY_FIELD(trial, parse_trial_id(*j, f));
  if (auto u = f.check_unknown(); !u) return tl::unexpected(u.error());
  return trial;
}

Reply from_invalid(const Invalid& e) { return validation_reply(e.field, e.message); }

json optional_json(const auto& v) { return v ? json(*v) : json(nullptr); }

json job_json(const JobRecord& job) {
  const JobSpec& s = job.spec;
  return json{{"job_id", job.job_id},
              {"job_id_prefix", job.job_id_prefix},
              {"batch_sizes", s.batch_sizes},
              {"default_batch_size", s.default_batch_size},
              {"eta_knob", s.eta_knob},
              {"beta_knob", optional_json(s.beta_knob)},
              {"target_metric", s.target_metric},
              {"higher_is_better_metric", s.higher_is_better_metric},
              {"max_epochs", s.max_epochs},
              {"num_pruning_rounds", s.num_pruning_rounds},
              {"window_size", s.window_size},
              {"mab_prior_mean", s.mab_prior_mean},
              {"mab_prior_precision", s.mab_prior_precision},
              {"mab_num_explorations", s.mab_num_explorations},
              {"mab_seed", optional_json(s.mab_seed)},
              {"max_power", job.max_power_w},
              {"number_of_gpus", job.number_of_gpus},
              {"gpu_model", job.gpu_model}};
}

bool same_job(const JobRecord& stored, const JobRequest& r) {
  return stored.job_id_prefix == r.job_id_prefix && stored.spec == r.spec && stored.max_power_w == r.max_power_w &&
         stored.number_of_gpus == r.number_of_gpus && stored.gpu_model == r.gpu_model;
}

/// Zeus's generated id: the prefix, a dash, 8 lowercase hex digits.
std::string generate_job_id(const std::string& prefix) {
  static thread_local std::mt19937_64 gen(
      std::random_device{}() ^ static_cast<std::uint64_t>(std::chrono::system_clock::now().time_since_epoch().count()));
  char hex[9];
  std::snprintf(hex, sizeof hex, "%08x", static_cast<unsigned>(gen() & 0xffffffffU));
  return prefix + "-" + hex;
}

Reply store_error(const Error& e) { return error_reply(e.code == ErrorCode::kTimeout ? 503 : 500, e.message); }

/// JSON text of an answer. Answers echo what clients sent (a job id from a query string, a field
/// name), which need not be UTF-8: invalid bytes become U+FFFD rather than an exception.
std::string answer_text(const json& body) { return body.dump(-1, ' ', false, json::error_handler_t::replace); }

Reply ok_reply(int status, const json& body) { return Reply{status, answer_text(body)}; }

}  // namespace

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

Reply Service::register_job(std::string_view body, const Caller& caller) {
  auto req = parse_job(body);
  if (!req) return from_invalid(req.error());
  JobRecord job;
  job.job_id = req->job_id ? *req->job_id : generate_job_id(req->job_id_prefix);
  job.job_id_prefix = req->job_id_prefix;
  job.spec = req->spec;
  job.max_power_w = req->max_power_w;
  job.number_of_gpus = req->number_of_gpus;
  job.gpu_model = req->gpu_model;
  auto opt = Optimizer::create(job.spec, Watts{job.max_power_w});
  if (!opt) return validation_reply("body", opt.error().message);
  job.optimizer_state = opt->save_state();
  auto tx = store_.begin();
  if (!tx) return store_error(tx.error());
  auto existing = (*tx)->load_job(job.job_id);
  if (!existing) return store_error(existing.error());
  // Who may write the job: the caller's local user, and the holder of its secret.
  JobAccess access;
  if (!caller.in_process && caller.uid) access.owner_uid = *caller.uid;
  std::string new_token;
  if (!caller.token.empty()) {
    access.token_sha256 = http_guard::sha256_hex(caller.token);
  } else {
    new_token = http_guard::random_hex(16);
    access.token_sha256 = http_guard::sha256_hex(new_token);
  }
  if (*existing) {
    if (!same_job(**existing, *req))
      return error_reply(409, "job " + job.job_id + " exists with a different configuration");
    auto known = (*tx)->load_access(job.job_id);
    if (!known) return store_error(known.error());
    // Another user's job: said at once (its writes would all be refused), so a client that
    // picked a job id someone else took learns it here.
    if (auto refused = refuse_write(caller, *known, job.job_id)) return *refused;
    if (!*known && access.owner_uid) {
      // Registered before erg kept owners (or by Zeus's server on a shared database): the first
      // local user to register it again owns it from now on.
      if (auto r = (*tx)->save_access(job.job_id, access); !r) return store_error(r.error());
      if (auto r = (*tx)->commit(); !r) return store_error(r.error());
      Reply reply = ok_reply(200, job_json(**existing));
      reply.job_token = new_token;
      return reply;
    }
    return ok_reply(200, job_json(**existing));
  }
  if (auto r = (*tx)->insert_job(job); !r) {
    if (r.error().code == ErrorCode::kAlreadyExists) return error_reply(409, r.error().message);
    return store_error(r.error());
  }
  if (auto r = (*tx)->save_access(job.job_id, access); !r) return store_error(r.error());
  if (auto r = (*tx)->commit(); !r) return store_error(r.error());
  Reply reply = ok_reply(201, job_json(job));
  reply.job_token = new_token;
  return reply;
}

std::optional<Reply> Service::refuse_write(const Caller& caller, const std::optional<JobAccess>& access,
                                           const std::string& job_id) const {
  if (caller.in_process || options_.allow_anonymous_writes) return std::nullopt;
  if (caller.uid && *caller.uid == 0) return std::nullopt;  // root on this machine
  if (!access) return std::nullopt;                         // a job without an owner (see register_job)
  if (access->owner_uid && caller.uid && *access->owner_uid == static_cast<std::int64_t>(*caller.uid))
    return std::nullopt;
  if (!caller.token.empty() && !access->token_sha256.empty() &&
      http_guard::same_secret(http_guard::sha256_hex(caller.token), access->token_sha256))
    return std::nullopt;
  return error_reply(403, "job " + job_id +
                              " belongs to another user: run as its owner, or present the secret its registration "
                              "answered in " +
                              http_guard::kJobTokenHeader);
}

/// Loads, restores, fails the trials that timed out, lets `op` act on the optimizer and saves it
/// if anything changed — one transaction. `unknown_job_status` answers a job that does not exist.
template <class Op>
Reply Service::with_job(const std::string& job_id, int unknown_job_status, const Caller& caller, Op op) {
  // No job has such an id (registering one is refused), and the database may refuse the bytes.
  if (!storable(job_id)) return error_reply(unknown_job_status, "unknown job " + job_id);
  auto tx = store_.begin();
  if (!tx) return store_error(tx.error());
  auto job = (*tx)->load_job(job_id);
  if (!job) return store_error(job.error());
  if (!*job) return error_reply(unknown_job_status, "unknown job " + job_id);
  auto access = (*tx)->load_access(job_id);
  if (!access) return store_error(access.error());
  if (auto refused = refuse_write(caller, *access, job_id)) return *refused;
  auto optimizer = Optimizer::restore((*job)->optimizer_state);
  if (!optimizer) return store_error(optimizer.error());
  const auto now = options_.clock();
  const std::string now_text = detail::iso8601(now);
  // The trial timeout, lazily: a trial whose client died without its end-of-trial PATCH (killed,
  // node lost) is failed by the next request on its job, in that request's transaction, before
  // the request acts (so a late report on it answers as for a failed trial).
  std::vector<int> expired;
  if (options_.trial_timeout.count() > 0) {
    auto stale = (*tx)->stale_trials(job_id, detail::iso8601(now - options_.trial_timeout));
    if (!stale) return store_error(stale.error());
    for (int number : *stale) {
      if (number < 1 || number > static_cast<int>(optimizer->trials().size())) continue;
      if (optimizer->trials()[static_cast<std::size_t>(number - 1)].status != TrialStatus::kDispatched) continue;
      if (auto r = optimizer->end_trial(number); !r) return store_error(r.error());
      expired.push_back(number);
    }
  }
  // What to save if `op` refuses: the expirations alone, not whatever `op` did before refusing.
  std::optional<Optimizer> after_expiry;
  if (!expired.empty()) after_expiry = *optimizer;
  std::vector<int> touched = expired;
  bool changed = false;
  Reply reply = op(*optimizer, touched, changed);
  const Optimizer* to_save = &*optimizer;
  if (reply.status >= 300 || !changed) {
    if (expired.empty()) return reply;
    to_save = &*after_expiry;
    touched = expired;
  }
  (*job)->optimizer_state = to_save->save_state();
  if (auto r = (*tx)->save_job(**job, *to_save, touched, now_text); !r) return store_error(r.error());
  if (auto r = (*tx)->commit(); !r) return store_error(r.error());
  return reply;
}

Reply Service::get_batch_size(const std::optional<std::string>& job_id, const Caller& caller) {
  if (!job_id) return validation_reply("job_id", "field required", "query");
  return with_job(*job_id, 400, caller, [&](Optimizer& o, std::vector<int>& touched, bool& changed) {
    auto trial = o.predict();
    if (!trial) return error_reply(400, trial.error().message);
    touched.push_back(trial->trial_number);
    changed = true;
    return ok_reply(
        200, json{{"job_id", *job_id}, {"batch_size", trial->batch_size}, {"trial_number", trial->trial_number}});
  });
}

Reply Service::report(std::string_view body, const Caller& caller) {
  auto req = parse_report(body);
  if (!req) return from_invalid(req.error());
  const auto& t = req->trial;
  return with_job(t.job_id, 400, caller, [&](Optimizer& o, std::vector<int>& touched, bool& changed) {
    if (t.trial_number > static_cast<int>(o.trials().size()))
      return error_reply(404, "unknown trial " + std::to_string(t.trial_number) + " of job " + t.job_id);
    const Trial& before = o.trials()[static_cast<std::size_t>(t.trial_number - 1)];
    if (before.batch_size != t.batch_size)
      return error_reply(400, "trial " + std::to_string(t.trial_number) + " runs batch size " +
                                  std::to_string(before.batch_size) + ", not " + std::to_string(t.batch_size));
    const Trial snapshot = before;
    auto r = o.report(TrainingResult{.trial_number = t.trial_number,
                                     .energy = Joules{req->energy_j},
                                     .time = Seconds{req->time_s},
                                     .metric = req->metric,
                                     .current_epoch = req->current_epoch});
    if (!r) return error_reply(r.error().code == ErrorCode::kNotFound ? 404 : 400, r.error().message);
    // A report on a running trial is always written: it is the trial's last-seen time.
    changed = snapshot.status == TrialStatus::kDispatched ||
              !(o.trials()[static_cast<std::size_t>(t.trial_number - 1)] == snapshot);
    touched.push_back(t.trial_number);
    return ok_reply(200, json{{"stop_train", r->stop_train}, {"converged", r->converged}, {"message", r->message}});
  });
}

Reply Service::end_trial(std::string_view body, const Caller& caller) {
  auto req = parse_trial_body(body);
  if (!req) return from_invalid(req.error());
  return with_job(req->job_id, 404, caller, [&](Optimizer& o, std::vector<int>& touched, bool& changed) {
    if (req->trial_number > static_cast<int>(o.trials().size()))
      return error_reply(404, "unknown trial " + std::to_string(req->trial_number) + " of job " + req->job_id);
    const Trial& t = o.trials()[static_cast<std::size_t>(req->trial_number - 1)];
    if (t.batch_size != req->batch_size)
      return error_reply(404, "trial " + std::to_string(req->trial_number) + " does not run batch size " +
                                  std::to_string(req->batch_size));
    changed = t.status == TrialStatus::kDispatched;
    if (auto r = o.end_trial(req->trial_number); !r) return error_reply(404, r.error().message);
    touched.push_back(req->trial_number);
    return ok_reply(
        200, json{{"job_id", req->job_id}, {"batch_size", req->batch_size}, {"trial_number", req->trial_number}});
  });
}

Reply Service::delete_job(const std::optional<std::string>& job_id, const Caller& caller) {
  if (!job_id) return validation_reply("job_id", "field required", "query");
  if (!storable(*job_id)) return error_reply(404, "unknown job " + *job_id);
  auto tx = store_.begin();
  if (!tx) return store_error(tx.error());
  auto job = (*tx)->load_job(*job_id);  // locks it
  if (!job) return store_error(job.error());
  if (!*job) return error_reply(404, "unknown job " + *job_id);
  auto access = (*tx)->load_access(*job_id);
  if (!access) return store_error(access.error());
  if (auto refused = refuse_write(caller, *access, *job_id)) return *refused;
  auto gone = (*tx)->delete_job(*job_id);
  if (!gone) return store_error(gone.error());
  if (!*gone) return error_reply(404, "unknown job " + *job_id);
  if (auto r = (*tx)->commit(); !r) return store_error(r.error());
  return ok_reply(200, nullptr);
}

}  // namespace erg::batch_size::server
