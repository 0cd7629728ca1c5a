#include "metrics_routes.hpp"

#include <prometheus/text_serializer.h>

#include <algorithm>
#include <string_view>

namespace erg::daemon {
namespace {

bool starts_with(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

/// Whether a series about `device` ("gpu", "cpu", "soc", ...) is in `view`.
bool shown(std::string_view device, MetricsView view) {
  if (device == "cpu" || device == "dram") return view.cpu;
  return view.gpu;  // gpu, soc
}

}  // namespace

Reply metrics(const prom::Collector& exposition, MetricsView view) {
  auto families = exposition.Collect();
  std::vector<::prometheus::MetricFamily> out;
  out.reserve(families.size());
  for (auto& f : families) {
    if (starts_with(f.name, "erg_cpu_") || starts_with(f.name, "erg_dram_")) {
      if (!view.cpu) continue;
    } else if (starts_with(f.name, "erg_gpu_") || starts_with(f.name, "erg_soc_")) {
      if (!view.gpu) continue;
    } else {
      // Families over several kinds of device (read errors): each series by its device label.
      auto& m = f.metric;
      m.erase(std::remove_if(m.begin(), m.end(),
                             [&](const ::prometheus::ClientMetric& c) {
                               for (const auto& l : c.label)
                                 if (l.name == "device") return !shown(l.value, view);
                               return false;
                             }),
              m.end());
    }
    out.push_back(std::move(f));
  }
  ::prometheus::TextSerializer serializer;
  return Reply{{200, prom::Collector::kContentType, serializer.Serialize(out), {}}, std::nullopt};
}

}  // namespace erg::daemon
