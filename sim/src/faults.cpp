#include "erg/sim/faults.hpp"

#include <string>

#include "erg/sim/machine.hpp"
#include "erg/sim/sim_call.hpp"

namespace erg::sim {
namespace {
// NVML return codes (vendor-abi.md): what the simulated driver answers while a fault lasts.
constexpr int kNvmlErrorTimeout = 10;
constexpr int kNvmlErrorUnknown = 999;
}  // namespace

std::string_view fault_name(Fault fault) {
  switch (fault) {
    case Fault::kCounterBackwards: return "backwards";
    case Fault::kCounterReset: return "reset";
    case Fault::kOneError: return "error";
    case Fault::kThreeErrors: return "errors3";
    case Fault::kTimeout: return "timeout";
    case Fault::kLost: return "lost";
  }
  return "unknown";
}

std::optional<Fault> parse_fault(std::string_view name) {
  for (Fault f : kAllFaults)
    if (fault_name(f) == name) return f;
  return std::nullopt;
}

std::string_view fault_names() { return "backwards, reset, error, errors3, timeout, lost"; }

Result<void> inject_fault(Machine& machine, unsigned gpu, Fault fault, Joules backwards) {
  switch (fault) {
    case Fault::kCounterBackwards: return machine.energy_counter_backwards(gpu, backwards);
    case Fault::kCounterReset: return machine.reset_energy_counter(gpu);
    case Fault::kOneError: return machine.inject_error(gpu, SimCall::kAny, kNvmlErrorUnknown, 1);
    case Fault::kThreeErrors: return machine.inject_error(gpu, SimCall::kAny, kNvmlErrorUnknown, 3);
    case Fault::kTimeout: return machine.inject_error(gpu, SimCall::kAny, kNvmlErrorTimeout, -1);
    case Fault::kLost: return machine.set_lost(gpu, true);
  }
  return fail(ErrorCode::kInvalidArgument, "unknown fault");
}

Result<void> clear_faults(Machine& machine, unsigned gpu) {
  if (auto r = machine.clear_faults(gpu); !r) return r;
  return machine.set_lost(gpu, false);
}

}  // namespace erg::sim
