#pragma once
/// The faults a simulated GPU can be given, by name: one vocabulary for the C++ tests, the
/// Python package (erg.sim.Machine.inject_fault) and `erg simulate fault`, so every face is
/// tested against the same faults.

#include <array>
#include <optional>
#include <string_view>

#include "erg/core/result.hpp"
#include "erg/core/units.hpp"

namespace erg::sim {

class Machine;

enum class Fault {
  kCounterBackwards,  ///< "backwards": the energy counter steps back (seen on AMD), then counts on.
  kCounterReset,      ///< "reset": the counter restarts from 0 (a driver reload), then counts on.
  kOneError,          ///< "error": the GPU's next call fails (NVML_ERROR_UNKNOWN).
  kThreeErrors,       ///< "errors3": its next three calls fail.
  kTimeout,           ///< "timeout": every call times out (NVML_ERROR_TIMEOUT) until cleared.
  kLost,              ///< "lost": the GPU fell off the bus (NVML_ERROR_GPU_IS_LOST) until found.
};

inline constexpr std::array<Fault, 6> kAllFaults = {Fault::kCounterBackwards, Fault::kCounterReset, Fault::kOneError,
                                                    Fault::kThreeErrors,      Fault::kTimeout,      Fault::kLost};

std::string_view fault_name(Fault fault);
std::optional<Fault> parse_fault(std::string_view name);
/// "backwards, reset, error, errors3, timeout, lost".
std::string_view fault_names();

/// How far "backwards" steps the counter back by default.
inline constexpr double kDefaultBackwardsJ = 200.0;

/// Gives simulated GPU `gpu` the fault. `backwards` is the step of kCounterBackwards.
Result<void> inject_fault(Machine& machine, unsigned gpu, Fault fault, Joules backwards = Joules(kDefaultBackwardsJ));
/// Ends every fault of the GPU (errors, timeout, lost); a counter step or reset stays done.
Result<void> clear_faults(Machine& machine, unsigned gpu);

}  // namespace erg::sim
