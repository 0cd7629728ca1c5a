// erg._core.carbon: carbon-intensity and price providers, CarbonMonitor and CostMonitor. Only
// translates (STYLE.md habit 13); errors go through module.cpp's one translator (raise_error).

#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "erg/carbon/electricity_maps.hpp"
#include "erg/carbon/monitor.hpp"
#include "erg/carbon/offline.hpp"
#include "erg/carbon/openei.hpp"
#include "erg/core/discovery.hpp"

namespace py = pybind11;

namespace erg_python {
[[noreturn]] void raise_error(erg::Error error);
const erg::Inventory& inventory_of(py::handle inventory);
}  // namespace erg_python

namespace {

using namespace erg::carbon;
using erg_python::raise_error;

template <class T>
T unwrap(erg::Result<T> r) {
  if (!r) raise_error(std::move(r.error()));
  return std::move(*r);
}

std::chrono::milliseconds millis(double s) {
  if (!(s > 0)) raise_error({erg::ErrorCode::kInvalidArgument, "timeout_s must be positive"});
  return std::chrono::milliseconds(static_cast<long long>(s * 1000.0));
}
UtcHour hour_from(double epoch_s) {
  return utc_hour_of(std::chrono::sys_seconds(std::chrono::seconds(static_cast<long long>(std::floor(epoch_s)))));
}
double epoch(UtcHour h) { return static_cast<double>(h.time_since_epoch().count()); }

py::dict intensity_dict(const Intensity& i) {
  py::dict d;
  d["g_per_kwh"] = i.g_per_kwh;
  d["resolution"] = std::string(to_string(i.resolution));
  d["estimated"] = i.estimated;
  d["provider"] = i.provider;
  d["zone"] = i.zone;
  d["source"] = i.source;
  return d;
}

py::dict price_dict(const Price& p) {
  py::dict d;
  d["cost"] = p.cost;
  d["per_kwh"] = p.per_kwh;
  d["currency"] = p.currency;
  d["resolution"] = std::string(to_string(p.resolution));
  d["provider"] = p.provider;
  d["source"] = p.source;
  d["note"] = p.note;
  return d;
}

/// An intensity provider written in Python: `fn(hour_epoch_s)` returns gCO2eq/kWh (or a
/// (value, estimated) pair); any exception it raises becomes an Unavailable error (so the monitor
/// falls back), with its text.
class CallableIntensity final : public IntensityProvider {
 public:
  CallableIntensity(std::string name, std::string zone, py::function fn)
      : name_(std::move(name)), zone_(std::move(zone)), fn_(std::make_shared<Holder>(Holder{std::move(fn)})) {}
  erg::Result<Intensity> intensity(UtcHour hour) override {
    py::gil_scoped_acquire gil;
    try {
      py::object r = fn_->fn(epoch(hour));
      Intensity i;
      if (py::isinstance<py::tuple>(r)) {
        auto t = r.cast<py::tuple>();
        i.g_per_kwh = t[0].cast<double>();
        i.estimated = t.size() > 1 && t[1].cast<bool>();
      } else {
        i.g_per_kwh = r.cast<double>();
      }
      i.provider = name_;
      i.zone = zone_;
      i.source = name_;
      return i;
    } catch (py::error_already_set& e) {
      return erg::fail(erg::ErrorCode::kUnavailable, e.what());
    } catch (const py::cast_error& e) {
      return erg::fail(erg::ErrorCode::kInvalidArgument,
                       std::string("the provider did not return a number: ") + e.what());
    }
  }
  std::string name() const override { return name_; }
  std::string zone() const override { return zone_; }

