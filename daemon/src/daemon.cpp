#include "erg/daemon/daemon.hpp"

#include <linux/capability.h>
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>

#include "device_worker.hpp"
#include "erg/daemon/auth.hpp"
#include "erg/daemon/metric_names.hpp"
#include "erg/protocol/bodies.hpp"
#include "erg/protocol/query.hpp"
#include "erg/protocol/routes.hpp"
#include "erg/protocol/status.hpp"
#include "power_poller.hpp"
#include "server.hpp"

namespace erg::daemon {

using nlohmann::json;
using protocol::ApiGroup;
using protocol::HttpResponse;
using protocol::Route;

namespace {

std::uint64_t unix_ms() {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count());
}

HttpResponse json_response(int status, const json& body) { return {status, "application/json", body.dump(), {}}; }
HttpResponse error_json(int status, std::string_view message) {
  return {status, "application/json", protocol::error_body(message), {}};
}
HttpResponse text(int status, std::string body) { return {status, "text/plain; charset=utf-8", std::move(body), {}}; }
HttpResponse empty(int status) { return {status, "", "", {}}; }

bool has_cap_sys_admin() {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2]{};
  if (syscall(SYS_capget, &header, data) != 0) return false;
  return (data[CAP_SYS_ADMIN / 32].effective & (1u << (CAP_SYS_ADMIN % 32))) != 0;
}

std::uint64_t to_u64(double v) { return v <= 0 ? 0 : static_cast<std::uint64_t>(std::llround(v)); }
std::uint32_t to_u32(double v) {
  if (v <= 0) return 0;
  if (v >= 4294967295.0) return 4294967295u;
  return static_cast<std::uint32_t>(std::lround(v));
}

struct GpuSlot {
  std::shared_ptr<Gpu> gpu;
  bool energy_available = false;
  std::unique_ptr<DeviceWorker> worker;
  std::unique_ptr<PowerPoller> poller;
  std::optional<std::uint32_t> last_mw;  // poller thread only
};

struct CpuSlot {
  std::shared_ptr<Cpu> cpu;
  std::unique_ptr<PowerPoller> poller;
  // poller thread only
  std::optional<double> last_pkg_uj, last_dram_uj;
  std::chrono::steady_clock::time_point last_time;
  std::optional<std::uint64_t> last_cpu_mw, last_dram_mw;
  bool have_last_event = false;
};

}  // namespace

struct Daemon::Impl {
  Config config;
  Inventory inventory;
  std::string signing_key;
  std::vector<GpuSlot> gpus;
  std::vector<CpuSlot> cpus;
  std::shared_ptr<Hub> gpu_hub = std::make_shared<Hub>();
  std::shared_ptr<Hub> cpu_hub = std::make_shared<Hub>();
  std::atomic<bool> stopping{false};
  std::unique_ptr<Server> server;

  // Metrics (scrape-time reads; one scrape at a time).
  std::mutex metrics_mutex;
  std::shared_ptr<prometheus::Registry> registry = std::make_shared<prometheus::Registry>();
  std::vector<prometheus::Counter*> gpu_energy, cpu_energy, dram_energy;
  std::vector<prometheus::Gauge*> gpu_power, gpu_limit;
  std::vector<double> gpu_energy_seen, cpu_energy_seen, dram_energy_seen;

  bool enabled(ApiGroup g) const { return config.enabled.count(g) != 0; }
  Reply handle(const protocol::RouteInfo& route, const protocol::Query& q, const std::optional<TokenClaims>& claims);
  Reply gpu_setter(Route route, const protocol::Query& q);
  Reply gpu_read(Route route, const protocol::Query& q);
  Reply cpu_read(Route route, const protocol::Query& q);
  HttpResponse metrics();
  void setup_metrics();
};

