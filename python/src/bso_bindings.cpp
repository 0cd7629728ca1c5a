// erg._core.bso: the batch-size optimizer server's client and the training job's
// BatchSizeOptimizer (erg::bso_client). Only translates (STYLE.md habit 13): a job spec is a
// dict of Zeus's JobSpec fields, answers are tuples, errors go through module.cpp's one
// translator. HTTP calls release the GIL.

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "erg/optimizers/batch_size/client/batch_size_optimizer.hpp"
#include "erg/optimizers/batch_size/client/client.hpp"

namespace py = pybind11;

namespace erg_python {
[[noreturn]] void raise_error(erg::Error error);
}  // namespace erg_python

namespace {

namespace bsc = erg::batch_size::client;
using erg_python::raise_error;

template <class T>
T unwrap(erg::Result<T> r) {
  if (!r) raise_error(std::move(r.error()));
  return std::move(*r);
}
void unwrap(erg::Result<void> r) {
  if (!r) raise_error(std::move(r.error()));
}

std::chrono::milliseconds millis(double s) {
  if (!(s > 0)) raise_error({erg::ErrorCode::kInvalidArgument, "timeout_s must be positive"});
  return std::chrono::milliseconds(static_cast<long long>(s * 1000.0));
}

/// Zeus's JobSpec fields (job_id, job_id_prefix, batch_sizes, default_batch_size, eta_knob,
/// beta_knob, ...): every one is required here; the Python layer fills Zeus's defaults.
bsc::JobConfig job_config(const py::dict& d) {
  bsc::JobConfig j;
  try {
    if (!d["job_id"].is_none()) j.job_id = d["job_id"].cast<std::string>();
    j.job_id_prefix = d["job_id_prefix"].cast<std::string>();
    auto& p = j.params;
    p.batch_sizes = d["batch_sizes"].cast<std::vector<int>>();
    p.default_batch_size = d["default_batch_size"].cast<int>();
    p.eta_knob = d["eta_knob"].cast<double>();
    if (!d["beta_knob"].is_none()) p.beta_knob = d["beta_knob"].cast<double>();
    p.target_metric = d["target_metric"].cast<double>();
    p.higher_is_better_metric = d["higher_is_better_metric"].cast<bool>();
    p.max_epochs = d["max_epochs"].cast<int>();
    p.num_pruning_rounds = d["num_pruning_rounds"].cast<int>();
    p.window_size = d["window_size"].cast<int>();
    p.mab_prior_mean = d["mab_prior_mean"].cast<double>();
    p.mab_prior_precision = d["mab_prior_precision"].cast<double>();
    p.mab_num_explorations = d["mab_num_explorations"].cast<int>();
    if (!d["mab_seed"].is_none()) p.mab_seed = d["mab_seed"].cast<std::uint64_t>();
  } catch (const py::error_already_set& e) {
    raise_error({erg::ErrorCode::kInvalidArgument, std::string("job spec: ") + e.what()});
  } catch (const py::cast_error& e) {
    raise_error({erg::ErrorCode::kInvalidArgument, std::string("job spec: ") + e.what()});
  }
  return j;
}

py::tuple trial_tuple(const bsc::TrialId& t) { return py::make_tuple(t.job_id, t.batch_size, t.trial_number); }
py::tuple response_tuple(const erg::batch_size::ReportResponse& r) {
  return py::make_tuple(r.stop_train, r.converged, r.message);
}
py::dict registered_dict(const bsc::RegisteredJob& r) {
  py::dict d;
  d["job_id"] = r.job_id;
  d["created"] = r.created;
  d["batch_sizes"] = r.config.params.batch_sizes;
  d["max_power"] = r.gpus.max_power.value();
  d["number_of_gpus"] = r.gpus.number_of_gpus;
  d["gpu_model"] = r.gpus.gpu_model;
  return d;
}

}  // namespace

