#pragma once
// The /metrics route: the Prometheus exposition of the served devices. Outside every API group
// (Prometheus scrapes without a token).

#include "erg/daemon/request_handler.hpp"
#include "erg/exporters/prometheus/collector.hpp"

namespace erg::daemon {

Reply metrics(const prom::Collector& exposition);

}  // namespace erg::daemon
