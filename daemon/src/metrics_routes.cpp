#include "metrics_routes.hpp"

namespace erg::daemon {

Reply metrics(PrometheusExposition& exposition) {
  return Reply{{200, PrometheusExposition::kContentType, exposition.scrape(), {}}, std::nullopt};
}

}  // namespace erg::daemon
