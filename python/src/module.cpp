// erg._core: the private pybind11 module. It only translates (STYLE.md habit 13): C++ types to
// Python types, erg::Error to the Python exception hierarchy of erg._errors (one translator),
// and releases the GIL around every call that reads hardware or blocks. Context managers,
// framework synchronization, distributed aggregation and the Zeus-compatible names live in the
// pure-Python package.

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "erg/core/device.hpp"
#include "erg/core/discovery.hpp"
#include "erg/core/result.hpp"
#include "erg/devices/devices.hpp"
#include "erg/exporters/prometheus/push.hpp"
#include "erg/measure/energy_monitor.hpp"
#include "erg/measure/measurement.hpp"
#include "erg/measure/power_monitor.hpp"
#include "erg/measure/temperature_monitor.hpp"
#include "erg/optimizers/power_limit/optimizer.hpp"
#include "erg/optimizers/profile/profile.hpp"
#include "erg/sim/faults.hpp"
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

/// Sets the Python error for `error` (the GIL held): erg._errors' class for its code.
void set_error(const erg::Error& error) {
  py::object errors = py::module_::import("erg._errors");
  py::object cls = errors.attr(exception_name(error.code));
  py::object exc = cls(error.message);
  exc.attr("code") = std::string(erg::to_string(error.code));
  PyErr_SetObject(cls.ptr(), exc.ptr());
}

void translate(std::exception_ptr p) {
  try {
    if (p) std::rethrow_exception(p);
  } catch (const ErgException& e) {
    set_error(e.error);
  }
}

double seconds(std::chrono::nanoseconds ns) { return std::chrono::duration<double>(ns).count(); }
std::chrono::nanoseconds nanos(double s) {
  // Rounded, not truncated: a time handed out as seconds (a sample's, from a timeline) must come
  // back as the same nanosecond, or it lands 1 ns before the sample it names.
  return std::chrono::round<std::chrono::nanoseconds>(std::chrono::duration<double>(s));
}

/// Discovery result shared by monitors created from it.
struct PyInventory {
  erg::Inventory inv;
  std::shared_ptr<erg::sim::Machine> machine;  ///< Kept alive with the devices it simulates.
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

// --- thermally stable profiling (erg::profile) ------------------------------------------------
// Python callables called from the profiler take the GIL for the call; the profiler runs with it
// released and takes its seams by reference, so no Python object is copied without the GIL.

/// `f` as a C++ callable that takes the GIL and calls it.
template <class R = void>
std::function<R()> py_call(py::object f) {
  return [f = std::move(f)]() -> R {
    py::gil_scoped_acquire gil;
    if constexpr (std::is_void_v<R>)
      f();
    else
      return f().cast<R>();
  };
}

/// The profiler's seams: an erg EnergyMonitor (with the inventory it measures), or any object with
/// sync(), begin_window(), end_window() -> (seconds, joules), cancel_window() and temperature().
struct ProfileSeams {
  erg::profile::Meter meter;
  erg::profile::Environment env;
  erg::profile::Target target;