namespace {

/// Validates a gpu_ids/cpu_ids list the way zeusd's handlers do.
std::optional<HttpResponse> check_ids(const std::vector<unsigned>& ids, std::size_t count, const char* kind) {
  if (ids.empty())
    return error_json(
        400, std::string(kind[0] == 'G' ? "gpu_ids" : "cpu_ids") + " must contain at least one " + kind + " index");
  for (unsigned id : ids)
    if (id >= count) return text(400, std::string(kind) + " index " + std::to_string(id) + " does not exist.");
  return std::nullopt;
}

std::vector<unsigned> all_ids(std::size_t n) {
  std::vector<unsigned> v(n);
  for (unsigned i = 0; i < n; ++i) v[i] = i;
  return v;
}

/// Aggregates per-device results: 200 with `ok_body` (empty → no body), or {"errors": ...}
/// with the worst status.
Reply aggregate(const std::map<unsigned, Error>& errors, std::optional<json> ok_body) {
  if (errors.empty()) return Reply{ok_body ? json_response(200, *ok_body) : empty(200), std::nullopt};
  int status = 0;
  std::map<unsigned, std::string> msgs;
  for (const auto& [id, e] : errors) {
    status =
        status == 0 ? protocol::http_status(e.code) : protocol::worst_status(status, protocol::http_status(e.code));
    msgs[id] = e.message;
  }
  return Reply{{status, "application/json", protocol::errors_body(msgs), {}}, std::nullopt};
}

}  // namespace

Reply Daemon::Impl::gpu_setter(Route route, const protocol::Query& q) {
  // Typed fields first (actix deserializes the whole query before the handler runs).
  auto block = q.get_bool("block");
  if (!block) return Reply{text(400, block.error().message), std::nullopt};
  std::optional<std::uint32_t> limit_mw, min_mhz, max_mhz;
  std::optional<bool> enabled_flag;
  if (route == Route::kSetPowerLimit) {
    auto v = q.get_u32("power_limit_mw");
    if (!v) return Reply{text(400, v.error().message), std::nullopt};
    limit_mw = *v;
  } else if (route == Route::kSetPersistenceMode) {
    auto v = q.get_bool("enabled");
    if (!v) return Reply{text(400, v.error().message), std::nullopt};
    enabled_flag = *v;
  } else if (route == Route::kSetGpuLockedClocks || route == Route::kSetMemLockedClocks) {
    auto lo = q.get_u32("min_clock_mhz");
    if (!lo) return Reply{text(400, lo.error().message), std::nullopt};
    auto hi = q.get_u32("max_clock_mhz");
    if (!hi) return Reply{text(400, hi.error().message), std::nullopt};
    min_mhz = *lo;
    max_mhz = *hi;
  }
  auto ids = protocol::parse_ids(*q.get("gpu_ids"));
  if (auto bad = check_ids(ids, gpus.size(), "GPU")) return Reply{*bad, std::nullopt};

  auto command = [=](Gpu& gpu) -> Result<void> {
    switch (route) {
      case Route::kSetPowerLimit: {
        auto c = gpu.power_limit_constraints();
        if (c && (*limit_mw < c->min.value() || *limit_mw > c->max.value()))
          return fail(ErrorCode::kInvalidArgument, "Invalid request: power limit " + std::to_string(*limit_mw) +
                                                       " mW is outside the supported range [" +
                                                       std::to_string(to_u64(c->min.value())) + ", " +
                                                       std::to_string(to_u64(c->max.value())) + "] mW");
        return gpu.set_power_limit(MilliWatts(*limit_mw));
      }
      case Route::kSetPersistenceMode: return gpu.set_persistence_mode(*enabled_flag);
      case Route::kSetGpuLockedClocks:
        if (*min_mhz > *max_mhz)
          return fail(ErrorCode::kInvalidArgument, "Invalid request: min_clock_mhz is greater than max_clock_mhz");
        return gpu.set_gpu_locked_clocks(Megahertz(*min_mhz), Megahertz(*max_mhz));
      case Route::kSetMemLockedClocks:
        if (*min_mhz > *max_mhz)
          return fail(ErrorCode::kInvalidArgument, "Invalid request: min_clock_mhz is greater than max_clock_mhz");
        return gpu.set_memory_locked_clocks(Megahertz(*min_mhz), Megahertz(*max_mhz));
      case Route::kResetGpuLockedClocks: return gpu.reset_gpu_locked_clocks();
      case Route::kResetMemLockedClocks: return gpu.reset_memory_locked_clocks();
      case Route::kResetLockedClocks: {
        auto a = gpu.reset_gpu_locked_clocks();
        auto b = gpu.reset_memory_locked_clocks();
        return a ? b : a;
      }
      default: return fail(ErrorCode::kInternal, "not a setter");
    }
  };

  std::map<unsigned, Error> errors;
  if (!**block) {
    for (unsigned id : ids) {
      auto gpu = gpus[id].gpu;
      if (!gpus[id].worker->post([gpu, command] { (void)command(*gpu); }))
        errors[id] = Error{ErrorCode::kUnavailable, "GPU command send error: daemon is shutting down"};
    }
    return aggregate(errors, std::nullopt);
  }
  // Fan out to every owner thread, then wait for all.
  std::vector<std::shared_ptr<std::promise<Result<void>>>> promises;
  std::vector<std::future<Result<void>>> futures;
  for (unsigned id : ids) {
    auto p = std::make_shared<std::promise<Result<void>>>();
    futures.push_back(p->get_future());
    auto gpu = gpus[id].gpu;
    if (!gpus[id].worker->post([gpu, command, p] { p->set_value(command(*gpu)); }))
      p->set_value(fail(ErrorCode::kUnavailable, "GPU command send error: daemon is shutting down"));
  }
  for (std::size_t k = 0; k < ids.size(); ++k) {
    auto r = futures[k].get();
    if (!r) errors[ids[k]] = r.error();
  }
  return aggregate(errors, std::nullopt);
}

