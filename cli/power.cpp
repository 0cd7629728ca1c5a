// `erg power`: live power of every GPU (and CPU package/DRAM).
//   On a terminal: a table refreshing in place. Otherwise one line per sample: CSV (with a
//   header) or JSON Lines with --json. Ctrl-C (or --count) ends it and prints total time and
//   energy, integrated from the same domain that is shown.

#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "app.hpp"
#include "erg/measure/power_monitor.hpp"
#include "signals.hpp"

namespace erg::cli {
namespace {

struct Row {
  std::string device;
  std::optional<double> watts;
  std::optional<double> limit_w;
  std::optional<std::string> error;  ///< the device stopped being sampled: its error code
};

}  // namespace

void add_power_command(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand("power", "Show live power until Ctrl-C, then total time and energy");
  struct Opts {
    double interval = 1.0;
    std::string domain = "device_instant";
    bool json = false;
    long count = 0;
    std::vector<unsigned> gpus;
  };
  auto opts = std::make_shared<Opts>();
  cmd->add_option("--interval", opts->interval, "Seconds between samples (default 1)");
  cmd->add_option("--domain", opts->domain, "GPU power domain: device_instant, device_average or memory_average");
  cmd->add_flag("--json", opts->json, "JSON Lines instead of CSV when not on a terminal");
  cmd->add_option("--count", opts->count, "Stop after this many samples")->check(positive_number());
  cmd->add_option("--gpus", opts->gpus, "GPUs to show (erg indices); default all")->delimiter(',');

  cmd->callback([&ctx, opts] {
    if (!(opts->interval > 0)) throw CliError{kExitUsage, "--interval must be greater than 0"};
    auto domain = parse_power_domain(opts->domain);
    if (!domain) throw CliError{kExitUsage, domain.error().message};
    StopSignals signals;
    auto inventory = ctx.discover(opts->gpus);
    if (!inventory) throw CliError{kExitUsage, inventory.error().message};

    measure::PowerMonitorOptions po;
    if (!opts->gpus.empty()) po.gpu_indices = opts->gpus;
    // Sample at the display interval, but at least every 100 ms so the integrated energy
    // follows the counters' update period.
    auto interval =
        std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::duration<double>(opts->interval));
    po.period = std::min(interval, std::chrono::microseconds(100'000));
    po.domains = {*domain};
    if (inventory->gpus.empty() && inventory->cpus.empty())
      throw CliError{kExitFailure, "no GPU or CPU energy source to read (see erg devices)"};
    if (inventory->gpus.empty()) po.domains.clear();
    auto pm = measure::PowerMonitor::create(inventory->gpus, inventory->cpus, po);
    if (!pm) throw CliError{kExitUsage, pm.error().message};
    auto& monitor = **pm;

    const bool tty = ::isatty(STDOUT_FILENO) == 1;
    const auto t0 = SteadyClock::instance().now();
    std::vector<unsigned> gpus = monitor.gpu_indices();
    std::vector<unsigned> cpus;
    std::vector<bool> dram;
    for (auto& c : inventory->cpus) cpus.push_back(c->index()), dram.push_back(c->capabilities().dram);

    // A device the monitor stopped sampling (lost, or failing read after read): no value, its
    // error's code on every output, and one line on stderr naming it, the first time.
    std::set<std::string> reported;
    auto collect = [&] {
      std::vector<Row> rows;
      const auto stopped = monitor.errors();
      for (unsigned g : gpus) {
        Row r{"gpu" + std::to_string(g), std::nullopt, std::nullopt, std::nullopt};
        for (const auto& e : stopped)
          if (e.device == r.device) {
            r.error = std::string(to_string(e.error.code));
            if (reported.insert(r.device).second) std::cerr << "erg power: " << e.error.message << "\n";
          }
        if (!r.error) {
          if (auto p = monitor.gpu_power(g, *domain)) r.watts = p->value();
          if (auto l = inventory->gpus[g]->power_limit()) r.limit_w = Watts(*l).value();
        }
        rows.push_back(r);
      }
      // A device without a value yet (CPU power needs two energy readings) shows none: "-" on
      // a terminal, an empty CSV cell, null in JSON — never 0 W.
      for (std::size_t k = 0; k < cpus.size(); ++k) {
        const unsigned c = cpus[k];
        Row r{"cpu" + std::to_string(c), std::nullopt, std::nullopt, std::nullopt};
        if (auto p = monitor.cpu_power(c, measure::CpuDomain::kPackage)) r.watts = p->value();
        rows.push_back(r);
        if (!dram[k]) continue;
        Row d{"dram" + std::to_string(c), std::nullopt, std::nullopt, std::nullopt};
        if (auto p = monitor.cpu_power(c, measure::CpuDomain::kDram)) d.watts = p->value();
        rows.push_back(d);
      }
      return rows;
    };

    long samples = 0;
    std::size_t drawn_lines = 0;
    bool header_done = false;
    const auto step =
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::duration<double>(opts->interval));
    auto next = t0 + step;
    while (true) {
      auto now = SteadyClock::instance().now();
      if (signals.wait(next - now)) break;
      next += step;
      double t = std::chrono::duration<double>(SteadyClock::instance().now() - t0).count();
      auto rows = collect();
      ++samples;
      if (tty) {
        std::ostringstream out;
        if (drawn_lines > 0) out << "\x1b[" << drawn_lines << "F\x1b[J";  // back up and clear
        char buf[200];
        std::snprintf(buf, sizeof buf, "erg power  %.1f s  domain %s%s\n", t, opts->domain.c_str(),
                      inventory->simulated ? "  (SIMULATED)" : "");
        out << buf;
        std::snprintf(buf, sizeof buf, "%-8s %10s %10s\n", "DEVICE", "POWER W", "LIMIT W");
        out << buf;
        for (const auto& r : rows) {
          std::snprintf(buf, sizeof buf, "%-8s %10s %10s\n", r.device.c_str(),
                        r.error   ? r.error->c_str()
                        : r.watts ? (std::to_string(static_cast<long long>(*r.watts * 10 + 0.5) / 10) + "." +
                                     std::to_string(static_cast<long long>(*r.watts * 10 + 0.5) % 10))
                                        .c_str()
                                  : "-",
                        r.limit_w ? std::to_string(static_cast<long long>(*r.limit_w)).c_str() : "-");
          out << buf;
        }
        drawn_lines = 2 + rows.size();
        std::cout << out.str() << std::flush;
      } else if (opts->json) {
        nlohmann::json j;
        j["time_s"] = t;
        j["simulated"] = inventory->simulated;
        for (const auto& r : rows) {
          j[r.device + "_power_w"] = r.watts ? nlohmann::json(*r.watts) : nlohmann::json(nullptr);
          if (r.limit_w) j[r.device + "_limit_w"] = *r.limit_w;
          if (r.error) j[r.device + "_error"] = *r.error;
        }
        std::cout << j.dump() << "\n" << std::flush;
      } else {
        if (!header_done) {
          std::cout << "time_s";
          for (const auto& r : rows) std::cout << "," << r.device << "_power_w";
          std::cout << "\n";
          header_done = true;
        }
        char buf[64];
        std::snprintf(buf, sizeof buf, "%.3f", t);
        std::cout << buf;
        for (const auto& r : rows) {
          if (r.watts) {
            std::snprintf(buf, sizeof buf, ",%.3f", *r.watts);
            std::cout << buf;
          } else {
            std::cout << ",";
          }
        }
        std::cout << "\n" << std::flush;
      }
      if (opts->count > 0 && samples >= opts->count) break;
    }
    auto t1 = SteadyClock::instance().now();
    monitor.stop();
    double total_s = std::chrono::duration<double>(t1 - t0).count();
    double total_j = 0;
    std::ostringstream summary;
    char buf[200];
    std::vector<std::string> missing;
    for (unsigned g : gpus) {
      if (auto e = monitor.gpu_energy(g, *domain, t0, t1)) {
        total_j += e->value();
        std::snprintf(buf, sizeof buf, "  gpu%u: %.3f J\n", g, e->value());
      } else {
        // Never a partial figure passed off as the whole: the energy is unknown, and said so.
        missing.push_back("gpu" + std::to_string(g));
        std::snprintf(buf, sizeof buf, "  gpu%u: unknown (%s)\n", g, e.error().message.c_str());
      }
      summary << buf;
    }
    for (unsigned c : cpus) {
      if (auto e = monitor.cpu_energy(c, measure::CpuDomain::kPackage, t0, t1)) {
        total_j += e->value();
        std::snprintf(buf, sizeof buf, "  cpu%u: %.3f J\n", c, e->value());
        summary << buf;
      }
      if (auto e = monitor.cpu_energy(c, measure::CpuDomain::kDram, t0, t1)) {
        total_j += e->value();
        std::snprintf(buf, sizeof buf, "  dram%u: %.3f J\n", c, e->value());
        summary << buf;
      }
    }
    std::string without;
    for (const auto& d : missing) without += (without.empty() ? " without " : ", ") + d;
    std::snprintf(buf, sizeof buf, "erg power: total time %.3f s, total energy %.3f J%s (%s)%s\n", total_s, total_j,
                  without.c_str(), opts->domain.c_str(), inventory->simulated ? " (SIMULATED)" : "");
    std::cerr << buf << summary.str();
    ctx.exit_code = kExitOk;
  });
}

}  // namespace erg::cli
