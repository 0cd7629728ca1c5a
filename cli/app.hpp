#pragma once
/// The `erg` command: global options and the subcommands, one file each. `main` only calls run().

#include <CLI/CLI.hpp>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "erg/core/discovery.hpp"
#include "erg/core/result.hpp"

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
  std::string simulate;  ///< --simulate SPEC (or ERG_SIMULATE).
  int verbosity = 0;
  int exit_code = 0;                      ///< Set by the subcommand that ran.
  std::unique_ptr<sim::Machine> machine;  ///< The simulated machine, when simulating.

  Context();
  ~Context();
  /// Creates or attaches the simulated machine if asked to (--simulate, ERG_SIMULATE).
  Result<void> setup_simulation();
  /// setup_simulation(), then discovers every device.
  Result<Inventory> discover();
};

/// An error that `run` turns into "erg: error: <message>" and `exit_code`.
struct CliError {
  int exit_code;
  std::string message;
};

/// Registers `erg devices`.
void add_devices_command(CLI::App& app, Context& ctx);
/// Registers `erg run`.
void add_run_command(CLI::App& app, Context& ctx);
/// Registers `erg energy` and `erg power`.
void add_energy_command(CLI::App& app, Context& ctx);
void add_power_command(CLI::App& app, Context& ctx);
/// Registers `erg simulate`.
void add_simulate_command(CLI::App& app, Context& ctx);

/// Parses argv and runs the chosen subcommand. Never throws.
int run(int argc, char** argv);

}  // namespace erg::cli
