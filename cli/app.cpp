#include "app.hpp"

#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "erg/devices/devices.hpp"
#include "erg/sim/machine.hpp"

#ifndef ERG_VERSION
#define ERG_VERSION "0.0.0"
#endif

namespace erg::cli {

Context::Context() = default;
Context::~Context() = default;

devices::DeviceOptions Context::device_options() const {
  devices::DeviceOptions o;
  o.simulate = simulate;
  return o;
}

Result<void> Context::setup_simulation() {
  if (machine) return ok();
  auto m = devices::open_machine(device_options());
  if (!m) return fail(m.error());
  machine = std::move(*m);
  return ok();
}

Result<Inventory> Context::discover(const std::vector<unsigned>& gpus, const std::vector<unsigned>& cpus) {
  auto o = device_options();
  if (!gpus.empty()) o.gpu_indices = gpus;
  if (!cpus.empty()) o.cpu_indices = cpus;
  auto opened = devices::open_devices(o);
  if (!opened) return fail(opened.error());
  machine = opened->machine;
  return std::move(opened->inventory);
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