Reply Daemon::Impl::gpu_read(Route route, const protocol::Query& q) {
  std::vector<unsigned> ids;
  if (auto raw = q.get("gpu_ids")) {
    ids = protocol::parse_ids(*raw);
    if (route == Route::kGpuGetPower || route == Route::kGpuStreamPower) {
      std::vector<unsigned> unknown;
      for (unsigned id : ids)
        if (id >= gpus.size()) unknown.push_back(id);
      if (!unknown.empty()) {
        auto valid = all_ids(gpus.size());
        return Reply{error_json(400, "Unknown GPU indices: " + protocol::format_ids(unknown) +
                                         ". Available: " + protocol::format_ids(valid)),
                     std::nullopt};
      }
    } else if (auto bad = check_ids(ids, gpus.size(), "GPU")) {
      return Reply{*bad, std::nullopt};
    }
  } else {
    ids = all_ids(gpus.size());
  }
  if (route == Route::kGpuStreamPower) return Reply{empty(200), StreamSpec{true, ids}};

  std::map<unsigned, Error> errors;
  if (route == Route::kGpuGetPower) {
    json power = json::object();
    for (unsigned id : ids) {
      auto p = gpus[id].gpu->power(PowerDomain::kDeviceInstant);
      if (p)
        power[std::to_string(id)] = to_u32(p->value());
      else
        errors[id] = p.error();
    }
    return aggregate(errors, json{{"timestamp_ms", unix_ms()}, {"power_mw", power}});
  }

  // The other reads build their small body directly (the hot path of a polling client): the
  // same bytes nlohmann::json::dump() writes, i.e. {"<id>":{<fields sorted>},...} with the ids
  // in the order of their decimal strings.
  if (ids.size() > 1 && ids.back() >= 10)
    std::sort(ids.begin(), ids.end(), [](unsigned a, unsigned b) { return std::to_string(a) < std::to_string(b); });
  std::string body;
  body.reserve(16 + ids.size() * 64);
  body += '{';
  char num[24];
  auto put_u64 = [&](std::uint64_t v) { body.append(num, std::to_chars(num, num + sizeof num, v).ptr); };
  auto open_entry = [&](unsigned id) {
    if (body.size() > 1) body += ',';
    body += '"';
    put_u64(id);
    body += "\":{";
  };
  for (unsigned id : ids) {
    Gpu& gpu = *gpus[id].gpu;
    switch (route) {
      case Route::kGpuGetCumulativeEnergy: {
        auto e = gpu.total_energy();
        if (!e) {
          errors[id] = e.error();
          break;
        }
        open_entry(id);
        body += "\"energy_mj\":";
        put_u64(to_u64(e->value()));
        body += '}';
        break;
      }
      case Route::kGpuGetPowerLimit: {
        auto p = gpu.power_limit();
        if (!p) {
          errors[id] = p.error();
          break;
        }
        open_entry(id);
        body += "\"power_limit_mw\":";
        put_u64(to_u32(p->value()));
        body += '}';
        break;
      }
      case Route::kGpuGetPowerLimitConstraints: {
        auto c = gpu.power_limit_constraints();
        if (!c) {
          errors[id] = c.error();
          break;
        }
        open_entry(id);
        body += "\"max_power_limit_mw\":";
        put_u64(to_u32(c->max.value()));
        body += ",\"min_power_limit_mw\":";
        put_u64(to_u32(c->min.value()));
        body += '}';
        break;
      }
      case Route::kGpuGetPersistenceMode: {
        auto m = gpu.persistence_mode();
        if (!m) {
          errors[id] = m.error();
          break;
        }
        open_entry(id);
        body += *m ? "\"enabled\":true}" : "\"enabled\":false}";
        break;
      }
      default: break;
    }
  }
  body += '}';
  if (!errors.empty()) return aggregate(errors, std::nullopt);
  return Reply{{200, "application/json", std::move(body), {}}, std::nullopt};
}

