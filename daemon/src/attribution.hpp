#pragma once
// GET /attribution: each GPU's energy split among the processes that ran on it (issue 23), as
// measure::attribute_processes does it, over a window that ends at the latest poll. A
// ProcessLedger per GPU keeps what that needs (counter readings, the driver's per-process
// samples, idle periods for the idle model, who owned each process); the AttributionSampler
// fills the ledgers on a thread of its own; the route answers from them, showing a caller only
// its own processes unless it may see all (docs/attribution.md, "ergd /attribution").

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "device_slots.hpp"
#include "erg/core/clock.hpp"
#include "erg/core/device.hpp"
#include "erg/core/result.hpp"
#include "erg/daemon/config.hpp"
#include "erg/daemon/request_handler.hpp"
#include "erg/measure/process_attribution.hpp"
#include "erg/protocol/query.hpp"

namespace erg::daemon {

/// Who a process belongs to, read from the proc root when ergd first sees its pid (it may exit
/// before a client asks). A pid reused within the retention keeps its first owner.
struct ProcessOwner {
  std::optional<uid_t> uid;  ///< the effective uid (/proc/<pid>/status "Uid:"); nullopt: gone
  std::string comm;
  std::optional<std::string> container;  ///< container id
  std::optional<std::string> pod;        ///< Kubernetes pod UID
};

/// Reads a process's owner from `proc_root` (/proc or a test tree).
ProcessOwner read_process_owner(const std::filesystem::path& proc_root, std::uint32_t pid);

/// One GPU's record for /attribution. Thread-safe.
class ProcessLedger {
 public:
  struct Options {
    std::chrono::nanoseconds retention{std::chrono::hours(1)};
    double energy_error = 0.03;  ///< the counter's error as a share of a difference
    /// How far a reading's time may be from its counter update (0 when readings carry the update time).
    std::chrono::nanoseconds edge_uncertainty{0};
    /// Idle periods (no process listed, none sampled busy) needed before an idle model is used.
    std::chrono::nanoseconds min_idle{std::chrono::seconds(2)};
  };
  explicit ProcessLedger(Options options) : options_(options) {}

  /// One poll: the counter reading (joules, at wall time `wall`: its update time or the read's),
  /// the samples newer than the previous poll's, and whether the driver listed any process.
  /// A reading not newer than the previous one is dropped (the counter has not updated).
  void record(std::chrono::nanoseconds wall, double joules, std::vector<ProcessUtilizationSample> samples,
              bool processes_listed);
  /// The driver reports no per-process utilization (MIG, or a backend without it).
  void record_not_attributable(std::string reason);
  /// A poll failed (cleared by the next good one).
  void record_error(Error error);

  struct Window {
    measure::ProcessAttribution attribution;
    std::optional<measure::IdleModel> idle;  ///< nullopt: not calibrated yet (idle energy counted as active)
  };
  /// The attribution over [the first reading at or after `since` (the oldest held when earlier),
  /// the latest reading]. kUnavailable before two readings; the poll's error when the last
  /// poll failed; a not-attributable result with the reason on a MIG GPU.
  Result<Window> attribute(std::optional<std::chrono::nanoseconds> since) const;
  /// The pids with samples held (for pruning owners).
  [[nodiscard]] std::set<std::uint32_t> pids() const;

 private:
  struct Reading {
    std::chrono::nanoseconds wall{0};
    double joules = 0.0;
    bool processes_listed = false;
  };
  void prune_locked();

  Options options_;
  mutable std::mutex mutex_;
  std::deque<Reading> readings_;
  std::deque<ProcessUtilizationSample> samples_;
  std::deque<measure::EnergySegment> idle_;  ///< counter periods with nothing running
  std::optional<std::string> not_attributable_;
  std::optional<Error> error_;
};

/// Polls every GPU's counter and per-process samples every `period` on its own thread, fills a
/// ProcessLedger per GPU and remembers each process's owner. Stops in the destructor.
class AttributionSampler {
 public:
  AttributionSampler(const DeviceSlots& devices, const Config& config, const Clock& clock = SteadyClock::instance());
  ~AttributionSampler();
  AttributionSampler(const AttributionSampler&) = delete;
  AttributionSampler& operator=(const AttributionSampler&) = delete;

  /// Polls every GPU once (the thread's step; tests call it on a stopped sampler).
  void poll_once();
  void stop();

  [[nodiscard]] std::size_t gpu_count() const { return ledgers_.size(); }
  [[nodiscard]] const ProcessLedger& ledger(unsigned gpu) const { return *ledgers_[gpu]; }
  [[nodiscard]] std::optional<ProcessOwner> owner(std::uint32_t pid) const;
  [[nodiscard]] std::chrono::nanoseconds started() const { return started_; }

 private:
  const DeviceSlots& devices_;
  const Clock& clock_;
  std::filesystem::path proc_root_;
  std::chrono::nanoseconds period_;
  std::chrono::nanoseconds started_{0};
  std::vector<std::unique_ptr<ProcessLedger>> ledgers_;
  std::vector<std::chrono::microseconds> last_seen_;
  mutable std::mutex owners_mutex_;
  std::map<std::uint32_t, ProcessOwner> owners_;
  std::mutex stop_mutex_;
  std::condition_variable stop_cv_;
  bool stop_ = false;
  std::thread thread_;
};

/// Whether `peer` sees every process's row: root, a uid in Config::attribution_all_uids, or a
/// peer whose primary or supplementary group (/proc/<pid>/status "Groups:") is in
/// Config::attribution_all_gids.
bool sees_all_processes(const Config& config, const Peer& peer);

/// GET /attribution?gpu_ids=&since_ms=.
Reply attribution(const AttributionSampler& sampler, const Config& config, const protocol::Query& query,
                  const Peer& peer);

}  // namespace erg::daemon
