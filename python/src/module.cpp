// erg._core: the private pybind11 module. It only translates (STYLE.md habit 13): C++ types to
// Python types, erg::Error to the Python exception hierarchy of erg._errors (one translator),
// and releases the GIL around every call that reads hardware or blocks. Context managers,
// framework synchronization, distributed aggregation and the Zeus-compatible names live in the
// pure-Python package.

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "erg/backends/discovery.hpp"
#ifdef ERG_WITH_DAEMON_CLIENT
#include "erg/client/discovery.hpp"
#endif
#include "erg/core/device.hpp"
#include "erg/core/discovery.hpp"
#include "erg/core/result.hpp"
#include "erg/measure/energy_monitor.hpp"
#include "erg/measure/measurement.hpp"
#include "erg/measure/power_monitor.hpp"
#include "erg/sim/machine.hpp"
#include "erg/sim/spec.hpp"

namespace py = pybind11;
using namespace std::chrono_literals;

namespace {

/// The one C++ exception the bindings throw; translated once, in `translate` below.
struct ErgException {
  erg::Error error;
};

[[noreturn]] void raise(erg::Error error) { throw ErgException{std::move(error)}; }

template <class T>
T unwrap(erg::Result<T> r) {
  if (!r) raise(std::move(r.error()));
  return std::move(*r);
}
inline void unwrap(erg::Result<void> r) {
  if (!r) raise(std::move(r.error()));
}

/// erg::ErrorCode → the class name in erg._errors.
const char* exception_name(erg::ErrorCode code) {
  switch (code) {
    case erg::ErrorCode::kNotSupported: return "NotSupportedError";
    case erg::ErrorCode::kNoPermission: return "NoPermissionError";
    case erg::ErrorCode::kNotFound: return "NotFoundError";
    case erg::ErrorCode::kInvalidArgument: return "InvalidArgumentError";
    case erg::ErrorCode::kDriverError: return "DriverError";
    case erg::ErrorCode::kGpuLost: return "GpuLostError";
    case erg::ErrorCode::kIo: return "IoError";
    case erg::ErrorCode::kUnavailable: return "UnavailableError";
    case erg::ErrorCode::kTimeout: return "DeviceTimeoutError";
    case erg::ErrorCode::kAlreadyExists: return "AlreadyExistsError";
    case erg::ErrorCode::kInternal: return "InternalError";
  }
  return "ErgError";
}

void translate(std::exception_ptr p) {
  try {
    if (p) std::rethrow_exception(p);
  } catch (const ErgException& e) {
    py::object errors = py::module_::import("erg._errors");
    py::object cls = errors.attr(exception_name(e.error.code));
    py::object exc = cls(e.error.message);
    exc.attr("code") = std::string(erg::to_string(e.error.code));
    PyErr_SetObject(cls.ptr(), exc.ptr());
  }
}

double seconds(std::chrono::nanoseconds ns) { return std::chrono::duration<double>(ns).count(); }
std::chrono::nanoseconds nanos(double s) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::duration<double>(s));
}

/// Discovery result shared by monitors created from it.
struct PyInventory {
  erg::Inventory inv;
};

/// Timeline → two NumPy arrays (monotonic seconds, watts), one copy out of the C++ vector.
py::tuple to_arrays(const std::vector<erg::measure::PowerPoint>& points) {
  const auto n = static_cast<py::ssize_t>(points.size());
  py::array_t<double> t(n);
  py::array_t<double> w(n);
  auto tv = t.mutable_unchecked<1>();
  auto wv = w.mutable_unchecked<1>();
  for (py::ssize_t k = 0; k < n; ++k) {
    tv(k) = seconds(points[static_cast<std::size_t>(k)].time);
    wv(k) = points[static_cast<std::size_t>(k)].watts;
  }
  return py::make_tuple(std::move(t), std::move(w));
}

erg::measure::CpuDomain cpu_domain(const std::string& s) {
  if (s == "package") return erg::measure::CpuDomain::kPackage;
  if (s == "dram") return erg::measure::CpuDomain::kDram;
  raise(erg::Error{erg::ErrorCode::kInvalidArgument, "unknown CPU domain '" + s + "' (package, dram)"});
}