  ProfileSeams(py::object target_function, py::object meter_obj, py::object inventory, py::object all_reduce,
               py::object log) {
    target = py_call(std::move(target_function));
    if (py::isinstance<erg::measure::EnergyMonitor>(meter_obj)) {
      if (inventory.is_none())
        raise({erg::ErrorCode::kInvalidArgument, "profiling an EnergyMonitor needs its inventory"});
      meter = erg::profile::monitor_meter(meter_obj.cast<erg::measure::EnergyMonitor&>(),
                                          inventory.cast<PyInventory&>().inv.gpus);
    } else {
      auto ok_call = [](py::object f) -> std::function<erg::Result<void>()> {
        return [g = py_call(std::move(f))]() -> erg::Result<void> {
          g();
          return erg::ok();
        };
      };
      meter.sync = ok_call(meter_obj.attr("sync"));
      meter.begin_window = ok_call(meter_obj.attr("begin_window"));
      meter.end_window = [f = py_call<std::pair<double, double>>(
                              meter_obj.attr("end_window"))]() -> erg::Result<erg::profile::WindowReading> {
        auto [t, e] = f();
        return erg::profile::WindowReading{erg::Seconds(t), erg::Joules(e)};
      };
      meter.cancel_window = py_call(meter_obj.attr("cancel_window"));
      meter.temperature = [f = py_call<double>(meter_obj.attr("temperature"))]() -> erg::Result<double> { return f(); };
    }
    if (!all_reduce.is_none())
      env.all_reduce = [f = std::move(all_reduce)](double v, erg::profile::ReduceOp op) -> erg::Result<double> {
        py::gil_scoped_acquire gil;
        return f(v, op == erg::profile::ReduceOp::kSum ? "sum" : "max").cast<double>();
      };
    if (!log.is_none())
      env.log = [f = std::move(log)](const std::string& line) {
        py::gil_scoped_acquire gil;
        f(line);
      };
  }
};

py::dict to_dict(const erg::profile::TrialResult& t) {
  py::dict d;
  d["energy_per_iter"] = t.energy_per_iter.value();
  d["time_per_iter"] = t.time_per_iter.count();
  d["total_energy"] = t.total_energy.value();
  d["total_time"] = t.total_time.count();
  d["iterations"] = t.iterations;
  d["temperature_before"] = t.temperature_before;
  d["temperature_after"] = t.temperature_after;
  return d;
}

py::dict to_dict(const erg::profile::SweepReport& r) {
  py::list entries;
  for (const auto& e : r.entries) {
    py::dict d;
    d["measurement_duration"] = e.measurement_duration.count();
    d["cooldown_duration"] = e.cooldown_duration.count();
    py::list trials;
    for (const auto& t : e.trials) trials.append(to_dict(t));
    d["trials"] = trials;
    d["energy_mean"] = e.energy_mean.value();
    d["energy_std"] = e.energy_std.value();
    d["avg_temperature_before"] = e.avg_temperature_before;
    d["avg_temperature_after"] = e.avg_temperature_after;
    d["avg_total_time"] = e.avg_total_time.count();
    d["avg_total_energy"] = e.avg_total_energy.value();
    d["is_valid"] = e.is_valid;
    entries.append(d);
  }
  std::vector<double> values;
  for (auto v : r.sweep_values) values.push_back(v.count());
  py::dict d;
  d["sweep_param"] = py::make_tuple(r.sweep_name, values);
  d["fixed_param"] = py::make_tuple(r.fixed_name, r.fixed_value.count());
  d["entries"] = entries;
  return d;
}

std::vector<erg::Seconds> to_seconds(const std::optional<std::vector<double>>& v) {
  std::vector<erg::Seconds> out;
  if (v)
    for (double s : *v) out.emplace_back(s);
  return out;
}

erg::profile::SweepOptions sweep_options(int num_trials, int num_warmup_trials, double threshold, int warmup_iterations,
                                         int calibration_iterations, std::optional<double> iteration_duration) {
  erg::profile::SweepOptions o;
  o.num_trials = num_trials;
  o.num_warmup_trials = num_warmup_trials;
  o.trial_stddev_threshold = erg::Joules(threshold);
  o.num_warmup_iterations = warmup_iterations;
  o.num_calibration_iterations = calibration_iterations;
  if (iteration_duration) o.iteration_duration = erg::Seconds(*iteration_duration);
  return o;
}

void bind_profile(py::module_& m) {
  auto p = m.def_submodule("profile", "Thermally stable profiling (erg::profile); see erg.profile");
  // Seams: target_function, meter (an EnergyMonitor with its inventory, or a meter object),
  // all_reduce(value, "sum"|"max") -> float or None, log(line) or None.
  p.def("measure", [](py::object target, py::object meter, py::object inventory, double measurement_duration,
                      double cooldown_duration, int warmup_iterations, int calibration_iterations,
                      std::optional<double> warmup_settle_duration, py::object all_reduce, py::object log) {
    ProfileSeams s(std::move(target), std::move(meter), std::move(inventory), std::move(all_reduce), std::move(log));
    erg::profile::MeasureOptions o{warmup_iterations, calibration_iterations, std::nullopt};
    if (warmup_settle_duration) o.warmup_settle_duration = erg::Seconds(*warmup_settle_duration);
    erg::Result<erg::profile::TrialResult> r = [&] {
      py::gil_scoped_release release;
      return erg::profile::measure(s.target, s.meter, erg::Seconds(measurement_duration),
                                   erg::Seconds(cooldown_duration), o, s.env);
    }();
    return to_dict(unwrap(std::move(r)));
  });
  p.def("sweep", [](const std::string& which, py::object target, py::object meter, py::object inventory,
                    std::optional<std::vector<double>> range, double fixed, int num_trials, int num_warmup_trials,
                    double threshold, int warmup_iterations, int calibration_iterations,
                    std::optional<double> iteration_duration, py::object all_reduce, py::object log) {
    ProfileSeams s(std::move(target), std::move(meter), std::move(inventory), std::move(all_reduce), std::move(log));
    const auto o = sweep_options(num_trials, num_warmup_trials, threshold, warmup_iterations, calibration_iterations,
                                 iteration_duration);
    if (which != "measurement_duration" && which != "cooldown_duration")
      raise({erg::ErrorCode::kInvalidArgument, "sweep measurement_duration or cooldown_duration"});
    erg::Result<erg::profile::SweepReport> r = [&] {
      py::gil_scoped_release release;
      return which == "measurement_duration" ? erg::profile::profile_measurement_duration(
                                                   s.target, s.meter, to_seconds(range), erg::Seconds(fixed), o, s.env)
                                             : erg::profile::profile_cooldown_duration(
                                                   s.target, s.meter, to_seconds(range), erg::Seconds(fixed), o, s.env);
    }();
    return to_dict(unwrap(std::move(r)));
  });
  p.def("profile_parameters", [](py::object target, py::object meter, py::object inventory,
                                 std::optional<std::vector<double>> m_range, std::optional<std::vector<double>> c_range,
                                 int num_trials, int num_warmup_trials, double threshold, int warmup_iterations,
                                 int calibration_iterations, py::object all_reduce, py::object log) {
    ProfileSeams s(std::move(target), std::move(meter), std::move(inventory), std::move(all_reduce), std::move(log));
    const auto o = sweep_options(num_trials, num_warmup_trials, threshold, warmup_iterations, calibration_iterations,
                                 std::nullopt);
    erg::Result<std::pair<erg::profile::SweepReport, erg::profile::SweepReport>> r = [&] {
      py::gil_scoped_release release;
      return erg::profile::profile_parameters(s.target, s.meter, to_seconds(m_range), to_seconds(c_range), o, s.env);
    }();
    auto both = unwrap(std::move(r));
    return py::make_tuple(to_dict(both.first), to_dict(both.second));
  });
}

// --- EnergyMonitor.begin_window / end_window -------------------------------------------------
// The two calls a training loop makes per step, as METH_FASTCALL|METH_KEYWORDS methods rather
// than through pybind11's dispatcher: that one copies the keyword dict of every call made with
// keywords (`sync_execution=False`, Zeus's spelling), which cost about 1 µs per window here.
// Same signatures, errors and GIL release as the pybind11 methods they replace.

/// Interned parameter names; call sites' keyword names are interned too, so they usually match
/// by pointer.
PyObject* g_kw_name = nullptr;
PyObject* g_kw_sync = nullptr;
PyObject* g_kw_restart = nullptr;
PyObject* g_kw_cancel = nullptr;

/// (name, sync_execution=True, <flag>=False) → out[0..2] (borrowed; nullptr: default). False
/// with a TypeError set on bad arguments.
bool window_args(const char* fn, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames, PyObject* flag_kw,
                 PyObject* out[3]) {
  PyObject* const names[3] = {g_kw_name, g_kw_sync, flag_kw};
  out[0] = out[1] = out[2] = nullptr;
  if (nargs > 3) {
    PyErr_Format(PyExc_TypeError, "%s() takes at most 3 positional arguments (%zd given)", fn, nargs);
    return false;
  }
  for (Py_ssize_t i = 0; i < nargs; ++i) out[i] = args[i];
  const Py_ssize_t nkw = kwnames != nullptr ? PyTuple_GET_SIZE(kwnames) : 0;
  for (Py_ssize_t k = 0; k < nkw; ++k) {
    PyObject* key = PyTuple_GET_ITEM(kwnames, k);
    int slot = -1;
    for (int j = 0; j < 3 && slot < 0; ++j)
      if (key == names[j]) slot = j;
    for (int j = 0; j < 3 && slot < 0; ++j) {
      const int eq = PyObject_RichCompareBool(key, names[j], Py_EQ);
      if (eq < 0) return false;
      if (eq == 1) slot = j;
    }
    if (slot < 0) {
      PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument '%U'", fn, key);
      return false;
    }
    if (out[slot] != nullptr) {
      PyErr_Format(PyExc_TypeError, "%s() got multiple values for argument '%U'", fn, names[slot]);
      return false;
    }
    out[slot] = args[nargs + k];
  }
  if (out[0] == nullptr) {
    PyErr_Format(PyExc_TypeError, "%s() missing required argument 'name'", fn);
    return false;
  }
  if (!PyUnicode_Check(out[0])) {
    PyErr_Format(PyExc_TypeError, "%s(): name must be str, not %.100s", fn, Py_TYPE(out[0])->tp_name);
    return false;
  }
  return true;
}

/// -1 with an error set, else 0/1 (Python truth, as Zeus's pure-Python signature takes it).
int truth(PyObject* o, bool dflt) { return o == nullptr ? static_cast<int>(dflt) : PyObject_IsTrue(o); }

/// Runs `call(monitor, name, sync, flag)` with the GIL released and converts its outcome.
template <class Call>
PyObject* window_call(const char* fn, PyObject* self, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames,
                      PyObject* flag_kw, Call&& call) noexcept {
  try {
    PyObject* a[3];
    if (!window_args(fn, args, nargs, kwnames, flag_kw, a)) return nullptr;
    const int sync = truth(a[1], true);
    const int flag = truth(a[2], false);
    if (sync < 0 || flag < 0) return nullptr;
    Py_ssize_t len = 0;
    const char* utf8 = PyUnicode_AsUTF8AndSize(a[0], &len);
    if (utf8 == nullptr) return nullptr;
    std::string name(utf8, static_cast<std::size_t>(len));
    auto& monitor = py::handle(self).cast<erg::measure::EnergyMonitor&>();
    return call(monitor, name, sync != 0, flag != 0);
  } catch (py::error_already_set& e) {  // raised by the synchronization callable
    e.restore();
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
  }
  return nullptr;
}

PyObject* begin_window_fast(PyObject* self, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  return window_call(
      "begin_window", self, args, nargs, kwnames, g_kw_restart,
      [](erg::measure::EnergyMonitor& mon, const std::string& name, bool sync, bool restart) -> PyObject* {
        erg::Result<void> r;
        {
          py::gil_scoped_release release;
          r = mon.begin_window(name, sync, restart);
        }
        if (!r) {
          set_error(r.error());
          return nullptr;
        }
        Py_RETURN_NONE;
      });
}

PyObject* end_window_fast(PyObject* self, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  return window_call(
      "end_window", self, args, nargs, kwnames, g_kw_cancel,
      [](erg::measure::EnergyMonitor& mon, const std::string& name, bool sync, bool cancel) -> PyObject* {
        if (cancel) {
          erg::Result<void> r;
          {
            py::gil_scoped_release release;
            r = mon.cancel_window(name, sync);  // synchronized first, as an ended window
          }
          if (!r) {
            set_error(r.error());
            return nullptr;
          }
          Py_RETURN_NONE;
        }
        erg::Result<erg::measure::Measurement> r;
        {
          py::gil_scoped_release release;
          r = mon.end_window(name, sync);
        }
        if (!r) {
          set_error(r.error());
          return nullptr;
        }
        return py::cast(std::move(*r), py::return_value_policy::move).release().ptr();
      });
}

PyMethodDef g_begin_window_def = {
    "begin_window", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&begin_window_fast)),
    METH_FASTCALL | METH_KEYWORDS,
    "begin_window(name, sync_execution=True, restart=False)\n\nStarts window ``name``. AlreadyExistsError if it is "
    "open (unless ``restart``)."};
