#include "erg/optimizers/batch_size/client/batch_size_optimizer.hpp"

#include <algorithm>
#include <cmath>

#include "erg/measure/energy_monitor.hpp"

namespace erg::batch_size::client {
namespace {

/// Zeus's window name, spelled right (Zeus's is "BatciSizeOptimizerClient").
constexpr const char* kWindow = "BatchSizeOptimizerClient";

}  // namespace

Result<GpuConfig> gpu_config(const std::vector<std::shared_ptr<Gpu>>& gpus) {
  if (gpus.empty()) return fail(ErrorCode::kInvalidArgument, "the batch-size optimizer needs at least one GPU");
  GpuConfig c;
  c.gpu_model = gpus.front()->name();
  c.number_of_gpus = static_cast<int>(gpus.size());
  for (const auto& g : gpus) {
    if (g->name() != c.gpu_model)
      return fail(ErrorCode::kInvalidArgument,
                  "the batch-size optimizer needs GPUs of one model (got " + c.gpu_model + " and " + g->name() + ")");
    auto limits = g->power_limit_constraints();
    if (!limits) return fail(limits.error());
    // Zeus's max_power: whole watts of each GPU's maximum limit.
    c.max_power += Watts(std::floor(static_cast<double>(limits->max.value()) / 1000.0));
  }
  return c;
}

BatchSizeOptimizer::BatchSizeOptimizer(Client client, RegisteredJob job, int rank, measure::EnergyMonitor* monitor)
    : client_(std::move(client)), job_(std::move(job)), rank_(rank), monitor_(monitor) {}

Result<std::unique_ptr<BatchSizeOptimizer>> BatchSizeOptimizer::create(BatchSizeOptimizerOptions options,
                                                                       measure::EnergyMonitor* monitor,
                                                                       const std::vector<std::shared_ptr<Gpu>>& gpus) {
  if (options.gpus.number_of_gpus == 0) {
    auto c = gpu_config(gpus);
    if (!c) return fail(c.error());
    options.gpus = *c;
  }
  auto client = Client::create(options.server_url, options.client);
  if (!client) return fail(client.error());
  auto job = client->register_job(options.job, options.gpus);
  if (!job) return fail(job.error());
  return std::unique_ptr<BatchSizeOptimizer>(
      new BatchSizeOptimizer(std::move(*client), std::move(*job), options.rank, monitor));
}

BatchSizeOptimizer::~BatchSizeOptimizer() {
  if (window_open_ && monitor_) (void)monitor_->cancel_window(kWindow);
  (void)end_trial();
}

Result<int> BatchSizeOptimizer::get_batch_size() {
  if (rank_ != 0) return fail(ErrorCode::kInvalidArgument, "only rank 0 asks for the batch size");
  if (trial_) return trial_->batch_size;
  auto t = client_.get_batch_size(job_.job_id);
  if (!t) return fail(t.error());
  const auto& sizes = job_.config.params.batch_sizes;
  if (std::find(sizes.begin(), sizes.end(), t->batch_size) == sizes.end())
    return fail(ErrorCode::kInvalidArgument,
                "the server answered batch size " + std::to_string(t->batch_size) + ", which is not the job's");
  trial_ = *t;
  epoch_ = 0;
  return t->batch_size;
}

Result<void> BatchSizeOptimizer::on_train_begin() {
  if (!trial_) return fail(ErrorCode::kInvalidArgument, "call get_batch_size() before on_train_begin()");
  if (!monitor_) return ok();
  if (auto r = monitor_->begin_window(kWindow, true, true); !r) return r;
  window_open_ = true;
  return ok();
}

Result<ReportResponse> BatchSizeOptimizer::on_evaluate(double metric) {
  if (!monitor_)
    return fail(ErrorCode::kInvalidArgument,
                "on_evaluate(metric) measures with a monitor; give one, "
                "or pass the time and energy");
  if (!trial_) return fail(ErrorCode::kInvalidArgument, "call get_batch_size() before on_evaluate()");
  if (finished_) return *finished_;
  if (!window_open_) return fail(ErrorCode::kInvalidArgument, "call on_train_begin() before on_evaluate()");
  auto m = monitor_->end_window(kWindow);
  window_open_ = false;
  if (!m) return fail(m.error());
  Joules energy;
  for (const auto& g : m->gpus) {
    // A GPU whose energy is unknown would make the trial look cheaper than it was.
    if (!g.energy)
      return fail(g.error ? *g.error : Error{ErrorCode::kIo, "GPU " + std::to_string(g.index) + ": energy unknown"});
    energy += *g.energy;
  }
  time_ += m->time;
  energy_ += energy;
  auto r = report(metric);
  if (r && !r->stop_train) {
    if (auto b = monitor_->begin_window(kWindow, true, true); !b) return fail(b.error());
    window_open_ = true;
  }
  return r;
}

Result<ReportResponse> BatchSizeOptimizer::on_evaluate(double metric, Seconds time, Joules energy) {
  if (!trial_) return fail(ErrorCode::kInvalidArgument, "call get_batch_size() before on_evaluate()");
  if (finished_) return *finished_;
  if (!(time.count() >= 0) || !(energy.value() >= 0))
    return fail(ErrorCode::kInvalidArgument, "on_evaluate: time and energy must be non-negative");
  time_ += time;
  energy_ += energy;
  return report(metric);
}

Result<ReportResponse> BatchSizeOptimizer::report(double metric) {
  ++epoch_;
  auto r = client_.report({*trial_, time_, energy_, metric, epoch_});
  if (!r) return fail(r.error());
  if (r->stop_train) finished_ = *r;
  return r;
}

Result<void> BatchSizeOptimizer::end_trial() {
  if (!trial_ || finished_ || ended_ || rank_ != 0) return ok();
  ended_ = true;
  return client_.end_trial(*trial_);
}

}  // namespace erg::batch_size::client
