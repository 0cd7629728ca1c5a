#pragma once
/// The one place a program turns options and environment into devices: real hardware, the
/// simulated machine, or hardware whose privileged calls go through ergd. The `erg` command, the
/// Python package, `ergd` and the benchmarks all call open_devices() and nothing else.
///
/// Precedence (first match wins), the same for every face:
///  1. `DeviceOptions::simulate` (`--simulate SPEC`): simulate SPEC. An empty SPEC is an error.
///  2. `ERG_SIMULATE=SPEC` in the environment: simulate SPEC. An empty value counts as unset.
///  3. `ERG_SIM_STATE` alone (a child whose parent simulates and cleared ERG_SIMULATE): attach to
///     that machine. Without it, the hardware.
/// A SPEC is simulated by attaching to the machine in ERG_SIM_STATE when that machine was made
/// from the same SPEC (a child of `erg --simulate SPEC run`, or an ergd started under it, sees
/// its parent's hardware); otherwise a new machine is created from SPEC and exported
/// (ERG_SIM_STATE, ERG_SIMULATE, ERG_NVML_LIBRARY, ERG_AMDSMI_LIBRARY, ERG_POWERCAP_ROOT,
/// ERG_HWMON_ROOT) to this process's children.
/// So `ERG_SIMULATE=1xH100` in a child of a 4xA100 simulation gets an H100, never the A100s. A
/// state that cannot be attached (its machine is gone) is ignored when a SPEC is given and an
/// error naming it when it is all there is.
///
/// Then, when `DeviceOptions::daemon` allows it and ERG_DAEMON_SOCK / ZEUSD_SOCK_PATH (or
/// ERG_DAEMON_HOST_PORT / ZEUSD_HOST_PORT) names an ergd, GPUs read locally and set through ergd,
/// and CPUs are read through ergd when local RAPL is unreadable (see client::with_daemon).
/// CUDA_VISIBLE_DEVICES orders and filters NVIDIA GPUs as frameworks do; HIP_VISIBLE_DEVICES
/// (else CUDA_VISIBLE_DEVICES, as ROCm reads it) does the same for AMD GPUs, which follow the
/// NVIDIA ones in erg index order on a mixed machine.

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "erg/core/discovery.hpp"
#include "erg/core/result.hpp"

namespace erg::sim {
class Machine;
}

namespace erg::devices {

/// Whether ergd is used for privileged calls.
enum class DaemonUse {
  kFromEnvironment,  ///< When ERG_DAEMON_SOCK, ZEUSD_SOCK_PATH or a *_HOST_PORT names one.
  kNever,            ///< Local devices only (ergd itself).
};

struct DeviceOptions {
  /// `--simulate SPEC`: nullopt when not given (ERG_SIMULATE then applies); an empty string is
  /// kInvalidArgument.
  std::optional<std::string> simulate;
  DaemonUse daemon = DaemonUse::kFromEnvironment;
  /// Erg GPU / CPU indices the caller will use (e.g. `--gpus 0,2`), checked against what was
  /// found: an index that is not there is kNotFound naming it and the indices there are; a
  /// repeated one is kInvalidArgument. nullopt: all.
  std::optional<std::vector<unsigned>> gpu_indices;
  std::optional<std::vector<unsigned>> cpu_indices;
  /// Where the devices come from, for tests: nullopt reads CUDA_VISIBLE_DEVICES itself.
  std::optional<std::optional<std::string>> cuda_visible_devices;
};

/// How the devices were opened (for output and logs).
enum class Source { kHardware, kSimulatedNew, kSimulatedAttached };

struct Devices {
  Inventory inventory;  ///< inventory.simulated is true exactly when `machine` is set.
  /// The simulated machine, when simulating (kept alive as long as the devices are used: a
  /// machine this call created is removed when the last reference goes).
  std::shared_ptr<sim::Machine> machine;
  Source source = Source::kHardware;
  /// When simulating: the machine's spec and its state file (what another process sets as
  /// ERG_SIMULATE and ERG_SIM_STATE to share it); empty otherwise.
  std::string spec;
  std::string state_file;
  /// The indices checked from DeviceOptions (all indices when none were given).
  std::vector<unsigned> gpu_indices;
  std::vector<unsigned> cpu_indices;
};

/// Opens the devices of this process. Fails on bad configuration only (an empty or malformed
/// spec, a malformed CUDA_VISIBLE_DEVICES or *_HOST_PORT, an unknown index, a state file that
/// cannot be attached); missing hardware is reported in inventory.unavailable. Sets the
/// simulator's variables in the environment when it creates a machine: call it before starting
/// threads that read the environment.
Result<Devices> open_devices(const DeviceOptions& options = {});

/// Only the simulation part of open_devices(): the machine the options and environment name
/// (nullptr when not simulating), exported for children. For `erg simulate`, which drives the
/// machine without measuring it.
Result<std::shared_ptr<sim::Machine>> open_machine(const DeviceOptions& options = {});

/// "hardware", "simulated (new machine)", "simulated (attached)".
std::string_view to_string(Source source);

}  // namespace erg::devices