 private:
  struct Holder {
    py::function fn;
    ~Holder() {
      py::gil_scoped_acquire gil;
      fn = py::function();
    }
  };
  std::string name_, zone_;
  std::shared_ptr<Holder> fn_;
};

std::function<void(const std::vector<unsigned>&)> sync_fn(std::optional<py::function> sync) {
  if (!sync) return {};
  struct Holder {
    py::function fn;
    ~Holder() {
      py::gil_scoped_acquire gil;
      fn = py::function();
    }
  };
  auto holder = std::make_shared<Holder>(Holder{std::move(*sync)});
  return [holder](const std::vector<unsigned>& gpus) {
    py::gil_scoped_acquire gil;
    holder->fn(gpus);
  };
}

template <class Hour>
py::dict share_common(const Hour& h) {
  py::dict d;
  d["hour"] = epoch(h.hour);
  d["hour_utc"] = format_utc(h.hour);
  d["time"] = h.time.count();
  d["energy"] = h.energy_j;
  d["total_energy"] = h.total_energy_j;
  return d;
}

py::dict carbon_dict(CarbonMeasurement m) {
  py::dict d;
  py::list hours;
  for (const auto& h : m.hours) {
    py::dict x = share_common(h);
    x["intensity"] = h.intensity ? py::object(intensity_dict(*h.intensity)) : py::object(py::none());
    x["carbon_g"] = h.carbon_g ? py::object(py::float_(*h.carbon_g)) : py::object(py::none());
    hours.append(x);
  }
  d["hours"] = hours;
  d["carbon_g"] = m.carbon_g ? py::object(py::float_(*m.carbon_g)) : py::object(py::none());
  d["carbon_g_by_device"] = m.carbon_g_by_device;
  d["providers"] = m.providers;
  d["resolution"] = m.resolution ? py::object(py::str(std::string(to_string(*m.resolution)))) : py::object(py::none());
  d["estimated"] = m.estimated;
  d["sources"] = m.sources;
  d["warnings"] = m.warnings;
  d["measurement"] = py::cast(std::move(m.energy));
  return d;
}

py::dict cost_dict(CostMeasurement m) {
  py::dict d;
  py::list hours;
  for (const auto& h : m.hours) {
    py::dict x = share_common(h);
    x["price"] = h.price ? py::object(price_dict(*h.price)) : py::object(py::none());
    x["cost"] = h.cost ? py::object(py::float_(*h.cost)) : py::object(py::none());
    hours.append(x);
  }
  d["hours"] = hours;
  d["cost"] = m.cost ? py::object(py::float_(*m.cost)) : py::object(py::none());
  d["currency"] = m.currency;
  d["cost_by_device"] = m.cost_by_device;
  d["providers"] = m.providers;
  d["resolution"] = m.resolution ? py::object(py::str(std::string(to_string(*m.resolution)))) : py::object(py::none());
  d["sources"] = m.sources;
  d["warnings"] = m.warnings;
  d["measurement"] = py::cast(std::move(m.energy));
  return d;
}

HourlyOptions hourly_options(std::optional<std::vector<unsigned>> gpu_indices,
                             std::optional<std::vector<unsigned>> cpu_indices, std::optional<py::function> sync) {
  HourlyOptions o;
  o.energy.gpu_indices = std::move(gpu_indices);
  o.energy.cpu_indices = std::move(cpu_indices);
  o.energy.sync = sync_fn(std::move(sync));
  return o;
}

/// Deletes a monitor with the GIL released: its sampler thread may be waiting for the GIL (a
/// Python provider) and is joined in the destructor.
template <class T>
struct ReleaseGilDelete {
  void operator()(T* p) const {
    py::gil_scoped_release release;
    delete p;
  }
};
template <class T>
using GilFreeHolder = std::unique_ptr<T, ReleaseGilDelete<T>>;

}  // namespace

PYBIND11_DECLARE_HOLDER_TYPE(T, GilFreeHolder<T>)