Reply Daemon::Impl::cpu_read(Route route, const protocol::Query& q) {
  bool want_cpu = true, want_dram = true;
  if (route == Route::kCpuGetCumulativeEnergy) {
    auto c = q.get_bool("cpu");
    if (!c) return Reply{text(400, c.error().message), std::nullopt};
    auto d = q.get_bool("dram");
    if (!d) return Reply{text(400, d.error().message), std::nullopt};
    want_cpu = **c;
    want_dram = **d;
  }
  std::vector<unsigned> ids;
  if (auto raw = q.get("cpu_ids")) {
    ids = protocol::parse_ids(*raw);
    if (auto bad = check_ids(ids, cpus.size(), "CPU")) return Reply{*bad, std::nullopt};
  } else {
    ids = all_ids(cpus.size());
  }
  if (route == Route::kCpuStreamPower) return Reply{empty(200), StreamSpec{false, ids}};

  std::map<unsigned, Error> errors;
  json body = json::object();
  if (route == Route::kCpuGetCumulativeEnergy) {
    for (unsigned id : ids) {
      Cpu& cpu = *cpus[id].cpu;
      json entry = {{"cpu_energy_uj", nullptr}, {"dram_energy_uj", nullptr}};
      if (want_cpu) {
        auto e = cpu.package_energy();
        if (!e) {
          errors[id] = e.error();
          continue;
        }
        entry["cpu_energy_uj"] = to_u64(e->value());
      }
      if (want_dram && cpu.capabilities().dram) {
        auto e = cpu.dram_energy();
        if (!e) {
          errors[id] = e.error();
          continue;
        }
        entry["dram_energy_uj"] = to_u64(e->value());
      }
      body[std::to_string(id)] = entry;
    }
    return aggregate(errors, body);
  }
  // get_power: two reads one CPU poll period apart.
  struct First {
    double pkg = 0;
    std::optional<double> dram;
  };
  std::map<unsigned, First> first;
  for (unsigned id : ids) {
    auto e = cpus[id].cpu->package_energy();
    if (!e) {
      errors[id] = e.error();
      continue;
    }
    First f{e->value(), std::nullopt};
    if (cpus[id].cpu->capabilities().dram)
      if (auto d = cpus[id].cpu->dram_energy()) f.dram = d->value();
    first[id] = f;
  }
  auto t0 = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(1.0 / config.cpu_power_poll_hz));
  json power = json::object();
  for (auto& [id, f] : first) {
    auto e = cpus[id].cpu->package_energy();
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!e) {
      errors[id] = e.error();
      continue;
    }
    json entry = {{"cpu_mw", to_u64((e->value() - f.pkg) / 1000.0 / secs)}, {"dram_mw", nullptr}};
    if (f.dram)
      if (auto d = cpus[id].cpu->dram_energy()) entry["dram_mw"] = to_u64((d->value() - *f.dram) / 1000.0 / secs);
    power[std::to_string(id)] = entry;
  }
  return aggregate(errors, json{{"timestamp_ms", unix_ms()}, {"power_mw", power}});
}