PyMethodDef g_end_window_def = {
    "end_window", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&end_window_fast)),
    METH_FASTCALL | METH_KEYWORDS,
    "end_window(name, sync_execution=True, cancel=False)\n\nEnds window ``name`` and returns its Measurement "
    "(None when ``cancel``)."};

// --- the power-limit optimizer (erg::power_limit) -------------------------------------------------

namespace pl = erg::power_limit;

/// Windows of a Python object with begin_window(name), end_window(name) -> (energy J, time s) and
/// cancel_window(name). A Python exception is kept and raised again by the binding that drove
/// the optimizer (the C++ state machine sees an error value, never an exception).
class PyWindows final : public pl::ProfileWindows {
 public:
  explicit PyWindows(py::object obj) : obj_(std::move(obj)) {}
  ~PyWindows() override {
    py::gil_scoped_acquire gil;
    obj_ = py::object();
    pending_.reset();
  }
  erg::Result<void> begin_window(const std::string& name) override {
    return call([&] { obj_.attr("begin_window")(name); });
  }
  erg::Result<pl::WindowFigures> end_window(const std::string& name) override {
    pl::WindowFigures f;
    auto r = call([&] {
      auto t = obj_.attr("end_window")(name).cast<std::pair<double, double>>();
      f = pl::WindowFigures{erg::Joules(t.first), erg::Seconds(t.second)};
    });
    if (!r) return erg::fail(r.error());
    return f;
  }
  erg::Result<void> cancel_window(const std::string& name) override {
    return call([&] { obj_.attr("cancel_window")(name); });
  }
  /// Raises the kept Python exception, if any.
  void reraise() {
    if (pending_) {
      auto e = std::move(pending_);
      pending_.reset();
      e->restore();
      throw py::error_already_set();
    }
  }
  template <class F>
  erg::Result<void> call(F&& f) {
    try {
      f();
      return erg::ok();
    } catch (py::error_already_set& e) {
      const std::string what = e.what();
      pending_ = std::make_unique<py::error_already_set>(std::move(e));
      return erg::fail(erg::ErrorCode::kInternal, what);
    }
  }

 private:
  py::object obj_;
  std::unique_ptr<py::error_already_set> pending_;
};

struct PyOptimizer {
  std::shared_ptr<PyWindows> windows;
  std::unique_ptr<pl::PowerLimitOptimizer> opt;
  /// Raises the Python exception a callback raised, else erg's error.
  void check(erg::Result<void> r) {
    windows->reraise();
    unwrap(std::move(r));
  }
};

py::object state_tuple(const pl::State& s) {
  py::dict d;
  if (const auto* r = std::get_if<pl::Ready>(&s)) {
    d["next_power_limit"] = static_cast<long long>(r->next_power_limit.value());
    d["steps"] = r->steps;
  } else if (const auto* w = std::get_if<pl::Warmup>(&s)) {
    d["current_power_limit"] = static_cast<long long>(w->current_power_limit.value());
    d["steps"] = w->steps;
  } else if (const auto* p = std::get_if<pl::Profiling>(&s)) {
    d["current_power_limit"] = static_cast<long long>(p->current_power_limit.value());
    d["steps"] = p->steps;
  } else if (const auto* dn = std::get_if<pl::Done>(&s)) {
    d["optimal_power_limit"] = static_cast<long long>(dn->optimal_power_limit.value());
  }
  return py::make_tuple(std::string(pl::state_name(s)), d);
}

std::vector<pl::PowerLimitMeasurement> to_measurements(const std::vector<std::tuple<double, double, double>>& v) {
  std::vector<pl::PowerLimitMeasurement> out;
  for (const auto& [w, e, t] : v) out.push_back({erg::Watts(w), erg::Joules(e), erg::Seconds(t)});
  return out;
}
std::vector<std::tuple<double, double, double>> from_measurements(const std::vector<pl::PowerLimitMeasurement>& v) {
  std::vector<std::tuple<double, double, double>> out;
  for (const auto& m : v) out.emplace_back(m.power_limit.value(), m.energy.value(), m.time.count());
  return out;
}

void add_power_limit(py::module_& m) {
  auto sub = m.def_submodule("power_limit", "The power-limit optimizer (erg::power_limit)");
  py::class_<pl::OptimumSelector, std::shared_ptr<pl::OptimumSelector>>(sub, "Selector")
      .def(
          "select",
          [](const pl::OptimumSelector& s, const std::vector<std::tuple<double, double, double>>& ms) {
            return unwrap(s.select(to_measurements(ms))).value();
          },
          py::arg("measurements"), "The pick (W) from (power_limit W, energy J, time s) tuples.")
      .def("describe", &pl::OptimumSelector::describe);
  sub.def("energy_selector", &pl::energy_selector);
  sub.def("time_selector", &pl::time_selector);
  sub.def(
      "zeus_cost_selector", [](double eta, unsigned world) { return unwrap(pl::zeus_cost_selector(eta, world)); },
      py::arg("eta"), py::arg("world_size"));
  sub.def(
      "max_slowdown_selector", [](double factor) { return unwrap(pl::max_slowdown_selector(factor)); },
      py::arg("factor"));
  sub.def(
      "load_profile", [](const std::filesystem::path& p) { return from_measurements(unwrap(pl::load_profile(p))); },
      py::arg("path"));
  sub.def(
      "save_profile",
      [](const std::filesystem::path& p, const std::vector<std::tuple<double, double, double>>& ms) {
        unwrap(pl::save_profile(p, to_measurements(ms)));
      },
      py::arg("path"), py::arg("measurements"));

  py::class_<PyOptimizer>(sub, "Optimizer")
      .def(py::init([](std::vector<std::shared_ptr<erg::Gpu>> gpus, py::object windows,
                       std::optional<py::object> selector, unsigned wait_steps, unsigned warmup_steps,
                       unsigned profile_steps, double pl_step, std::optional<std::filesystem::path> profile_path,
                       std::optional<py::function> reduce, std::optional<py::function> log, bool restore_on_signals) {
             auto w = std::make_shared<PyWindows>(std::move(windows));
             pl::OptimizerOptions o;
             o.wait_steps = wait_steps;
             o.warmup_steps = warmup_steps;
             o.profile_steps = profile_steps;
             o.pl_step = erg::Watts(pl_step);
             o.profile_path = std::move(profile_path);
             o.restore_on_signals = restore_on_signals;
             if (selector && !selector->is_none()) {
               if (py::isinstance<pl::OptimumSelector>(*selector)) {
                 o.selector = selector->cast<std::shared_ptr<pl::OptimumSelector>>();
               } else {  // a Python object with select(measurements) -> W
                 auto fn = std::make_shared<py::object>(*selector);
                 auto holder = std::shared_ptr<py::object>(fn.get(), [fn](py::object*) mutable {
                   py::gil_scoped_acquire gil;
                   fn.reset();
                 });
                 std::weak_ptr<PyWindows> keep = w;
                 o.selector = pl::function_selector(
                     [holder, keep](const std::vector<pl::PowerLimitMeasurement>& ms) -> erg::Result<erg::Watts> {
                       auto win = keep.lock();
                       if (!win) return erg::fail(erg::ErrorCode::kInternal, "optimizer gone");
                       double pick = 0;
                       auto r = win->call([&] { pick = holder->attr("select")(from_measurements(ms)).cast<double>(); });
                       if (!r) return erg::fail(r.error());
                       return erg::Watts(pick);
                     },
                     py::str(py::type::of(*selector).attr("__name__")));
               }
             }
             if (reduce) {
               auto fn = std::make_shared<py::function>(std::move(*reduce));
               std::weak_ptr<PyWindows> keep = w;
               o.reduce = [fn, keep](const pl::WindowFigures& f) -> erg::Result<pl::WindowFigures> {
                 auto win = keep.lock();
                 if (!win) return erg::fail(erg::ErrorCode::kInternal, "optimizer gone");
                 pl::WindowFigures out;
                 auto r = win->call([&] {
                   auto t = (*fn)(f.energy.value(), f.time.count()).cast<std::pair<double, double>>();
                   out = pl::WindowFigures{erg::Joules(t.first), erg::Seconds(t.second)};
                 });
                 if (!r) return erg::fail(r.error());
                 return out;
               };
             }
             if (log) {
               auto fn = std::make_shared<py::function>(std::move(*log));
               o.log = [fn](const std::string& line) { (*fn)(line); };
             }
             auto opt = pl::PowerLimitOptimizer::create(std::move(gpus), w, std::move(o));
             w->reraise();
             return PyOptimizer{w, unwrap(std::move(opt))};
           }),
           py::arg("gpus"), py::arg("windows"), py::arg("selector") = py::none(), py::arg("wait_steps") = 1,
           py::arg("warmup_steps") = 10, py::arg("profile_steps") = 40, py::arg("pl_step") = 25.0,
           py::arg("profile_path") = py::none(), py::arg("reduce") = py::none(), py::arg("log") = py::none(),
           py::arg("restore_on_signals") = true)
      .def("on_step_begin", [](PyOptimizer& o) { o.check(o.opt->on_step_begin()); })
      .def("on_epoch_end", [](PyOptimizer& o) { o.check(o.opt->on_epoch_end()); })
      .def("restore", [](PyOptimizer& o) { unwrap(o.opt->restore()); })
      .def_property_readonly("state", [](const PyOptimizer& o) { return state_tuple(o.opt->state()); })
      .def_property_readonly("power_limits",
                             [](const PyOptimizer& o) {
                               std::vector<long long> v;
                               for (auto l : o.opt->power_limits()) v.push_back(static_cast<long long>(l.value()));
                               return v;
                             })
      .def_property_readonly("measurements",
                             [](const PyOptimizer& o) { return from_measurements(o.opt->measurements()); })
      .def_property_readonly("limits_set",
                             [](const PyOptimizer& o) {
                               std::vector<long long> v;
                               for (auto l : o.opt->limits_set()) v.push_back(static_cast<long long>(l.value()));
                               return v;
                             })
      .def_property_readonly("current_power_limit",
                             [](const PyOptimizer& o) -> std::optional<long long> {
                               auto c = o.opt->current_power_limit();
                               if (!c) return std::nullopt;
                               return static_cast<long long>(c->value());
                             })
      .def_property_readonly("selector", [](const PyOptimizer& o) { return o.opt->selector().describe(); });
}

