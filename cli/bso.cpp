// `erg bso serve`: the batch-size optimizer server (Zeus's REST API) over SQLite or PostgreSQL.
//
//   erg bso serve --db sqlite:///var/lib/erg/bso.db [--listen 127.0.0.1:8000] [--trial-timeout S] [--json]
//   erg bso simulate ... (bso_simulate.cpp)

#include <chrono>
#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>

#include "app.hpp"
#include "erg/optimizers/batch_size/server/http_server.hpp"
#include "erg/optimizers/batch_size/server/service.hpp"
#include "erg/optimizers/batch_size/server/store.hpp"
#include "signals.hpp"

namespace erg::cli {

void add_bso_command(CLI::App& app, Context& ctx) {
  auto* bso = app.add_subcommand("bso", "The batch-size optimizer server and its tools");
  bso->require_subcommand(1);
  auto* serve = bso->add_subcommand("serve", "Serve Zeus's batch-size optimizer REST API over a database");
  struct Opts {
    std::string db;
    std::string listen = "127.0.0.1:8000";
    bool json = false;
    long long trial_timeout_s = erg::batch_size::server::kDefaultTrialTimeout.count();
    erg::http_guard::Limits limits;
    bool allow_anonymous_writes = false;
  };
  auto opts = std::make_shared<Opts>();
  serve->add_option("--db", opts->db, "sqlite:///path.db or postgresql://user@host:port/dbname")->required();
  serve->add_option("--listen", opts->listen, "HOST:PORT (default 127.0.0.1:8000; port 0 picks a free one)");
  serve
      ->add_option("--trial-timeout", opts->trial_timeout_s,
                   "Seconds a dispatched trial may go without a report before it is marked Failed "
                   "(default 86400, a day; 0 never)")
      ->check(CLI::NonNegativeNumber);
  add_connection_options(*serve, opts->limits);
  serve->add_flag("--allow-anonymous-writes", opts->allow_anonymous_writes,
                  "Let any peer write any job, as Zeus's server does (for Zeus's clients on other hosts, which send "
                  "no secret); by default a job is written by root, the local user that registered it, or a request "
                  "with its secret (X-Erg-Job-Token). See docs/security.md");
  serve->add_flag("--json", opts->json, "Print where it serves as one JSON line on stdout once listening");
  serve->footer("See docs/bso-server.md.");
  serve->callback([&ctx, opts] {
    namespace srv = erg::batch_size::server;
    const auto colon = opts->listen.rfind(':');
    srv::HttpOptions http;
    http.limits = opts->limits;
    try {
      if (colon == std::string::npos) throw std::invalid_argument("no port");
      http.host = opts->listen.substr(0, colon);
      std::size_t used = 0;
      const std::string port = opts->listen.substr(colon + 1);
      http.port = std::stoi(port, &used);
      if (used != port.size() || http.port < 0 || http.port > 65535) throw std::invalid_argument("port");
    } catch (const std::exception&) {
      throw CliError{kExitUsage, "--listen: expected HOST:PORT (got " + opts->listen + ")"};
    }
    StopSignals signals;  // before the server's threads start, so they never take SIGINT/SIGTERM
    auto store = srv::open_store(opts->db);
    if (!store)
      throw CliError{store.error().code == ErrorCode::kInvalidArgument ? kExitUsage : kExitFailure,
                     "--db: " + store.error().message};
    srv::ServiceOptions service_options;
    service_options.trial_timeout = std::chrono::seconds(opts->trial_timeout_s);
    service_options.allow_anonymous_writes = opts->allow_anonymous_writes;
    if (opts->allow_anonymous_writes)
      std::cerr << "erg bso: WARNING: --allow-anonymous-writes: every peer that reaches " << opts->listen
                << " may change or delete every job\n";
    srv::Service service(**store, service_options);
    auto server = srv::HttpServer::bind(service, http);
    if (!server) throw CliError{kExitFailure, server.error().message};
    std::thread serving([&] { (*server)->run(); });
    (*server)->wait_until_ready();
    if (opts->json)
      std::cout << nlohmann::json{{"url", "http://" + http.host + ":" + std::to_string((*server)->port())},
                                  {"port", (*server)->port()},
                                  {"schema_version", (*store)->schema_version()}}
                       .dump()
                << std::endl;
    else
      std::cerr << "erg bso: serving on http://" << http.host << ":" << (*server)->port() << "\n";
    signals.wait(std::nullopt);
    (*server)->stop();
    serving.join();
    ctx.exit_code = kExitOk;
  });
  add_bso_simulate_command(*bso, ctx);
}

}  // namespace erg::cli
