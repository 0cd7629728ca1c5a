#pragma once
// Profiles of GPU types built from Zeus's NSDI'23 power traces (optimizers/zeus_sim/data), for
// the tests and the benchmark. A trace row gives time_per_epoch and average_power of one
// (workload, batch size, power limit); the step time is time_per_epoch · b / dataset_size with
// the training-set sizes below. Each type's max_power_limit_w is its largest traced limit; its
// idle power is the idle_w of erg's simulated SKU (sim/src/sku.cpp), an assumption: the traces
// hold no idle power.

#include <set>
#include <string>
#include <vector>

#include "erg/optimizers/hetero/profile.hpp"
#include "erg/optimizers/zeus_sim/trace.hpp"

namespace erg::hetero::testing {

/// A workload of the traces with the optimizer chosen for it.
struct TraceWorkload {
  std::string dataset, network, optimizer;
  double dataset_size = 0;  ///< Training samples per epoch.
};

/// The workloads traced on both GPUs (the optimizer: the first, alphabetically, on both).
std::vector<TraceWorkload> common_workloads(const zeus_sim::Traces& traces, const std::string& a, const std::string& b);

/// Batch sizes of `w` that both GPUs traced at every one of their limits.
std::set<int> common_batch_sizes(const zeus_sim::Traces& traces, const std::string& a, const std::string& b,
                                 const TraceWorkload& w);

/// The profile of `gpu` running `w` over `batch_sizes` (each must be complete on that GPU).
Profile trace_profile(const zeus_sim::Traces& traces, const std::string& gpu, const TraceWorkload& w,
                      const std::set<int>& batch_sizes);

}  // namespace erg::hetero::testing
