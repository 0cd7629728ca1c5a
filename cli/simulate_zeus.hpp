#pragma once
// What `erg simulate zeus` and `erg bso simulate` share: the traces they read and the JSON of
// one simulated (GPU, workload) pair.

#include <nlohmann/json.hpp>
#include <string>

#include "erg/optimizers/zeus_sim/simulator.hpp"
#include "erg/optimizers/zeus_sim/trace.hpp"

namespace erg::cli {

/// The traces in `trace_dir`, or erg's own copy when it is empty. Throws CliError (usage for a
/// missing directory, failure for a malformed trace).
zeus_sim::Traces load_zeus_traces(const std::string& trace_dir);

/// One pair as `erg simulate zeus --json` prints it (baseline, erg, improvement_pct, converged,
/// optimum, converged_gap_pct, ...).
nlohmann::json zeus_pair_json(const zeus_sim::PairResult& pair);

}  // namespace erg::cli
