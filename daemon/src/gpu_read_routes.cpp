// The gpu-read group: /gpu/get_* (the stream lives in streaming.cpp).

#include <algorithm>
#include <charconv>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "gpu_routes.hpp"
#include "replies.hpp"
#include "reply_bodies.hpp"

namespace erg::daemon {
namespace {

/// Writes a JSON body into a buffer sized up front: literals of known length are copied
/// inline and numbers go straight in with std::to_chars, so building a reply makes no library
/// call per piece (std::string::append is an out-of-line call with a length check each time).
class BodyWriter {
 public:
  explicit BodyWriter(char* at) : p_(at) {}
  template <std::size_t N>
  void lit(const char (&s)[N]) {
    std::memcpy(p_, s, N - 1);
    p_ += N - 1;
  }
  void ch(char c) { *p_++ = c; }
  void u64(std::uint64_t v) {
    if (v < 10)  // a GPU id, mostly
      *p_++ = static_cast<char>('0' + v);
    else
      p_ = std::to_chars(p_, p_ + 20, v).ptr;
  }
  [[nodiscard]] char* end() const { return p_; }

 private:
  char* p_;
};

/// The most one entry's fields write: two `"<name>":<u64>` pairs.
constexpr std::size_t kMaxFieldsBytes = 2 * (32 + 20);
/// `,"<id>":{` + fields + `}`.
constexpr std::size_t kMaxEntryBytes = 2 + 10 + 3 + kMaxFieldsBytes + 1;

/// The per-GPU reads: `{"<id>":{<fields>},...}` with the ids in the order of their decimal
/// strings and the fields sorted, the bytes nlohmann::json::dump() would write. Built directly:
/// this is the hot path of a polling client. `read(gpu)` returns a Result; `fields(out, value)`
/// writes the entry's fields without braces, at most kMaxFieldsBytes.
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
  // Written on the stack (bounded by kMaxEntryBytes per GPU), then copied once into the body,
  // the thread's spare buffer: sizing a string up front would zero-fill the whole bound first.
  constexpr std::size_t kStackGpus = 16;
  std::vector<char> spill;  // more GPUs than kStackGpus: rare, the heap
  char stack_buf[2 + kStackGpus * kMaxEntryBytes];
  char* start = stack_buf;
  if (n > kStackGpus) {
    spill.resize(2 + n * kMaxEntryBytes);
    start = spill.data();
  }
  BodyWriter out(start);
  out.ch('{');
  bool first = true;
  for (std::size_t k = 0; k < n; ++k) {
    unsigned id = ids.empty() ? static_cast<unsigned>(k) : ids[k];
    Gpu& gpu = *devices.gpus[id].gpu;
    auto value = read_retrying([&] { return read(gpu); });
    if (!value) {
      errors.emplace(id, std::move(value.error()));
      continue;
    }
    if (!first) out.ch(',');
    first = false;
    out.ch('"');
    out.u64(id);
    out.lit("\":{");
    fields(out, *value);
    out.ch('}');
  }
  out.ch('}');
  std::string body = take_reply_body();
  body.assign(start, out.end());
  if (!errors.empty()) return aggregate(errors, nlohmann::json::parse(body));
  return Reply{{200, "application/json", std::move(body), {}}, std::nullopt};
}

}  // namespace

Reply gpu_get_cumulative_energy(const DeviceSlots& devices, const protocol::Query& query) {
  return read_each(
      devices, query, [](Gpu& gpu) { return gpu.total_energy(); },
      [](BodyWriter& out, MilliJoules e) {
        out.lit("\"energy_mj\":");
        out.u64(to_u64(e.value()));
      });
}

Reply gpu_get_power_limit(const DeviceSlots& devices, const protocol::Query& query) {
  return read_each(
      devices, query, [](Gpu& gpu) { return gpu.power_limit(); },
      [](BodyWriter& out, MilliWatts limit) {
        out.lit("\"power_limit_mw\":");
        out.u64(to_u32(limit.value()));
      });
}

Reply gpu_get_power_limit_constraints(const DeviceSlots& devices, const protocol::Query& query) {
  return read_each(
      devices, query, [](Gpu& gpu) { return gpu.power_limit_constraints(); },
      [](BodyWriter& out, const PowerLimitConstraints& c) {
        out.lit("\"max_power_limit_mw\":");
        out.u64(to_u32(c.max.value()));
        out.lit(",\"min_power_limit_mw\":");
        out.u64(to_u32(c.min.value()));
      });
}

Reply gpu_get_persistence_mode(const DeviceSlots& devices, const protocol::Query& query) {
  return read_each(
      devices, query, [](Gpu& gpu) { return gpu.persistence_mode(); },
      [](BodyWriter& out, bool enabled) {
        if (enabled)
          out.lit("\"enabled\":true");
        else
          out.lit("\"enabled\":false");
      });
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
