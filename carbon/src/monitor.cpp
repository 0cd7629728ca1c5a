#include "erg/carbon/monitor.hpp"

#include <algorithm>
#include <mutex>

#include "erg/carbon/offline.hpp"

namespace erg::carbon {

using namespace std::chrono;

namespace {

constexpr double kJoulesPerKwh = 3.6e6;
/// A provider that failed for an hour is asked again after this long (not at every window end:
/// each try may cost a full timeout).
constexpr seconds kRetryFailureAfter{300};

void add_unique(std::vector<std::string>& v, const std::string& s) {
  if (!s.empty() && std::find(v.begin(), v.end(), s) == v.end()) v.push_back(s);
}

int coarseness(Resolution r) { return r == Resolution::kHourly ? 0 : r == Resolution::kFlat ? 1 : 2; }

void note_resolution(std::optional<Resolution>& have, Resolution r) {
  if (!have || coarseness(r) > coarseness(*have)) have = r;
}

/// One value per hour per provider, kept for the monitor's life (see the header's contract).
template <class Value>
class HourCache {
 public:
  template <class Fetch>
  Result<Value> get(UtcHour hour, const Clock& clock, Fetch fetch) {
    {
      std::lock_guard lock(mu_);
      auto it = values_.find(hour);
      if (it != values_.end()) {
        if (it->second.value) return *it->second.value;
        if (clock.now() - it->second.failed_at < kRetryFailureAfter) return fail(it->second.error);
      }
    }
    auto r = fetch(hour);
    std::lock_guard lock(mu_);
    Entry& e = values_[hour];
    if (r) {
      e.value = *r;
    } else {
      e.error = r.error();
      e.failed_at = clock.now();
    }
    return r;
  }

