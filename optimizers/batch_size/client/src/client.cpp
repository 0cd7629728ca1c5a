#include "erg/optimizers/batch_size/client/client.hpp"

#include <httplib.h>

#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>

namespace erg::batch_size::client {
namespace {

/// The header a job's secret travels in (the server's erg::http_guard::kJobTokenHeader).
constexpr const char* kJobTokenHeader = "X-Erg-Job-Token";

using nlohmann::json;

/// The one place a server status becomes an ErrorCode.
ErrorCode code_of(int status) {
  switch (status) {
    case 400:
    case 413:
    case 422: return ErrorCode::kInvalidArgument;
    case 404: return ErrorCode::kNotFound;
    case 409: return ErrorCode::kAlreadyExists;
    case 503: return ErrorCode::kUnavailable;
    case 504: return ErrorCode::kTimeout;
    default: return ErrorCode::kIo;
  }
}

/// The server's own words: `message`, else FastAPI's `detail` (a string, or a 422's list of
/// {loc, msg}), else the body itself.
std::string server_message(const std::string& body) {
  const json j = json::parse(body, nullptr, false);
  if (j.is_object()) {
    if (auto m = j.find("message"); m != j.end() && m->is_string()) return m->get<std::string>();
    if (auto d = j.find("detail"); d != j.end()) {
      if (d->is_string()) return d->get<std::string>();
      if (d->is_array() && !d->empty() && (*d)[0].is_object()) {
        const json& first = (*d)[0];
        std::string where;
        if (auto loc = first.find("loc"); loc != first.end() && loc->is_array())
          for (const auto& part : *loc)
            where += (where.empty() ? "" : ".") + (part.is_string() ? part.get<std::string>() : part.dump());
        const std::string msg = first.value("msg", std::string());
        return where.empty() ? msg : where + ": " + msg;
      }
    }
  }
  return body.empty() ? "(no body)" : body;
}

json params_json(const JobConfig& job) {
  const JobSpec& p = job.params;
  return {{"job_id", job.job_id ? json(*job.job_id) : json(nullptr)},
          {"job_id_prefix", job.job_id_prefix},
          {"batch_sizes", p.batch_sizes},
          {"default_batch_size", p.default_batch_size},
          {"eta_knob", p.eta_knob},
          {"beta_knob", p.beta_knob ? json(*p.beta_knob) : json(nullptr)},
          {"target_metric", p.target_metric},
          {"higher_is_better_metric", p.higher_is_better_metric},
          {"max_epochs", p.max_epochs},
          {"num_pruning_rounds", p.num_pruning_rounds},
          {"window_size", p.window_size},
          {"mab_prior_mean", p.mab_prior_mean},
          {"mab_prior_precision", p.mab_prior_precision},
          {"mab_num_explorations", p.mab_num_explorations},
          {"mab_seed", p.mab_seed ? json(*p.mab_seed) : json(nullptr)}};
}

json trial_json(const TrialId& t) {
  return {{"job_id", t.job_id}, {"batch_size", t.batch_size}, {"trial_number", t.trial_number}};
}

/// A field of an answer, or an error naming the request (a server that is not erg's or Zeus's).
template <class T>
Result<T> field(const json& j, const char* name, std::string_view what) {
  try {
    return j.at(name).get<T>();
  } catch (const json::exception&) {
    return fail(ErrorCode::kIo, std::string(what) + ": the server's answer has no valid '" + name + "'");
  }
}

}  // namespace

struct Client::Impl {
  std::string url;
  std::string prefix;  ///< Path the routes are appended to ("" or "/something").
  httplib::Client http;
  std::string token;                          ///< ClientOptions::job_token (or the environment's)
  std::map<std::string, std::string> tokens;  ///< Secrets the server gave, by job id

  Impl(std::string u, std::string p, const std::string& origin)
      : url(std::move(u)), prefix(std::move(p)), http(origin) {}