// --- Prometheus push (erg::prom: EnergyHistogram, EnergyCumulativeCounter, PowerGauge) -----------
// Their reports (push failures from their sender thread, out-of-bucket energies from end_window)
// are queued here, never handed to Python from a native thread; erg.metric takes them after
// each call and logs them.

/// Reports of one push object, bounded (the oldest go first; how many is counted).
struct PushMessages {
  static constexpr std::size_t kMax = 1000;
  std::mutex mutex;
  std::deque<std::string> queue;
  std::uint64_t dropped = 0;
  void add(const std::string& m) {
    std::lock_guard lock(mutex);
    if (queue.size() == kMax) {
      queue.pop_front();
      ++dropped;
    }
    queue.push_back(m);
  }
  std::vector<std::string> take() {
    std::lock_guard lock(mutex);
    std::vector<std::string> out(queue.begin(), queue.end());
    queue.clear();
    if (dropped != 0) out.push_back(std::to_string(dropped) + " earlier report(s) dropped");
    dropped = 0;
    return out;
  }
};

/// A push object for Python: its reports, and a destructor that waits for the last pushes (at
/// most the close timeout) with the GIL released.
template <class T>
struct PyPush {
  std::shared_ptr<PushMessages> messages;
  std::unique_ptr<T> obj;
  std::uint64_t errors_at_close = 0;
  PyPush() = default;
  PyPush(PyPush&&) noexcept = default;
  PyPush& operator=(PyPush&&) noexcept = default;
  ~PyPush() { close(); }
  void close() {
    if (!obj) return;
    errors_at_close = obj->push_errors();
    if (PyGILState_Check() != 0) {
      py::gil_scoped_release release;
      obj.reset();
    } else {
      obj.reset();
    }
  }
  T& get() {
    if (!obj) raise({erg::ErrorCode::kUnavailable, "this push metric is closed"});
    return *obj;
  }
};

erg::prom::PushOptions push_options(const std::string& gateway_url, const std::string& job,
                                    std::map<std::string, std::string> grouping, double timeout_s, int max_attempts,
                                    double retry_backoff_s, double close_timeout_s,
                                    const std::shared_ptr<PushMessages>& messages) {
  auto ms = [](double s) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::duration<double>(s));
  };
  erg::prom::PushOptions o;
  o.gateway_url = gateway_url;
  o.job = job;
  o.grouping = std::move(grouping);
  o.timeout = ms(timeout_s);
  o.max_attempts = max_attempts;
  o.retry_backoff = ms(retry_backoff_s);
  o.close_timeout = ms(close_timeout_s);
  o.on_error = [messages](const std::string& m) { messages->add(m); };
  return o;
}

/// The inventory's devices with these indices (all when None); InvalidArgument for an unknown one.
template <class D>
std::vector<std::shared_ptr<D>> select_devices(const std::vector<std::shared_ptr<D>>& all,
                                               const std::optional<std::vector<unsigned>>& indices, const char* what) {
  if (!indices) return all;
  std::vector<std::shared_ptr<D>> out;
  for (unsigned i : *indices) {
    auto it = std::find_if(all.begin(), all.end(), [&](const auto& d) { return d->index() == i; });
    if (it == all.end())
      raise({erg::ErrorCode::kInvalidArgument, std::string(what) + " index " + std::to_string(i) + " does not exist"});
    out.push_back(*it);
  }
  return out;
}

template <class T>
void push_methods(py::class_<PyPush<T>>& c) {
  c.def(
       "begin_window", [](PyPush<T>& p, const std::string& name) { unwrap(p.get().begin_window(name, false)); },
       py::arg("name"), py::call_guard<py::gil_scoped_release>())
      .def(
          "end_window", [](PyPush<T>& p, const std::string& name) { unwrap(p.get().end_window(name, false)); },
          py::arg("name"), py::call_guard<py::gil_scoped_release>())
      .def(
          "flush",
          [](PyPush<T>& p, double timeout_s) {
            return p.get().flush(
                std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::duration<double>(timeout_s)));
          },
          py::arg("timeout_s"), py::call_guard<py::gil_scoped_release>(),
          "Waits until every queued push is sent or dropped, at most timeout_s. True if none is left.")
      .def_property_readonly("push_errors",
                             [](const PyPush<T>& p) { return p.obj ? p.obj->push_errors() : p.errors_at_close; })
      .def("take_messages", [](PyPush<T>& p) { return p.messages->take(); })
      .def("close", &PyPush<T>::close, "Waits for the last pushes (at most the close timeout), then stops.");
}

