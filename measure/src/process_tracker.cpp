#include "erg/measure/process_tracker.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>

namespace erg::measure {

namespace {

std::string read_comm(const std::filesystem::path& proc_root, std::uint32_t pid) {
  std::ifstream in(proc_root / std::to_string(pid) / "comm");
  std::string line;
  if (!in || !std::getline(in, line)) return {};
  return line;
}

std::optional<std::uint64_t> read_starttime(const std::filesystem::path& proc_root, std::uint32_t pid) {
  auto st = read_proc_pid_stat(proc_root, pid);
  if (!st) return std::nullopt;
  return st->starttime;
}

double seconds(std::chrono::nanoseconds d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

ProcessTracker::ProcessTracker(Gpu& gpu, const Clock& clock, ProcessTrackerOptions options)
    : gpu_(gpu), clock_(clock), options_(std::move(options)) {}

TrackedProcess ProcessTracker::describe(const GpuProcess& p, std::chrono::nanoseconds now) const {
  TrackedProcess t;
  t.pid = p.pid;
  t.comm = read_comm(options_.proc_root, p.pid);
  t.starttime = read_starttime(options_.proc_root, p.pid);
  if (auto cg = read_proc_cgroup(options_.proc_root, p.pid)) t.cgroup = std::move(*cg);
  t.used_memory_bytes = p.used_memory_bytes;
  t.gpu_instance = p.gpu_instance;
  t.first_seen = now;
  return t;
}

Result<ProcessStep> ProcessTracker::step() {
  auto er = gpu_.energy_reading();
  if (!er) return fail(er.error());
  Reading now;
  now.joules = er->energy.value() / 1000.0;
  now.stamped = er->updated_at.has_value();
  now.wall = er->updated_at.value_or(clock_.wall_now());
  const auto wall_now = clock_.wall_now();

  std::vector<GpuProcess> listed;
  if (auto rp = gpu_.running_processes()) {
    listed = std::move(*rp);
  } else if (rp.error().code != ErrorCode::kNotSupported) {
    return fail(rp.error());
  }
  std::optional<std::string> not_attributable_reason;
  if (!previous_) last_seen_ = std::chrono::duration_cast<std::chrono::microseconds>(now.wall);
  std::vector<ProcessUtilizationSample> fresh;
  if (auto got = gpu_.process_utilization(last_seen_)) {
    fresh = std::move(*got);
  } else if (got.error().code == ErrorCode::kNotSupported) {
    not_attributable_reason = got.error().message;
  } else {
    return fail(got.error());
  }

  // From here on nothing fails: commit.
  for (const auto& s : fresh) last_seen_ = std::max(last_seen_, s.timestamp);
  samples_.insert(samples_.end(), fresh.begin(), fresh.end());

  ProcessStep out;
  out.measured = last_.measured;
  out.measured_bound = last_.measured_bound;
  out.idle = last_.idle;
  out.idle_bound = last_.idle_bound;
  out.unattributed = last_.unattributed;
  out.unattributed_bound = last_.unattributed_bound;
  out.exited = last_.exited;
  out.exited_bound = last_.exited_bound;
  out.exited_count = last_.exited_count;
  out.counter_anomalies = last_.counter_anomalies;
  out.attributable = !not_attributable_reason;
  if (not_attributable_reason) out.reason = *not_attributable_reason;

  // Membership: the driver's table now. A pid whose start time changed is a new process.
  std::map<std::uint32_t, TrackedProcess> old;
  for (auto& p : live_) old.emplace(p.pid, std::move(p));
  std::vector<TrackedProcess> live;
  for (const auto& gp : listed) {
    auto it = old.find(gp.pid);
    if (it != old.end()) {
      const auto st = read_starttime(options_.proc_root, gp.pid);
      if (!st || !it->second.starttime || *st == *it->second.starttime) {
        TrackedProcess kept = std::move(it->second);
        old.erase(it);
        kept.used_memory_bytes = gp.used_memory_bytes;
        kept.gpu_instance = gp.gpu_instance;
        live.push_back(std::move(kept));
        continue;
      }
    }
    live.push_back(describe(gp, wall_now));
  }
  std::sort(live.begin(), live.end(), [](const auto& a, const auto& b) { return a.pid < b.pid; });
  std::vector<ExitedProcess> leaving;
  for (auto& [pid, p] : old) leaving.push_back({std::move(p), true});

  // The interval to attribute: from the last attributed end to the previous step's reading
  // (attribute_late: the driver has sampled past it by now), else to this one.
  std::optional<Reading> end_r;
  if (!previous_)
    previous_ = now;  // the first step: the baseline
  else
    end_r = options_.attribute_late ? pending_ : std::optional<Reading>(now);
  if (end_r && end_r->wall <= previous_->wall) end_r.reset();  // the counter has not moved on
  if (end_r && end_r->joules < previous_->joules) {            // it went back: start again from there
    ++out.counter_anomalies;
    previous_ = *end_r;
    end_r.reset();
  }
  bool attributed = false;
  if (end_r) {
    EnergySegment seg;
    seg.start = previous_->wall;
    seg.end = end_r->wall;
    seg.energy = Joules(end_r->joules - previous_->joules);
    seg.error_bound = Joules(options_.energy_error * std::abs(seg.energy.value()) + 0.002);  // + 1 mJ per end
    auto options = options_.attribution;
    options.edge_uncertainty =
        (end_r->stamped && previous_->stamped) ? std::chrono::nanoseconds(0) : options_.counter_period;
    Result<ProcessAttribution> a = not_attributable_reason
                                       ? Result<ProcessAttribution>(not_attributable(seg, *not_attributable_reason))
                                       : attribute_processes(seg, samples_, options);
    if (a) {
      attributed = true;
      const double t = seconds(seg.end - seg.start);
      out.updated = true;
      out.start = seg.start;
      out.end = seg.end;
      out.measured += seg.energy;
      out.measured_bound += seg.error_bound;
      out.measured_power = Watts(seg.energy.value() / t);
      out.measured_power_bound = Watts(seg.error_bound.value() / t);
      out.idle += a->idle;
      out.idle_bound += a->idle_bound;
      // A GPU that cannot be attributed keeps its energy whole, as unattributed.
      const Joules rest = a->attributable ? a->unattributed : seg.energy;
      const Joules rest_bound = a->attributable ? a->unattributed_bound : seg.error_bound;
      out.unattributed += rest;
      out.unattributed_bound += rest_bound;
      out.idle_power = Watts(a->idle.value() / t);
      out.unattributed_power = Watts(rest.value() / t);
      out.unattributed_power_bound = Watts(rest_bound.value() / t);
      auto reset = [](TrackedProcess& p) {
        p.share = 0.0;
        p.power = Watts(0.0);
        p.power_bound = Watts(0.0);
        p.interval_energy = Joules(0.0);
        p.interval_bound = Joules(0.0);
      };
      for (auto& p : live) reset(p);
      for (auto& e : leaving) reset(e.process);
      for (const auto& pe : a->processes) {
        TrackedProcess* target = nullptr;
        for (auto& p : live)
          if (p.pid == pe.pid) target = &p;
        for (auto& e : leaving)
          if (!target && e.process.pid == pe.pid) target = &e.process;
        if (!target) {
          // Ran only between two steps: known from its samples alone.
          ExitedProcess e;
          e.listed = false;
          e.process.pid = pe.pid;
          e.process.comm = read_comm(options_.proc_root, pe.pid);
          e.process.first_seen = seg.start;
          leaving.push_back(std::move(e));
          target = &leaving.back().process;
        }
        target->share = pe.share;
        target->interval_energy = pe.energy;
        target->interval_bound = pe.bound;
        target->power = Watts(pe.energy.value() / t);
        target->power_bound = Watts(pe.bound.value() / t);
        target->energy += pe.energy;
        target->energy_bound += pe.bound;
      }
      previous_ = *end_r;
      std::erase_if(samples_, [&](const auto& s) {
        return std::chrono::duration_cast<std::chrono::nanoseconds>(s.timestamp) <= seg.end;
      });
    }
  }
  if (options_.attribute_late) {
    if (now.wall > previous_->wall)
      pending_ = now;
    else
      pending_.reset();
  }
  if (!attributed) {
    // Nothing new: keep the last interval's figures for the processes still here.
    out.start = last_.start;
    out.end = last_.end;
    out.measured_power = last_.measured_power;
    out.measured_power_bound = last_.measured_power_bound;
    out.idle_power = last_.idle_power;
    out.unattributed_power = last_.unattributed_power;
    out.unattributed_power_bound = last_.unattributed_power_bound;
  }

  for (auto& e : leaving) {
    out.exited += e.process.energy;
    out.exited_bound += e.process.energy_bound;
    ++out.exited_count;
  }
  live_ = live;
  out.processes = std::move(live);
  out.exited_now = std::move(leaving);
  last_ = out;
  return out;
}

}  // namespace erg::measure
