#include "erg/client/attribution.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "erg/protocol/status.hpp"

namespace erg::client {

namespace {

using nlohmann::json;

double num(const json& j, const char* key) {
  return j.contains(key) && j[key].is_number() ? j[key].get<double>() : 0.0;
}

std::optional<std::string> opt_str(const json& j, const char* key) {
  if (j.contains(key) && j[key].is_string()) return j[key].get<std::string>();
  return std::nullopt;
}

GpuAttribution parse_gpu(unsigned id, const json& g) {
  GpuAttribution a;
  a.gpu = id;
  a.attributable = g.value("attributable", false);
  a.error = g.value("error", std::string());
  a.start_ms = g.value("start_ms", std::int64_t{0});
  a.end_ms = g.value("end_ms", std::int64_t{0});
  a.duration_s = num(g, "duration_s");
  a.measured_j = num(g, "measured_j");
  a.measured_bound_j = num(g, "measured_bound_j");
  a.idle_j = num(g, "idle_j");
  a.idle_bound_j = num(g, "idle_bound_j");
  a.unattributed_j = num(g, "unattributed_j");
  a.unattributed_bound_j = num(g, "unattributed_bound_j");
  a.idle_calibrated = g.value("idle_calibrated", false);
  if (g.contains("processes") && g["processes"].is_array())
    for (const auto& p : g["processes"]) {
      AttributedProcess r;
      r.pid = p.value("pid", 0u);
      if (p.contains("uid") && p["uid"].is_number_unsigned()) r.uid = p["uid"].get<std::uint32_t>();
      r.comm = p.value("comm", std::string());
      r.container = opt_str(p, "container");
      r.pod = opt_str(p, "pod");
      r.energy_j = num(p, "energy_j");
      r.bound_j = num(p, "bound_j");
      r.power_w = num(p, "power_w");
      r.busy_s = num(p, "busy_s");
      r.share = num(p, "share");
      a.processes.push_back(std::move(r));
    }
  if (g.contains("other_users") && g["other_users"].is_object()) {
    const json& o = g["other_users"];
    a.other_users.processes = o.value("processes", std::size_t{0});
    a.other_users.energy_j = num(o, "energy_j");
    a.other_users.bound_j = num(o, "bound_j");
    a.other_users.power_w = num(o, "power_w");
  }
  return a;
}

}  // namespace

double GpuAttribution::sum_j() const {
  double s = idle_j + unattributed_j + other_users.energy_j;
  for (const auto& p : processes) s += p.energy_j;
  return s;
}

Result<DaemonAttribution> parse_attribution(std::string_view body) {
  json j = json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return fail(ErrorCode::kIo, "ergd /attribution: the body is not JSON");
  DaemonAttribution out;
  if (j.contains("errors") && j["errors"].is_object()) {
    for (const auto& [id, message] : j["errors"].items()) {
      Error e{ErrorCode::kDriverError, message.is_string() ? message.get<std::string>() : message.dump()};
      if (j.contains("error_codes") && j["error_codes"].contains(id))
        if (auto c = parse_error_code(j["error_codes"][id].get<std::string>())) e.code = *c;
      out.errors.emplace(static_cast<unsigned>(std::stoul(id)), std::move(e));
    }
    if (!j.contains("partial")) return out;
    j = j["partial"];
  }
  if (!j.contains("gpus") || !j["gpus"].is_object())
    return fail(ErrorCode::kIo, "ergd /attribution: the body has no \"gpus\" object");
  out.sees_all_processes = j.value("sees_all_processes", false);
  if (j.contains("uid") && j["uid"].is_number_unsigned()) out.uid = j["uid"].get<std::uint32_t>();
  out.daemon_started_ms = j.value("daemon_started_ms", std::int64_t{0});
  for (const auto& [id, g] : j["gpus"].items()) out.gpus.push_back(parse_gpu(static_cast<unsigned>(std::stoul(id)), g));
  std::sort(out.gpus.begin(), out.gpus.end(), [](const auto& a, const auto& b) { return a.gpu < b.gpu; });
  return out;
}

Result<DaemonAttribution> get_attribution(Connection& connection, std::span<const unsigned> gpu_ids,
                                          std::optional<std::int64_t> since_ms) {
  std::string target = "/attribution";
  char sep = '?';
  if (!gpu_ids.empty()) {
    target += "?gpu_ids=";
    for (std::size_t i = 0; i < gpu_ids.size(); ++i) target += (i ? "," : "") + std::to_string(gpu_ids[i]);
    sep = '&';
  }
  if (since_ms) target += sep + std::string("since_ms=") + std::to_string(*since_ms);
  auto r = connection.request("GET", target);
  if (!r) return fail(r.error());
  if (r->status == 200) return parse_attribution(r->body);
  json j = json::parse(r->body, nullptr, false);
  if (!j.is_discarded() && j.is_object() && j.contains("partial")) {
    auto parsed = parse_attribution(r->body);
    if (parsed && !parsed->gpus.empty()) return parsed;
  }
  std::string message = r->body;
  if (!j.is_discarded() && j.is_object() && j.contains("error") && j["error"].is_string())
    message = j["error"].get<std::string>();
  else if (!j.is_discarded() && j.is_object() && j.contains("errors"))
    message = j["errors"].dump();
  return fail(r->status == 503 ? ErrorCode::kUnavailable : protocol::error_code_for_status(r->status),
              "ergd " + target + " answered " + std::to_string(r->status) + ": " + message);
}

}  // namespace erg::client