void bind_bso(py::module_& m) {
  auto bso = m.def_submodule("bso", "The batch-size optimizer server's client (erg::bso_client)");

  bso.def(
      "gpu_config",
      [](const std::vector<std::shared_ptr<erg::Gpu>>& gpus) {
        auto c = unwrap(bsc::gpu_config(gpus));
        return py::make_tuple(c.max_power.value(), c.number_of_gpus, c.gpu_model);
      },
      py::arg("gpus"), "(max_power W, number_of_gpus, gpu_model) of homogeneous GPUs: their maximum limits added up.");

  py::class_<bsc::Client>(bso, "Client")
      .def(py::init([](const std::string& url, double timeout_s) {
             return unwrap(bsc::Client::create(url, {millis(timeout_s)}));
           }),
           py::arg("url"), py::arg("timeout_s") = 30.0)
      .def_property_readonly("url", &bsc::Client::url)
      .def(
          "register_job",
          [](bsc::Client& c, const py::dict& job, double max_power, int number_of_gpus, const std::string& gpu_model) {
            const auto config = job_config(job);
            erg::Result<bsc::RegisteredJob> r;
            {
              py::gil_scoped_release release;
              r = c.register_job(config, {erg::Watts(max_power), number_of_gpus, gpu_model});
            }
            return registered_dict(unwrap(std::move(r)));
          },
          py::arg("job"), py::arg("max_power"), py::arg("number_of_gpus"), py::arg("gpu_model"),
          "POST /jobs: dict job_id, created, batch_sizes, max_power, number_of_gpus, gpu_model.")
      .def(
          "get_batch_size",
          [](bsc::Client& c, const std::string& job_id) {
            erg::Result<bsc::TrialId> r;
            {
              py::gil_scoped_release release;
              r = c.get_batch_size(job_id);
            }
            return trial_tuple(unwrap(std::move(r)));
          },
          py::arg("job_id"), "GET /jobs/batch_size: (job_id, batch_size, trial_number).")
      .def(
          "report",
          [](bsc::Client& c, const std::string& job_id, int batch_size, int trial_number, double time, double energy,
             double metric, int current_epoch) {
            erg::Result<erg::batch_size::ReportResponse> r;
            {
              py::gil_scoped_release release;
              r = c.report(
                  {{job_id, batch_size, trial_number}, erg::Seconds(time), erg::Joules(energy), metric, current_epoch});
            }
            return response_tuple(unwrap(std::move(r)));
          },
          py::arg("job_id"), py::arg("batch_size"), py::arg("trial_number"), py::arg("time"), py::arg("energy"),
          py::arg("metric"), py::arg("current_epoch"), "POST /report: (stop_train, converged, message).")
      .def(
          "end_trial",
          [](bsc::Client& c, const std::string& job_id, int batch_size, int trial_number) {
            unwrap(c.end_trial({job_id, batch_size, trial_number}));
          },
          py::arg("job_id"), py::arg("batch_size"), py::arg("trial_number"), py::call_guard<py::gil_scoped_release>(),
          "PATCH /trials.")
      .def(
          "delete_job", [](bsc::Client& c, const std::string& job_id) { unwrap(c.delete_job(job_id)); },
          py::arg("job_id"), py::call_guard<py::gil_scoped_release>(), "DELETE /jobs.");

  py::class_<bsc::BatchSizeOptimizer>(bso, "BatchSizeOptimizer")
      .def(py::init([](const std::string& url, const py::dict& job, double max_power, int number_of_gpus,
                       const std::string& gpu_model, int rank, double timeout_s) {
             bsc::BatchSizeOptimizerOptions o;
             o.server_url = url;
             o.job = job_config(job);
             o.gpus = {erg::Watts(max_power), number_of_gpus, gpu_model};
             o.rank = rank;
             o.client.timeout = millis(timeout_s);
             erg::Result<std::unique_ptr<bsc::BatchSizeOptimizer>> r;
             {
               py::gil_scoped_release release;
               r = bsc::BatchSizeOptimizer::create(std::move(o));
             }
             return unwrap(std::move(r));
           }),
           py::arg("url"), py::arg("job"), py::arg("max_power"), py::arg("number_of_gpus"), py::arg("gpu_model"),
           py::arg("rank") = 0, py::arg("timeout_s") = 30.0,
           "Registers the job. Time and energy come from the caller (the Python layer's monitor).")
      .def(
          "get_batch_size", [](bsc::BatchSizeOptimizer& b) { return unwrap(b.get_batch_size()); },
          py::call_guard<py::gil_scoped_release>())
      .def("on_train_begin", [](bsc::BatchSizeOptimizer& b) { unwrap(b.on_train_begin()); })
      .def(
          "on_evaluate",
          [](bsc::BatchSizeOptimizer& b, double metric, double time, double energy) {
            erg::Result<erg::batch_size::ReportResponse> r;
            {
              py::gil_scoped_release release;
              r = b.on_evaluate(metric, erg::Seconds(time), erg::Joules(energy));
            }
            return response_tuple(unwrap(std::move(r)));
          },
          py::arg("metric"), py::arg("time"), py::arg("energy"),
          "Adds this stretch's time (s) and energy (J) and reports: (stop_train, converged, message).")
      .def(
          "end_trial", [](bsc::BatchSizeOptimizer& b) { unwrap(b.end_trial()); },
          py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("job", [](const bsc::BatchSizeOptimizer& b) { return registered_dict(b.job()); })
      .def_property_readonly("trial",
                             [](const bsc::BatchSizeOptimizer& b) -> py::object {
                               if (!b.trial()) return py::none();
                               return trial_tuple(*b.trial());
                             })
      .def_property_readonly("current_epoch", &bsc::BatchSizeOptimizer::current_epoch)
      .def_property_readonly("time", [](const bsc::BatchSizeOptimizer& b) { return b.time().count(); })
      .def_property_readonly("energy", [](const bsc::BatchSizeOptimizer& b) { return b.energy().value(); })
      .def_property_readonly("training_finished", &bsc::BatchSizeOptimizer::training_finished);
}
