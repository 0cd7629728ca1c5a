// erg._core.pipeline_frequency: the rank side of Perseus (erg::perseus_client's
// PipelineFrequencyOptimizer). Only translates (STYLE.md habit 13): results are dicts with Zeus's
// ProfilingResult field names, errors go through module.cpp's one translator. Calls that talk to
// the server release the GIL; the job-id callback takes it back.

#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "erg/optimizers/pipeline_frequency/client/optimizer.hpp"

namespace py = pybind11;

namespace erg_python {
[[noreturn]] void raise_error(erg::Error error);
}  // namespace erg_python

namespace {

namespace pf = erg::pipeline_frequency;
using erg_python::raise_error;

void unwrap(erg::Result<void> r) {
  if (!r) raise_error(std::move(r.error()));
}

py::dict result_dict(const pf::server::ProfilingResult& r) {
  py::dict d;
  d["rank"] = r.rank;
  d["iter_time"] = r.iter_time;
  d["iter_energy"] = r.iter_energy;
  d["time_breakdown"] = r.time_breakdown;
  d["energy_breakdown"] = r.energy_breakdown;
  if (r.coarse_energy_windows > 0) d["coarse_energy_windows"] = r.coarse_energy_windows;
  if (r.extrapolated_energy_windows > 0) d["extrapolated_energy_windows"] = r.extrapolated_energy_windows;
  return d;
}

}  // namespace

void bind_perseus(py::module_& m) {
  auto sub = m.def_submodule("pipeline_frequency", "The rank side of Perseus (erg::perseus_client)");
  py::class_<pf::PipelineFrequencyOptimizer>(sub, "Optimizer")
      .def(py::init([](std::shared_ptr<erg::Gpu> gpu, int rank, int dp_rank, int pp_rank, int tp_rank, int dp_degree,
                       int pp_degree, int tp_degree, int world_size, const std::string& server_url,
                       std::optional<std::string> job_metadata, std::optional<py::function> share_job_id,
                       double read_timeout_s, bool lock_memory_clock) {
             pf::RankPlacement p{rank, dp_rank, pp_rank, tp_rank, dp_degree, pp_degree, tp_degree, world_size};
             pf::PipelineFrequencyOptions o;
             o.server_url = server_url;
             o.job_metadata = std::move(job_metadata);
             o.lock_memory_clock = lock_memory_clock;
             if (!(read_timeout_s > 0))
               raise_error({erg::ErrorCode::kInvalidArgument, "read_timeout_s must be positive"});
             o.read_timeout = std::chrono::seconds(static_cast<long long>(read_timeout_s + 0.999));
             if (share_job_id && !share_job_id->is_none()) {
               // Released with the GIL taken: the optimizer may drop it on a thread without it.
               auto fn = std::shared_ptr<py::function>(new py::function(std::move(*share_job_id)), [](py::function* f) {
                 py::gil_scoped_acquire gil;
                 delete f;
               });
               o.share_job_id = [fn](const std::optional<std::string>& mine) -> erg::Result<std::string> {
                 py::gil_scoped_acquire gil;
                 try {
                   py::object id = (*fn)(mine ? py::object(py::str(*mine)) : py::object(py::none()));
                   return id.cast<std::string>();
                 } catch (const std::exception& e) {
                   return erg::fail(erg::ErrorCode::kInvalidArgument, std::string("share_job_id: ") + e.what());
                 }
               };
             }
             erg::Result<std::unique_ptr<pf::PipelineFrequencyOptimizer>> r = erg::fail(erg::ErrorCode::kInternal, "");
             {
               py::gil_scoped_release release;
               r = pf::PipelineFrequencyOptimizer::create(std::move(gpu), p, std::move(o));
             }
             if (!r) raise_error(std::move(r.error()));
             return std::move(*r);
           }),
           py::arg("gpu"), py::arg("rank"), py::arg("dp_rank"), py::arg("pp_rank"), py::arg("tp_rank"),
           py::arg("dp_degree"), py::arg("pp_degree"), py::arg("tp_degree"), py::arg("world_size"),
           py::arg("server_url"), py::arg("job_metadata") = py::none(), py::arg("share_job_id") = py::none(),
           py::arg("read_timeout_s") = 660.0, py::arg("lock_memory_clock") = true)
      .def(
          "on_step_begin", [](pf::PipelineFrequencyOptimizer& o) { unwrap(o.on_step_begin()); },
          py::call_guard<py::gil_scoped_release>())
      .def(
          "on_step_end", [](pf::PipelineFrequencyOptimizer& o) { unwrap(o.on_step_end()); },
          py::call_guard<py::gil_scoped_release>())
      .def(
          "on_instruction_begin",
          [](pf::PipelineFrequencyOptimizer& o, const std::string& name) { unwrap(o.on_instruction_begin(name)); },
          py::arg("name"), py::call_guard<py::gil_scoped_release>())
      .def(
          "on_instruction_end",
          [](pf::PipelineFrequencyOptimizer& o, const std::string& name) { unwrap(o.on_instruction_end(name)); },
          py::arg("name"), py::call_guard<py::gil_scoped_release>())
      .def(
          "reset_clocks", [](pf::PipelineFrequencyOptimizer& o) { unwrap(o.reset_clocks()); },
          py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("job_id", &pf::PipelineFrequencyOptimizer::job_id)
      .def_property_readonly("schedule",
                             [](const pf::PipelineFrequencyOptimizer& o) { return o.schedule().frequencies; })
      .def_property_readonly("available_frequencies", &pf::PipelineFrequencyOptimizer::available_frequencies)
      .def_property_readonly("current_frequency",
                             [](const pf::PipelineFrequencyOptimizer& o) -> std::optional<int> {
                               auto f = o.current_frequency();
                               if (!f) return std::nullopt;
                               return static_cast<int>(f->value());
                             })
      .def_property_readonly("memory_clock",
                             [](const pf::PipelineFrequencyOptimizer& o) -> std::optional<int> {
                               auto f = o.memory_clock();
                               if (!f) return std::nullopt;
                               return static_cast<int>(f->value());
                             })
      .def_property_readonly("instructions",
                             [](const pf::PipelineFrequencyOptimizer& o) {
                               py::list out;
                               for (const auto& i : o.instructions())
                                 out.append(py::make_tuple(i.name, static_cast<int>(i.frequency.value()),
                                                           i.time.count(), i.energy.value()));
                               return out;
                             })
      .def_property_readonly("results",
                             [](const pf::PipelineFrequencyOptimizer& o) {
                               py::list out;
                               for (const auto& r : o.results()) out.append(result_dict(r));
                               return out;
                             })
      .def_property_readonly("steps", &pf::PipelineFrequencyOptimizer::steps);
}
