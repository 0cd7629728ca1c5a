#include "erg/optimizers/batch_size/client/server_agent.hpp"

#include <algorithm>
#include <cmath>

namespace erg::batch_size::client {

ServerAgent::ServerAgent(Client& client, std::string job_id_prefix, std::string gpu_model,
                         std::function<Result<int>(const std::string&)> best)
    : client_(client), prefix_(std::move(job_id_prefix)), gpu_model_(std::move(gpu_model)), best_(std::move(best)) {}

Result<void> ServerAgent::start(const JobSpec& spec, Watts max_power) {
  JobConfig job;
  job.job_id_prefix = prefix_;
  job.params = spec;
  job.params.beta_knob.reset();  // the simulator's own early stop decides (see the header)
  job.params.higher_is_better_metric = true;
  auto registered = client_.register_job(job, GpuConfig{max_power, 1, gpu_model_});
  if (!registered) return fail(registered.error());
  job_id_ = registered->job_id;
  spec_ = job.params;
  return ok();
}

Result<zeus_sim::Dispatch> ServerAgent::next() {
  auto t = client_.get_batch_size(job_id_);
  if (!t) return fail(t.error());
  return zeus_sim::Dispatch{t->trial_number, t->batch_size};
}

Result<void> ServerAgent::finish(const zeus_sim::RunOutcome& run) {
  // Below the target by at least 1, or by its magnitude for a large target.
  const double miss = spec_.target_metric - std::max(1.0, std::abs(spec_.target_metric));
  TrainingReport r;
  r.trial = {job_id_, run.batch_size, run.trial_number};
  r.time = run.time;
  r.energy = run.energy;
  r.metric = run.reached ? spec_.target_metric : miss;
  r.current_epoch = run.reached ? std::max(run.epochs, 1) : spec_.max_epochs;
  auto answer = client_.report(r);
  if (!answer) return fail(answer.error());
  if (!answer->stop_train || answer->converged != run.reached)
    return fail(ErrorCode::kInternal, "trial " + std::to_string(run.trial_number) + ": the server answered '" +
                                          answer->message + "' to a run that " +
                                          (run.reached ? "reached" : "did not reach") + " the target");
  responses_.push_back(*answer);
  if (run.reached) last_reached_ = run.batch_size;
  return ok();
}

Result<int> ServerAgent::best_batch_size() {
  if (best_) return best_(job_id_);
  if (!last_reached_) return fail(ErrorCode::kNotFound, "no run reached the target");
  return *last_reached_;
}

}  // namespace erg::batch_size::client