  /// Sends one request; the status and parsed body of a 2xx answer, or the error for anything else.
  /// `job_id`: the job the request writes, whose secret it presents.
  Result<std::pair<int, json>> send(const char* method, const std::string& route, const std::string& query,
                                    const std::optional<json>& body, const std::string& job_id,
                                    std::string* answered_token = nullptr) {
    const std::string what = std::string(method) + " " + route;
    const std::string path = prefix + route + query;
    const std::string text = body ? body->dump() : std::string();
    const std::string_view m(method);
    httplib::Headers headers;
    const auto known = tokens.find(job_id);
    const std::string& secret = known != tokens.end() ? known->second : token;
    if (!secret.empty()) headers.emplace(kJobTokenHeader, secret);
    httplib::Result res = m == "GET"     ? http.Get(path, headers)
                          : m == "POST"  ? http.Post(path, headers, text, "application/json")
                          : m == "PATCH" ? http.Patch(path, headers, text, "application/json")
                                         : http.Delete(path, headers);
    if (!res) {
      const auto err = res.error();
      const ErrorCode code =
          err == httplib::Error::Read || err == httplib::Error::Write || err == httplib::Error::ConnectionTimeout
              ? ErrorCode::kTimeout
              : ErrorCode::kUnavailable;
      return fail(code, what + ": cannot reach the batch-size optimizer server at " + url + " (" +
                            httplib::to_string(err) + ")");
    }
    if (res->status < 200 || res->status >= 300)
      return fail(code_of(res->status),
                  what + ": the server answered " + std::to_string(res->status) + ": " + server_message(res->body));
    json j = res->body.empty() ? json(nullptr) : json::parse(res->body, nullptr, false);
    if (j.is_discarded()) return fail(ErrorCode::kIo, what + ": the server's answer is not JSON");
    if (answered_token) *answered_token = res->get_header_value(kJobTokenHeader);
    return std::pair<int, json>(res->status, std::move(j));
  }
};

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Client::Client(Client&&) noexcept = default;
Client& Client::operator=(Client&&) noexcept = default;
Client::~Client() = default;

const std::string& Client::url() const { return impl_->url; }

Result<Client> Client::create(std::string_view url, ClientOptions options) {
  // https works where cpp-httplib was built with OpenSSL (Debian's is).
  const std::string_view scheme = url.starts_with("http://")    ? "http://"
                                  : url.starts_with("https://") ? "https://"
                                                                : "";
  if (scheme.empty())
    return fail(ErrorCode::kInvalidArgument,
                "batch-size optimizer server URL must start with http:// or https:// (got '" + std::string(url) + "')");
  const std::string_view rest = url.substr(scheme.size());
  const auto slash = rest.find('/');
  const std::string authority(rest.substr(0, slash));
  std::string prefix = slash == std::string_view::npos ? std::string() : std::string(rest.substr(slash));
  while (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
  if (authority.empty() || authority.find_first_of("?#@ ") != std::string::npos)
    return fail(ErrorCode::kInvalidArgument, "batch-size optimizer server URL has no valid host: '" + std::string(url) +
                                                 "' (expected http://HOST:PORT)");
  auto impl = std::make_unique<Impl>(std::string(url), std::move(prefix), std::string(scheme) + authority);
  const auto ms = options.timeout.count();
  impl->http.set_connection_timeout(ms / 1000, (ms % 1000) * 1000);
  impl->http.set_read_timeout(ms / 1000, (ms % 1000) * 1000);
  impl->http.set_write_timeout(ms / 1000, (ms % 1000) * 1000);
  impl->http.set_keep_alive(true);
  impl->token = options.job_token;
  if (impl->token.empty())
    if (const char* env = std::getenv("ERG_BSO_JOB_TOKEN")) impl->token = env;
  return Client(std::move(impl));
}

std::string job_body(const JobConfig& job, const GpuConfig& gpus) {
  json j = params_json(job);
  j["max_power"] = gpus.max_power.value();
  j["number_of_gpus"] = gpus.number_of_gpus;
  j["gpu_model"] = gpus.gpu_model;
  return j.dump();
}

Result<RegisteredJob> Client::register_job(const JobConfig& job, const GpuConfig& gpus) {
  constexpr std::string_view kWhat = "POST /jobs";
  std::string given;
  auto answer = impl_->send("POST", "/jobs", "", json::parse(job_body(job, gpus)), job.job_id.value_or(""), &given);
  if (!answer) return fail(answer.error());
  const auto& [status, j] = *answer;
  RegisteredJob out;
  out.created = status == 201;
  auto id = field<std::string>(j, "job_id", kWhat);
  if (!id) return fail(id.error());
  out.job_id = *id;
  if (!given.empty()) impl_->tokens[*id] = given;
  out.config = job;
  out.config.job_id = *id;
  if (auto sizes = field<std::vector<int>>(j, "batch_sizes", kWhat)) out.config.params.batch_sizes = *sizes;
  out.gpus = gpus;
  return out;
}

Result<TrialId> Client::get_batch_size(std::string_view job_id) {
  constexpr std::string_view kWhat = "GET /jobs/batch_size";
  const std::string query = httplib::append_query_params("", {{"job_id", std::string(job_id)}});
  auto answer = impl_->send("GET", "/jobs/batch_size", query, std::nullopt, std::string(job_id));
  if (!answer) return fail(answer.error());
  const json& j = answer->second;
  auto id = field<std::string>(j, "job_id", kWhat);
  auto bs = field<int>(j, "batch_size", kWhat);
  auto n = field<int>(j, "trial_number", kWhat);
  if (!id) return fail(id.error());
  if (!bs) return fail(bs.error());
  if (!n) return fail(n.error());
  return TrialId{*id, *bs, *n};
}

Result<ReportResponse> Client::report(const TrainingReport& r) {
  constexpr std::string_view kWhat = "POST /report";
  json body = trial_json(r.trial);
  body["time"] = r.time.count();
  body["energy"] = r.energy.value();
  body["metric"] = r.metric;
  body["current_epoch"] = r.current_epoch;
  auto answer = impl_->send("POST", "/report", "", body, r.trial.job_id);
  if (!answer) return fail(answer.error());
  const json& j = answer->second;
  auto stop = field<bool>(j, "stop_train", kWhat);
  auto converged = field<bool>(j, "converged", kWhat);
  auto message = field<std::string>(j, "message", kWhat);
  if (!stop) return fail(stop.error());
  if (!converged) return fail(converged.error());
  if (!message) return fail(message.error());
  return ReportResponse{*stop, *converged, *message};
}

Result<void> Client::end_trial(const TrialId& trial) {
  if (auto answer = impl_->send("PATCH", "/trials", "", trial_json(trial), trial.job_id); !answer)
    return fail(answer.error());
  return ok();
}

Result<void> Client::delete_job(std::string_view job_id) {
  const std::string query = httplib::append_query_params("", {{"job_id", std::string(job_id)}});
  if (auto answer = impl_->send("DELETE", "/jobs", query, std::nullopt, std::string(job_id)); !answer)
    return fail(answer.error());
  return ok();
}

}  // namespace erg::batch_size::client
