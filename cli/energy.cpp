// `erg energy`: measures every device until Ctrl-C (or --duration), then prints the summary
// (parity with `python -m zeus.monitor energy`).

#include <iostream>

#include "app.hpp"
#include "erg/measure/energy_monitor.hpp"
#include "signals.hpp"
#include "summary.hpp"

namespace erg::cli {

void add_energy_command(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand("energy", "Measure energy until Ctrl-C, then print the summary");
  struct Opts {
    bool json = false;
    double duration = 0;
    std::vector<unsigned> gpus;
    std::vector<unsigned> cpus;
    bool no_settle = false;
  };
  auto opts = std::make_shared<Opts>();
  cmd->add_flag("--json", opts->json, "Print the result as one JSON object on stdout");
  cmd->add_option("--duration", opts->duration, "Stop after this many seconds instead of waiting for Ctrl-C")
      ->check(positive_number());
  cmd->add_option("--gpus", opts->gpus, "GPUs to measure (erg indices); default all")->delimiter(',');
  cmd->add_option("--cpus", opts->cpus, "CPU packages to measure; default all available")->delimiter(',');
  cmd->add_flag("--no-settle", opts->no_settle,
                "Stop at once instead of waiting (at most one counter period, ~0.1 s) for the GPU counters' "
                "next update; the last part is then extrapolated (extrapolated_s says how much)");
  cmd->callback([&ctx, opts] {
    StopSignals signals;  // before any thread starts
    auto inventory = ctx.discover(opts->gpus, opts->cpus);
    if (!inventory) throw CliError{kExitUsage, inventory.error().message};
    auto monitor = make_energy_monitor(*inventory, opts->gpus, opts->cpus, !opts->no_settle);
    const std::string window = "erg.energy";
    if (auto r = monitor->begin_window(window, false); !r) throw CliError{kExitFailure, r.error().message};
    if (!opts->json) std::cerr << "erg: measuring; press Ctrl-C to stop\n";
    std::optional<std::chrono::nanoseconds> timeout;
    if (opts->duration > 0)
      timeout = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::duration<double>(opts->duration));
    signals.wait(timeout);
    auto m = monitor->end_window(window, false);
    if (!m) throw CliError{kExitFailure, m.error().message};
    if (opts->json) {
      std::cout << measurement_json(*m, *inventory).dump(2) << "\n";
    } else {
      std::cout << measurement_table(*m, *inventory);
    }
    std::cout.flush();
    ctx.exit_code = kExitOk;
  });
}

}  // namespace erg::cli