/// The window methods CarbonMonitor and CostMonitor share: begin/end/cancel_window (the GIL
/// released while measuring), open_windows and the monitored indices; `to_dict` turns the
/// monitor's measurement into the Python result.
template <typename Monitor, typename Meas>
void add_window_methods(py::class_<Monitor, GilFreeHolder<Monitor>>& cls, py::dict (*to_dict)(Meas)) {
  cls.def(
         "begin_window",
         [](Monitor& mon, const std::string& name, bool sync) {
           erg::Result<void> r;
           {
             py::gil_scoped_release release;
             r = mon.begin_window(name, sync);
           }
           if (!r) raise_error(r.error());
         },
         py::arg("name"), py::arg("sync_execution") = true)
      .def(
          "end_window",
          [to_dict](Monitor& mon, const std::string& name, bool sync) {
            std::optional<erg::Result<Meas>> r;
            {
              py::gil_scoped_release release;
              r = mon.end_window(name, sync);
            }
            return to_dict(unwrap(std::move(*r)));
          },
          py::arg("name"), py::arg("sync_execution") = true)
      .def(
          "cancel_window",
          [](Monitor& mon, const std::string& name) {
            auto r = mon.cancel_window(name);
            if (!r) raise_error(r.error());
          },
          py::arg("name"))
      .def_property_readonly("open_windows", [](Monitor& mon) { return mon.hourly().open_windows(); })
      .def_property_readonly("gpu_indices", [](Monitor& mon) { return mon.hourly().energy_monitor().gpu_indices(); })
      .def_property_readonly("cpu_indices", [](Monitor& mon) { return mon.hourly().energy_monitor().cpu_indices(); });
}

