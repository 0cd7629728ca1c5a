#pragma once
/// The `erg` command: global options and the subcommands, one file each. `main` only calls run().

#include <CLI/CLI.hpp>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "erg/core/discovery.hpp"
#include "erg/core/result.hpp"
#include "erg/devices/devices.hpp"
#include "erg/optimizers/http_guard.hpp"

namespace erg::sim {
class Machine;
}

namespace erg::cli {

/// Exit codes shared by every subcommand.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;  ///< A runtime error (device, file, driver).
inline constexpr int kExitUsage = 2;    ///< Bad command line or configuration.

/// State shared by the subcommands of one invocation.
struct Context {
  std::optional<std::string> simulate;  ///< --simulate SPEC (ERG_SIMULATE is read by erg::devices).
  int verbosity = 0;
  int exit_code = 0;                      ///< Set by the subcommand that ran.
  std::shared_ptr<sim::Machine> machine;  ///< The simulated machine, when simulating.

  Context();
  ~Context();
  /// The options every subcommand opens devices with (erg::devices documents the precedence).
  [[nodiscard]] devices::DeviceOptions device_options() const;
  /// Creates or attaches the simulated machine if asked to (--simulate, ERG_SIMULATE, an
  /// inherited ERG_SIM_STATE); leaves `machine` null otherwise.
  Result<void> setup_simulation();
  /// Opens the devices (erg::devices::open_devices), checking the GPU and CPU indices the
  /// subcommand was given (empty: all): an unknown or repeated index is an error naming it.
  Result<Inventory> discover(const std::vector<unsigned>& gpus = {}, const std::vector<unsigned>& cpus = {});
};

/// Option checks whose messages name the value: "--duration: must be greater than 0 (got -1)".
CLI::Validator positive_number();
CLI::Validator non_negative_number();

/// The connection bounds of a server command (`erg bso serve`, `erg perseus serve`, `erg
/// exporter`): --max-connections, --max-per-peer, --request-deadline (docs/security.md).
void add_connection_options(CLI::App& command, http_guard::Limits& limits);

/// An error that `run` turns into "erg: error: <message>" and `exit_code`.
struct CliError {
  int exit_code;
  std::string message;
};

/// Registers `erg bso` (the batch-size optimizer server).
void add_bso_command(CLI::App& app, Context& ctx);
/// Registers `erg bso simulate` under `erg bso` (bso_simulate.cpp).
void add_bso_simulate_command(CLI::App& bso, Context& ctx);
/// Registers `erg devices`.
void add_devices_command(CLI::App& app, Context& ctx);
/// Registers `erg run`.
void add_run_command(CLI::App& app, Context& ctx);
/// Registers `erg energy` and `erg power`.
void add_energy_command(CLI::App& app, Context& ctx);
void add_power_command(CLI::App& app, Context& ctx);
/// Registers `erg simulate`.
void add_simulate_command(CLI::App& app, Context& ctx);
/// Registers `erg simulate zeus` under `erg simulate` (simulate_zeus.cpp).
void add_simulate_zeus_command(CLI::App& simulate, Context& ctx);

/// Registers `erg optimize` (power-limit).
void add_optimize_command(CLI::App& app, Context& ctx);

/// Registers `erg hetero` (heterogeneous GPUs: plan, profile; hetero.cpp).
void add_hetero_command(CLI::App& app, Context& ctx);

/// Registers `erg exporter` (the Prometheus pull exporter; exporter.cpp).
void add_exporter_command(CLI::App& app, Context& ctx);

/// Registers `erg perseus` (pipeline-frequency planning; perseus.cpp).
void add_perseus_command(CLI::App& app, Context& ctx);

/// Registers `erg report` (report.cpp).
void add_report_command(CLI::App& app, Context& ctx);

/// Registers `erg top` (live per-process GPU power and energy; top.cpp).
void add_top_command(CLI::App& app, Context& ctx);

/// Parses argv and runs the chosen subcommand. Never throws.
int run(int argc, char** argv);

}  // namespace erg::cli