void add_prometheus(py::module_& m) {
  namespace prom = erg::prom;
  auto sub = m.def_submodule("prometheus", "Pushgateway metrics (erg::prom)");
  sub.attr("DEFAULT_GPU_BUCKETS") = prom::kDefaultGpuBuckets;
  sub.attr("DEFAULT_CPU_BUCKETS") = prom::kDefaultCpuBuckets;
  sub.attr("DEFAULT_DRAM_BUCKETS") = prom::kDefaultDramBuckets;
  using Hist = PyPush<prom::EnergyHistogram>;
  py::class_<Hist> hist(sub, "EnergyHistogram");
  hist.def(
      py::init([](const PyInventory& inv, std::optional<std::vector<unsigned>> gpu_indices,
                  std::optional<std::vector<unsigned>> cpu_indices, const std::string& gateway_url,
                  const std::string& job, std::map<std::string, std::string> grouping, std::vector<double> gpu_buckets,
                  std::vector<double> cpu_buckets, std::vector<double> dram_buckets, double timeout_s, int max_attempts,
                  double retry_backoff_s, double close_timeout_s) {
        Hist p;
        p.messages = std::make_shared<PushMessages>();
        auto o = push_options(gateway_url, job, std::move(grouping), timeout_s, max_attempts, retry_backoff_s,
                              close_timeout_s, p.messages);
        auto gpus = select_devices(inv.inv.gpus, gpu_indices, "GPU");
        auto cpus = select_devices(inv.inv.cpus, cpu_indices, "CPU");
        py::gil_scoped_release release;
        p.obj =
            unwrap(prom::EnergyHistogram::create(std::move(gpus), std::move(cpus), std::move(o), std::move(gpu_buckets),
                                                 std::move(cpu_buckets), std::move(dram_buckets)));
        return p;
      }),
      py::arg("inventory"), py::arg("gpu_indices"), py::arg("cpu_indices"), py::arg("gateway_url"), py::arg("job"),
      py::arg("grouping"), py::arg("gpu_buckets"), py::arg("cpu_buckets"), py::arg("dram_buckets"),
      py::arg("timeout_s"), py::arg("max_attempts"), py::arg("retry_backoff_s"), py::arg("close_timeout_s"));
  push_methods(hist);

  using Counter = PyPush<prom::EnergyCumulativeCounter>;
  py::class_<Counter> counter(sub, "EnergyCumulativeCounter");
  counter.def(
      py::init([](const PyInventory& inv, std::optional<std::vector<unsigned>> gpu_indices,
                  std::optional<std::vector<unsigned>> cpu_indices, double update_period_s,
                  const std::string& gateway_url, const std::string& job, std::map<std::string, std::string> grouping,
                  double timeout_s, int max_attempts, double retry_backoff_s, double close_timeout_s) {
        Counter p;
        p.messages = std::make_shared<PushMessages>();
        auto o = push_options(gateway_url, job, std::move(grouping), timeout_s, max_attempts, retry_backoff_s,
                              close_timeout_s, p.messages);
        auto gpus = select_devices(inv.inv.gpus, gpu_indices, "GPU");
        auto cpus = select_devices(inv.inv.cpus, cpu_indices, "CPU");
        py::gil_scoped_release release;
        p.obj = unwrap(prom::EnergyCumulativeCounter::create(
            std::move(gpus), std::move(cpus),
            std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::duration<double>(update_period_s)),
            std::move(o)));
        return p;
      }),
      py::arg("inventory"), py::arg("gpu_indices"), py::arg("cpu_indices"), py::arg("update_period_s"),
      py::arg("gateway_url"), py::arg("job"), py::arg("grouping"), py::arg("timeout_s"), py::arg("max_attempts"),
      py::arg("retry_backoff_s"), py::arg("close_timeout_s"));
  push_methods(counter);

  using Gauge = PyPush<prom::PowerGauge>;
  py::class_<Gauge> gauge(sub, "PowerGauge");
  gauge.def(
      py::init([](const PyInventory& inv, std::optional<std::vector<unsigned>> gpu_indices, double update_period_s,
                  const std::string& gateway_url, const std::string& job, std::map<std::string, std::string> grouping,
                  double timeout_s, int max_attempts, double retry_backoff_s, double close_timeout_s) {
        Gauge p;
        p.messages = std::make_shared<PushMessages>();
        auto o = push_options(gateway_url, job, std::move(grouping), timeout_s, max_attempts, retry_backoff_s,
                              close_timeout_s, p.messages);
        auto gpus = select_devices(inv.inv.gpus, gpu_indices, "GPU");
        py::gil_scoped_release release;
        p.obj = unwrap(prom::PowerGauge::create(
            std::move(gpus),
            std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::duration<double>(update_period_s)),
            std::move(o)));
        return p;
      }),
      py::arg("inventory"), py::arg("gpu_indices"), py::arg("update_period_s"), py::arg("gateway_url"), py::arg("job"),
      py::arg("grouping"), py::arg("timeout_s"), py::arg("max_attempts"), py::arg("retry_backoff_s"),
      py::arg("close_timeout_s"));
  push_methods(gauge);
}

}  // namespace

