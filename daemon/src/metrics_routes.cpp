#include "metrics_routes.hpp"

namespace erg::daemon {

Reply metrics(const prom::Collector& exposition) {
  return Reply{{200, prom::Collector::kContentType, exposition.scrape(), {}}, std::nullopt};
}

}  // namespace erg::daemon
