// `erg exporter`: the Prometheus pull exporter of this machine's devices, the same collector
// ergd serves on /metrics (exporters/prometheus), over HTTP at --listen until Ctrl-C or SIGTERM.
// Devices are read when Prometheus scrapes; nothing samples in between.

#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>

#include "app.hpp"
#include "erg/exporters/prometheus/collector.hpp"
#include "erg/optimizers/guarded_server.hpp"
#include "signals.hpp"

namespace erg::cli {

void add_exporter_command(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand("exporter", "Serve Prometheus /metrics for this machine's GPUs and CPUs");
  struct Opts {
    std::string listen = "127.0.0.1:9400";
    std::vector<std::string> labels;
    std::optional<std::string> node;
    std::vector<unsigned> gpus;
    bool once = false;
    bool json = false;
    bool processes = false;
    bool no_processes = false;
    std::size_t max_process_series = 256;
    double idle_power = 0.0;
    double idle_error = 0.0;
    std::string proc_root = "/proc";
    http_guard::Limits limits;
  };
  auto opts = std::make_shared<Opts>();
  cmd->add_option("--listen", opts->listen,
                  "HOST:PORT to serve /metrics on (default 127.0.0.1:9400; port 0 picks a free one)");
  cmd->add_option("--label", opts->labels, "An extra label NAME=VALUE on every series (repeatable)");
  cmd->add_option("--node", opts->node, "The node label on every series (default: the host name; empty: none)");
  cmd->add_option("--gpus", opts->gpus, "GPUs to export (erg indices); default all")->delimiter(',');
  cmd->add_flag("--once", opts->once, "Print one scrape's exposition to stdout and exit (no server)");
  cmd->add_flag("--json", opts->json, "Print where it serves as one JSON line on stdout once listening");
  cmd->add_flag("--process-metrics", opts->processes,
                "Per-process series (erg_gpu_process_*: pid, command, container, pod, energy of every user's GPU "
                "processes) for every peer that can connect: off by default (docs/security.md)");
  cmd->add_flag("--no-process-metrics", opts->no_processes, "No per-process series (the default)");
  cmd->add_option("--max-process-series", opts->max_process_series,
                  "At most this many processes get series of their own; later ones are summed into pid=\"other\" "
                  "(default 256)");
  cmd->add_option("--idle-power", opts->idle_power,
                  "The GPUs' idle power in W, calibrated while they ran nothing: not charged to processes (default 0)")
      ->check(non_negative_number());
  cmd->add_option("--idle-error", opts->idle_error, "How far --idle-power may be off, W (default 0)")
      ->check(non_negative_number());
  cmd->add_option("--proc-root", opts->proc_root,
                  "Where processes' comm and cgroup are read (default /proc; /host/proc in a container)");
  add_connection_options(*cmd, opts->limits);
  cmd->footer(
      "Energy counters (erg_*_energy_joules_total) count joules from the exporter's first read of each device and "
      "never decrease (RAPL wraps and GPU counter resets are bridged): use rate() and increase(). "
      "See docs/prometheus.md.");

  cmd->callback([&ctx, opts] {
    prom::CollectorOptions o;
    for (const auto& l : opts->labels) {
      auto kv = prom::parse_label(l);
      if (!kv) throw CliError{kExitUsage, "--label: " + kv.error().message};
      if (!o.labels.insert(*kv).second) throw CliError{kExitUsage, "--label: '" + kv->first + "' given twice"};
    }
    StopSignals signals;
    auto inventory = ctx.discover(opts->gpus);
    if (!inventory) throw CliError{kExitUsage, inventory.error().message};
    std::vector<std::shared_ptr<Gpu>> gpus;
    if (opts->gpus.empty())
      gpus = inventory->gpus;
    else
      for (unsigned g : opts->gpus) gpus.push_back(inventory->gpus.at(g));
    if (gpus.empty() && inventory->cpus.empty() && inventory->socs.empty())
      throw CliError{kExitFailure, "no GPU, CPU or SoC energy source to export (see erg devices)"};
    o.node = opts->node.value_or(prom::host_name());
    o.exporter = "erg-exporter";
    o.simulated = inventory->simulated;
    o.socs = inventory->socs;
    if (opts->processes && opts->no_processes)
      throw CliError{kExitUsage, "--process-metrics and --no-process-metrics contradict each other"};
    o.process_metrics = opts->processes;
    o.max_process_series = opts->max_process_series;
    o.process_idle_power_w = opts->idle_power;
    o.process_idle_error_w = opts->idle_error;
    o.proc_root = opts->proc_root;
    const std::size_t n_gpus = gpus.size();
    const std::size_t n_cpus = inventory->cpus.size();
    auto collector = prom::Collector::create(std::move(gpus), inventory->cpus, o);
    if (!collector) throw CliError{kExitUsage, collector.error().message};
    if (opts->once) {
      std::cout << (*collector)->scrape() << std::flush;
      return;
    }
    // Served by a GuardedServer (docs/security.md): a connection per thread with caps per peer and
    // a whole-request deadline, so one local user's slow or idle connections cannot stop the
    // scrapes (prometheus-cpp's Exposer serves on 2 worker threads and has neither).
    const auto colon = opts->listen.rfind(':');
    std::string host = colon == std::string::npos ? std::string() : opts->listen.substr(0, colon);
    int requested = -1;
    try {
      std::size_t used = 0;
      const std::string port_text = colon == std::string::npos ? "" : opts->listen.substr(colon + 1);
      requested = std::stoi(port_text, &used);
      if (used != port_text.size() || requested < 0 || requested > 65535) requested = -1;
    } catch (const std::exception&) {
      requested = -1;
    }
    if (host.empty() || requested < 0)
      throw CliError{kExitUsage, "--listen " + opts->listen + ": expected HOST:PORT (port 0-65535)"};
    const std::string bind_host =
        host.size() > 2 && host.front() == '[' && host.back() == ']' ? host.substr(1, host.size() - 2) : host;
    http_guard::GuardedServer server(opts->limits);
    const prom::Collector& scraped = **collector;
    server.Get("/metrics", [&scraped](const httplib::Request&, httplib::Response& res) {
      res.set_content(scraped.scrape(), "text/plain; version=0.0.4; charset=utf-8");
    });
    const int port = server.bind(bind_host, requested);
    if (port < 0) throw CliError{kExitFailure, "--listen " + opts->listen + ": cannot serve there"};
    std::thread serving([&server] { server.listen_after_bind(); });
    if (opts->json) {
      nlohmann::json j{{"listen", host + ":" + std::to_string(port)},
                       {"port", port},
                       {"path", "/metrics"},
                       {"gpus", n_gpus},
                       {"cpus", n_cpus},
                       {"socs", inventory->socs.size()},
                       {"simulated", inventory->simulated}};
      std::cout << j.dump() << std::endl;
    }
    if (o.process_metrics)
      std::cerr << "erg exporter: WARNING: --process-metrics: every peer that can connect to " << host << ":" << port
                << " sees every user's GPU processes (pid, command, container, pod, energy); the exporter cannot tell "
                   "scrapers apart (ergd's /attribution shows each user their own)\n";
    std::cerr << "erg exporter: serving http://" << host << ":" << port << "/metrics (" << n_gpus << " GPU(s), "
              << n_cpus << " CPU package(s), " << inventory->socs.size() << " SoC(s)"
              << (inventory->simulated ? ", simulated machine" : "") << "); Ctrl-C stops\n";
    signals.wait(std::nullopt);
    server.shut();
    serving.join();
  });
}

}  // namespace erg::cli
