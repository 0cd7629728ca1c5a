// The gpu-control group: /gpu/set_* and /gpu/reset_*. Each route reads its typed fields, then
// hands one command per GPU to that GPU's owner thread.

#include <functional>
#include <future>
#include <map>
#include <memory>
#include <string>

#include "gpu_routes.hpp"
#include "replies.hpp"

namespace erg::daemon {
namespace {

/// What a setter does to one GPU (its id, the device), on that GPU's owner thread.
using Command = std::function<Result<void>(unsigned, Gpu&)>;

/// A command that does not need the GPU's id.
template <class F>
Command on_each(F f) {
  return [f = std::move(f)](unsigned, Gpu& gpu) { return f(gpu); };
}

/// The fields every setter has, in the order actix-web reports their errors: `block` first,
/// then the route's own fields (read by the caller), then `gpu_ids`.
Reply run_on_owners(const DeviceSlots& devices, const protocol::Query& query, bool block, const Command& command) {
  std::vector<unsigned> ids;
  if (auto bad = select_ids(query, "gpu_ids", devices.gpus.size(), "GPU", ids)) return std::move(*bad);
  std::map<unsigned, Error> errors;
  // The GPUs the command reached (applied, or queued without block), for a partial failure.
  auto applied = [&] {
    std::vector<unsigned> out;
    for (unsigned id : ids)
      if (!errors.contains(id)) out.push_back(id);
    return out;
  };
  const Error shutting_down{ErrorCode::kUnavailable, "GPU command send error: daemon is shutting down"};
  if (!block) {
    for (unsigned id : ids) {
      auto gpu = devices.gpus[id].gpu;
      if (!devices.gpus[id].worker->post([id, gpu, command] { (void)command(id, *gpu); }))
        errors.emplace(id, shutting_down);
    }
    return aggregate(errors, std::nullopt, applied());
  }
  // Fan out to every owner thread, then wait for all.
  std::vector<std::future<Result<void>>> futures;
  for (unsigned id : ids) {
    auto promise = std::make_shared<std::promise<Result<void>>>();
    futures.push_back(promise->get_future());
    auto gpu = devices.gpus[id].gpu;
    if (!devices.gpus[id].worker->post([id, gpu, command, promise] { promise->set_value(command(id, *gpu)); }))
      promise->set_value(fail(shutting_down));
  }
  for (std::size_t k = 0; k < ids.size(); ++k) {
    auto r = futures[k].get();
    if (!r) errors.emplace(ids[k], std::move(r.error()));
  }
  return aggregate(errors, std::nullopt, applied());
}

/// Reads a required bool or u32 field (the route table makes them required) or answers 400.
template <class T>
std::optional<Reply> field(const Result<std::optional<T>>& value, T& out) {
  if (!value) return text_reply(400, value.error().message);
  out = value->value_or(T{});
  return std::nullopt;
}

Result<void> check_clock_range(std::uint32_t min_mhz, std::uint32_t max_mhz) {
  if (min_mhz > max_mhz)
    return fail(ErrorCode::kInvalidArgument, "Invalid request: min_clock_mhz is greater than max_clock_mhz");
  return ok();
}

}  // namespace

Reply gpu_set_power_limit(const DeviceSlots& devices, const protocol::Query& query, const Peer& peer,
                          LimitRestorer* restorer) {
  bool block = false;
  std::uint32_t limit_mw = 0;
  if (auto bad = field(query.get_bool("block"), block)) return std::move(*bad);
  if (auto bad = field(query.get_u32("power_limit_mw"), limit_mw)) return std::move(*bad);
  // The setting process, named now, while its connection is open (limit_restorer.hpp).
  std::shared_ptr<const ClientProcess> setter = restorer != nullptr ? ClientProcess::of(peer) : nullptr;
  return run_on_owners(devices, query, block, [limit_mw, restorer, setter](unsigned id, Gpu& gpu) -> Result<void> {
    auto c = gpu.power_limit_constraints();
    if (c && (limit_mw < c->min.value() || limit_mw > c->max.value()))
      return fail(ErrorCode::kInvalidArgument,
                  "Invalid request: power limit " + std::to_string(limit_mw) + " mW is outside the supported range [" +
                      std::to_string(to_u64(c->min.value())) + ", " + std::to_string(to_u64(c->max.value())) + "] mW");
    if (restorer != nullptr) restorer->before_set(id);
    auto r = gpu.set_power_limit(MilliWatts(limit_mw));
    if (r && restorer != nullptr) restorer->claimed(id, setter, MilliWatts(limit_mw));
    return r;
  });
}

Reply gpu_set_persistence_mode(const DeviceSlots& devices, const protocol::Query& query) {
  bool block = false, enabled = false;
  if (auto bad = field(query.get_bool("block"), block)) return std::move(*bad);
  if (auto bad = field(query.get_bool("enabled"), enabled)) return std::move(*bad);
  return run_on_owners(devices, query, block,
                       on_each([enabled](Gpu& gpu) { return gpu.set_persistence_mode(enabled); }));
}

namespace {
using Clocks = LimitRestorer::Clocks;

/// The two locked-clock setters: block, min_clock_mhz and max_clock_mhz, checked, then `set`;
/// with a restorer, the setting process owns the domain's clocks (limit_restorer.hpp).
Reply set_locked_clocks(const DeviceSlots& devices, const protocol::Query& query, const Peer& peer,
                        LimitRestorer* restorer, Clocks domain, Result<void> (Gpu::*set)(Megahertz, Megahertz)) {
  bool block = false;
  std::uint32_t lo = 0, hi = 0;
  if (auto bad = field(query.get_bool("block"), block)) return std::move(*bad);
  if (auto bad = field(query.get_u32("min_clock_mhz"), lo)) return std::move(*bad);
  if (auto bad = field(query.get_u32("max_clock_mhz"), hi)) return std::move(*bad);
  std::shared_ptr<const ClientProcess> setter = restorer != nullptr ? ClientProcess::of(peer) : nullptr;
  return run_on_owners(devices, query, block,
                       [lo, hi, set, restorer, setter, domain](unsigned id, Gpu& gpu) -> Result<void> {
                         if (auto r = check_clock_range(lo, hi); !r) return r;
                         auto r = (gpu.*set)(Megahertz(lo), Megahertz(hi));
                         if (r && restorer != nullptr)
                           restorer->clocks_claimed(id, domain, setter, Megahertz(lo), Megahertz(hi));
                         return r;
                       });
}

/// A reset of `domains`' locked clocks; with a restorer, nobody owns them after.
Reply reset_locked_clocks(const DeviceSlots& devices, const protocol::Query& query, LimitRestorer* restorer, bool sm,
                          bool memory) {
  bool block = false;
  if (auto bad = field(query.get_bool("block"), block)) return std::move(*bad);
  return run_on_owners(devices, query, block, [restorer, sm, memory](unsigned id, Gpu& gpu) -> Result<void> {
    Result<void> a = ok(), b = ok();
    if (sm) {
      a = gpu.reset_gpu_locked_clocks();
      if (a && restorer != nullptr) restorer->clocks_reset(id, Clocks::kSm);
    }
    if (memory) {
      b = gpu.reset_memory_locked_clocks();
      if (b && restorer != nullptr) restorer->clocks_reset(id, Clocks::kMemory);
    }
    return a ? b : a;
  });
}
}  // namespace

Reply gpu_set_gpu_locked_clocks(const DeviceSlots& devices, const protocol::Query& query, const Peer& peer,
                                LimitRestorer* restorer) {
  return set_locked_clocks(devices, query, peer, restorer, Clocks::kSm, &Gpu::set_gpu_locked_clocks);
}

Reply gpu_set_mem_locked_clocks(const DeviceSlots& devices, const protocol::Query& query, const Peer& peer,
                                LimitRestorer* restorer) {
  return set_locked_clocks(devices, query, peer, restorer, Clocks::kMemory, &Gpu::set_memory_locked_clocks);
}

Reply gpu_reset_gpu_locked_clocks(const DeviceSlots& devices, const protocol::Query& query, LimitRestorer* restorer) {
  return reset_locked_clocks(devices, query, restorer, true, false);
}

Reply gpu_reset_mem_locked_clocks(const DeviceSlots& devices, const protocol::Query& query, LimitRestorer* restorer) {
  return reset_locked_clocks(devices, query, restorer, false, true);
}

Reply gpu_reset_locked_clocks(const DeviceSlots& devices, const protocol::Query& query, LimitRestorer* restorer) {
  return reset_locked_clocks(devices, query, restorer, true, true);
}

}  // namespace erg::daemon
