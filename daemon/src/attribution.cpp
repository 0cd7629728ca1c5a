#include "attribution.hpp"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <sstream>

#include "erg/measure/proc_info.hpp"
#include "replies.hpp"

namespace erg::daemon {

namespace {

using std::chrono::nanoseconds;

/// Owners remembered before those of processes no ledger holds a sample of are forgotten.
constexpr std::size_t kOwnersKept = 4096;

/// The numbers after `key` on its line of /proc/<pid>/status ("Uid:", "Groups:").
std::vector<std::uint64_t> status_numbers(const std::filesystem::path& proc_root, std::uint32_t pid,
                                          std::string_view key) {
  std::ifstream in(proc_root / std::to_string(pid) / "status");
  std::string line;
  std::vector<std::uint64_t> out;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) != 0) continue;
    std::istringstream s(line.substr(key.size()));
    std::uint64_t v = 0;
    while (s >> v) out.push_back(v);
    break;
  }
  return out;
}

double seconds(nanoseconds d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

ProcessOwner read_process_owner(const std::filesystem::path& proc_root, std::uint32_t pid) {
  ProcessOwner o;
  auto uid = status_numbers(proc_root, pid, "Uid:");
  if (uid.size() >= 2) o.uid = static_cast<uid_t>(uid[1]);  // real, effective, saved, fs
  std::ifstream comm(proc_root / std::to_string(pid) / "comm");
  std::getline(comm, o.comm);
  if (auto cg = measure::read_proc_cgroup(proc_root, pid)) {
    o.container = cg->container_id;
    o.pod = cg->pod_uid;
  }
  return o;
}

// ---- ProcessLedger ----

void ProcessLedger::record(nanoseconds wall, double joules, std::vector<ProcessUtilizationSample> samples,
                           bool processes_listed) {
  std::lock_guard lock(mutex_);
  error_.reset();
  not_attributable_.reset();
  for (auto& s : samples) samples_.push_back(s);
  if (!readings_.empty() && wall <= readings_.back().wall) {
    readings_.back().processes_listed = readings_.back().processes_listed || processes_listed;
    return;
  }
  if (!readings_.empty()) {
    const Reading& prev = readings_.back();
    // Idle: nothing listed at either end and no sample busy in between.
    bool busy = prev.processes_listed || processes_listed;
    for (const auto& s : samples) busy = busy || s.sm_percent > 0;
    if (!busy) {
      measure::EnergySegment seg;
      seg.start = prev.wall;
      seg.end = wall;
      seg.energy = Joules(joules - prev.joules);
      seg.error_bound = Joules(options_.energy_error * std::abs(joules - prev.joules) + 0.002);
      if (seg.energy.value() >= 0) idle_.push_back(seg);
      while (idle_.size() > 1000) idle_.pop_front();
    }
  }
  readings_.push_back(Reading{wall, joules, processes_listed});
  prune_locked();
}

void ProcessLedger::prune_locked() {
  if (readings_.size() < 2) return;
  const nanoseconds horizon = readings_.back().wall - options_.retention;
  while (readings_.size() > 2 && readings_[1].wall <= horizon) readings_.pop_front();
  // Samples for the period before the oldest reading are no longer needed (one period of slack).
  const auto keep_from =
      std::chrono::duration_cast<std::chrono::microseconds>(readings_.front().wall) - std::chrono::seconds(2);
  while (!samples_.empty() && samples_.front().timestamp < keep_from) samples_.pop_front();
}

void ProcessLedger::record_not_attributable(std::string reason) {
  std::lock_guard lock(mutex_);
  error_.reset();
  not_attributable_ = std::move(reason);
}

void ProcessLedger::record_error(Error error) {
  std::lock_guard lock(mutex_);
  error_ = std::move(error);
}

std::set<std::uint32_t> ProcessLedger::pids() const {
  std::lock_guard lock(mutex_);
  std::set<std::uint32_t> out;
  for (const auto& s : samples_) out.insert(s.pid);
  return out;
}

Result<ProcessLedger::Window> ProcessLedger::attribute(std::optional<nanoseconds> since) const {
  std::lock_guard lock(mutex_);
  if (error_) return fail(*error_);
  std::size_t first = 0;
  if (since)
    while (first < readings_.size() && readings_[first].wall < *since) ++first;
  if ((readings_.size() < 2 || first + 1 >= readings_.size()) && not_attributable_) {
    Window w;  // no window to measure (e.g. no energy counter): the reason alone
    w.attribution.attributable = false;
    w.attribution.reason = *not_attributable_;
    return w;
  }
  if (readings_.size() < 2 || first + 1 >= readings_.size())
    return fail(ErrorCode::kUnavailable,
                "no counter update in the window yet: ergd attributes from one counter update to the next "
                "(ask again after a poll period)");
  const Reading& a = readings_[first];
  const Reading& b = readings_.back();
  measure::EnergySegment interval;
  interval.start = a.wall;
  interval.end = b.wall;
  interval.energy = Joules(b.joules - a.joules);
  interval.error_bound = Joules(options_.energy_error * std::abs(b.joules - a.joules) + 0.002);
  Window w;
  if (not_attributable_) {
    w.attribution = measure::not_attributable(interval, *not_attributable_);
    return w;
  }
  std::vector<ProcessUtilizationSample> samples(samples_.begin(), samples_.end());
  measure::ProcessAttributionOptions o;
  if (auto p = measure::infer_sample_period(samples)) o.sample_period = *p;
  o.edge_uncertainty = options_.edge_uncertainty;
  nanoseconds idle_time{0};
  for (const auto& s : idle_) idle_time += s.end - s.start;
  if (!idle_.empty() && idle_time >= options_.min_idle) {
    std::vector<measure::EnergySegment> segs(idle_.begin(), idle_.end());
    if (auto m = measure::calibrate_idle(segs)) {
      o.idle = *m;
      w.idle = *m;
    }
  }
  auto r = measure::attribute_processes(interval, samples, o);
  if (!r) return fail(r.error());
  w.attribution = std::move(*r);
  return w;
}

// ---- AttributionSampler ----

AttributionSampler::AttributionSampler(const DeviceSlots& devices, const Config& config, const Clock& clock)
    : devices_(devices),
      clock_(clock),
      proc_root_(config.proc_root),
      period_(config.attribution_poll),
      started_(clock.wall_now()) {
  for (const auto& slot : devices.gpus) {
    ProcessLedger::Options o;
    o.retention = config.attribution_retention;
    // A reading's time may be the read's rather than the counter update's (drivers differ and
    // the capability cannot tell): the window's ends are known to one update period.
    o.edge_uncertainty = slot.gpu->capabilities().energy_update_period.value_or(std::chrono::milliseconds(100));
    ledgers_.push_back(std::make_unique<ProcessLedger>(o));
    last_seen_.emplace_back(0);
  }
  if (period_ > nanoseconds(0))
    thread_ = std::thread([this] {
      std::unique_lock lock(stop_mutex_);
      while (!stop_) {
        lock.unlock();
        poll_once();
        lock.lock();
        stop_cv_.wait_for(lock, period_, [this] { return stop_; });
      }
    });
}

AttributionSampler::~AttributionSampler() { stop(); }

void AttributionSampler::stop() {
  {
    std::lock_guard lock(stop_mutex_);
    stop_ = true;
  }
  stop_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void AttributionSampler::poll_once() {
  for (std::size_t i = 0; i < ledgers_.size(); ++i) {
    Gpu& gpu = *devices_.gpus[i].gpu;
    ProcessLedger& ledger = *ledgers_[i];
    if (!devices_.gpus[i].energy_available) {
      ledger.record_not_attributable("this GPU has no energy counter");
      continue;
    }
    // Samples first, then the reading: the reading's window then ends no later than the samples.
    auto samples = read_retrying([&] { return gpu.process_utilization(last_seen_[i]); });
    auto listed = gpu.running_processes();
    auto reading = read_retrying([&] { return gpu.energy_reading(); });
    if (!reading) {
      ledger.record_error(reading.error());
      continue;
    }
    const nanoseconds wall = reading->updated_at.value_or(clock_.wall_now());
    const double joules = reading->energy.value() / 1000.0;
    if (!samples) {
      if (samples.error().code == ErrorCode::kNotSupported) {
        ledger.record(wall, joules, {}, true);
        ledger.record_not_attributable(samples.error().message);
      } else {
        ledger.record_error(samples.error());
      }
      continue;
    }
    std::set<std::uint32_t> pids;
    for (const auto& s : *samples) {
      last_seen_[i] = std::max(last_seen_[i], s.timestamp);
      pids.insert(s.pid);
    }
    bool any_listed = listed && !listed->empty();
    if (listed)
      for (const auto& p : *listed) pids.insert(p.pid);
    {
      std::lock_guard lock(owners_mutex_);
      for (auto pid : pids)
        if (!owners_.count(pid)) owners_.emplace(pid, read_process_owner(proc_root_, pid));
    }
    ledger.record(wall, joules, std::move(*samples), any_listed);
  }
  // Owners are kept while any ledger holds a sample of their process; the held set is worked
  // out only once the map has grown (a pass over every sample held).
  {
    std::lock_guard lock(owners_mutex_);
    if (owners_.size() <= kOwnersKept) return;
  }
  std::set<std::uint32_t> held;
  for (const auto& l : ledgers_)
    for (auto pid : l->pids()) held.insert(pid);
  std::lock_guard lock(owners_mutex_);
  for (auto it = owners_.begin(); it != owners_.end();) {
    if (!held.count(it->first))
      it = owners_.erase(it);
    else
      ++it;
  }
}

std::optional<ProcessOwner> AttributionSampler::owner(std::uint32_t pid) const {
  std::lock_guard lock(owners_mutex_);
  auto it = owners_.find(pid);
  if (it == owners_.end()) return std::nullopt;
  return it->second;
}

// ---- the route ----

bool sees_all_processes(const Config& config, const Peer& peer) {
  if (!peer.uid) return false;  // TCP: no uid to match
  if (*peer.uid == 0 || config.attribution_all_uids.count(*peer.uid)) return true;
  if (config.attribution_all_gids.empty()) return false;
  if (peer.gid && config.attribution_all_gids.count(*peer.gid)) return true;
  if (peer.pid)
    for (auto g : status_numbers(config.proc_root, static_cast<std::uint32_t>(*peer.pid), "Groups:"))
      if (config.attribution_all_gids.count(static_cast<gid_t>(g))) return true;
  return false;
}

Reply attribution(const AttributionSampler& sampler, const Config& config, const protocol::Query& query,
                  const Peer& peer) {
  std::vector<unsigned> ids;
  if (auto bad = select_ids(query, "gpu_ids", sampler.gpu_count(), "GPU", ids)) return std::move(*bad);
  std::optional<nanoseconds> since;
  if (auto raw = query.get("since_ms")) {
    std::uint64_t ms = 0;
    auto r = std::from_chars(raw->data(), raw->data() + raw->size(), ms);
    if (raw->empty() || r.ec != std::errc() || r.ptr != raw->data() + raw->size() || ms > (1ull << 53))
      return error_reply(400, "since_ms must be milliseconds since the Unix epoch (a non-negative integer), got '" +
                                  std::string(*raw) + "'");
    // Compared in milliseconds first: a far-future value would overflow nanoseconds.
    const auto now_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch());
    if (ms > static_cast<std::uint64_t>(now_ms.count()))
      return error_reply(400, "since_ms " + std::string(*raw) + " is in the future");
    since = std::chrono::milliseconds(ms);
  }
  const bool all = sees_all_processes(config, peer);
  nlohmann::json gpus = nlohmann::json::object();
  std::map<unsigned, Error> errors;
  auto ms = [](nanoseconds t) { return std::chrono::duration_cast<std::chrono::milliseconds>(t).count(); };
  for (unsigned id : ids) {
    auto w = sampler.ledger(id).attribute(since);
    if (!w) {
      errors.emplace(id, std::move(w.error()));
      continue;
    }
    const auto& a = w->attribution;
    if (!a.attributable && a.end == a.start) {
      gpus[std::to_string(id)] = {{"attributable", false}, {"error", a.reason}};
      continue;
    }
    const double duration = seconds(a.end - a.start);
    nlohmann::json g{{"start_ms", ms(a.start)},
                     {"end_ms", ms(a.end)},
                     {"duration_s", duration},
                     {"measured_j", a.measured.value()},
                     {"measured_bound_j", a.measured_bound.value()},
                     {"attributable", a.attributable}};
    if (!a.attributable) {
      g["error"] = a.reason;  // never 0 J per process
      gpus[std::to_string(id)] = std::move(g);
      continue;
    }
    g["idle_j"] = a.idle.value();
    g["idle_bound_j"] = a.idle_bound.value();
    g["idle_calibrated"] = w->idle.has_value();
    if (w->idle) {
      g["idle_power_w"] = w->idle->power.value();
      g["idle_power_error_w"] = w->idle->error.value();
    }
    g["unattributed_j"] = a.unattributed.value();
    g["unattributed_bound_j"] = a.unattributed_bound.value();
    nlohmann::json rows = nlohmann::json::array();
    double other_j = 0, other_bound = 0;
    std::size_t other_n = 0;
    for (const auto& p : a.processes) {
      auto owner = sampler.owner(p.pid);
      bool own = owner && owner->uid && peer.uid && *owner->uid == *peer.uid;
      if (!all && !own) {
        other_j += p.energy.value();
        other_bound += p.bound.value();
        ++other_n;
        continue;
      }
      nlohmann::json row{{"pid", p.pid},
                         {"energy_j", p.energy.value()},
                         {"bound_j", p.bound.value()},
                         {"power_w", duration > 0 ? p.energy.value() / duration : 0.0},
                         {"busy_s", p.busy.count()},
                         {"share", p.share}};
      row["uid"] = owner && owner->uid ? nlohmann::json(*owner->uid) : nlohmann::json(nullptr);
      row["comm"] = owner ? owner->comm : "";
      row["container"] = owner && owner->container ? nlohmann::json(*owner->container) : nlohmann::json(nullptr);
      row["pod"] = owner && owner->pod ? nlohmann::json(*owner->pod) : nlohmann::json(nullptr);
      rows.push_back(std::move(row));
    }
    g["processes"] = std::move(rows);
    g["other_users"] = {{"processes", other_n},
                        {"energy_j", other_j},
                        {"bound_j", other_bound},
                        {"power_w", duration > 0 ? other_j / duration : 0.0}};
    gpus[std::to_string(id)] = std::move(g);
  }
  nlohmann::json body{{"gpus", gpus},
                      {"daemon_started_ms", ms(sampler.started())},
                      {"sees_all_processes", all},
                      {"uid", peer.uid ? nlohmann::json(*peer.uid) : nlohmann::json(nullptr)}};
  if (errors.empty()) return json_reply(200, body);
  Reply r = aggregate(errors, body);
  // Only "no counter update yet": a temporary state, 503 (ask again), not a failure.
  bool early =
      std::all_of(errors.begin(), errors.end(), [](const auto& e) { return e.second.code == ErrorCode::kUnavailable; });
  if (early) r.response.status = 503;
  return r;
}

}  // namespace erg::daemon
