#pragma once
/// The trace-driven simulator of Zeus NSDI'23 (reference §8): a recurring training job on one
/// GPU model, its batch size chosen by erg::batch_size (pruning, then Gaussian Thompson
/// sampling) and its power limit by just-in-time profiling, replayed from the measured traces.
/// Every figure it produces is a trace-driven simulation. The methodology, and where it departs
/// from the reference, is in docs/zeus-simulator.md.

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "erg/core/result.hpp"
#include "erg/core/units.hpp"
#include "erg/optimizers/batch_size/job_spec.hpp"
#include "erg/optimizers/zeus_sim/trace.hpp"

namespace erg::zeus_sim {

/// A recurring job of the traces with the reference's per-workload defaults.
struct Workload {
  std::string name;  ///< The dataset, which names the workload (`cifar100`, ...).
  std::string network;
  std::string optimizer;
  double target_metric = 0;
  int max_epochs = 0;
  int default_batch_size = 0;  ///< b0.
};

/// The six workloads with run_alibaba.py's defaults, except librispeech's b0: 192 as in
/// run_single.py, because run_alibaba.py's 256 is in no power trace.
std::span<const Workload> workloads();
/// The workload named `name`, or nullptr.
const Workload* find_workload(std::string_view name);

struct Options {
  double eta = 0.5;                  ///< η in [0, 1].
  std::optional<double> beta = 2.0;  ///< β > 0; nullopt: no early stopping.
  std::uint64_t seed = 1;
  std::optional<int> recurrences;  ///< Default 2·|B|·|P| (batch sizes × power limits).
};
/// kInvalidArgument for η outside [0, 1], β ≤ 0 or recurrences < 1.
Result<void> validate(const Options& options);

/// A batch size with a power limit.
struct Config {
  int batch_size = 0;
  Watts power_limit;
};
/// Energy, time and Zeus cost (η·E + (1 − η)·max_power·T, J) of some runs.
struct Totals {
  Joules energy;
  Seconds time{0.0};
  double cost = 0;
};
/// One recurrence of the job: every try until it reached the target.
struct Recurrence {
  Config config;                 ///< Of the try that reached the target.
  int tries = 0;                 ///< Runs it took (early-stopped and failed runs, then the one that reached).
  std::vector<int> batch_sizes;  ///< The batch size of each try, in order (the last one reached).
  Totals totals;                 ///< Of all its tries, profiling epochs included.
};

/// One (GPU, workload) pair simulated.
struct PairResult {
  std::string gpu;
  Workload workload;
  std::vector<int> batch_sizes;     ///< |B|: in both traces for the workload.
  std::vector<Watts> power_limits;  ///< |P|: the workload's limits on this GPU.
  Watts max_power;                  ///< The GPU's maximum power limit (the cost's max power).
  int recurrences = 0;

  Config baseline_config;  ///< b0 at its maximum power limit.
  Totals baseline_run;     ///< Expected for one recurrence (see expected_run()).
  Totals baseline;         ///< baseline_run × recurrences.
  Totals erg;              ///< Simulated: the sum over every run of every recurrence.
  std::vector<Recurrence> history;

  Config converged;      ///< The optimizer's answer at the end: its best batch size and that one's JIT limit.
  Totals converged_run;  ///< Expected for one recurrence at `converged`.
  Config optimum;        ///< The (b, p) with the least expected recurrence cost, by exhaustive search.
  Totals optimum_run;

  /// 100 × (1 − erg / baseline) for energy, time and cost.
  [[nodiscard]] double energy_improvement_pct() const;
  [[nodiscard]] double time_improvement_pct() const;
  [[nodiscard]] double cost_improvement_pct() const;
  /// 100 × (converged_run.cost / optimum_run.cost − 1).
  [[nodiscard]] double converged_gap_pct() const;
};

/// A run the batch-size optimizer handed out.
struct Dispatch {
  int trial_number = 0;
  int batch_size = 0;
};

/// How a run ended, as a live job would report it once: its energy and time (the cost is
/// batch_size::zeus_cost of them with the job's η and max power), whether it reached the target,
/// and the epochs it ran. A run that never started (not one epoch fits under the early-stopping
/// bound) is charged as if it had run until it cost 100 × β × the least recurrence cost.
struct RunOutcome {
  int trial_number = 0;
  int batch_size = 0;
  Joules energy;
  Seconds time{0.0};
  bool reached = false;
  int epochs = 0;
};

/// The batch-size optimizer a simulation asks for each run's batch size and tells how the run
/// went: erg::batch_size in-process (simulate() without an agent), or a batch-size optimizer
/// server through its client (`erg bso simulate`). The simulator decides early stopping itself,
/// so an agent must take each outcome as final (converged = reached).
class BatchSizeAgent {
 public:
  virtual ~BatchSizeAgent() = default;
  /// Called once, before the first run: the job (its batch sizes, b0, η, β, target, max epochs,
  /// seed) on GPUs whose maximum power limits add up to `max_power`.
  virtual Result<void> start(const batch_size::JobSpec& spec, Watts max_power) = 0;
  /// The next run's trial.
  virtual Result<Dispatch> next() = 0;
  /// The dispatched run ended.
  virtual Result<void> finish(const RunOutcome& run) = 0;
  /// After the last run: the batch size the optimizer believes best.
  virtual Result<int> best_batch_size() = 0;
};

/// The in-process agent: an erg::batch_size::Optimizer fed each run's cost with observe().
std::unique_ptr<BatchSizeAgent> in_process_agent();

/// Simulates `workload` recurring on `gpu` (a key of traces.power). kNotFound for a GPU
/// without a power trace or a workload or b0 missing from it; kInvalidArgument for bad
/// options, or when the default batch size does not reach the target in every trace run
/// within max_epochs (there is no baseline) or the job cannot converge (no batch size survives
/// pruning, or 20 tries of one recurrence fail).
Result<PairResult> simulate(const Traces& traces, std::string_view gpu, const Workload& workload,
                            const Options& options);
/// The same with the batch sizes chosen by `agent` (fresh: start() not called yet). Its errors
/// end the simulation.
Result<PairResult> simulate(const Traces& traces, std::string_view gpu, const Workload& workload,
                            const Options& options, BatchSizeAgent& agent);

/// The expected energy, time and cost of one recurrence run at `config` once it is known: the
/// mean over the trace's runs of that batch size of target_epoch × the epoch at that limit.
/// nullopt when some run does not reach the target within max_epochs (the configuration is
/// not feasible). kNotFound for a GPU, workload or configuration not in the traces.
Result<std::optional<Totals>> expected_run(const Traces& traces, std::string_view gpu, const Workload& workload,
                                           Config config, double eta);

/// A pair the sweep left out, and why.
struct Skipped {
  std::string gpu;
  std::string workload;
  std::string reason;
};
struct Sweep {
  std::vector<PairResult> pairs;
  std::vector<Skipped> skipped;
};
/// Simulates every pair of `gpus` × `workloads` whose default batch size is in that GPU's
/// power trace, in the order given; the others are skipped with the reason. A pair whose
/// simulation fails is an error (the sweep stops there).
Result<Sweep> sweep(const Traces& traces, std::span<const std::string> gpus, std::span<const Workload> workloads,
                    const Options& options);

}  // namespace erg::zeus_sim
