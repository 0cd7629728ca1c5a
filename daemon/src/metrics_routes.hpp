#pragma once
// The /metrics route: the Prometheus exposition of the served devices. Outside every API group
// (Prometheus scrapes without a token).

#include "erg/daemon/request_handler.hpp"
#include "prometheus_exposition.hpp"

namespace erg::daemon {

Reply metrics(PrometheusExposition& exposition);

}  // namespace erg::daemon
