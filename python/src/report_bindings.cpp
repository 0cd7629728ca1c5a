// erg._core.report: the erg record (RecordWriter) and the HTML report (render_report), so Python
// programs record and report like `erg run --record` and `erg report`. Only translates (STYLE.md
// habit 13); errors go through module.cpp's one translator (raise_error).

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <string>
#include <vector>

#include "erg/exporters/report/html.hpp"
#include "erg/exporters/report/record.hpp"

namespace py = pybind11;

namespace erg_python {
[[noreturn]] void raise_error(erg::Error error);
}  // namespace erg_python

namespace {

using erg_python::raise_error;
namespace report = erg::report;

template <typename T>
T value_or_raise(erg::Result<T> r) {
  if (!r) raise_error(r.error());
  return std::move(*r);
}
void ok_or_raise(const erg::Result<void>& r) {
  if (!r) raise_error(r.error());
}

}  // namespace

void bind_report(py::module_& m) {
  py::class_<report::RecordWriter>(m, "RecordWriter")
      .def_static(
          "create",
          [](const std::string& path, bool simulated, std::int64_t t0_steady_ns) {
            return value_or_raise(report::RecordWriter::create(path, simulated, t0_steady_ns));
          },
          py::arg("path"), py::arg("simulated"), py::arg("t0_steady_ns"))
      .def_static(
          "open", [](const std::string& path) { return value_or_raise(report::RecordWriter::open(path)); },
          py::arg("path"))
      .def("seconds_now", &report::RecordWriter::seconds_now)
      .def(
          "set_meta",
          [](report::RecordWriter& w, const std::string& k, const std::string& v) { ok_or_raise(w.set_meta(k, v)); },
          py::arg("key"), py::arg("value"))
      .def(
          "add_device",
          [](report::RecordWriter& w, const std::string& kind, unsigned index, const std::string& domain,
             const std::string& name) {
            return value_or_raise(w.add_device({0, kind, index, domain, name}));
          },
          py::arg("kind"), py::arg("index"), py::arg("domain"), py::arg("name") = "")
      .def(
          "add_samples",
          [](report::RecordWriter& w, std::int64_t device,
             py::array_t<double, py::array::c_style | py::array::forcecast> t,
             py::array_t<double, py::array::c_style | py::array::forcecast> watts) {
            if (t.size() != watts.size())
              raise_error({erg::ErrorCode::kInvalidArgument, "add_samples: times and watts differ in length"});
            std::vector<report::PowerSample> s(static_cast<std::size_t>(t.size()));
            for (py::ssize_t i = 0; i < t.size(); ++i) s[i] = {device, t.data()[i], watts.data()[i]};
            ok_or_raise(w.add_samples(s));
          },
          py::arg("device"), py::arg("t_s"), py::arg("power_w"))
      .def(
          "add_window",
          [](report::RecordWriter& w, const std::string& name, double start_s, double end_s,
             const std::map<std::int64_t, double>& energy_j) {
            ok_or_raise(w.add_window({name, start_s, end_s, energy_j}));
          },
          py::arg("name"), py::arg("start_s"), py::arg("end_s"), py::arg("energy_j") = std::map<std::int64_t, double>{})
      .def(
          "add_event",
          [](report::RecordWriter& w, double t_s, const std::string& kind, const std::string& data_json) {
            auto data = nlohmann::json::parse(data_json, nullptr, false);
            if (data.is_discarded()) raise_error({erg::ErrorCode::kInvalidArgument, "add_event: data is not JSON"});
            ok_or_raise(w.add_event({t_s, kind, data}));
          },
          py::arg("t_s"), py::arg("kind"), py::arg("data_json"));

  m.def(
      "render_report",
      [](const std::string& path, const std::string& title) {
        auto rec = value_or_raise(report::read_record(path));
        report::RenderOptions o;
        o.title = title;
        return report::render_html(rec, o);
      },
      py::arg("path"), py::arg("title") = "", "The HTML page of the record at `path` (erg report)");
  m.def(
      "render_report_compare",
      [](const std::vector<std::string>& paths, const std::string& title) {
        std::vector<report::Record> runs;
        for (const auto& p : paths) runs.push_back(value_or_raise(report::read_record(p)));
        report::RenderOptions o;
        o.title = title;
        return report::render_compare_html(runs, paths, o);
      },
      py::arg("paths"), py::arg("title") = "", "One page comparing the records at `paths` (erg report --compare)");
}
