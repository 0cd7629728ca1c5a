#pragma once
/// Pushing to a Prometheus Pushgateway as Zeus's zeus.metric does (reference/zeus.md §7), from
/// threads, with Zeus's family names, types, HELP texts, `index`/`window` labels and buckets:
/// EnergyHistogram, EnergyCumulativeCounter, PowerGauge.
///
/// Where Zeus's push misbehaves, these do not:
///  - Grouping key: every push goes to the group {job, <grouping labels, e.g. rank>, window} with
///    POST, which replaces only the families it carries within that group. So one window's series
///    never replace another window's, and a histogram, a counter and a gauge on one job and window
///    (distinct families) never replace each other. Zeus PUTs everything to {job} alone.
///  - Pushes happen on a background thread: begin_window/end_window never wait for the network;
///    end_window returns at once and its final push still goes out (the destructor waits for it,
///    bounded by PushOptions::close_timeout).
///  - An unreachable or slow Pushgateway: each exchange is bounded by `timeout`, retried up to
///    `max_attempts` times with `retry_backoff` between, then dropped (the next push carries the
///    latest state anyway); every failure is reported the same way by every class: through
///    PushOptions::on_error (default: one line on stderr) and counted in push_errors().
///  - A duplicate or unknown window is an error value, and nothing is left running.

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "erg/core/device.hpp"
#include "erg/core/result.hpp"

namespace erg::prom {

/// Zeus's default buckets (J).
inline const std::vector<double> kDefaultGpuBuckets = {50.0, 100.0, 200.0, 500.0, 1000.0};
inline const std::vector<double> kDefaultCpuBuckets = {10.0, 50.0, 100.0, 500.0, 1000.0};
inline const std::vector<double> kDefaultDramBuckets = {5.0, 10.0, 20.0, 50.0, 150.0};

struct PushOptions {
  /// "http://host:port", "host:port" (http assumed); https is not supported (InvalidArgument).
  std::string gateway_url;
  /// The `job` grouping label. Required.
  std::string job;
  /// Further grouping labels (e.g. {"rank", "3"} for one rank of a distributed job), after job
  /// and before window in the grouping key.
  std::map<std::string, std::string> grouping;
  /// Bound on one HTTP exchange (connect, send, reply).
  std::chrono::milliseconds timeout{2'000};
  /// Attempts per push before it is dropped (reported each time).
  int max_attempts = 3;
  std::chrono::milliseconds retry_backoff{250};
  /// How long the destructor waits for pushes still queued (the final one included) before it
  /// gives up on them (reported).
  std::chrono::milliseconds close_timeout{5'000};
  /// Where push failures go (a message naming the gateway and the group); nullptr: stderr.
  std::function<void(const std::string&)> on_error;
};

/// One push of a group, in the text exposition format, and what came of it. Internal to the
/// classes below; public for tests.
class Pusher;

/// Per-window energy histograms (Zeus's EnergyHistogram): end_window observes each device's
/// energy of the window and pushes.
class EnergyHistogram {
 public:
  /// Errors: InvalidArgument for an empty bucket list, a bad URL/job, or an unknown device
  /// index (Zeus raises ValueError for empty buckets).
  static Result<std::unique_ptr<EnergyHistogram>> create(std::vector<std::shared_ptr<Gpu>> gpus,
                                                         std::vector<std::shared_ptr<Cpu>> cpus, PushOptions options,
                                                         std::vector<double> gpu_buckets = kDefaultGpuBuckets,
                                                         std::vector<double> cpu_buckets = kDefaultCpuBuckets,
                                                         std::vector<double> dram_buckets = kDefaultDramBuckets);
  ~EnergyHistogram();
  EnergyHistogram(const EnergyHistogram&) = delete;
  EnergyHistogram& operator=(const EnergyHistogram&) = delete;

  /// AlreadyExists if the window is open.
  Result<void> begin_window(const std::string& name, bool sync = true);
  /// Observes the window's energy per device and queues the push; returns without waiting for
  /// it. NotFound for a window not open. Energies beyond the largest bucket (or below the smallest) are
  /// reported through on_error as Zeus warns.
  Result<void> end_window(const std::string& name, bool sync = true);
  /// Push failures so far.
  [[nodiscard]] std::uint64_t push_errors() const;
  /// Waits until every queued push is done (sent or dropped), at most `timeout`. True if none is left.
  bool flush(std::chrono::milliseconds timeout);

 private:
  struct Impl;
  explicit EnergyHistogram(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

/// Energy counters that grow while a window is open (Zeus's EnergyCumulativeCounter): every
/// `update_period` a thread adds each device's energy since the last update and pushes.
class EnergyCumulativeCounter {
 public:
  static Result<std::unique_ptr<EnergyCumulativeCounter>> create(std::vector<std::shared_ptr<Gpu>> gpus,
                                                                 std::vector<std::shared_ptr<Cpu>> cpus,
                                                                 std::chrono::milliseconds update_period,
                                                                 PushOptions options);
  ~EnergyCumulativeCounter();
  EnergyCumulativeCounter(const EnergyCumulativeCounter&) = delete;
  EnergyCumulativeCounter& operator=(const EnergyCumulativeCounter&) = delete;

  /// Starts window `name` (its own updater). AlreadyExists while it is open (nothing started).
  Result<void> begin_window(const std::string& name, bool sync = true);
  /// Stops window `name`'s updater, adds the energy since its last update and queues the final
  /// push; returns at once (does not wait for the period or the network). NotFound if not open.
  Result<void> end_window(const std::string& name, bool sync = true);
  [[nodiscard]] std::uint64_t push_errors() const;
  bool flush(std::chrono::milliseconds timeout);

 private:
  struct Impl;
  explicit EnergyCumulativeCounter(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

/// GPU power gauges (Zeus's PowerGauge): while a window is open, every `update_period` the
/// latest power of each GPU is set and pushed.
class PowerGauge {
 public:
  static Result<std::unique_ptr<PowerGauge>> create(std::vector<std::shared_ptr<Gpu>> gpus,
                                                    std::chrono::milliseconds update_period, PushOptions options);
  ~PowerGauge();
  PowerGauge(const PowerGauge&) = delete;
  PowerGauge& operator=(const PowerGauge&) = delete;

  Result<void> begin_window(const std::string& name, bool sync = true);
  Result<void> end_window(const std::string& name, bool sync = true);
  [[nodiscard]] std::uint64_t push_errors() const;
  bool flush(std::chrono::milliseconds timeout);

 private:
  struct Impl;
  explicit PowerGauge(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace erg::prom
