#pragma once
/// A synchronous 1F1B pipeline on the simulated machine (sim/, faithful model, virtual clock), for
/// Perseus end to end: profile it (`erg perseus profile`), plan it, run the plan, and be the ranks
/// of a job on the Perseus server (tests/perseus). It drives the simulator's control API and
/// opens the GPUs through devices/ (the production NVML path to the simulated driver), so it sits
/// above both, in cli/ (ARCHITECTURE.md; optimizers/ may include neither).
///
/// The model. Stage s runs on GPU s. One micro-batch's forward (backward) on stage s is
/// `work` units of the simulator (1 unit = 1 s of a fully busy GPU at its highest clock), run as
/// a steady load at utilization 1 with the GPU's SM clock locked (nvmlDeviceSetGpuLockedClocks,
/// through the production NVML path) at the frequency chosen for it. The simulator's faithful
/// device model gives the speed at clock f: speed = 1 / ((1 − μ)·f_max/f + μ) with μ the SKU's
/// memory-bound share (A100: 0.45), so time = work · ((1 − μ)·f_max/f + μ) — the compute part
/// scales with the clock, the memory-bound part does not — and the power is the model's at that
/// clock and activity (with its electrical lag, load-change transients and noise). Stages are
/// imbalanced by giving them different work. The schedule is PipelineDag::synchronous_1f1b, the
/// planner's own DAG: a GPU starts its next computation as soon as the previous one of its stage
/// and the neighbouring stage's one it depends on have finished; until then it is blocked on P2P
/// communication, at utilization `blocking_utilization` (0: the SKU's idle power), at the clock of
/// its last computation. Computations finish at the exact simulated nanosecond their work is done.

#include <memory>
#include <string>
#include <vector>

#include "erg/core/device.hpp"
#include "erg/core/result.hpp"
#include "erg/devices/devices.hpp"
#include "erg/optimizers/pipeline_frequency/pipeline_dag.hpp"
#include "erg/optimizers/pipeline_frequency/planner.hpp"
#include "erg/optimizers/pipeline_frequency/profiler.hpp"
#include "erg/sim/machine.hpp"

namespace erg::pipeline_frequency::simulated {

/// One micro-batch's work on a stage, in simulator units (1 unit = 1 s fully busy at f_max).
struct StageWork {
  double forward = 0;
  double backward = 0;
};

struct PipelineConfig {
  std::string spec = "4xA100,cpus=0";  ///< One GPU per stage; the first stages() GPUs are used.
  std::vector<StageWork> stages;
  int micro_batches = 8;
  double blocking_utilization = 0.0;  ///< GPU activity while blocked on a neighbour.
};

/// Iterations as run: means per iteration.
struct IterationMeasurement {
  double time_s = 0;
  /// Per measured iteration: its time (s) and each stage's GPU energy (J, physical).
  std::vector<double> iteration_time_s;
  std::vector<std::vector<double>> iteration_stage_energy_j;
  /// Per measured iteration, per activity id (PipelineDag order): the computation's duration (s)
  /// and its GPU's physical energy over that duration (J) — what a per-computation meter would
  /// read (the simulated NVML counter updates every 100 ms, too coarse for one computation).
  std::vector<std::vector<double>> activity_time_s;
  std::vector<std::vector<double>> activity_energy_j;
  double energy_j = 0;                  ///< All stages' GPUs, the simulator's physical energy.
  std::vector<double> stage_energy_j;   ///< Per stage.
  std::vector<double> stage_blocked_s;  ///< Per stage: time not computing.
};

class SimulatedPipeline {
 public:
  /// A fresh machine on the virtual clock, its GPUs opened through the simulated NVML driver.
  static Result<std::unique_ptr<SimulatedPipeline>> create(PipelineConfig config);
  ~SimulatedPipeline();

  [[nodiscard]] const PipelineConfig& config() const { return config_; }
  [[nodiscard]] const PipelineDag& dag() const { return dag_; }
  [[nodiscard]] int stages() const { return static_cast<int>(config_.stages.size()); }
  /// The SM clocks the GPUs support (NVML's list), highest first.
  [[nodiscard]] const std::vector<int>& frequencies() const { return frequencies_; }
  /// Every computation at `mhz`, as a plan's per-stage list.
  [[nodiscard]] StageFrequencies uniform(int mhz) const;
  /// The time one `instruction` of `stage` takes at `mhz` by the device model (no measurement).
  [[nodiscard]] double model_time_s(int stage, Instruction instruction, int mhz) const;

  /// Runs `warmup` iterations, then `iterations` measured ones, every computation at the
  /// frequency the plan gives it (per stage in its execution order, as the Perseus server hands
  /// them out). kInvalidArgument if the plan's shape does not match the pipeline's.
  Result<IterationMeasurement> run(const StageFrequencies& plan, int iterations, int warmup = 1);

  /// Profiling, as Perseus does on a real pipeline: `stage`'s `instruction` run back to back at
  /// `mhz` for at least `window_s` after a settling period; time per execution from the clock and
  /// the executions completed, energy per execution from the GPU's NVML energy counter (read at
  /// its updates, so the window holds whole sensor periods). A measurement, with the sensor's
  /// errors: not the model's figure.
  Result<InstructionMeasurement> measure_instruction(int stage, Instruction instruction, int mhz,
                                                     double window_s = 1.0);
  /// Power of `stage`'s GPU blocked on P2P communication, from its energy counter.
  Result<double> measure_blocking_power(int stage, double window_s = 1.0);

  sim::Machine& machine() { return *machine_; }

 private:
  SimulatedPipeline(PipelineConfig config, PipelineDag dag) : config_(std::move(config)), dag_(std::move(dag)) {}
  [[nodiscard]] double work(int stage, Instruction instruction) const;
  Result<void> lock(int stage, int mhz);
  double seconds() const;
  /// Advances the machine 1 ms at a time until `stage`'s energy counter changes; returns the new
  /// reading (J) and the time it was seen (s).
  Result<std::pair<double, double>> next_counter_update(int stage);

  PipelineConfig config_;
  PipelineDag dag_;
  std::unique_ptr<sim::Machine> machine_;
  devices::Devices devices_;  // the same machine, attached through devices/
  std::vector<std::shared_ptr<Gpu>> gpus_;
  std::vector<int> frequencies_;
  std::vector<int> locked_;  // per stage, the clock locked now (0: none yet)
  int max_mhz_ = 0;
  double memory_bound_ = 0;
};

}  // namespace erg::pipeline_frequency::simulated