 private:
  struct Entry {
    std::optional<Value> value;
    Error error;
    nanoseconds failed_at{0};
  };
  std::mutex mu_;
  std::map<UtcHour, Entry> values_;
};

/// The offline stand-in for `provider`: the yearly average of its zone (or `zone`), if known.
std::unique_ptr<IntensityProvider> offline_for(const IntensityProvider& provider, const std::string& zone) {
  const std::string z = !zone.empty() ? zone : provider.zone();
  if (z.empty()) return nullptr;
  auto o = OfflineIntensity::create(z);
  return o ? std::unique_ptr<IntensityProvider>(std::move(*o)) : nullptr;
}

CarbonMeasurement join_carbon(HourlyMeasurement m, const std::function<Result<Intensity>(UtcHour)>& primary,
                              const std::function<Result<Intensity>(UtcHour)>& fallback,
                              const std::string& primary_name, const std::string& fallback_name) {
  CarbonMeasurement out;
  out.energy = std::move(m.energy);
  bool complete = true;
  double total = 0.0;
  for (auto& share : m.hours) {
    HourCarbon h;
    h.hour = share.hour;
    h.time = share.time;
    h.total_energy_j = share.total_j();
    h.energy_j = std::move(share.energy_j);
    auto value = primary(h.hour);
    if (!value) {
      std::string warning =
          primary_name + " has no carbon intensity for " + format_utc(h.hour) + ": " + value.error().message;
      if (fallback) {
        auto fb = fallback(h.hour);
        if (fb) {
          warning += "; used " + fallback_name + " (" + std::string(to_string(fb->resolution)) + " average " +
                     std::to_string(fb->g_per_kwh) + " gCO2eq/kWh for " + fb->zone + ") instead";
          value = std::move(fb);
        } else {
          warning += "; no fallback either: " + fb.error().message;
        }
      } else {
        warning += "; no fallback (give a zone that erg's offline table has)";
      }
      add_unique(out.warnings, warning);
    }
    if (value) {
      h.carbon_g = h.total_energy_j / kJoulesPerKwh * value->g_per_kwh;
      total += *h.carbon_g;
      add_unique(out.providers, value->provider);
      add_unique(out.sources, value->source);
      note_resolution(out.resolution, value->resolution);
      out.estimated = out.estimated || value->estimated;
      for (const auto& [device, j] : h.energy_j) out.carbon_g_by_device[device] += j / kJoulesPerKwh * value->g_per_kwh;
      h.intensity = std::move(*value);
    } else {
      complete = false;
    }
    out.hours.push_back(std::move(h));
  }
  if (complete) {
    out.carbon_g = total;
  } else {
    out.carbon_g_by_device.clear();
  }
  for (const auto& d : out.energy.missing_devices())
    add_unique(out.warnings, "the energy of " + d + " is unknown, so its carbon is not counted");
  return out;
}

CostMeasurement join_cost(HourlyMeasurement m, const std::function<Result<Price>(UtcHour, double, double)>& price,
                          const std::string& provider_name, double kwh_before) {
  CostMeasurement out;
  out.energy = std::move(m.energy);
  bool complete = true;
  double total = 0.0, used = kwh_before;
  for (auto& share : m.hours) {
    HourCost h;
    h.hour = share.hour;
    h.time = share.time;
    h.total_energy_j = share.total_j();
    h.energy_j = std::move(share.energy_j);
    const double kwh = h.total_energy_j / kJoulesPerKwh;
    auto p = price(h.hour, used, kwh);
    used += kwh;
    if (p) {
      h.cost = p->cost;
      total += p->cost;
      if (out.currency.empty()) out.currency = p->currency;
      if (p->currency != out.currency)
        add_unique(out.warnings, "prices in more than one currency (" + out.currency + ", " + p->currency + ")");
      add_unique(out.providers, p->provider);
      add_unique(out.sources, p->source);
      if (!p->note.empty()) add_unique(out.warnings, p->note);
      note_resolution(out.resolution, p->resolution);
      for (const auto& [device, j] : h.energy_j)
        if (h.total_energy_j > 0) out.cost_by_device[device] += p->cost * (j / h.total_energy_j);
      h.price = std::move(*p);
    } else {
      complete = false;
      add_unique(out.warnings, provider_name + " has no price for " + format_utc(h.hour) + ": " + p.error().message);
    }
    out.hours.push_back(std::move(h));
  }
  if (complete) {
    out.cost = total;
  } else {
    out.cost_by_device.clear();
  }
  for (const auto& d : out.energy.missing_devices())
    add_unique(out.warnings, "the energy of " + d + " is unknown, so its cost is not counted");
  return out;
}

}  // namespace

CarbonMeasurement attribute_carbon(HourlyMeasurement m, IntensityProvider& provider, IntensityProvider* fallback) {
  std::function<Result<Intensity>(UtcHour)> fb;
  if (fallback != nullptr) fb = [fallback](UtcHour h) { return fallback->intensity(h); };
  return join_carbon(
      std::move(m), [&](UtcHour h) { return provider.intensity(h); }, fb, provider.name(),
      fallback != nullptr ? fallback->name() : "");
}

CostMeasurement attribute_cost(HourlyMeasurement m, PriceProvider& provider, double kwh_before) {
  return join_cost(
      std::move(m), [&](UtcHour h, double before, double kwh) { return provider.cost(h, before, kwh); },
      provider.name(), kwh_before);
}

struct CarbonMonitor::Impl {
  std::shared_ptr<IntensityProvider> provider;
  std::shared_ptr<IntensityProvider> fallback;  // set lazily when the options name none
  CarbonMonitorOptions options;
  std::mutex fallback_mu;
  HourCache<Intensity> cache;
  std::unique_ptr<HourlyEnergyMonitor> hourly;
  const Clock* clock = nullptr;

