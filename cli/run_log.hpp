#pragma once
// What `erg run` writes while its command runs, so that an erg killed mid-run (SIGKILL, a crash,
// the OOM killer) leaves usable files: the power timeline (--timeline) is appended every period,
// and the JSON result (--output) is replaced atomically every period with the energy so far,
// then with the final result. Everything up to the last period survives.

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "erg/core/clock.hpp"
#include "erg/core/result.hpp"
#include "erg/measure/energy_monitor.hpp"
#include "erg/measure/measurement.hpp"
#include "erg/measure/power_monitor.hpp"

namespace erg::cli {

/// How often erg run writes its files while the command runs: what a SIGKILLed erg loses at
/// most. A second keeps the loss small at a negligible cost (one append, one small rename).
inline constexpr std::chrono::milliseconds kRunLogPeriod{1000};

/// The CSV timeline `time_s,device,domain,power_w` of a PowerMonitor's series from `t0`,
/// sample-and-hold: per series a row at t0 (the power held then), every sample after it, and at
/// the end a row at t1, so integrating a series' rows gives its energy. Rows are appended in time
/// order as the run goes; each append is whole lines, so every line that ends in a newline is a
/// complete row. Not thread-safe (one writer at a time).
class TimelineLog {
 public:
  /// Writes the header to a temporary file beside `path`; publish() puts it in place. Errors
  /// (Io) name `path`.
  /// `t0`: the start of the run on `clock`, the monitor's clock (both must outlive the log).
  static Result<std::unique_ptr<TimelineLog>> create(const std::string& path, const measure::PowerMonitor& monitor,
                                                     std::vector<unsigned> cpus, std::chrono::nanoseconds t0,
                                                     const Clock& clock);
  ~TimelineLog();
  TimelineLog(const TimelineLog&) = delete;
  TimelineLog& operator=(const TimelineLog&) = delete;

  /// Renames the file into place (once the command runs: a run that never started leaves none).
  Result<void> publish();
  /// Ends the run now and returns that time (t1): no row after it is written from here on, even
  /// by a flush that races with the end.
  std::chrono::nanoseconds mark_end();
  /// Appends the rows of the samples up to `now` (monitor clock) whose power is final: each
  /// series' latest sample waits for the next one, since an energy-derived power (CPU, DRAM)
  /// is only known once the next reading is in. A failed append leaves the file at its last
  /// complete row and keeps the rows for the next call.
  Result<void> flush(std::chrono::nanoseconds now);
  /// Appends every remaining row and each series' row at `t1` (after the sampler stopped), and
  /// syncs the file to disk.
  Result<void> finish(std::chrono::nanoseconds t1);

 private:
  struct Series;
  TimelineLog() = default;
  Result<void> append(const std::string& rows);
  Result<void> write_rows(std::chrono::nanoseconds upto, bool final_rows);
  /// Io if the file at the path is no longer the one written (moved or removed).
  [[nodiscard]] Result<void> in_place() const;

  std::mutex mu_;
  std::string path_;
  std::string tmp_path_;
  bool published_ = false;
  int fd_ = -1;
  off_t committed_ = 0;  ///< Bytes of complete rows in the file.
  std::string pending_;  ///< Rows an append failed to write.
  bool torn_ = false;    ///< A failed append left part of a row that could not be cut off yet.
  const measure::PowerMonitor* monitor_ = nullptr;
  const Clock* clock_ = nullptr;
  std::chrono::nanoseconds t0_{0};
  std::optional<std::chrono::nanoseconds> end_;
  std::vector<Series> series_;
};

/// The energy of a run so far, from the same counters as its final measurement: consecutive
/// windows on the EnergyMonitor, each begun before the previous one ends (so no time falls
/// between them), summed. Not thread-safe (one caller at a time).
class ProgressWindows {
 public:
  ProgressWindows(measure::EnergyMonitor& monitor, std::string name_prefix);
  ~ProgressWindows();
  ProgressWindows(const ProgressWindows&) = delete;
  ProgressWindows& operator=(const ProgressWindows&) = delete;
  /// Begins the first window.
  Result<void> start();
  /// Begins the next window, ends the current one and returns the sum so far. On an error the
  /// sum is unchanged.
  Result<measure::Measurement> step();
  /// Cancels the open window.
  void stop();
  [[nodiscard]] const measure::Measurement& total() const { return total_; }

 private:
  measure::EnergyMonitor& monitor_;
  std::string prefix_;
  unsigned current_ = 0;
  bool open_ = false;
  bool any_ = false;
  measure::Measurement total_;
};

/// Adds `part` (a later window) to `total`: energies and times add up; the flags describe the
/// whole (short only while every part was, affected if any part was); extrapolated_s and errors
/// are the latest part's.
void accumulate(measure::Measurement& total, const measure::Measurement& part);

/// A thread that calls `tick` every `period` until stopped (and not after stop() returns).
/// Problems `tick` reports go to stderr as warnings, each once: a log that cannot be written
/// must not stop the user's command, nor flood its terminal.
class PeriodicWriter {
 public:
  /// `tick` returns the problems of this round (none: empty).
  PeriodicWriter(std::chrono::milliseconds period, std::function<std::vector<std::string>()> tick);
  ~PeriodicWriter();
  PeriodicWriter(const PeriodicWriter&) = delete;
  PeriodicWriter& operator=(const PeriodicWriter&) = delete;
  /// Stops and joins the thread (waits for a round in progress). Idempotent.
  void stop();

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace erg::cli
