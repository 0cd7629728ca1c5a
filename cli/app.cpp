#include "app.hpp"

#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "erg/backends/discovery.hpp"
#ifdef ERG_WITH_DAEMON_CLIENT
#include "erg/client/discovery.hpp"
#endif
#include "erg/sim/machine.hpp"
#include "erg/sim/spec.hpp"

#ifndef ERG_VERSION
#define ERG_VERSION "0.0.0"
#endif

namespace erg::cli {

Context::Context() = default;
Context::~Context() = default;

namespace {

/// Points every hardware seam at the simulated machine. A child of a simulating erg (for
/// example the command under `erg run`) inherits ERG_SIM_STATE and attaches to the same
/// machine instead of creating a new one.
Result<void> setup_simulation_for(Context& ctx) {
  const char* env_spec = std::getenv("ERG_SIMULATE");
  if (ctx.simulate.empty() && env_spec != nullptr) ctx.simulate = env_spec;
  if (ctx.simulate.empty()) return ok();

  const char* state = std::getenv("ERG_SIM_STATE");
  if (state != nullptr && *state != '\0' && env_spec != nullptr && ctx.simulate == env_spec) {
    auto machine = sim::Machine::attach(state);
    if (!machine) return fail(machine.error());
    ctx.machine = std::move(*machine);
    return ok();
  }
  auto spec = sim::parse_spec(ctx.simulate);
  if (!spec) return fail(ErrorCode::kInvalidArgument, "invalid --simulate spec: " + spec.error().message);
  auto machine = sim::Machine::create_temp(*spec);
  if (!machine) return fail(machine.error());
  if (auto r = (*machine)->export_env(); !r) return r;
  ctx.machine = std::move(*machine);
  return ok();
}

}  // namespace

Result<void> Context::setup_simulation() {
  if (machine) return ok();
  return setup_simulation_for(*this);
}

Result<Inventory> Context::discover() {
  if (auto r = setup_simulation(); !r) return fail(r.error());
#ifdef ERG_WITH_DAEMON_CLIENT
  return client::discover();  // uses ergd when ERG_DAEMON_SOCK / ZEUSD_SOCK_PATH is set
#else
  return backends::discover();
#endif
}

int run(int argc, char** argv) {
  Context ctx;
  CLI::App app{"erg: measure and optimize the energy of deep-learning work (GPU, CPU and DRAM)", "erg"};
  app.set_version_flag("--version", std::string("erg ") + ERG_VERSION);
  app.add_option("--simulate", ctx.simulate,
                 "Run on a simulated machine, e.g. 4xA100 or 2xH100,1xV100,cpus=2 or a JSON file "
                 "(also ERG_SIMULATE)");
  app.add_flag("-v,--verbose", ctx.verbosity, "More output (repeatable)");
  app.require_subcommand(1);
  add_devices_command(app, ctx);
  add_run_command(app, ctx);
  add_energy_command(app, ctx);
  add_power_command(app, ctx);
  add_simulate_command(app, ctx);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::string what = e.what();
    if (app.get_subcommands().empty() && !app.remaining().empty())
      what = "unknown command '" + app.remaining().front() + "'";
    if (what.find('\n') != std::string::npos) what = what.substr(0, what.find('\n'));
    std::cerr << "erg: error: " << what << " (see erg --help)\n";
    return kExitUsage;
  } catch (const CliError& e) {
    std::cerr << "erg: error: " << e.message << "\n";
    return e.exit_code;
  } catch (const std::exception& e) {
    std::cerr << "erg: error: " << e.what() << "\n";
    return kExitFailure;
  }
  return ctx.exit_code;
}

}  // namespace erg::cli
