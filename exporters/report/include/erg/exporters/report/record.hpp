#pragma once
/// The erg record (`erg run --record FILE.ergrec`): one SQLite file holding a run's power
/// timelines, windows, optimizer events and carbon/cost, documented in docs/report.md. Written
/// incrementally, one transaction per batch (WAL journal), so a writer killed at any moment leaves
/// every committed batch readable. Other processes of the run (e.g. `erg optimize power-limit`
/// under `erg run --record`, found through ERG_RECORD) add windows and events to the same file.

#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "erg/core/result.hpp"

struct sqlite3;

namespace erg::report {

/// The format version in meta("format_version"). Readers refuse a newer major version.
inline constexpr int kRecordFormatVersion = 1;
/// The environment variable `erg run --record` sets for its command: the record's path.
inline constexpr const char* kRecordEnv = "ERG_RECORD";

/// A power series: one device and domain ("gpu" 0 "device_instant", "cpu" 0 "package").
struct RecordDevice {
  std::int64_t id = 0;
  std::string kind;    ///< "gpu", "cpu", "soc"
  unsigned index = 0;  ///< erg's index of the device
  std::string domain;  ///< "device_instant", "device_average", "package", "dram", ...
  std::string name;    ///< model name, e.g. "NVIDIA A100-SXM4-40GB"; may be empty
};

struct PowerSample {
  std::int64_t device = 0;  ///< RecordDevice::id
  double t_s = 0;           ///< seconds since the record's start (meta t0)
  double power_w = 0;
};

struct RecordWindow {
  std::string name;
  double start_s = 0, end_s = 0;
  /// Measured energy per device id (from the energy counters); devices missing here get their
  /// energy from the samples when the report is made.
  std::map<std::int64_t, double> energy_j;
};

struct RecordEvent {
  double t_s = 0;
  std::string kind;  ///< e.g. "power_limit.profile", "power_limit.chosen", "carbon"
  nlohmann::json data;
};

/// Writes a record. Not thread-safe (one caller at a time); several processes may write one file.
class RecordWriter {
 public:
  /// Creates `path` (replacing a file there) with the schema and meta: format, format_version,
  /// simulated, t0_steady_ns (`t0_steady_ns`: CLOCK_MONOTONIC ns of t = 0, so other processes on
  /// the machine place their events on the same axis), created_utc. Errors: Io naming `path`.
  static Result<std::unique_ptr<RecordWriter>> create(const std::string& path, bool simulated,
                                                      std::int64_t t0_steady_ns);
  /// Opens an existing record to add to it (another process of the run). Errors: Io, or
  /// InvalidArgument if it is not an erg record of a version this erg writes.
  static Result<std::unique_ptr<RecordWriter>> open(const std::string& path);
  ~RecordWriter();
  RecordWriter(const RecordWriter&) = delete;
  RecordWriter& operator=(const RecordWriter&) = delete;

  /// Seconds since the record's t0 of a CLOCK_MONOTONIC time in ns (std::chrono::steady_clock).
  [[nodiscard]] double seconds_at(std::int64_t steady_ns) const;
  /// Seconds since t0 now.
  [[nodiscard]] double seconds_now() const;

  Result<void> set_meta(const std::string& key, const std::string& value);
  Result<std::int64_t> add_device(const RecordDevice& device);
  /// One transaction: all of `samples` or none.
  Result<void> add_samples(const std::vector<PowerSample>& samples);
  Result<void> add_window(const RecordWindow& window);
  Result<void> add_event(const RecordEvent& event);

 private:
  RecordWriter() = default;
  Result<void> exec(const std::string& sql);
  std::string path_;
  sqlite3* db_ = nullptr;
  std::int64_t t0_steady_ns_ = 0;
};

/// A whole record in memory (samples of each device in time order).
struct Record {
  std::map<std::string, std::string> meta;
  std::vector<RecordDevice> devices;
  std::map<std::int64_t, std::vector<PowerSample>> samples;
  std::vector<RecordWindow> windows;
  std::vector<RecordEvent> events;
  [[nodiscard]] bool simulated() const;
};

/// Reads `path`. Errors: Io (missing, not SQLite), InvalidArgument (not an erg record, or a
/// newer format version).
Result<Record> read_record(const std::string& path);

}  // namespace erg::report