erg::PowerDomain gpu_domain(const std::string& s) { return unwrap(erg::parse_power_domain(s)); }

}  // namespace

PYBIND11_MODULE(_core, m) {
  m.doc() = "erg's native core (private; use the `erg` package)";
  py::register_exception_translator(&translate);

  // --- devices -------------------------------------------------------------------------------
  py::class_<erg::Gpu, std::shared_ptr<erg::Gpu>>(m, "Gpu")
      .def_property_readonly("index", &erg::Gpu::index)
      .def_property_readonly("physical_index", &erg::Gpu::physical_index)
      .def_property_readonly("vendor", [](const erg::Gpu& g) { return std::string(erg::to_string(g.vendor())); })
      .def_property_readonly("name", &erg::Gpu::name)
      .def_property_readonly("uuid", &erg::Gpu::uuid)
      .def_property_readonly("architecture", &erg::Gpu::architecture)
      .def_property_readonly("energy_counter", [](const erg::Gpu& g) { return g.capabilities().energy_counter; })
      .def_property_readonly("power_domains",
                             [](const erg::Gpu& g) {
                               std::vector<std::string> out;
                               for (auto d : g.capabilities().power_domains) out.emplace_back(erg::to_string(d));
                               return out;
                             })
      .def(
          "total_energy", [](erg::Gpu& g) { return erg::Joules(unwrap(g.total_energy())).value(); },
          py::call_guard<py::gil_scoped_release>(), "Cumulative energy counter, joules.")
      .def(
          "power",
          [](erg::Gpu& g, const std::string& domain) {
            return erg::Watts(unwrap(g.power(gpu_domain(domain)))).value();
          },
          py::arg("domain") = "device_instant", py::call_guard<py::gil_scoped_release>(), "Power now, watts.")
      .def("__repr__",
           [](const erg::Gpu& g) { return "<erg.Gpu " + std::to_string(g.index()) + " " + g.name() + ">"; });

  py::class_<erg::Cpu, std::shared_ptr<erg::Cpu>>(m, "Cpu")
      .def_property_readonly("index", &erg::Cpu::index)
      .def_property_readonly("name", &erg::Cpu::name)
      .def_property_readonly("dram", [](const erg::Cpu& c) { return c.capabilities().dram; })
      .def("__repr__",
           [](const erg::Cpu& c) { return "<erg.Cpu " + std::to_string(c.index()) + " " + c.name() + ">"; });

  py::class_<erg::Unavailable>(m, "Unavailable")
      .def_readonly("source", &erg::Unavailable::source)
      .def_property_readonly("code", [](const erg::Unavailable& u) { return std::string(erg::to_string(u.code)); })
      .def_readonly("reason", &erg::Unavailable::reason);

  py::class_<PyInventory, std::shared_ptr<PyInventory>>(m, "Inventory")
      .def_property_readonly("gpus", [](const PyInventory& i) { return i.inv.gpus; })
      .def_property_readonly("cpus", [](const PyInventory& i) { return i.inv.cpus; })
      .def_property_readonly("unavailable", [](const PyInventory& i) { return i.inv.unavailable; })
      .def_property_readonly("simulated", [](const PyInventory& i) { return i.inv.simulated; });

  m.def(
      "discover",
      []() {
#ifdef ERG_WITH_DAEMON_CLIENT
        auto inv = unwrap(erg::client::discover());  // through ergd when ERG_DAEMON_SOCK is set
#else
        auto inv = unwrap(erg::backends::discover());
#endif
        return std::make_shared<PyInventory>(PyInventory{std::move(inv)});
      },
      py::call_guard<py::gil_scoped_release>(), "Discovers GPUs (NVML) and CPU packages (RAPL).");

  // --- measurements --------------------------------------------------------------------------
  using erg::measure::Measurement;
  py::class_<Measurement>(m, "Measurement")
      .def_readonly("name", &Measurement::name)
      .def_property_readonly("time", [](const Measurement& x) { return x.time.count(); })
      .def_property_readonly("start_wall", [](const Measurement& x) { return seconds(x.start_wall); })
      .def_property_readonly("gpu_energy",
                             [](const Measurement& x) {
                               py::dict d;
                               for (const auto& g : x.gpus) d[py::int_(g.index)] = g.energy.value();
                               return d;
                             })
      .def_property_readonly("cpu_energy",
                             [](const Measurement& x) {
                               py::dict d;
                               for (const auto& c : x.cpus) d[py::int_(c.index)] = c.package.value();
                               return d;
                             })
      .def_property_readonly("dram_energy",
                             [](const Measurement& x) {
                               py::dict d;
                               for (const auto& c : x.cpus)
                                 if (c.dram) d[py::int_(c.index)] = c.dram->value();
                               return d;
                             })
      .def_property_readonly("gpu_energy_total", [](const Measurement& x) { return x.gpu_energy().value(); })
      .def_property_readonly("cpu_energy_total", [](const Measurement& x) { return x.cpu_energy().value(); })
      .def_property_readonly("dram_energy_total", [](const Measurement& x) { return x.dram_energy().value(); })
      .def_property_readonly("total_energy", [](const Measurement& x) { return x.total_energy().value(); })
      .def_property_readonly("affected", &Measurement::affected)
      .def_property_readonly("short_window_gpus",
                             [](const Measurement& x) {
                               std::vector<unsigned> out;
                               for (const auto& g : x.gpus)
                                 if (g.short_window) out.push_back(g.index);
                               return out;
                             })
      .def_property_readonly("gpu_sources",
                             [](const Measurement& x) {
                               py::dict d;
                               for (const auto& g : x.gpus) d[py::int_(g.index)] = std::string(to_string(g.source));
                               return d;
                             })
      .def_property_readonly("errors",
                             [](const Measurement& x) {
                               py::dict d;
                               for (const auto& g : x.gpus)
                                 if (g.error) d[py::str("gpu" + std::to_string(g.index))] = g.error->message;
                               for (const auto& c : x.cpus)
                                 if (c.error) d[py::str("cpu" + std::to_string(c.index))] = c.error->message;
                               return d;
                             })
      .def("__repr__", [](const Measurement& x) {
        return "Measurement(name='" + x.name + "', time=" + std::to_string(x.time.count()) +
               " s, total_energy=" + std::to_string(x.total_energy().value()) + " J)";
      });

  using erg::measure::EnergyMonitor;
  py::class_<EnergyMonitor>(m, "EnergyMonitor")
      .def(py::init([](const PyInventory& inv, std::optional<std::vector<unsigned>> gpu_indices,
                       std::optional<std::vector<unsigned>> cpu_indices, bool approx_instant_energy,
                       bool extrapolate_counters, std::optional<std::filesystem::path> log_file) {
             erg::measure::EnergyMonitorOptions o;
             o.gpu_indices = std::move(gpu_indices);
             o.cpu_indices = std::move(cpu_indices);
             o.approx_instant_energy = approx_instant_energy;
             o.extrapolate_counters = extrapolate_counters;
             o.log_file = std::move(log_file);
             py::gil_scoped_release release;
             return unwrap(EnergyMonitor::create(inv.inv.gpus, inv.inv.cpus, std::move(o)));
           }),
           py::arg("inventory"), py::arg("gpu_indices") = py::none(), py::arg("cpu_indices") = py::none(),
           py::arg("approx_instant_energy") = false, py::arg("extrapolate_counters") = true,
           py::arg("log_file") = py::none())
      // Synchronization with frameworks happens in Python before these calls (sync=false here).
      .def(
          "begin_window",
          [](EnergyMonitor& mon, const std::string& name, bool restart) {
            unwrap(mon.begin_window(name, /*sync=*/false, restart));
          },
          py::arg("name"), py::arg("restart") = false, py::call_guard<py::gil_scoped_release>())
      .def(
          "end_window", [](EnergyMonitor& mon, const std::string& name) { return unwrap(mon.end_window(name, false)); },
          py::arg("name"), py::call_guard<py::gil_scoped_release>())
      .def(
          "cancel_window", [](EnergyMonitor& mon, const std::string& name) { unwrap(mon.cancel_window(name)); },
          py::arg("name"), py::call_guard<py::gil_scoped_release>())
      .def("reset_windows", &EnergyMonitor::reset_windows, py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("gpu_indices", &EnergyMonitor::gpu_indices)
      .def_property_readonly("cpu_indices", &EnergyMonitor::cpu_indices)
      .def_property_readonly("open_windows", &EnergyMonitor::open_windows);

  using erg::measure::PowerMonitor;
  py::class_<PowerMonitor>(m, "PowerMonitor")
      .def(py::init([](const PyInventory& inv, std::optional<std::vector<unsigned>> gpu_indices,
                       const std::vector<std::string>& domains, bool cpus, std::optional<double> period,
                       std::size_t max_samples) {
             erg::measure::PowerMonitorOptions o;
             o.gpu_indices = std::move(gpu_indices);
             for (const auto& d : domains) o.domains.push_back(gpu_domain(d));
             o.cpus = cpus;
             if (period)
               o.period = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::duration<double>(*period));
             o.max_samples = max_samples;
             py::gil_scoped_release release;
             return unwrap(PowerMonitor::create(
                 inv.inv.gpus, cpus ? inv.inv.cpus : std::vector<std::shared_ptr<erg::Cpu>>{}, std::move(o)));
           }),
           py::arg("inventory"), py::arg("gpu_indices") = py::none(), py::arg("domains") = std::vector<std::string>{},
           py::arg("cpus") = true, py::arg("period") = py::none(), py::arg("max_samples") = std::size_t{1} << 18)
      .def("stop", &PowerMonitor::stop, py::call_guard<py::gil_scoped_release>())
      .def("sample_once", &PowerMonitor::sample_once, py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("period",
                             [](const PowerMonitor& p) { return std::chrono::duration<double>(p.period()).count(); })
      .def_property_readonly("gpu_indices", &PowerMonitor::gpu_indices)
      .def_property_readonly("domains",
                             [](const PowerMonitor& p) {
                               std::vector<std::string> out;
                               for (auto d : p.domains()) out.emplace_back(erg::to_string(d));
                               return out;
                             })
      .def("sampled",
           [](const PowerMonitor& p, unsigned gpu, const std::string& d) { return p.sampled(gpu, gpu_domain(d)); })
      .def_property_readonly("rounds", &PowerMonitor::rounds)
      .def(
          "gpu_power",
          [](const PowerMonitor& p, unsigned gpu, const std::string& domain, std::optional<double> time) {
            std::optional<std::chrono::nanoseconds> t;
            if (time) t = nanos(*time);
            return unwrap(p.gpu_power(gpu, gpu_domain(domain), t)).value();
          },
          py::arg("gpu"), py::arg("domain") = "device_instant", py::arg("time") = py::none())
      .def(
          "gpu_timeline",
          [](const PowerMonitor& p, unsigned gpu, const std::string& domain, double start, double end) {
            std::vector<erg::measure::PowerPoint> points;
            {
              py::gil_scoped_release release;
              points = unwrap(p.gpu_timeline(gpu, gpu_domain(domain), nanos(start), nanos(end)));
            }
            return to_arrays(points);
          },
          py::arg("gpu"), py::arg("domain"), py::arg("start"), py::arg("end"))
      .def(
          "gpu_energy",
          [](const PowerMonitor& p, unsigned gpu, const std::string& domain, double start, double end) {
            return unwrap(p.gpu_energy(gpu, gpu_domain(domain), nanos(start), nanos(end))).value();
          },
          py::arg("gpu"), py::arg("domain"), py::arg("start"), py::arg("end"))
      .def(
          "cpu_power",
          [](const PowerMonitor& p, unsigned cpu, const std::string& domain, std::optional<double> time) {
            std::optional<std::chrono::nanoseconds> t;
            if (time) t = nanos(*time);
            return unwrap(p.cpu_power(cpu, cpu_domain(domain), t)).value();
          },
          py::arg("cpu"), py::arg("domain") = "package", py::arg("time") = py::none())
      .def(
          "cpu_timeline",
          [](const PowerMonitor& p, unsigned cpu, const std::string& domain, double start, double end) {
            std::vector<erg::measure::PowerPoint> points;
            {
              py::gil_scoped_release release;
              points = unwrap(p.cpu_timeline(cpu, cpu_domain(domain), nanos(start), nanos(end)));
            }
            return to_arrays(points);
          },
          py::arg("cpu"), py::arg("domain"), py::arg("start"), py::arg("end"))
      .def(
          "cpu_energy",
          [](const PowerMonitor& p, unsigned cpu, const std::string& domain, double start, double end) {
            return unwrap(p.cpu_energy(cpu, cpu_domain(domain), nanos(start), nanos(end))).value();
          },
          py::arg("cpu"), py::arg("domain"), py::arg("start"), py::arg("end"))
      .def_property_readonly("stored_samples", &PowerMonitor::stored_samples);

  m.def(
      "monotonic", []() { return seconds(std::chrono::steady_clock::now().time_since_epoch()); },
      "The monitors' clock (CLOCK_MONOTONIC), seconds.");

  // --- simulated machine control API ------------------------------------------------------------
  auto sim = m.def_submodule("sim", "Simulated machine control (tests and demos)");
  using erg::sim::Machine;
  py::class_<Machine>(sim, "Machine")
      .def_static(
          "create",
          [](const std::string& spec) {
            auto parsed = unwrap(erg::sim::parse_spec(spec));
            py::gil_scoped_release release;
            return unwrap(Machine::create_temp(parsed));
          },
          py::arg("spec"))
      .def_static(
          "attach", [](const std::filesystem::path& state) { return unwrap(Machine::attach(state)); },
          py::arg("state_file"), py::call_guard<py::gil_scoped_release>())
      .def("export_env",
           [](const Machine& mach) {
             unwrap(mach.export_env());
             py::dict env;
             for (const char* k : {"ERG_SIM_STATE", "ERG_NVML_LIBRARY", "ERG_POWERCAP_ROOT", "ERG_SIMULATE"}) {
               const char* v = std::getenv(k);
               if (v != nullptr) env[py::str(k)] = std::string(v);
             }
             return env;
           })
      .def_property_readonly("state_file", &Machine::state_file)
      .def_property_readonly("dir", &Machine::dir)
      .def_property_readonly("spec", [](const Machine& mach) { return mach.spec().text; })
      .def_property_readonly("gpu_count", &Machine::gpu_count)
      .def_property_readonly("cpu_count", &Machine::cpu_count)
      .def("use_virtual_clock", &Machine::use_virtual_clock, py::arg("on") = true)
      .def(
          "advance", [](Machine& mach, double s) { unwrap(mach.advance(nanos(s))); }, py::arg("seconds"))
      .def("now", [](const Machine& mach) { return seconds(mach.now()); })
      .def(
          "set_utilization", [](Machine& mach, unsigned gpu, double u) { unwrap(mach.set_utilization(gpu, u)); },
          py::arg("gpu"), py::arg("utilization"))
      .def(
          "run_work",
          [](Machine& mach, unsigned gpu, double work, double u) {
            return seconds(unwrap(mach.run_work(gpu, work, u)));
          },
          py::arg("gpu"), py::arg("work"), py::arg("utilization") = 1.0, py::call_guard<py::gil_scoped_release>())
      .def(
          "set_cpu_power",
          [](Machine& mach, unsigned cpu, double package, double dram) {
            unwrap(mach.set_cpu_power(cpu, erg::Watts(package), erg::Watts(dram)));
          },
          py::arg("cpu"), py::arg("package"), py::arg("dram"))
      .def("true_energy", [](Machine& mach, unsigned gpu) { return unwrap(mach.true_energy(gpu)).value(); })
      .def("true_cpu_energy", [](Machine& mach, unsigned cpu) { return unwrap(mach.true_cpu_energy(cpu)).value(); })
      .def("true_dram_energy", [](Machine& mach, unsigned cpu) { return unwrap(mach.true_dram_energy(cpu)).value(); })
      .def("power", [](Machine& mach, unsigned gpu) { return unwrap(mach.status(gpu)).power.value(); })
      .def("reset_energy_counter", [](Machine& mach, unsigned gpu) { unwrap(mach.reset_energy_counter(gpu)); })
      .def("set_lost", [](Machine& mach, unsigned gpu, bool lost) { unwrap(mach.set_lost(gpu, lost)); });
}
