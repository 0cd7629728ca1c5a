#pragma once
/// The trace simulator's batch-size agent over a live server (`erg bso simulate`): the simulated
/// job is registered on the server through the client, each simulated run is a trial the server
/// hands out (GET /jobs/batch_size), and each run's end is one report (POST /report), as a live
/// job evaluating once at its end would send it. End to end: client, HTTP, server, database.
///
/// The simulator decides early stopping itself (docs/zeus-simulator.md), so the job is
/// registered without β (the server would otherwise stop runs by its own bound), and each run's
/// report makes the server finish the trial with the simulator's outcome: the metric is the
/// target when the run reached it and below it otherwise, and a run that did not reach it reports
/// current_epoch = max_epochs. The server recomputes the cost from the reported energy and time
/// with the same zeus_cost, so it sees the cost the in-process optimizer would.

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "erg/optimizers/batch_size/client/client.hpp"
#include "erg/optimizers/zeus_sim/simulator.hpp"

namespace erg::batch_size::client {

class ServerAgent final : public zeus_sim::BatchSizeAgent {
 public:
  /// Asks the server of `client` (which must outlive the agent) for job `job_id_prefix`-…,
  /// registered with `gpu_model` (one GPU). `best`, when given, answers best_batch_size() for the
  /// job id (the server has no route for it: `erg bso simulate` reads the database it serves);
  /// without it the best is the batch size of the last run that reached the target.
  ServerAgent(Client& client, std::string job_id_prefix, std::string gpu_model,
              std::function<Result<int>(const std::string& job_id)> best = {});

  Result<void> start(const JobSpec& spec, Watts max_power) override;
  Result<zeus_sim::Dispatch> next() override;
  Result<void> finish(const zeus_sim::RunOutcome& run) override;
  Result<int> best_batch_size() override;

  /// The job's id on the server, once start() registered it.
  [[nodiscard]] const std::string& job_id() const { return job_id_; }
  /// The server's answer to each run's report, in order.
  [[nodiscard]] const std::vector<ReportResponse>& responses() const { return responses_; }

 private:
  Client& client_;
  std::string prefix_;
  std::string gpu_model_;
  std::function<Result<int>(const std::string&)> best_;
  std::string job_id_;
  JobSpec spec_;
  std::optional<int> last_reached_;
  std::vector<ReportResponse> responses_;
};

}  // namespace erg::batch_size::client
