// The gpu-read group: /gpu/get_* (the stream lives in streaming.cpp).

#include <algorithm>
#include <charconv>
#include <map>
#include <string>

#include "gpu_routes.hpp"
#include "replies.hpp"

namespace erg::daemon {
namespace {

/// Appends decimal `v` to `out`.
void put_u64(std::string& out, std::uint64_t v) {
  char num[24];
  out.append(num, std::to_chars(num, num + sizeof num, v).ptr);
}

/// The per-GPU reads: `{"<id>":{<fields>},...}` with the ids in the order of their decimal
/// strings and the fields sorted, the bytes nlohmann::json::dump() would write. Built directly:
/// this is the hot path of a polling client. `read(gpu)` returns a Result; `fields(body, value)`
/// appends the entry's fields without braces.
template <class Read, class Fields>
Reply read_each(const DeviceSlots& devices, const protocol::Query& query, Read read, Fields fields) {
  const std::size_t count = devices.gpus.size();
  std::vector<unsigned> ids;  // empty: every GPU, 0..count-1 (no list to build on the hot path)
  if (query.get("gpu_ids")) {
    if (auto bad = select_ids(query, "gpu_ids", count, "GPU", ids)) return std::move(*bad);
  } else if (count > 10) {
    for (unsigned i = 0; i < count; ++i) ids.push_back(i);
  }
  if (ids.size() > 1 && ids.back() >= 10)
    std::sort(ids.begin(), ids.end(), [](unsigned a, unsigned b) { return std::to_string(a) < std::to_string(b); });
  const std::size_t n = ids.empty() ? count : ids.size();
  std::map<unsigned, Error> errors;
  std::string body;
  body.reserve(16 + n * 48);
  body += '{';
  for (std::size_t k = 0; k < n; ++k) {
    unsigned id = ids.empty() ? static_cast<unsigned>(k) : ids[k];
    Gpu& gpu = *devices.gpus[id].gpu;
    auto value = read_retrying([&] { return read(gpu); });
    if (!value) {
      errors.emplace(id, std::move(value.error()));
      continue;
    }
    if (body.size() > 1) body += ',';
    body += '"';
    put_u64(body, id);
    body += "\":{";
    fields(body, *value);
    body += '}';
  }
  body += '}';
  if (!errors.empty()) return aggregate(errors, nlohmann::json::parse(body));
  return Reply{{200, "application/json", std::move(body), {}}, std::nullopt};
}

}  // namespace

Reply gpu_get_cumulative_energy(const DeviceSlots& devices, const protocol::Query& query) {
  return read_each(
      devices, query, [](Gpu& gpu) { return gpu.total_energy(); },
      [](std::string& body, MilliJoules e) {
        body += "\"energy_mj\":";
        put_u64(body, to_u64(e.value()));
      });
}

Reply gpu_get_power_limit(const DeviceSlots& devices, const protocol::Query& query) {
  return read_each(
      devices, query, [](Gpu& gpu) { return gpu.power_limit(); },
      [](std::string& body, MilliWatts limit) {
        body += "\"power_limit_mw\":";
        put_u64(body, to_u32(limit.value()));
      });
}

Reply gpu_get_power_limit_constraints(const DeviceSlots& devices, const protocol::Query& query) {
  return read_each(
      devices, query, [](Gpu& gpu) { return gpu.power_limit_constraints(); },
      [](std::string& body, const PowerLimitConstraints& c) {
        body += "\"max_power_limit_mw\":";
        put_u64(body, to_u32(c.max.value()));
        body += ",\"min_power_limit_mw\":";
        put_u64(body, to_u32(c.min.value()));
      });
}

Reply gpu_get_persistence_mode(const DeviceSlots& devices, const protocol::Query& query) {
  return read_each(
      devices, query, [](Gpu& gpu) { return gpu.persistence_mode(); },
      [](std::string& body, bool enabled) { body += enabled ? "\"enabled\":true" : "\"enabled\":false"; });
}

Reply gpu_get_power(const DeviceSlots& devices, const protocol::Query& query) {
  std::vector<unsigned> ids;
  if (auto bad = select_ids_listing_unknown(query, "gpu_ids", devices.gpus.size(), "GPU", ids)) return std::move(*bad);
  std::map<unsigned, Error> errors;
  nlohmann::json power = nlohmann::json::object();
  for (unsigned id : ids) {
    Gpu& gpu = *devices.gpus[id].gpu;
    auto p = read_retrying([&] { return gpu.power(PowerDomain::kDeviceInstant); });
    if (p)
      power[std::to_string(id)] = to_u32(p->value());
    else
      errors.emplace(id, std::move(p.error()));
  }
  return aggregate(errors, nlohmann::json{{"timestamp_ms", unix_ms()}, {"power_mw", power}});
}

}  // namespace erg::daemon
