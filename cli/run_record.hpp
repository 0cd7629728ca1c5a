#pragma once
// `erg run --record FILE`: the run's power samples, its window and carbon/cost in an erg record
// (exporters/report, docs/report.md), committed every kRunLogPeriod so a killed erg leaves the
// record up to the last period.

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "erg/core/clock.hpp"
#include "erg/core/device.hpp"
#include "erg/core/result.hpp"
#include "erg/exporters/report/record.hpp"
#include "erg/measure/measurement.hpp"
#include "erg/measure/power_monitor.hpp"

namespace erg::cli {

/// Writes a PowerMonitor's series into a record as the run goes. Not thread-safe.
class RunRecord {
 public:
  /// Creates the record at `path` with a device row per series of `monitor` (its GPUs' sampled
  /// domains, `cpus`' package and DRAM). `t0`: the run's start on `clock` (the steady clock).
  static Result<std::unique_ptr<RunRecord>> create(const std::string& path, const measure::PowerMonitor& monitor,
                                                   const std::vector<std::shared_ptr<Gpu>>& gpus,
                                                   const std::vector<std::shared_ptr<Cpu>>& cpus, bool simulated,
                                                   std::chrono::nanoseconds t0, const Clock& clock);
  report::RecordWriter& writer() { return *writer_; }
  /// Commits the samples up to `now` whose power is final (a series' latest sample waits for the
  /// next, as TimelineLog); with `final_rows`, every remaining one and each series' power at `now`.
  Result<void> flush(std::chrono::nanoseconds now, bool final_rows = false);
  /// Adds a window of the run with the measured energy of each recorded device it has.
  Result<void> add_window(const std::string& name, std::chrono::nanoseconds start, std::chrono::nanoseconds end,
                          const measure::Measurement& m);

 private:
  struct Series {
    std::int64_t id = 0;
    bool gpu = true;
    unsigned index = 0;
    PowerDomain gpu_domain{};
    measure::CpuDomain cpu_domain{};
    std::chrono::nanoseconds last{0};
    bool started = false;
  };
  RunRecord() = default;
  double seconds(std::chrono::nanoseconds t) const { return std::chrono::duration<double>(t - t0_).count(); }
  std::unique_ptr<report::RecordWriter> writer_;
  const measure::PowerMonitor* monitor_ = nullptr;
  std::chrono::nanoseconds t0_{0};
  std::vector<Series> series_;
};

/// Under `erg run --record` (ERG_RECORD set by the run): adds one event of `kind` to the run's
/// record, so `erg report` shows what this command decided. A record that cannot be written is a
/// warning on stderr, never a failure of the command. No-op outside a recording run.
void record_event_if_recording(const std::string& kind, const nlohmann::json& data);

}  // namespace erg::cli