Reply Daemon::Impl::handle(const protocol::RouteInfo& route, const protocol::Query& q,
                           const std::optional<TokenClaims>& claims) {
  switch (route.route) {
    case Route::kDiscover: {
      protocol::DiscoverBody b;
      for (unsigned i = 0; i < gpus.size(); ++i)
        b.gpus.push_back({i, gpus[i].gpu->name(), gpus[i].gpu->pci_address(), gpus[i].energy_available});
      for (unsigned i = 0; i < cpus.size(); ++i) b.cpus.push_back({i, cpus[i].cpu->capabilities().dram});
      for (ApiGroup g : protocol::kAllApiGroups)
        if (enabled(g)) b.enabled_api_groups.emplace_back(protocol::to_string(g));
      b.auth_required = !signing_key.empty();
      return Reply{json_response(200, protocol::to_json(b)), std::nullopt};
    }
    case Route::kTime: return Reply{json_response(200, json{{"timestamp_ms", unix_ms()}}), std::nullopt};
    case Route::kWhoami: {
      json j = {{"sub", claims ? claims->sub : ""}, {"scopes", claims ? claims->scopes : std::vector<std::string>{}}};
      if (claims && claims->exp) j["exp"] = *claims->exp;
      return Reply{json_response(200, j), std::nullopt};
    }
    case Route::kMetrics: return Reply{metrics(), std::nullopt};
    case Route::kCpuGetCumulativeEnergy:
    case Route::kCpuGetPower:
    case Route::kCpuStreamPower: return cpu_read(route.route, q);
    case Route::kGpuGetCumulativeEnergy:
    case Route::kGpuGetPower:
    case Route::kGpuGetPowerLimit:
    case Route::kGpuGetPowerLimitConstraints:
    case Route::kGpuGetPersistenceMode:
    case Route::kGpuStreamPower: return gpu_read(route.route, q);
    default: return gpu_setter(route.route, q);
  }
}

void Daemon::Impl::setup_metrics() {
  auto& ge = prometheus::BuildCounter()
                 .Name(metrics::kGpuEnergy)
                 .Help("GPU energy from the driver's counter (J)")
                 .Register(*registry);
  auto& gp = prometheus::BuildGauge().Name(metrics::kGpuPower).Help("Instantaneous GPU power (W)").Register(*registry);
  auto& gl = prometheus::BuildGauge().Name(metrics::kGpuPowerLimit).Help("GPU power limit (W)").Register(*registry);
  auto& ce =
      prometheus::BuildCounter().Name(metrics::kCpuEnergy).Help("CPU package energy, RAPL (J)").Register(*registry);
  auto& de = prometheus::BuildCounter().Name(metrics::kDramEnergy).Help("DRAM energy, RAPL (J)").Register(*registry);
  for (unsigned i = 0; i < gpus.size(); ++i) {
    std::map<std::string, std::string> labels{
        {"index", std::to_string(i)}, {"uuid", gpus[i].gpu->uuid()}, {"name", gpus[i].gpu->name()}};
    gpu_energy.push_back(&ge.Add(labels));
    gpu_power.push_back(&gp.Add(labels));
    gpu_limit.push_back(&gl.Add(labels));
    gpu_energy_seen.push_back(0.0);
  }
  for (unsigned i = 0; i < cpus.size(); ++i) {
    std::map<std::string, std::string> labels{{"index", std::to_string(i)}, {"name", cpus[i].cpu->name()}};
    cpu_energy.push_back(&ce.Add(labels));
    cpu_energy_seen.push_back(0.0);
    if (cpus[i].cpu->capabilities().dram) {
      dram_energy.push_back(&de.Add(labels));
    } else {
      dram_energy.push_back(nullptr);
    }
    dram_energy_seen.push_back(0.0);
  }
}

