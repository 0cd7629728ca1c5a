#pragma once
// The /metrics route: the Prometheus exposition of the served devices. Not a zeusd API group (a
// new group would change what /discover tells Zeus's client); each peer sees the series of the
// read groups it may use: GPU (and Jetson rail) series with gpu-read, CPU package and DRAM (RAPL)
// series with cpu-read (docs/security.md).

#include "erg/daemon/request_handler.hpp"
#include "erg/exporters/prometheus/collector.hpp"

namespace erg::daemon {

/// Which series a peer may see.
struct MetricsView {
  bool gpu = false;  ///< erg_gpu_*, erg_soc_*, the GPU read-error series.
  bool cpu = false;  ///< erg_cpu_*, erg_dram_*, the CPU read-error series.
};

Reply metrics(const prom::Collector& exposition, MetricsView view);

}  // namespace erg::daemon
