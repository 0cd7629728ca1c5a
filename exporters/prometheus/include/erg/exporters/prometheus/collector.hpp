#pragma once
/// The one Prometheus collector of a node's devices, behind ergd's /metrics and `erg exporter`:
/// reads every device when scraped (no sampling thread of its own) and returns the metrics of
/// metric_names.hpp, whose header states the energy counter semantics.

#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "erg/core/device.hpp"

namespace erg::prom {

struct CollectorOptions {
  /// `node` label on every series; empty: no node label.
  std::string node;
  /// Extra labels on every series (`--label k=v`). Names must be valid Prometheus label names
  /// and not one the collector sets (see check_user_labels).
  std::map<std::string, std::string> labels;
  /// erg_info's `exporter` label (ergd, erg-exporter).
  std::string exporter = "erg";
  /// erg_info's `simulated` label: the devices are the simulated machine.
  bool simulated = false;
  /// SoC modules (Jetson) whose rails are exported (erg_soc_*): energy from the backend's
  /// integral (its sampler starts with the first scrape), power read at each scrape.
  std::vector<std::shared_ptr<Soc>> socs;
  /// Per-process series (erg_gpu_process_*, metric_names.hpp) for every GPU whose driver lists
  /// its processes: each scrape attributes the energy since the previous one among them
  /// (measure::ProcessTracker). Off by default. With it on, the labels pid, comm, container, pod
  /// and part are erg's own too.
  bool process_metrics = false;
  /// At most this many processes (over all GPUs) get series of their own; a process first seen
  /// when that many have them is summed, for its whole life, into its GPU's pid="other" series.
  std::size_t max_process_series = 256;
  /// The GPUs' idle power, calibrated while they ran nothing, and its error (W): the idle part is
  /// not charged to the processes. 0: processes are charged the idle power too.
  double process_idle_power_w = 0.0;
  double process_idle_error_w = 0.0;
  /// Where a process's comm and cgroup (container, pod) are read: "/proc", or "/host/proc" for
  /// an exporter in a container that mounts the host's.
  std::string proc_root = "/proc";
};

/// InvalidArgument naming the label for a name that is not a Prometheus label name
/// ([a-zA-Z_][a-zA-Z0-9_]*, not starting with "__") or that the collector sets itself.
Result<void> check_user_labels(const std::map<std::string, std::string>& labels);

/// Parses a `--label` argument "name=value" (value may be empty; checked as check_user_labels
/// checks). InvalidArgument naming the argument otherwise.
Result<std::pair<std::string, std::string>> parse_label(std::string_view text);

/// The host's name (for the node label); "localhost" if it cannot be read.
std::string host_name();

class Collector : public ::prometheus::Collectable {
 public:
  /// The exposition format's content type.
  static constexpr std::string_view kContentType = "text/plain; version=0.0.4; charset=utf-8";

  /// Errors: InvalidArgument for a bad user label (check_user_labels).
  static Result<std::shared_ptr<Collector>> create(std::vector<std::shared_ptr<Gpu>> gpus,
                                                   std::vector<std::shared_ptr<Cpu>> cpus,
                                                   CollectorOptions options = {});
  ~Collector() override;
  Collector(const Collector&) = delete;
  Collector& operator=(const Collector&) = delete;

  /// Reads every device and returns the metric families. A device that does not answer (lost,
  /// or failing after the retries a transient error gets) is `erg_*_up 0`, its read error is
  /// counted, and its other series are withdrawn until it answers again (never a frozen value).
  /// GPU energy counters are followed between scrapes, from the first scrape on, by a
  /// measure::EnergyMonitor, so a driver counter that restarts or steps back between two scrapes
  /// is bridged and counted. Thread-safe (scrapes are serialized).
  std::vector<::prometheus::MetricFamily> Collect() const override;

  /// Collect() in the text exposition format.
  std::string scrape() const;

 private:
  struct Impl;
  explicit Collector(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace erg::prom
