#include "erg/optimizers/pipeline_frequency/server/client.hpp"

#include <httplib.h>

#include <nlohmann/json.hpp>

namespace erg::pipeline_frequency::server {

using json = nlohmann::json;

struct Client::Impl {
  Impl(const std::string& host, int port) : http(host, port) {}
  httplib::Client http;
};

namespace {

Error from_reply(const httplib::Result& res) {
  if (!res) return Error{ErrorCode::kUnavailable, "perseus server: " + httplib::to_string(res.error())};
  const json j = json::parse(res->body, nullptr, false);
  std::string message =
      j.is_object() && j.contains("message") && j["message"].is_string() ? j["message"].get<std::string>() : res->body;
  const int s = res->status;
  const ErrorCode code = s == 400 || s == 422 ? ErrorCode::kInvalidArgument
                         : s == 404           ? ErrorCode::kNotFound
                         : s == 409           ? ErrorCode::kAlreadyExists
                         : s == 503           ? ErrorCode::kUnavailable
                         : s == 504           ? ErrorCode::kTimeout
                                              : ErrorCode::kIo;
  return Error{code, "perseus server (" + std::to_string(s) + "): " + message};
}

bool ok(const httplib::Result& res) { return res && res->status == 200; }

}  // namespace

Client::Client(const std::string& host, int port, std::chrono::seconds read_timeout)
    : impl_(std::make_unique<Impl>(host, port)) {
  impl_->http.set_read_timeout(read_timeout);
  impl_->http.set_keep_alive(true);
  impl_->http.set_tcp_nodelay(true);
}
Client::~Client() = default;

Result<std::string> Client::register_job(const JobInfo& job) {
  json body{{"job_id", job.job_id},       {"pp_degree", job.pp_degree},   {"dp_degree", job.dp_degree},
            {"tp_degree", job.tp_degree}, {"world_size", job.world_size}, {"job_metadata", nullptr}};
  if (job.job_metadata) body["job_metadata"] = *job.job_metadata;
  const auto res = impl_->http.Post("/register_job", body.dump(), "application/json");
  if (!ok(res)) return fail(from_reply(res));
  const json id = json::parse(res->body, nullptr, false);
  if (!id.is_string()) return fail(ErrorCode::kIo, "perseus server: the job id is not a string: " + res->body);
  return id.get<std::string>();
}

Result<void> Client::register_rank(const std::string& job_id, const RankInfo& rank) {
  const auto res = impl_->http.Post(("/register_rank/" + job_id).c_str(), to_json(rank), "application/json");
  if (!ok(res)) return fail(from_reply(res));
  return {};
}

Result<FrequencySchedule> Client::get_schedule(const std::string& job_id, int rank) {
  const auto res = impl_->http.Get(("/schedule/" + job_id + "?rank=" + std::to_string(rank)).c_str());
  if (!ok(res)) return fail(from_reply(res));
  const json j = json::parse(res->body, nullptr, false);
  FrequencySchedule s;
  try {
    s.rank = j.at("rank").get<int>();
    for (const auto& item : j.at("frequencies"))
      s.frequencies.emplace_back(item.at(0).get<std::string>(), item.at(1).get<int>());
  } catch (const json::exception&) {
    return fail(ErrorCode::kIo, "perseus server: malformed schedule: " + res->body);
  }
  return s;
}

Result<void> Client::post_result(const std::string& job_id, const ProfilingResult& result) {
  const auto res = impl_->http.Post(("/result/" + job_id).c_str(), to_json(result), "application/json");
  if (!ok(res)) return fail(from_reply(res));
  return {};
}

}  // namespace erg::pipeline_frequency::server
