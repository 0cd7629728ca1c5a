#pragma once
/// The rank side of Perseus (Zeus's PipelineFrequencyOptimizer, reference/zeus.md §6): one per
/// rank of a pipeline-parallel training job, driving that rank's GPU.
///
/// create(): rank 0 registers the job (POST /register_job) and hands its id to the other ranks
/// (`share_job_id`, Zeus's broadcast_object_list); every rank locks its GPU's memory clock at the
/// highest supported one (where the GPU can), registers with the SM clocks supported at that
/// memory clock, highest first, locks the SM clock at the highest, and fetches its first schedule
/// (GET /schedule, which waits for every rank).
///
/// Per training step:
///   on_step_begin()                  — from the second step on, fetch this round's schedule
///                                      (waits for every rank, as the server's rounds do)
///   on_instruction_begin("forward")  — the next planned (instruction, MHz) must be a forward: the
///   ...compute...                      SM clock is locked to that MHz, then its time and energy
///   on_instruction_end("forward")      are measured until on_instruction_end
///   on_step_end()                    — the schedule must be used up; POST /result with this
///                                      step's time and energy and the per-instruction breakdowns
///
/// Unlike Zeus's client, which fetches one schedule and never posts, every step is a round of the
/// server: the result carries iter_time = [step s], iter_energy = [step J], and time_breakdown /
/// energy_breakdown = {"forward": [[s or J per forward, in execution order]], "backward": [[...]]}
/// (one inner list: one iteration). docs/perseus.md states the shape.
///
/// The clocks go back on destruction and reset_clocks(): the SM and memory locked clocks are
/// reset (Gpu::reset_gpu_locked_clocks / reset_memory_locked_clocks). A process killed before
/// that keeps them locked unless its GPU setters go through ergd, which resets the clocks of a
/// setter that exited (docs/ergd.md), or it started a guardian (`guardian_executable`), which
/// resets them when the process is gone.
///
/// Not thread-safe: drive it from the training loop's thread.

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "erg/core/clock.hpp"
#include "erg/core/device.hpp"
#include "erg/core/result.hpp"
#include "erg/core/units.hpp"
#include "erg/optimizers/pipeline_frequency/server/service.hpp"

