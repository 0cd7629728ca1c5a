#pragma once
/// The online scheduler (issue 20; Zeus lists online profiling as to do): a job needs no offline
/// profile. It profiles the pipeline from the ranks' own results during the first rounds, plans,
/// then serves the chosen plan.
///
/// Profiling rounds. The clocks to sweep are the ones every rank registered (highest first; every
/// `frequency_step`-th, or an explicit list). In profiling round k every (stage, instruction)
/// still being swept runs all its computations at clock k; one whose sweep has stopped runs at the
/// highest clock. Ranks post per-computation times and energies (ProfilingResult's breakdowns,
/// service.hpp: "forward" and "backward", one list per iteration of micro_batches values). Per
/// stage the ranks are aggregated as the 3-D point solution does — a micro-batch's time is the
/// slowest dp/tp rank's, its energy the sum over them — and the mean over the round's iterations
/// and micro-batches is the profile row (stage, instruction, clock k). A (stage, instruction)
/// stops after `stop_after_rises` consecutive clocks each costing more energy than the one above
/// (sweep_frequencies' rule, profiler.hpp), or when the clocks run out.
///
/// Planning. When every sweep has stopped the profile goes to plan_pipeline (planner.hpp) with the
/// job's pp_degree stages, `micro_batches`, `unit_s` and P2P power `p2p_power_w × dp × tp` (a
/// stage's energy is all its GPUs'), and the chosen plan is the frontier's **fastest** plan: the
/// cheapest plan whose stated iteration time is the all-maximum-frequency time (the rule the
/// offline acceptance test uses). Every rank of a stage then gets that stage's entry, every round.
///
/// Bound. With N clocks to sweep there are at most N profiling rounds (0 … N − 1), so the plan is
/// served from round N at the latest: the job converges within N + 1 rounds (`rounds_bound`).
///
/// Errors. While profiling, a result without both breakdowns for both instructions, with another
/// number of iterations than iter_time, another number of micro-batches, or a value that is not a
/// positive finite number is rejected (422 naming the field); a plan that cannot be made ends the
/// job (500, evicted) rather than serving a wrong one.
///
/// State (state_json, GET /state, the dump's scheduler.json): `phase` ("profiling" | "planned"),
/// `rounds_observed`, `rounds_bound`, `frequencies_mhz` (the sweep's clocks), per (stage,
/// instruction) the clocks measured and whether its sweep stopped, the profile rows so far, and
/// once planned `plan`: `index`, `plans` (frontier size), `time_s`, `energy_j`, `cost_j`,
/// `planned_at_round`, `frequencies` (per stage, `[["forward", MHz], …]`).

#include <memory>
#include <vector>

#include "erg/core/result.hpp"
#include "erg/optimizers/pipeline_frequency/server/service.hpp"

namespace erg::pipeline_frequency::server {

/// kInvalidArgument for settings no job could use (micro_batches < 1, unit ≤ 0, negative power,
/// frequency_step < 1, stop_after_rises < 0).
Result<void> check_online(const OnlineOptions& options, const JobInfo& job);

/// The scheduler for a job whose ranks (indexed by rank) have all registered. kInvalidArgument if
/// the ranks share no clock or a listed clock is not available on every rank.
Result<std::unique_ptr<FrequencyScheduler>> make_online_scheduler(const OnlineOptions& options, const JobInfo& job,
                                                                  const std::vector<RankInfo>& ranks);

/// The clocks the online scheduler sweeps for these ranks, highest first (see above).
Result<std::vector<int>> online_frequencies(const OnlineOptions& options, const std::vector<RankInfo>& ranks);

}  // namespace erg::pipeline_frequency::server
