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

namespace {
CLI::Validator number_check(bool zero_allowed) {
  return CLI::Validator(
      [zero_allowed](std::string& text) -> std::string {
        double v = 0;
        try {
          std::size_t used = 0;
          v = std::stod(text, &used);
          if (used != text.size()) return "'" + text + "' is not a number";
        } catch (const std::exception&) {
          return "'" + text + "' is not a number";
        }
        if (zero_allowed ? !(v >= 0) : !(v > 0))
          return std::string(zero_allowed ? "must be 0 or more" : "must be greater than 0") + " (got " + text + ")";
        return {};
      },
      zero_allowed ? "NUMBER >= 0" : "NUMBER > 0");
}
}  // namespace

CLI::Validator positive_number() { return number_check(false); }

void add_connection_options(CLI::App& command, http_guard::Limits& limits) {
  command
      .add_option("--max-connections", limits.max_connections,
                  "Open connections served at once, each on its own thread (default " +
                      std::to_string(limits.max_connections) + ")")
      ->check(CLI::Range(std::size_t{2}, std::size_t{100000}));
  command
      .add_option("--max-per-peer", limits.max_per_peer,
                  "Open connections of one peer: a local user over loopback, else a source address (default " +
                      std::to_string(limits.max_per_peer) + "); its longest-idle one is closed for a new one")
      ->check(CLI::Range(std::size_t{1}, std::size_t{100000}));
  command
      .add_option_function<double>(
          "--request-deadline",
          [&limits](double s) {
            limits.request_deadline = std::chrono::milliseconds(static_cast<long long>(s * 1000));
          },
          "Seconds a request may take to arrive, from its first byte to its body's last (default " +
              std::to_string(limits.request_deadline.count() / 1000) + ")")
      ->check(CLI::Range(0.1, 3600.0));
}
CLI::Validator non_negative_number() { return number_check(true); }

int run(int argc, char** argv) {
  Context ctx;
  CLI::App app{"erg: measure the energy of deep-learning work (GPU, CPU and DRAM)", "erg"};
  app.footer(
      "Devices: --simulate SPEC, else ERG_SIMULATE, else a simulated machine inherited through ERG_SIM_STATE, "
      "else the hardware; ERG_DAEMON_SOCK routes privileged calls through ergd; CUDA_VISIBLE_DEVICES applies.\n"
      "Exit codes: 0 success; 1 a runtime error (device, driver, file); 2 a bad command line, option value, "
      "spec, device index or environment variable. erg run exits with its command's status instead (126 not "
      "executable, 127 not found, 128+N killed by signal N).");
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
  add_optimize_command(app, ctx);
  add_exporter_command(app, ctx);
  add_bso_command(app, ctx);
  add_hetero_command(app, ctx);
  add_perseus_command(app, ctx);
  add_report_command(app, ctx);
  add_top_command(app, ctx);

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
