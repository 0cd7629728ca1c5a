#pragma once
/// The training job's side of the batch-size optimizer (Zeus's BatchSizeOptimizer client,
/// reference/zeus.md §5): registers the job with the server, asks it for this run's batch size,
/// measures the run's time and energy between evaluations, reports after each evaluation
/// whether to go on, and ends the trial when the run leaves without finishing it.
///
///     auto bso = BatchSizeOptimizer::create(options, &monitor);   // registers the job
///     int bs = bso->get_batch_size().value();                      // rank 0; the trial starts
///     bso->on_train_begin();
///     for (epoch...) { train(bs); auto r = bso->on_evaluate(validate()); if (r->stop_train) break; }
///
/// A run that ends (or crashes into the destructor) before the server said stop ends its trial
/// (PATCH /trials: Dispatched becomes Failed, so pruning may try the batch size again), as Zeus's
/// client does at exit. Not thread-safe: drive it from the training loop.

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "erg/core/device.hpp"
#include "erg/core/result.hpp"
#include "erg/core/units.hpp"
#include "erg/optimizers/batch_size/client/client.hpp"

namespace erg::measure {
class EnergyMonitor;
}

namespace erg::batch_size::client {

struct BatchSizeOptimizerOptions {
  std::string server_url;  ///< http://HOST:PORT of `erg bso serve` (or Zeus's server).
  JobConfig job;
  GpuConfig gpus;  ///< See gpu_config(); with a monitor, left empty (0 GPUs), it is made from them.
  /// Rank of this process under distributed training: only rank 0 asks for the batch size.
  int rank = 0;
  ClientOptions client;
};

/// The job's GPUs as the server wants them: their model and their maximum power limits added up.
/// kInvalidArgument for no GPUs or GPUs of different models (the optimizer assumes one kind);
/// the GPUs' errors reading their limit constraints.
Result<GpuConfig> gpu_config(const std::vector<std::shared_ptr<Gpu>>& gpus);

class BatchSizeOptimizer {
 public:
  /// Registers options.job (POST /jobs). With `monitor` (which must outlive the optimizer),
  /// on_train_begin() and on_evaluate(metric) measure the run with a window of it, and the energy
  /// is the sum over its GPUs; `gpus` (the monitor's) fill options.gpus when it has no GPUs.
  /// Errors: the client's (a refused spec is kInvalidArgument, another spec under the id
  /// kAlreadyExists, no server kUnavailable), and gpu_config()'s.
  static Result<std::unique_ptr<BatchSizeOptimizer>> create(BatchSizeOptimizerOptions options,
                                                            measure::EnergyMonitor* monitor = nullptr,
                                                            const std::vector<std::shared_ptr<Gpu>>& gpus = {});
  /// Ends a trial that is still out (end_trial()); an error is dropped here: call end_trial()
  /// first to see it.
  ~BatchSizeOptimizer();
  BatchSizeOptimizer(const BatchSizeOptimizer&) = delete;
  BatchSizeOptimizer& operator=(const BatchSizeOptimizer&) = delete;

  /// This run's batch size: the first call asks the server (GET /jobs/batch_size, which starts a
  /// trial), later ones return the same. kInvalidArgument on a rank other than 0 or when the
  /// server answers a batch size that is not the job's.
  Result<int> get_batch_size();
  /// Training starts: opens the monitor's window (without a monitor, nothing to do).
  /// kInvalidArgument before get_batch_size().
  Result<void> on_train_begin();
  /// An evaluation gave `metric`: the time and energy since on_train_begin() (or the last
  /// evaluation's report) are added to the trial's and reported (POST /report). If the server
  /// says go on, the window reopens. The answer says whether to stop and whether the run
  /// converged: stop_train without converged is Zeus's ZeusBSOTrainFailError (this batch size
  /// failed; relaunch and the server picks another). After the stop, further calls return the
  /// same answer without a request. Needs a monitor (kInvalidArgument without one).
  Result<ReportResponse> on_evaluate(double metric);
  /// The same, with this stretch's time and energy measured elsewhere (not cumulative: they are
  /// added to the trial's totals).
  Result<ReportResponse> on_evaluate(double metric, Seconds time, Joules energy);
  /// Ends the trial now if it is out and the server has not said stop (PATCH /trials; a no-op
  /// otherwise, and on ranks other than 0). Further calls do nothing.
  Result<void> end_trial();

  [[nodiscard]] const RegisteredJob& job() const { return job_; }
  /// The trial this run is, once get_batch_size() asked for it.
  [[nodiscard]] const std::optional<TrialId>& trial() const { return trial_; }
  [[nodiscard]] int current_epoch() const { return epoch_; }
  [[nodiscard]] Seconds time() const { return time_; }
  [[nodiscard]] Joules energy() const { return energy_; }
  /// The server said stop (training_finished in Zeus).
  [[nodiscard]] bool training_finished() const { return finished_.has_value(); }

 private:
  BatchSizeOptimizer(Client client, RegisteredJob job, int rank, measure::EnergyMonitor* monitor);
  Result<ReportResponse> report(double metric);

  Client client_;
  RegisteredJob job_;
  int rank_;
  measure::EnergyMonitor* monitor_;
  std::optional<TrialId> trial_;
  bool window_open_ = false;
  bool ended_ = false;
  int epoch_ = 0;
  Seconds time_{0.0};
  Joules energy_;
  std::optional<ReportResponse> finished_;
};

}  // namespace erg::batch_size::client