HttpResponse Daemon::Impl::metrics() {
  std::lock_guard lock(metrics_mutex);
  // Counters only move forward: a counter that went back (driver reload) restarts from its
  // new value, which Prometheus's rate() treats as a reset.
  auto advance = [](prometheus::Counter* c, double& seen, double now_j) {
    if (now_j >= seen)
      c->Increment(now_j - seen);
    else
      c->Increment(now_j);
    seen = now_j;
  };
  for (unsigned i = 0; i < gpus.size(); ++i) {
    Gpu& g = *gpus[i].gpu;
    if (gpus[i].energy_available)
      if (auto e = g.total_energy()) advance(gpu_energy[i], gpu_energy_seen[i], Joules(*e).value());
    if (auto p = g.power(PowerDomain::kDeviceInstant)) gpu_power[i]->Set(Watts(*p).value());
    if (auto l = g.power_limit()) gpu_limit[i]->Set(Watts(*l).value());
  }
  for (unsigned i = 0; i < cpus.size(); ++i) {
    if (auto e = cpus[i].cpu->package_energy()) advance(cpu_energy[i], cpu_energy_seen[i], Joules(*e).value());
    if (dram_energy[i] != nullptr)
      if (auto e = cpus[i].cpu->dram_energy()) advance(dram_energy[i], dram_energy_seen[i], Joules(*e).value());
  }
  prometheus::TextSerializer serializer;
  return {200, "text/plain; version=0.0.4; charset=utf-8", serializer.Serialize(registry->Collect()), {}};
}

Daemon::Daemon(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Daemon::~Daemon() { stop(); }

Result<std::unique_ptr<Daemon>> Daemon::create(Config config, Inventory inventory) {
  auto impl = std::make_unique<Impl>();
  if (!config.skip_privilege_check) {
    if (config.enabled.count(ApiGroup::kGpuControl) && ::geteuid() != 0 && !has_cap_sys_admin())
      return fail(ErrorCode::kNoPermission,
                  "API group gpu-control needs root or CAP_SYS_ADMIN (setting GPU power limits and clocks); run ergd "
                  "as root or with AmbientCapabilities=CAP_SYS_ADMIN, or leave gpu-control out of --enable");
    if (config.enabled.count(ApiGroup::kCpuRead)) {
      for (const auto& u : inventory.unavailable)
        if (u.source == "rapl" && u.code == ErrorCode::kNoPermission)
          return fail(ErrorCode::kNoPermission,
                      "API group cpu-read needs read access to RAPL energy counters (" + u.reason +
                          "); run ergd as root or with CAP_DAC_READ_SEARCH, or leave cpu-read out of --enable");
    }
  }
  if (config.signing_key_path) {
    auto key = read_signing_key(*config.signing_key_path);
    if (!key) return fail(key.error());
    impl->signing_key = std::move(*key);
  }
  if (!(config.gpu_power_poll_hz > 0 && config.gpu_power_poll_hz <= 1000) ||
      !(config.cpu_power_poll_hz > 0 && config.cpu_power_poll_hz <= 1000))
    return fail(ErrorCode::kInvalidArgument, "poll rates must be in (0, 1000] Hz");

  Impl* self = impl.get();
  auto gpu_period = std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::duration<double>(1.0 / config.gpu_power_poll_hz));
  auto cpu_period = std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::duration<double>(1.0 / config.cpu_power_poll_hz));
  impl->gpus.resize(inventory.gpus.size());
  for (unsigned i = 0; i < inventory.gpus.size(); ++i) {
    GpuSlot& s = impl->gpus[i];
    s.gpu = inventory.gpus[i];
    // zeusd validates the counter at start-up: NotSupported → cumulative_energy_available=false.
    auto e = s.gpu->total_energy();
    s.energy_available = e.has_value() || e.error().code != ErrorCode::kNotSupported;
    s.worker = std::make_unique<DeviceWorker>();
    s.poller = std::make_unique<PowerPoller>(
        impl->gpu_hub, gpu_period,
        [self, i]() -> std::optional<std::string> {
          GpuSlot& slot = self->gpus[i];
          auto p = slot.gpu->power(PowerDomain::kDeviceInstant);
          if (!p) return std::nullopt;
          std::uint32_t mw = to_u32(p->value());
          if (slot.last_mw == mw) return std::nullopt;
          slot.last_mw = mw;
          return protocol::sse_event(json{{"timestamp_ms", unix_ms()}, {"gpu_id", i}, {"power_mw", mw}});
        },
        [self, i] { self->gpus[i].last_mw.reset(); });
  }
  impl->cpus.resize(inventory.cpus.size());
  for (unsigned i = 0; i < inventory.cpus.size(); ++i) {
    CpuSlot& s = impl->cpus[i];
    s.cpu = inventory.cpus[i];
    s.poller = std::make_unique<PowerPoller>(
        impl->cpu_hub, cpu_period,
        [self, i]() -> std::optional<std::string> {
          CpuSlot& slot = self->cpus[i];
          auto now = std::chrono::steady_clock::now();
          auto e = slot.cpu->package_energy();
          if (!e) return std::nullopt;
          std::optional<double> d;
          if (slot.cpu->capabilities().dram)
            if (auto r = slot.cpu->dram_energy()) d = r->value();
          std::optional<std::string> out;
          if (slot.last_pkg_uj) {
            // Measured elapsed time, not the nominal period (zeusd's quirk, fixed upstream in #283).
            double secs = std::chrono::duration<double>(now - slot.last_time).count();
            if (secs > 0) {
              std::uint64_t cpu_mw = to_u64((e->value() - *slot.last_pkg_uj) / 1000.0 / secs);
              std::optional<std::uint64_t> dram_mw;
              if (d && slot.last_dram_uj) dram_mw = to_u64((*d - *slot.last_dram_uj) / 1000.0 / secs);
              if (!slot.have_last_event || cpu_mw != slot.last_cpu_mw || dram_mw != slot.last_dram_mw) {
                json j = {{"timestamp_ms", unix_ms()}, {"cpu_id", i}, {"cpu_mw", cpu_mw}, {"dram_mw", nullptr}};
                if (dram_mw) j["dram_mw"] = *dram_mw;
                out = protocol::sse_event(j);
                slot.last_cpu_mw = cpu_mw;
                slot.last_dram_mw = dram_mw;
                slot.have_last_event = true;
              }
            }
          }
          slot.last_pkg_uj = e->value();
          slot.last_dram_uj = d;
          slot.last_time = now;
          return out;
        },
        [self, i] {
          CpuSlot& slot = self->cpus[i];
          slot.last_pkg_uj.reset();
          slot.last_dram_uj.reset();
          slot.have_last_event = false;
        });
  }
  impl->config = std::move(config);
  impl->inventory = std::move(inventory);
  impl->setup_metrics();
  return std::unique_ptr<Daemon>(new Daemon(std::move(impl)));
}