namespace erg::pipeline_frequency {

/// Where a rank sits in the job (Zeus's constructor arguments, in its order, less device_id and
/// server_url).
struct RankPlacement {
  int rank = 0;
  int dp_rank = 0;
  int pp_rank = 0;
  int tp_rank = 0;
  int dp_degree = 1;
  int pp_degree = 1;
  int tp_degree = 1;
  int world_size = 1;  ///< Must equal dp·pp·tp.
};

struct PipelineFrequencyOptions {
  /// "http://HOST:PORT" (a trailing '/' is allowed); https is not supported.
  std::string server_url;
  /// Appended to the job id by the server (Zeus's job_metadata).
  std::optional<std::string> job_metadata;
  /// Hands rank 0's job id to every rank: called on every rank with rank 0's id on rank 0 and
  /// nullopt on the others, returns rank 0's id (torch.distributed's broadcast under Python).
  /// nullptr: only a job of world_size 1 can start.
  std::function<Result<std::string>(const std::optional<std::string>& job_id)> share_job_id;
  /// Waits for the GPU's queued work before each clock change and measurement edge (the Python
  /// layer plugs torch.cuda.synchronize in); nullptr: nothing to wait for.
  std::function<void()> sync;
  /// HTTP read timeout: must outlast the server's --rank-timeout (GET /schedule waits for every rank).
  std::chrono::seconds read_timeout = server::kDefaultRankTimeout + std::chrono::seconds(60);
  /// Time source of the measurements; nullptr: the steady clock. Must outlive the optimizer.
  const Clock* clock = nullptr;
  /// Lock the memory clock at its highest supported value (Zeus does, where supported).
  bool lock_memory_clock = true;
  /// A guardian process that resets the clocks if this process dies without resetting them
  /// (SIGKILL, a crash; clock_guardian.hpp): the `erg` command to start it with, a path or a name
  /// on PATH. Empty: no guardian — right when the GPU is driven through ergd, which resets the
  /// clocks of a setter that exited. Started before the first clock is locked.
  std::string guardian_executable;
  /// The GPU's index as the guardian's `erg` sees it (the same environment: ERG_SIMULATE,
  /// CUDA_VISIBLE_DEVICES, ...); nullopt: the GPU's own index().
  std::optional<unsigned> guardian_gpu_index;
};

/// What one instruction measured.
struct InstructionFigures {
  std::string name;  ///< "forward" or "backward"
  Megahertz frequency;
  Seconds time{0.0};
  Joules energy;
  /// The window was shorter than about two updates of the GPU's energy counter, so `energy` is
  /// coarse (measure::GpuEnergy::short_window); counted in the posted result's
  /// coarse_energy_windows.
  bool short_window = false;
  /// How much of the window, at its end, was extrapolated past the counter's last update
  /// (measure::GpuEnergy::extrapolated); counted in the posted result's
  /// extrapolated_energy_windows when positive.
  Seconds extrapolated{0.0};
};

class PipelineFrequencyOptimizer {
 public:
  /// Errors: kInvalidArgument (a placement out of range, world_size ≠ dp·pp·tp, a malformed
  /// server_url, no share_job_id for world_size > 1, a GPU without SM clocks to lock); the
  /// driver's (kNoPermission without privilege or ergd, ...); the server's (Client's mapping,
  /// kTimeout when a rank never asked and the job was evicted); share_job_id's.
  static Result<std::unique_ptr<PipelineFrequencyOptimizer>> create(std::shared_ptr<Gpu> gpu, RankPlacement placement,
                                                                    PipelineFrequencyOptions options);
  /// reset_clocks(); errors are dropped.
  ~PipelineFrequencyOptimizer();
  PipelineFrequencyOptimizer(const PipelineFrequencyOptimizer&) = delete;
  PipelineFrequencyOptimizer& operator=(const PipelineFrequencyOptimizer&) = delete;

  /// kAlreadyExists if the step already began. From the second step: GET /schedule (waits for
  /// every rank; kTimeout when the server evicted the job for a dead rank).
  Result<void> on_step_begin();
  /// kInvalidArgument unless the step began and every planned instruction ran; then POST /result.
  Result<void> on_step_end();
  /// kInvalidArgument for a name other than the next planned instruction's ("forward" expected,
  /// got "backward"), an exhausted schedule, or an instruction still open. Locks the SM clock to
  /// the planned MHz (skipped when it is locked there already) and starts measuring.
  Result<void> on_instruction_begin(std::string_view name);
  /// kInvalidArgument unless `name` is the open instruction.
  Result<void> on_instruction_end(std::string_view name);

  /// Resets the SM and memory locked clocks now; afterwards nothing is locked again. Idempotent.
  /// Tries both; returns the first error.
  Result<void> reset_clocks();

  [[nodiscard]] const std::string& job_id() const;
  /// This round's schedule.
  [[nodiscard]] const server::FrequencySchedule& schedule() const;
  /// The SM clocks registered (highest first).
  [[nodiscard]] const std::vector<int>& available_frequencies() const;
  /// The SM clock this optimizer last locked; nullopt before the first or after reset_clocks().
  [[nodiscard]] std::optional<Megahertz> current_frequency() const;
  /// The memory clock locked at start; nullopt if the GPU cannot lock it.
  [[nodiscard]] std::optional<Megahertz> memory_clock() const;
  /// The instructions of the current (or, after on_step_end, the last) step, in order.
  [[nodiscard]] const std::vector<InstructionFigures>& instructions() const;
  /// The results posted so far, in order (one per step).
  [[nodiscard]] const std::vector<server::ProfilingResult>& results() const;
  /// Steps ended so far.
  [[nodiscard]] int steps() const;

 private:
  struct Impl;
  explicit PipelineFrequencyOptimizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

/// "http://HOST:PORT[/]" → (HOST, PORT). kInvalidArgument names what is wrong.
Result<std::pair<std::string, int>> parse_server_url(std::string_view url);

}  // namespace erg::pipeline_frequency