void bind_carbon(py::module_& m) {
  auto c = m.def_submodule("carbon", "Carbon intensity and electricity price providers and monitors (erg::carbon)");

  py::class_<IntensityProvider, std::shared_ptr<IntensityProvider>>(c, "IntensityProvider")
      .def_property_readonly("name", &IntensityProvider::name)
      .def_property_readonly("zone", &IntensityProvider::zone)
      .def(
          "intensity",
          [](IntensityProvider& p, double hour) {
            std::optional<erg::Result<Intensity>> r;
            {
              py::gil_scoped_release release;  // a request may take a while; a Python provider takes it back
              r = p.intensity(hour_from(hour));
            }
            return intensity_dict(unwrap(std::move(*r)));
          },
          py::arg("hour"), "The intensity of the UTC hour containing `hour` (Unix seconds), as a dict.");
  c.def(
      "offline",
      [](const std::string& zone) -> std::shared_ptr<IntensityProvider> {
        return unwrap(OfflineIntensity::create(zone));
      },
      py::arg("zone"));
  c.def(
      "from_file",
      [](const std::string& path) -> std::shared_ptr<IntensityProvider> { return unwrap(FileIntensity::open(path)); },
      py::arg("path"));
  c.def(
      "fixed_intensity",
      [](double g) -> std::shared_ptr<IntensityProvider> {
        if (!(g >= 0)) raise_error({erg::ErrorCode::kInvalidArgument, "an intensity must be >= 0 gCO2eq/kWh"});
        return std::make_shared<FixedIntensity>(g);
      },
      py::arg("g_per_kwh"));
  c.def(
      "callable_intensity",
      [](const std::string& name, const std::string& zone, py::function fn) -> std::shared_ptr<IntensityProvider> {
        return std::make_shared<CallableIntensity>(name, zone, std::move(fn));
      },
      py::arg("name"), py::arg("zone"), py::arg("fn"));
  c.def(
      "electricity_maps",
      [](std::optional<std::string> zone, std::optional<double> lat, std::optional<double> lon, std::string token,
         bool estimations, std::string emission_factor_type, std::optional<std::string> base_url,
         double timeout_s) -> std::shared_ptr<IntensityProvider> {
        ElectricityMapsOptions o;
        o.zone = zone.value_or("");
        o.lat = lat;
        o.lon = lon;
        o.token = std::move(token);
        o.estimations = estimations;
        o.emission_factor_type = std::move(emission_factor_type);
        if (base_url) o.base_url = *base_url;
        o.timeout = millis(timeout_s);
        return unwrap(ElectricityMaps::create(std::move(o)));
      },
      py::arg("zone") = py::none(), py::arg("lat") = py::none(), py::arg("lon") = py::none(), py::arg("token") = "",
      py::arg("estimations") = true, py::arg("emission_factor_type") = "", py::arg("base_url") = py::none(),
      py::arg("timeout_s") = 5.0);

  py::class_<PriceProvider, std::shared_ptr<PriceProvider>>(c, "PriceProvider")
      .def_property_readonly("name", &PriceProvider::name)
      .def(
          "cost",
          [](PriceProvider& p, double hour, double kwh_before, double kwh) {
            std::optional<erg::Result<Price>> r;
            {
              py::gil_scoped_release release;
              r = p.cost(hour_from(hour), kwh_before, kwh);
            }
            return price_dict(unwrap(std::move(*r)));
          },
          py::arg("hour"), py::arg("kwh_before"), py::arg("kwh"));
  c.def(
      "fixed_price",
      [](double per_kwh, const std::string& currency) -> std::shared_ptr<PriceProvider> {
        if (!(per_kwh >= 0)) raise_error({erg::ErrorCode::kInvalidArgument, "a price must be >= 0 per kWh"});
        return std::make_shared<FixedPrice>(per_kwh, currency);
      },
      py::arg("per_kwh"), py::arg("currency") = "USD");
  c.def(
      "openei",
      [](const std::string& label, std::string api_key, std::optional<std::string> base_url, std::string version,
         std::string time_zone, double timeout_s) -> std::shared_ptr<PriceProvider> {
        OpenEiOptions o;
        o.label = label;
        o.api_key = std::move(api_key);
        if (base_url) o.base_url = *base_url;
        o.version = std::move(version);
        o.time_zone = std::move(time_zone);
        o.timeout = millis(timeout_s);
        return unwrap(OpenEi::create(std::move(o)));
      },
      py::arg("label"), py::arg("api_key") = "", py::arg("base_url") = py::none(), py::arg("version") = "latest",
      py::arg("time_zone") = "", py::arg("timeout_s") = 5.0);

  py::class_<CarbonMonitor, GilFreeHolder<CarbonMonitor>> carbon_monitor(c, "CarbonMonitor");
  carbon_monitor.def(
      py::init([](py::handle inventory, std::shared_ptr<IntensityProvider> provider,
                  std::optional<std::vector<unsigned>> gpu_indices, std::optional<std::vector<unsigned>> cpu_indices,
                  std::optional<py::function> sync, std::string fallback_zone, bool use_fallback) {
        const erg::Inventory& inv = erg_python::inventory_of(inventory);
        CarbonMonitorOptions o;
        o.hourly = hourly_options(std::move(gpu_indices), std::move(cpu_indices), std::move(sync));
        o.fallback_zone = std::move(fallback_zone);
        o.use_fallback = use_fallback;
        py::gil_scoped_release release;
        return unwrap(CarbonMonitor::create(std::move(provider), inv.gpus, inv.cpus, std::move(o))).release();
      }),
      py::arg("inventory"), py::arg("provider"), py::arg("gpu_indices") = py::none(),
      py::arg("cpu_indices") = py::none(), py::arg("sync") = py::none(), py::arg("fallback_zone") = "",
      py::arg("use_fallback") = true);
  add_window_methods(carbon_monitor, &carbon_dict);

  py::class_<CostMonitor, GilFreeHolder<CostMonitor>> cost_monitor(c, "CostMonitor");
  cost_monitor.def(
      py::init([](py::handle inventory, std::shared_ptr<PriceProvider> provider,
                  std::optional<std::vector<unsigned>> gpu_indices, std::optional<std::vector<unsigned>> cpu_indices,
                  std::optional<py::function> sync, double kwh_before) {
        const erg::Inventory& inv = erg_python::inventory_of(inventory);
        CostMonitorOptions o;
        o.hourly = hourly_options(std::move(gpu_indices), std::move(cpu_indices), std::move(sync));
        o.kwh_before = kwh_before;
        py::gil_scoped_release release;
        return unwrap(CostMonitor::create(std::move(provider), inv.gpus, inv.cpus, std::move(o))).release();
      }),
      py::arg("inventory"), py::arg("provider"), py::arg("gpu_indices") = py::none(),
      py::arg("cpu_indices") = py::none(), py::arg("sync") = py::none(), py::arg("kwh_before") = 0.0);
  add_window_methods(cost_monitor, &cost_dict);
}