Result<void> Daemon::start() {
  if (!impl_->server) impl_->server = std::make_unique<Server>(*this, impl_->config);
  return impl_->server->start();
}

void Daemon::stop() {
  if (!impl_) return;
  impl_->stopping.store(true);
  { std::lock_guard a(impl_->gpu_hub->mutex); }
  impl_->gpu_hub->cv.notify_all();
  impl_->cpu_hub->cv.notify_all();
  if (impl_->server) impl_->server->stop();
  impl_->server.reset();
  for (auto& g : impl_->gpus)
    if (g.worker) g.worker->drain();
}

const Config& Daemon::config() const { return impl_->config; }
std::uint16_t Daemon::tcp_port() const { return impl_->server ? impl_->server->tcp_port() : 0; }

unsigned Daemon::subscribers(bool gpu, unsigned id) const {
  if (gpu) return id < impl_->gpus.size() ? impl_->gpus[id].poller->subscribers() : 0;
  return id < impl_->cpus.size() ? impl_->cpus[id].poller->subscribers() : 0;
}

Reply Daemon::dispatch(const protocol::HttpRequest& request, const Peer& peer) {
  try {
    const protocol::RouteInfo* route = protocol::find_route(request.path);
    if (route == nullptr) return Reply{empty(404), std::nullopt};
    if (request.method != route->method) {
      HttpResponse r = empty(405);
      r.headers.emplace_back("Allow", std::string(route->method));
      return Reply{r, std::nullopt};
    }
    // Disabled API group → 404, before auth (zeusd's order).
    if (route->group && !impl_->enabled(*route->group)) return Reply{empty(404), std::nullopt};
    if (route->route == Route::kWhoami && impl_->signing_key.empty()) return Reply{empty(404), std::nullopt};

    // Unix socket: the peer's uid/gid against the group's allow lists (root always passes).
    if (peer.unix_socket && route->group && peer.uid && *peer.uid != 0) {
      ApiGroup g = *route->group;
      auto u = impl_->config.allow_uid.find(g);
      auto gg = impl_->config.allow_gid.find(g);
      bool listed = u != impl_->config.allow_uid.end() || gg != impl_->config.allow_gid.end();
      bool allowed = !listed || (u != impl_->config.allow_uid.end() && u->second.count(*peer.uid)) ||
                     (gg != impl_->config.allow_gid.end() && peer.gid && gg->second.count(*peer.gid));
      if (!allowed)
        return Reply{error_json(403, "uid " + std::to_string(*peer.uid) + " is not allowed to use API group " +
                                         std::string(protocol::to_string(g)) + " (see --allow-uid/--allow-gid)"),
                     std::nullopt};
    }

    // Bearer tokens on TCP when a signing key is configured; /discover, /time, /metrics are open.
    std::optional<TokenClaims> claims;
    bool needs_token =
        !impl_->signing_key.empty() && !peer.unix_socket && (route->group || route->route == Route::kWhoami);
    if (needs_token) {
      auto unauthorized = [](std::string msg) {
        HttpResponse r = error_json(401, msg);
        r.headers.emplace_back("WWW-Authenticate", "Bearer realm=\"zeusd\"");
        return Reply{r, std::nullopt};
      };
      auto h = request.header("Authorization");
      if (!h || h->size() < 7 || h->substr(0, 7) != "Bearer ") return unauthorized("missing bearer token");
      auto c = verify_token(std::string(h->substr(7)), impl_->signing_key);
      if (!c) return unauthorized(c.error().message);
      if (route->group) {
        auto name = protocol::to_string(*route->group);
        bool granted = false;
        for (const auto& s : c->scopes) granted = granted || s == name;
        if (!granted) return Reply{error_json(403, "token lacks scope " + std::string(name)), std::nullopt};
      }
      claims = std::move(*c);
    }

    auto q = protocol::Query::parse(request.query, route->params, route->required);
    if (!q) return Reply{text(400, q.error().message), std::nullopt};
    return impl_->handle(*route, *q, claims);
  } catch (const std::exception& e) {
    return Reply{error_json(500, std::string("internal error: ") + e.what()), std::nullopt};
  }
}