  Result<Intensity> primary(UtcHour h) {
    return cache.get(h, *clock, [&](UtcHour hour) { return provider->intensity(hour); });
  }
  IntensityProvider* fallback_provider() {
    if (!options.use_fallback) return nullptr;
    std::lock_guard lock(fallback_mu);
    if (!fallback) fallback = offline_for(*provider, options.fallback_zone);
    return fallback.get();
  }
  CarbonMeasurement join(HourlyMeasurement m) {
    IntensityProvider* fb = fallback_provider();
    std::function<Result<Intensity>(UtcHour)> fallback_fn;
    if (fb != nullptr) fallback_fn = [fb](UtcHour h) { return fb->intensity(h); };
    return join_carbon(
        std::move(m), [this](UtcHour h) { return primary(h); }, fallback_fn, provider->name(),
        fb != nullptr ? fb->name() : "");
  }
};

CarbonMonitor::CarbonMonitor(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CarbonMonitor::~CarbonMonitor() {
  if (impl_) impl_->hourly.reset();  // stops the sampler before the provider goes
}

Result<std::unique_ptr<CarbonMonitor>> CarbonMonitor::create(std::shared_ptr<IntensityProvider> provider,
                                                             std::vector<std::shared_ptr<Gpu>> gpus,
                                                             std::vector<std::shared_ptr<Cpu>> cpus,
                                                             CarbonMonitorOptions options) {
  if (!provider) return fail(ErrorCode::kInvalidArgument, "CarbonMonitor needs a carbon intensity provider");
  auto impl = std::make_unique<Impl>();
  impl->provider = std::move(provider);
  impl->fallback = options.fallback;
  impl->clock = options.hourly.energy.clock != nullptr ? options.hourly.energy.clock : &SteadyClock::instance();
  Impl* raw = impl.get();
  HourlyOptions hourly = options.hourly;
  // Fetch each hour as soon as it ends, while the provider's history still has it.
  auto user_hook = hourly.on_hour_end;
  hourly.on_hour_end = [raw, user_hook](UtcHour h) {
    (void)raw->primary(h);
    if (user_hook) user_hook(h);
  };
  impl->options = std::move(options);
  auto m = HourlyEnergyMonitor::create(std::move(gpus), std::move(cpus), std::move(hourly));
  if (!m) return fail(m.error());
  impl->hourly = std::move(*m);
  return std::unique_ptr<CarbonMonitor>(new CarbonMonitor(std::move(impl)));
}

Result<void> CarbonMonitor::begin_window(const std::string& name, bool sync) {
  return impl_->hourly->begin_window(name, sync);
}
Result<CarbonMeasurement> CarbonMonitor::end_window(const std::string& name, bool sync) {
  auto m = impl_->hourly->end_window(name, sync);
  if (!m) return fail(m.error());
  return impl_->join(std::move(*m));
}
Result<void> CarbonMonitor::cancel_window(const std::string& name) { return impl_->hourly->cancel_window(name); }
CarbonMeasurement CarbonMonitor::attribute(HourlyMeasurement m) { return impl_->join(std::move(m)); }
HourlyEnergyMonitor& CarbonMonitor::hourly() { return *impl_->hourly; }

struct CostMonitor::Impl {
  std::shared_ptr<PriceProvider> provider;
  CostMonitorOptions options;
  std::unique_ptr<HourlyEnergyMonitor> hourly;
};

CostMonitor::CostMonitor(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CostMonitor::~CostMonitor() {
  if (impl_) impl_->hourly.reset();
}

Result<std::unique_ptr<CostMonitor>> CostMonitor::create(std::shared_ptr<PriceProvider> provider,
                                                         std::vector<std::shared_ptr<Gpu>> gpus,
                                                         std::vector<std::shared_ptr<Cpu>> cpus,
                                                         CostMonitorOptions options) {
  if (!provider) return fail(ErrorCode::kInvalidArgument, "CostMonitor needs an electricity price provider");
  if (!(options.kwh_before >= 0.0)) return fail(ErrorCode::kInvalidArgument, "kwh_before must be >= 0");
  auto impl = std::make_unique<Impl>();
  impl->provider = std::move(provider);
  PriceProvider* raw = impl->provider.get();
  HourlyOptions hourly = options.hourly;
  auto user_hook = hourly.on_hour_end;
  // Rates are fetched once (OpenEI's provider keeps the rate); asking warms that cache.
  hourly.on_hour_end = [raw, user_hook](UtcHour h) {
    (void)raw->cost(h, 0.0, 0.0);
    if (user_hook) user_hook(h);
  };
  impl->options = std::move(options);
  auto m = HourlyEnergyMonitor::create(std::move(gpus), std::move(cpus), std::move(hourly));
  if (!m) return fail(m.error());
  impl->hourly = std::move(*m);
  return std::unique_ptr<CostMonitor>(new CostMonitor(std::move(impl)));
}

Result<void> CostMonitor::begin_window(const std::string& name, bool sync) {
  return impl_->hourly->begin_window(name, sync);
}
Result<CostMeasurement> CostMonitor::end_window(const std::string& name, bool sync) {
  auto m = impl_->hourly->end_window(name, sync);
  if (!m) return fail(m.error());
  return attribute_cost(std::move(*m), *impl_->provider, impl_->options.kwh_before);
}
Result<void> CostMonitor::cancel_window(const std::string& name) { return impl_->hourly->cancel_window(name); }
CostMeasurement CostMonitor::attribute(HourlyMeasurement m) {
  return attribute_cost(std::move(m), *impl_->provider, impl_->options.kwh_before);
}
HourlyEnergyMonitor& CostMonitor::hourly() { return *impl_->hourly; }

}  // namespace erg::carbon
