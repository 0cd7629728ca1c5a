#pragma once
// The Prometheus text exposition of a set of devices: reads every device at scrape time and
// writes the metrics of erg/daemon/metric_names.hpp. Knows nothing of HTTP or of ergd's routes
// (a later step moves it to exporters/).

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "erg/core/device.hpp"

namespace erg::daemon {

class PrometheusExposition {
 public:
  /// The exposition format's content type.
  static constexpr std::string_view kContentType = "text/plain; version=0.0.4; charset=utf-8";

  PrometheusExposition(std::vector<std::shared_ptr<Gpu>> gpus, std::vector<std::shared_ptr<Cpu>> cpus);
  ~PrometheusExposition();
  PrometheusExposition(const PrometheusExposition&) = delete;
  PrometheusExposition& operator=(const PrometheusExposition&) = delete;

  /// Reads every device and returns the exposition text. A device that does not answer (lost, or
  /// failing after the retries a transient error gets) is `erg_*_up 0` and its other series are
  /// withdrawn until it answers again — never a frozen value; they then start again from zero,
  /// which rate() treats as a counter reset. GPU energy counters are followed between scrapes
  /// (from the first scrape on, by a measure::EnergyMonitor) and only move forward: a driver
  /// counter that restarted or stepped back is bridged as the monitor bridges it (exact unless
  /// an update fell with the anomaly) and counted in erg_gpu_energy_counter_anomalies_total. Thread-safe (one scrape at
  /// a time).
  std::string scrape();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace erg::daemon