void Daemon::run_stream(const StreamSpec& spec, const std::function<bool(std::string_view)>& write,
                        const std::function<bool()>& closed) {
  std::vector<PowerPoller*> pollers;
  for (unsigned id : spec.ids) {
    if (spec.gpu && id < impl_->gpus.size()) pollers.push_back(impl_->gpus[id].poller.get());
    if (!spec.gpu && id < impl_->cpus.size()) pollers.push_back(impl_->cpus[id].poller.get());
  }
  Hub& hub = spec.gpu ? *impl_->gpu_hub : *impl_->cpu_hub;
  std::vector<std::uint64_t> seen(pollers.size(), 0);
  {
    std::lock_guard lock(hub.mutex);
    for (std::size_t k = 0; k < pollers.size(); ++k) seen[k] = pollers[k]->seq_locked();
  }
  for (auto* p : pollers) p->subscribe();
  struct Unsubscribe {
    std::vector<PowerPoller*>& ps;
    ~Unsubscribe() {
      for (auto* p : ps) p->unsubscribe();
    }
  } unsubscribe{pollers};

  std::vector<std::string> events;
  while (!impl_->stopping.load() && !closed()) {
    events.clear();
    {
      std::unique_lock lock(hub.mutex);
      auto fresh = [&] {
        for (std::size_t k = 0; k < pollers.size(); ++k)
          if (pollers[k]->seq_locked() != seen[k]) return true;
        return impl_->stopping.load();
      };
      hub.cv.wait_for(lock, std::chrono::milliseconds(100), fresh);
      for (std::size_t k = 0; k < pollers.size(); ++k) {
        if (pollers[k]->seq_locked() != seen[k]) {
          seen[k] = pollers[k]->seq_locked();
          events.push_back(pollers[k]->event_locked());
        }
      }
    }
    for (const auto& e : events)
      if (!write(e)) return;
  }
}

}  // namespace erg::daemon
