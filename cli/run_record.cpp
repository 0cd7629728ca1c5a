#include "run_record.hpp"

#include <cstdlib>
#include <iostream>

namespace erg::cli {

using namespace std::chrono_literals;

Result<std::unique_ptr<RunRecord>> RunRecord::create(const std::string& path, const measure::PowerMonitor& monitor,
                                                     const std::vector<std::shared_ptr<Gpu>>& gpus,
                                                     const std::vector<std::shared_ptr<Cpu>>& cpus, bool simulated,
                                                     std::chrono::nanoseconds t0, const Clock& clock) {
  (void)clock;  // the record's t0 is on the steady clock, the monitor's (documented in record.hpp)
  auto w = report::RecordWriter::create(path, simulated, t0.count());
  if (!w) return fail(w.error());
  std::unique_ptr<RunRecord> r(new RunRecord());
  r->writer_ = std::move(*w);
  r->monitor_ = &monitor;
  r->t0_ = t0;
  for (unsigned g : monitor.gpu_indices())
    for (auto d : monitor.domains()) {
      if (!monitor.sampled(g, d)) continue;
      const std::string name = g < gpus.size() ? gpus[g]->name() : "";
      auto id = r->writer_->add_device({0, "gpu", g, std::string(to_string(d)), name});
      if (!id) return fail(id.error());
      Series s;
      s.id = *id;
      s.index = g;
      s.gpu_domain = d;
      r->series_.push_back(s);
    }
  for (const auto& cpu : cpus)
    for (auto [domain, label] :
         {std::pair{measure::CpuDomain::kPackage, "package"}, std::pair{measure::CpuDomain::kDram, "dram"}}) {
      if (domain == measure::CpuDomain::kDram && !cpu->capabilities().dram) continue;
      auto id = r->writer_->add_device({0, "cpu", cpu->index(), label, cpu->name()});
      if (!id) return fail(id.error());
      Series s;
      s.id = *id;
      s.gpu = false;
      s.index = cpu->index();
      s.cpu_domain = domain;
      r->series_.push_back(s);
    }
  return r;
}

Result<void> RunRecord::flush(std::chrono::nanoseconds now, bool final_rows) {
  const auto& pm = *monitor_;
  std::vector<report::PowerSample> rows;
  for (auto& s : series_) {
    auto power_at = [&](std::chrono::nanoseconds t) {
      return s.gpu ? pm.gpu_power_at(s.index, s.gpu_domain, t) : pm.cpu_power_at(s.index, s.cpu_domain, t);
    };
    if (!s.started) {
      // The power held at the start, so the record's series begin with the run.
      if (auto w = power_at(t0_)) rows.push_back({s.id, 0.0, w->value()});
      s.started = true;
      s.last = t0_;
    }
    auto points = s.gpu ? pm.gpu_timeline(s.index, s.gpu_domain, s.last + 1ns, now)
                        : pm.cpu_timeline(s.index, s.cpu_domain, s.last + 1ns, now);
    if (points) {
      // An energy-derived power (CPU, DRAM) may still change until the next reading comes.
      if (!final_rows && !points->empty()) points->pop_back();
      for (const auto& p : *points) {
        rows.push_back({s.id, seconds(p.time), p.watts});
        s.last = p.time;
      }
    }
    if (final_rows && s.last < now)
      if (auto w = power_at(now)) rows.push_back({s.id, seconds(now), w->value()});
  }
  return writer_->add_samples(rows);
}

Result<void> RunRecord::add_window(const std::string& name, std::chrono::nanoseconds start,
                                   std::chrono::nanoseconds end, const measure::Measurement& m) {
  report::RecordWindow w;
  w.name = name;
  w.start_s = seconds(start);
  w.end_s = seconds(end);
  // The counters measure a device, not a domain: the energy goes to its main series.
  for (const auto& s : series_) {
    if (s.gpu && s.gpu_domain != series_.front().gpu_domain) continue;
    if (s.gpu) {
      for (const auto& g : m.gpus)
        if (g.index == s.index && g.energy) w.energy_j[s.id] = g.energy->value();
    } else {
      for (const auto& c : m.cpus)
        if (c.index == s.index) {
          if (s.cpu_domain == measure::CpuDomain::kPackage) w.energy_j[s.id] = c.package.value();
          if (s.cpu_domain == measure::CpuDomain::kDram && c.dram) w.energy_j[s.id] = c.dram->value();
        }
    }
  }
  return writer_->add_window(w);
}

void record_event_if_recording(const std::string& kind, const nlohmann::json& data) {
  const char* path = std::getenv(report::kRecordEnv);
  if (path == nullptr || *path == '\0') return;
  auto writer = report::RecordWriter::open(path);
  Result<void> r =
      writer ? (*writer)->add_event({(*writer)->seconds_now(), kind, data}) : Result<void>(fail(writer.error()));
  if (!r) std::cerr << "erg: warning: not recording " << kind << " in " << path << ": " << r.error().message << "\n";
}

}  // namespace erg::cli