// Shared with the bindings in other files (carbon_bindings.cpp): one translator, one inventory.
namespace erg_python {
[[noreturn]] void raise_error(erg::Error error) { raise(std::move(error)); }
const erg::Inventory& inventory_of(py::handle inventory) { return inventory.cast<const PyInventory&>().inv; }
}  // namespace erg_python
void bind_carbon(py::module_& m);
void bind_bso(py::module_& m);          // bso_bindings.cpp
void bind_report(py::module_& m);       // report_bindings.cpp
void bind_perseus(py::module_& m);      // perseus_bindings.cpp
void bind_attribution(py::module_& m);  // attribution_bindings.cpp

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
      .def(
          "power_limit",
          [](erg::Gpu& g) -> std::optional<double> {
            auto l = g.power_limit();
            if (!l) return std::nullopt;
            return erg::Watts(*l).value();
          },
          py::call_guard<py::gil_scoped_release>(), "The power limit now, watts (None when it cannot be read).")
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
      // The device calls below (erg.compat.zeus.device) keep the units of their names; errors
      // raise erg's exceptions through the one translator.
      .def_property_readonly("pci_address", &erg::Gpu::pci_address)
      .def_property_readonly("temperature_supported", [](const erg::Gpu& g) { return g.capabilities().temperature; })
      .def_property_readonly("setters_need_privilege",
                             [](const erg::Gpu& g) { return g.capabilities().setters_need_privilege; })
      .def(
          "power_mw",
          [](erg::Gpu& g, const std::string& domain) { return unwrap(g.power(gpu_domain(domain))).value(); },
          py::arg("domain") = "device_instant", py::call_guard<py::gil_scoped_release>(), "Power now, milliwatts.")
      .def(
          "total_energy_mj", [](erg::Gpu& g) { return unwrap(g.total_energy()).value(); },
          py::call_guard<py::gil_scoped_release>(), "Cumulative energy counter, millijoules.")
      .def(
          "power_limit_mw", [](erg::Gpu& g) { return unwrap(g.power_limit()).value(); },
          py::call_guard<py::gil_scoped_release>(), "The power limit now, milliwatts.")
      .def(
          "power_limit_constraints_mw",
          [](erg::Gpu& g) {
            const auto c = unwrap(g.power_limit_constraints());
            return std::make_pair(c.min.value(), c.max.value());
          },
          py::call_guard<py::gil_scoped_release>(), "(min, max) settable power limit, milliwatts.")
      .def(
          "default_power_limit_mw", [](erg::Gpu& g) { return unwrap(g.default_power_limit()).value(); },
          py::call_guard<py::gil_scoped_release>())
      .def(
          "set_power_limit_mw", [](erg::Gpu& g, double mw) { unwrap(g.set_power_limit(erg::MilliWatts(mw))); },
          py::arg("limit_mw"), py::call_guard<py::gil_scoped_release>(),
          "Needs privilege (or ergd); out of range: InvalidArgumentError.")
      .def(
          "reset_power_limit", [](erg::Gpu& g) { unwrap(g.reset_power_limit()); },
          py::call_guard<py::gil_scoped_release>())
      .def(
          "persistence_mode", [](erg::Gpu& g) { return unwrap(g.persistence_mode()); },
          py::call_guard<py::gil_scoped_release>())
      .def(
          "set_persistence_mode", [](erg::Gpu& g, bool on) { unwrap(g.set_persistence_mode(on)); }, py::arg("enabled"),
          py::call_guard<py::gil_scoped_release>())
      .def(
          "supported_memory_clocks_mhz",
          [](erg::Gpu& g) {
            std::vector<double> out;
            for (auto c : unwrap(g.supported_memory_clocks())) out.push_back(c.value());
            return out;
          },
          py::call_guard<py::gil_scoped_release>())
      .def(
          "supported_graphics_clocks_mhz",
          [](erg::Gpu& g, double memory_mhz) {
            std::vector<double> out;
            for (auto c : unwrap(g.supported_graphics_clocks(erg::Megahertz(memory_mhz)))) out.push_back(c.value());
            return out;
          },
          py::arg("memory_clock_mhz"), py::call_guard<py::gil_scoped_release>())
      .def(
          "set_gpu_locked_clocks_mhz",
          [](erg::Gpu& g, double lo, double hi) {
            unwrap(g.set_gpu_locked_clocks(erg::Megahertz(lo), erg::Megahertz(hi)));
          },
          py::arg("min_mhz"), py::arg("max_mhz"), py::call_guard<py::gil_scoped_release>())
      .def(
          "reset_gpu_locked_clocks", [](erg::Gpu& g) { unwrap(g.reset_gpu_locked_clocks()); },
          py::call_guard<py::gil_scoped_release>())
      .def(
          "set_memory_locked_clocks_mhz",
          [](erg::Gpu& g, double lo, double hi) {
            unwrap(g.set_memory_locked_clocks(erg::Megahertz(lo), erg::Megahertz(hi)));
          },
          py::arg("min_mhz"), py::arg("max_mhz"), py::call_guard<py::gil_scoped_release>())
      .def(
          "reset_memory_locked_clocks", [](erg::Gpu& g) { unwrap(g.reset_memory_locked_clocks()); },
          py::call_guard<py::gil_scoped_release>())
      .def(
          "temperature_c", [](erg::Gpu& g) { return unwrap(g.temperature()); },
          py::call_guard<py::gil_scoped_release>(), "GPU core temperature, °C.")
      .def("__repr__",
           [](const erg::Gpu& g) { return "<erg.Gpu " + std::to_string(g.index()) + " " + g.name() + ">"; });

  py::class_<erg::Cpu, std::shared_ptr<erg::Cpu>>(m, "Cpu")
      .def_property_readonly("index", &erg::Cpu::index)
      .def_property_readonly("name", &erg::Cpu::name)
      .def_property_readonly("dram", [](const erg::Cpu& c) { return c.capabilities().dram; })
      .def(
          "package_energy_uj", [](erg::Cpu& c) { return unwrap(c.package_energy()).value(); },
          py::call_guard<py::gil_scoped_release>(), "Package energy since this process first read it, µJ.")
      .def(
          "dram_energy_uj", [](erg::Cpu& c) { return unwrap(c.dram_energy()).value(); },
          py::call_guard<py::gil_scoped_release>(), "DRAM energy since this process first read it, µJ.")
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
      .def_property_readonly("simulated", [](const PyInventory& i) { return i.inv.simulated; })
      .def_property_readonly(
          "machine", [](const PyInventory& i) { return i.machine; }, "The simulated machine (None on hardware)");

  m.def(
      "discover",
      [](std::optional<std::string> simulate) {
        erg::devices::DeviceOptions o;
        o.simulate = std::move(simulate);
        auto opened = unwrap(erg::devices::open_devices(o));
        return std::make_shared<PyInventory>(PyInventory{std::move(opened.inventory), std::move(opened.machine)});
      },
      py::arg("simulate") = py::none(), py::call_guard<py::gil_scoped_release>(),
      "Opens this process's devices as every erg face does (erg::devices::open_devices): simulated "
      "(simulate=SPEC, ERG_SIMULATE, ERG_SIM_STATE), through ergd (ERG_DAEMON_SOCK) or hardware.");

  // --- measurements --------------------------------------------------------------------------
  using erg::measure::Measurement;
  py::class_<Measurement>(m, "Measurement")
      .def_readonly("name", &Measurement::name)
      .def_property_readonly("time", [](const Measurement& x) { return x.time.count(); })
      .def_property_readonly("start_wall", [](const Measurement& x) { return seconds(x.start_wall); })
      .def_property_readonly("gpu_energy",
                             [](const Measurement& x) {
                               py::dict d;
                               // None for a GPU whose energy is unknown (see errors), never 0.
                               for (const auto& g : x.gpus)
                                 d[py::int_(g.index)] =
                                     g.energy ? py::object(py::float_(g.energy->value())) : py::object(py::none());
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
      .def_property_readonly(
          "soc_energy",
          [](const Measurement& x) {
            py::list out;
            for (const auto& soc : x.socs) {
              py::dict d;
              d["index"] = soc.index;
              py::dict rails;
              py::dict kinds;
              for (const auto& r : soc.rails) {
                rails[py::str(r.name)] = r.energy.value();
                kinds[py::str(r.name)] = std::string(erg::to_string(r.kind));
              }
              d["rails"] = rails;
              d["kinds"] = kinds;
              d["cpu"] = soc.cpu ? py::object(py::float_(soc.cpu->value())) : py::object(py::none());
              d["gpu"] = soc.gpu ? py::object(py::float_(soc.gpu->value())) : py::object(py::none());
              d["total"] = soc.error ? py::object(py::none()) : py::object(py::float_(soc.total.value()));
              d["error"] = soc.error ? py::object(py::str(soc.error->message)) : py::object(py::none());
              out.append(std::move(d));
            }
            return out;
          },
          "Per SoC module (Jetson): dicts of index, rails {label: J}, kinds {label: kind}, cpu, gpu and "
          "total J (None when unknown), error.")
      .def_property_readonly("affected", &Measurement::affected)
      .def_property_readonly("missing_devices", &Measurement::missing_devices,
                             "Devices the totals leave out because their energy is unknown ('gpu1', ...).")
      .def_property_readonly(
          "gpu_faults",
          [](const Measurement& x) {
            py::dict d;
            for (const auto& g : x.gpus) {
              if (!g.affected && !g.error) continue;
              py::dict f;
              f["counter_restarts"] = g.counter_restarts;
              f["counter_backwards"] = g.counter_backwards;
              f["bridged"] = g.bridged.count();
              f["error_bound"] = g.error_bound.value();
              f["read_errors"] = g.read_errors;
              f["error"] = g.error ? py::object(py::str(g.error->message)) : py::object(py::none());
              f["error_code"] =
                  g.error ? py::object(py::str(std::string(to_string(g.error->code)))) : py::object(py::none());
              d[py::int_(g.index)] = f;
            }
            return d;
          },
          "Per affected GPU: counter restarts and backward steps in the window, how long was bridged "
          "and the error bound (J) that implies, failed reads (retried), and the error if any.")
      .def_property_readonly("short_window_gpus",
                             [](const Measurement& x) {
                               std::vector<unsigned> out;
                               for (const auto& g : x.gpus)
                                 if (g.short_window) out.push_back(g.index);
                               return out;
                             })
      .def_property_readonly("gpu_extrapolated",
                             [](const Measurement& x) {
                               py::dict d;
                               for (const auto& g : x.gpus) d[py::int_(g.index)] = g.extrapolated.count();
                               return d;
                             })
      .def_property_readonly("gpu_unread",
                             [](const Measurement& x) {
                               py::dict d;
                               for (const auto& g : x.gpus) d[py::int_(g.index)] = g.unread.count();
                               return d;
                             })
      .def_property_readonly(
          "plain_difference_gpus",
          [](const Measurement& x) {
            std::vector<unsigned> out;
            for (const auto& g : x.gpus)
              if (g.plain_difference) out.push_back(g.index);
            return out;
          },
          "GPUs whose counter schedule was being relearned at an edge of the window: that edge "
          "is the plain value read there (off by up to one update period's energy).")
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
  // erg.EnergyMonitor subclasses this in Python (for window() and its docs), so begin_window and
  // end_window are these bindings themselves: no Python frame between a user and the counters.
  py::class_<EnergyMonitor> energy_monitor(m, "EnergyMonitor");
  energy_monitor
      .def(py::init([](const PyInventory& inv, std::optional<std::vector<unsigned>> gpu_indices,
                       std::optional<std::vector<unsigned>> cpu_indices, bool approx_instant_energy,
                       bool extrapolate_counters, std::optional<std::filesystem::path> log_file,
                       std::optional<py::function> sync, bool settle, bool follow_counters) {
             erg::measure::EnergyMonitorOptions o;
             o.gpu_indices = std::move(gpu_indices);
             o.cpu_indices = std::move(cpu_indices);
             o.approx_instant_energy = approx_instant_energy;
             o.extrapolate_counters = extrapolate_counters;
             o.settle = settle;
             o.follow_counters = follow_counters;
             o.log_file = std::move(log_file);
             o.socs = inv.inv.socs;  // SoC modules (Jetson rails) are measured whenever there are any
             if (sync) {
               // Called from begin/end_window with the GIL released: take it for the callable.
               // The holder drops its reference under the GIL too, wherever it is destroyed.
               struct Holder {
                 py::function fn;
                 ~Holder() {
                   py::gil_scoped_acquire gil;
                   fn = py::function();
                 }
               };
               auto holder = std::make_shared<Holder>(Holder{std::move(*sync)});
               o.sync = [holder](const std::vector<unsigned>& gpus) {
                 py::gil_scoped_acquire gil;
                 holder->fn(gpus);
               };
             }
             py::gil_scoped_release release;
             return unwrap(EnergyMonitor::create(inv.inv.gpus, inv.inv.cpus, std::move(o)));
           }),
           py::arg("inventory"), py::arg("gpu_indices") = py::none(), py::arg("cpu_indices") = py::none(),
           py::arg("approx_instant_energy") = false, py::arg("extrapolate_counters") = true,
           py::arg("log_file") = py::none(), py::arg("sync") = py::none(), py::arg("settle") = false,
           py::arg("follow_counters") = true)
      .def(
          "counter_schedule",
          [](const EnergyMonitor& mon, unsigned gpu) {
            const auto s = unwrap(mon.counter_schedule(gpu));
            py::dict d;
            d["locked"] = s.locked;
            d["continuous"] = s.continuous;
            d["stamps_are_update_times"] =
                s.stamps_are_update_times ? py::object(py::bool_(*s.stamps_are_update_times)) : py::object(py::none());
            d["period"] = seconds(s.period);
            d["jitter"] = seconds(s.jitter);
            d["fitted_updates"] = s.fitted_updates;
            return d;
          },
          py::arg("gpu"))
      .def(
          "cancel_window", [](EnergyMonitor& mon, const std::string& name) { unwrap(mon.cancel_window(name)); },
          py::arg("name"), py::call_guard<py::gil_scoped_release>())
      .def("reset_windows", &EnergyMonitor::reset_windows, py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("gpu_indices", &EnergyMonitor::gpu_indices)
      .def_property_readonly("cpu_indices", &EnergyMonitor::cpu_indices)
      .def_property_readonly("open_windows", &EnergyMonitor::open_windows);
  g_kw_name = PyUnicode_InternFromString("name");
  g_kw_sync = PyUnicode_InternFromString("sync_execution");
  g_kw_restart = PyUnicode_InternFromString("restart");
  g_kw_cancel = PyUnicode_InternFromString("cancel");
  for (PyMethodDef* def : {&g_begin_window_def, &g_end_window_def}) {
    auto descr = py::reinterpret_steal<py::object>(
        PyDescr_NewMethod(reinterpret_cast<PyTypeObject*>(energy_monitor.ptr()), def));
    if (!descr) throw py::error_already_set();
    energy_monitor.attr(def->ml_name) = descr;
  }

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
           py::arg("cpus") = true, py::arg("period") = py::none(), py::arg("max_samples") = std::size_t{0})
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

  using erg::measure::TemperatureMonitor;
  py::class_<TemperatureMonitor>(m, "TemperatureMonitor")
      .def(py::init([](const PyInventory& inv, std::optional<std::vector<unsigned>> gpu_indices, double period,
                       std::size_t max_samples) {
             erg::measure::TemperatureMonitorOptions o;
             o.gpu_indices = std::move(gpu_indices);
             o.period = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::duration<double>(period));
             o.max_samples = max_samples;
             py::gil_scoped_release release;
             return unwrap(TemperatureMonitor::create(inv.inv.gpus, std::move(o)));
           }),
           py::arg("inventory"), py::arg("gpu_indices") = py::none(), py::arg("period") = 1.0,
           py::arg("max_samples") = std::size_t{0})
      .def("stop", &TemperatureMonitor::stop, py::call_guard<py::gil_scoped_release>())
      .def("sample_once", &TemperatureMonitor::sample_once, py::call_guard<py::gil_scoped_release>())
      .def_property_readonly(
          "period", [](const TemperatureMonitor& t) { return std::chrono::duration<double>(t.period()).count(); })
      .def_property_readonly("gpu_indices", &TemperatureMonitor::gpu_indices)
      .def_property_readonly("rounds", &TemperatureMonitor::rounds)
      .def_property_readonly("stored_samples", &TemperatureMonitor::stored_samples)
      .def("sampled", &TemperatureMonitor::sampled, py::arg("gpu"))
      .def_property_readonly("errors",
                             [](const TemperatureMonitor& t) {
                               py::dict d;
                               for (const auto& e : t.errors()) {
                                 py::dict f;
                                 f["code"] = std::string(erg::to_string(e.error.code));
                                 f["message"] = e.error.message;
                                 d[py::str(e.device)] = f;
                               }
                               return d;
                             })
      .def(
          "temperature",
          [](const TemperatureMonitor& t, unsigned gpu, std::optional<double> time) {
            std::optional<std::chrono::nanoseconds> at;
            if (time) at = nanos(*time);
            return unwrap(t.temperature(gpu, at));
          },
          py::arg("gpu"), py::arg("time") = py::none())
      .def(
          "timeline",
          [](const TemperatureMonitor& t, unsigned gpu, double start, double end) {
            std::vector<erg::measure::TemperaturePoint> points;
            {
              py::gil_scoped_release release;
              points = unwrap(t.timeline(gpu, nanos(start), nanos(end)));
            }
            const auto n = static_cast<py::ssize_t>(points.size());
            py::array_t<double> times(n);
            py::array_t<std::int32_t> celsius(n);
            auto tv = times.mutable_unchecked<1>();
            auto cv = celsius.mutable_unchecked<1>();
            for (py::ssize_t k = 0; k < n; ++k) {
              tv(k) = seconds(points[static_cast<std::size_t>(k)].time);
              cv(k) = points[static_cast<std::size_t>(k)].celsius;
            }
            return py::make_tuple(std::move(times), std::move(celsius));
          },
          py::arg("gpu"), py::arg("start"), py::arg("end"));

  m.def(
      "infer_update_period",
      [](erg::Gpu& gpu, double budget) -> std::optional<double> {
        auto p = erg::measure::infer_update_period(
            gpu, std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::duration<double>(budget)));
        if (!p) return std::nullopt;
        return std::chrono::duration<double>(*p).count();
      },
      py::arg("gpu"), py::arg("budget") = 0.6, py::call_guard<py::gil_scoped_release>(),
      "How often the GPU's power reading changes, seconds (None if it never changed within the budget).");

  m.def(
      "monotonic", []() { return seconds(std::chrono::steady_clock::now().time_since_epoch()); },
      "The monitors' clock (CLOCK_MONOTONIC), seconds.");

  bind_profile(m);
  bind_carbon(m);
  bind_bso(m);
  bind_report(m);
  bind_perseus(m);
  bind_attribution(m);

  // --- simulated machine control API ------------------------------------------------------------
  auto sim = m.def_submodule("sim", "Simulated machine control (tests and demos)");
  using erg::sim::Machine;
  py::class_<Machine, std::shared_ptr<Machine>>(sim, "Machine")
      .def_static(
          "create",
          [](const std::string& spec) {
            auto parsed = unwrap(erg::sim::parse_spec(spec));
            py::gil_scoped_release release;
            return std::shared_ptr<Machine>(unwrap(Machine::create_temp(parsed)));
          },
          py::arg("spec"))
      .def_static(
          "attach",
          [](const std::filesystem::path& state) { return std::shared_ptr<Machine>(unwrap(Machine::attach(state))); },
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
      .def(
          "set_load",
          [](Machine& mach, unsigned gpu, double util, double step, double ripple_depth, double ripple_duty) {
            unwrap(mach.set_load(gpu, erg::sim::Load{util, nanos(step), ripple_depth, ripple_duty}));
          },
          py::arg("gpu"), py::arg("utilization"), py::arg("step") = 0.0, py::arg("ripple_depth") = 0.0,
          py::arg("ripple_duty") = 0.2)
      .def(
          "set_training_load",
          [](Machine& mach, unsigned gpu, double util) { unwrap(mach.set_load(gpu, erg::sim::Load::training(util))); },
          py::arg("gpu"), py::arg("utilization") = 1.0)
      .def(
          "set_thermal_drift",
          [](Machine& mach, unsigned gpu, double celsius_per_s, double leakage, double max_rise, double tau) {
            unwrap(mach.set_thermal_drift(gpu, erg::sim::ThermalDrift{celsius_per_s, leakage, max_rise, tau}));
          },
          py::arg("gpu"), py::arg("celsius_per_s"), py::arg("leakage_per_celsius") = 0.005,
          py::arg("max_rise_celsius") = 40.0, py::arg("cooling_time_constant") = 0.0,
          "Makes the GPU heat while it works (°C per second at full activity), never shedding the heat unless "
          "cooling_time_constant > 0, and draw leakage_per_celsius more power per °C of it: the energy per unit of "
          "work rises with its temperature. celsius_per_s=0 ends the drift. Faithful model only.")
      .def("drift_celsius", [](Machine& mach, unsigned gpu) { return unwrap(mach.status(gpu)).drift_celsius; })
      .def("true_energy", [](Machine& mach, unsigned gpu) { return unwrap(mach.true_energy(gpu)).value(); })
      // Per-process attribution (erg.attribution's tests): processes of the simulated driver and the truth.
      .def(
          "set_process",
          [](Machine& mach, unsigned gpu, std::uint32_t pid, double share, double memory_mib) {
            erg::sim::SimProcess p;
            p.pid = pid;
            p.share = share;
            p.used_memory_bytes = static_cast<std::uint64_t>(memory_mib * 1024 * 1024);
            unwrap(mach.set_process(gpu, p));
          },
          py::arg("gpu"), py::arg("pid"), py::arg("share"), py::arg("memory_mib") = 0.0,
          "Adds (or updates) a process of the simulated driver on the GPU; its load becomes the GPU's.")
      .def(
          "set_mig_mode", [](Machine& mach, unsigned gpu, bool on) { unwrap(mach.set_mig_mode(gpu, on)); },
          py::arg("gpu"), py::arg("enabled"),
          "MIG mode: while on, the driver reports no per-process utilization (as on hardware).")
      .def(
          "remove_process",
          [](Machine& mach, unsigned gpu, std::uint32_t pid) { unwrap(mach.remove_process(gpu, pid)); }, py::arg("gpu"),
          py::arg("pid"))
      .def(
          "process_truth_at",
          [](Machine& mach, unsigned gpu, double time, bool wall) {
            // `wall`: seconds since the epoch (a reading's update time) → sim time.
            auto t = nanos(time);
            if (wall) t -= mach.wall_now() - mach.now();
            auto truth = unwrap(mach.process_truth_at(gpu, t));
            py::dict d, procs;
            d["idle"] = truth.idle.value();
            d["unattributed"] = truth.unattributed.value();
            for (const auto& p : truth.processes) procs[py::int_(p.pid)] = p.energy.value();
            d["processes"] = procs;
            return d;
          },
          py::arg("gpu"), py::arg("time"), py::arg("wall") = true,
          "The simulator's per-process truth at the counter update nearest `time` (wall: s since the epoch, "
          "else sim time; the latest ~12.8 s): idle, unattributed, {pid: energy above idle}.")
      .def("rail_labels", &Machine::rail_labels, "The simulated Jetson's rail labels (empty without one).")
      .def(
          "set_rail_power",
          [](Machine& mach, const std::string& label, double watts) {
            unwrap(mach.set_rail_power(label, erg::Watts(watts)));
          },
          py::arg("label"), py::arg("watts"), "Mean power of a Jetson rail from now, W.")
      .def(
          "true_rail_energy",
          [](Machine& mach, const std::string& label) { return unwrap(mach.true_rail_energy(label)).value(); },
          py::arg("label"), "True energy of a Jetson rail since the simulation started, J.")
      .def(
          "sensor_energy_at",
          [](Machine& mach, unsigned gpu, double t) { return unwrap(mach.sensor_energy_at(gpu, nanos(t))).value(); },
          py::arg("gpu"), py::arg("time"))
      .def("sensor_info",
           [](Machine& mach, unsigned gpu) {
             const auto i = unwrap(mach.sensor_info(gpu));
             py::dict d;
             d["energy_period"] = seconds(i.energy_period);
             d["power_period"] = seconds(i.power_period);
             d["jitter"] = seconds(i.jitter);
             d["power_jitter"] = seconds(i.power_jitter);
             d["gain"] = i.gain;
             d["partial_sampling"] = i.partial_sampling;
             d["last_update"] = seconds(i.last_update);  // sim time of the latest counter update
             return d;
           })
      .def("mean_power", [](Machine& mach, unsigned gpu) { return unwrap(mach.status(gpu)).mean_power.value(); })
      .def(
          "locked_clocks",
          [](Machine& mach, unsigned gpu) {
            const auto st = unwrap(mach.status(gpu));
            py::dict d;
            d["sm"] = py::make_tuple(st.locked_sm_min.value(), st.locked_sm_max.value());
            d["memory"] = py::make_tuple(st.locked_mem_min.value(), st.locked_mem_max.value());
            return d;
          },
          py::arg("gpu"),
          "The GPU's locked clock ranges, MHz: {'sm': (min, max), 'memory': (min, max)}; (0, 0) when not locked.")
      .def("true_cpu_energy", [](Machine& mach, unsigned cpu) { return unwrap(mach.true_cpu_energy(cpu)).value(); })
      .def("true_dram_energy", [](Machine& mach, unsigned cpu) { return unwrap(mach.true_dram_energy(cpu)).value(); })
      .def("power", [](Machine& mach, unsigned gpu) { return unwrap(mach.status(gpu)).power.value(); })
      .def("reset_energy_counter", [](Machine& mach, unsigned gpu) { unwrap(mach.reset_energy_counter(gpu)); })
      .def("set_lost", [](Machine& mach, unsigned gpu, bool lost) { unwrap(mach.set_lost(gpu, lost)); })
      .def(
          "inject_fault",
          [](Machine& mach, unsigned gpu, const std::string& kind, double joules) {
            const auto fault = erg::sim::parse_fault(kind);
            if (!fault)
              unwrap(erg::Result<void>(
                  erg::fail(erg::ErrorCode::kInvalidArgument,
                            "unknown fault '" + kind + "' (" + std::string(erg::sim::fault_names()) + ")")));
            unwrap(erg::sim::inject_fault(mach, gpu, *fault, erg::Joules(joules)));
          },
          py::arg("gpu"), py::arg("kind"), py::arg("joules") = erg::sim::kDefaultBackwardsJ,
          "Gives the GPU a fault: backwards (the counter steps back by `joules`), reset, error (the next "
          "call fails), errors3, timeout (until cleared), lost (until cleared).")
      .def(
          "clear_faults", [](Machine& mach, unsigned gpu) { unwrap(erg::sim::clear_faults(mach, gpu)); },
          py::arg("gpu"), "Ends the GPU's errors, timeout and loss.")
      .def(
          "set_privilege",
          [](Machine& mach, const std::string& who) {
            if (who == "root")
              mach.set_privilege(erg::sim::Privilege::kRootOnly);
            else if (who == "everyone")
              mach.set_privilege(erg::sim::Privilege::kEveryone);
            else if (who == "nobody")
              mach.set_privilege(erg::sim::Privilege::kNobody);
            else
              raise(erg::Error{erg::ErrorCode::kInvalidArgument, "privilege: root, everyone or nobody"});
          },
          py::arg("who"), "Who may call the simulated setters: 'root' (default), 'everyone', 'nobody'.")
      .def(
          "power_limit",
          [](Machine& mach, unsigned gpu) { return unwrap(mach.status(gpu)).power_limit.value() / 1000.0; },
          py::arg("gpu"), "The GPU's current power limit, W.")
      .def(
          "power_limit_log",
          [](const Machine& mach) {
            py::list out;
            for (const auto& c : mach.power_limit_log()) {
              py::dict d;
              d["gpu"] = c.gpu;
              d["limit_w"] = c.limit.value() / 1000.0;
              d["time"] = seconds(c.time);
              d["ok"] = c.ok();
              d["nvml_return"] = c.nvml_return;
              out.append(std::move(d));
            }
            return out;
          },
          "Every nvmlDeviceSetPowerManagementLimit call the simulated driver answered, in order (any "
          "process): dicts gpu, limit_w, time, ok, nvml_return.")
      .def("clear_power_limit_log", &Machine::clear_power_limit_log);
  sim.attr("FAULTS") = [] {
    std::vector<std::string> names;
    for (auto f : erg::sim::kAllFaults) names.emplace_back(erg::sim::fault_name(f));
    return names;
  }();

  add_power_limit(m);
  add_prometheus(m);
}
