// `erg bso simulate`: one workload of Zeus's NSDI'23 traces replayed through a live batch-size
// optimizer server, end to end (client, HTTP, server, database): the server this command starts
// on 127.0.0.1 over a SQLite database (a temporary one, or --db), or the one at --server.
//
//   erg bso simulate --gpu v100 --workload librispeech [--eta 0.5] [--beta 2] [--seed 1]
//                    [--recurrences N] [--trace-dir DIR] [--db URL | --server URL] [--json]

#include <stdlib.h>

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>

#include "app.hpp"
#include "erg/optimizers/batch_size/client/server_agent.hpp"
#include "erg/optimizers/batch_size/server/http_server.hpp"
#include "erg/optimizers/batch_size/server/service.hpp"
#include "erg/optimizers/batch_size/server/store.hpp"
#include "simulate_zeus.hpp"

namespace erg::cli {
namespace {

namespace srv = erg::batch_size::server;
namespace bsc = erg::batch_size::client;
using nlohmann::json;

struct BsoSimOpts {
  std::string gpu;
  std::string workload;
  double eta = 0.5;
  double beta = 2.0;
  std::uint64_t seed = 1;
  int recurrences = 0;  // 0: the default, 2·|B|·|P|
  std::string trace_dir;
  std::string db;
  std::string server;
  std::string job_id_prefix = "erg-bso-simulate";
  bool json = false;
};

/// A temporary directory removed when the command ends.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "erg-bso-simulate-XXXXXX").string();
    if (!mkdtemp(tmpl.data())) throw CliError{kExitFailure, "cannot create a temporary directory"};
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  [[nodiscard]] const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

/// The server this command runs: `store` served on 127.0.0.1 at a free port until destroyed.
class LocalServer {
 public:
  explicit LocalServer(srv::Store& store) : service_(store) {
    auto bound = srv::HttpServer::bind(service_, srv::HttpOptions{});
    if (!bound) throw CliError{kExitFailure, bound.error().message};
    http_ = std::move(*bound);
    thread_ = std::thread([this] { http_->run(); });
    http_->wait_until_ready();
  }
  ~LocalServer() {
    http_->stop();
    thread_.join();
  }
  LocalServer(const LocalServer&) = delete;
  LocalServer& operator=(const LocalServer&) = delete;
  [[nodiscard]] std::string url() const { return "http://127.0.0.1:" + std::to_string(http_->port()); }

 private:
  srv::Service service_;
  std::unique_ptr<srv::HttpServer> http_;
  std::thread thread_;
};

/// The optimizer's best batch size as the database holds it (the REST API has no route for it).
Result<int> stored_best(srv::Store& store, const std::string& job_id) {
  auto tx = store.begin();
  if (!tx) return fail(tx.error());
  auto job = (*tx)->load_job(job_id);
  if (!job) return fail(job.error());
  if (!*job) return fail(ErrorCode::kNotFound, "job " + job_id + " is not in the database");
  auto optimizer = batch_size::Optimizer::restore((*job)->optimizer_state);
  if (!optimizer) return fail(optimizer.error());
  return optimizer->best_batch_size();
}

json history_json(const zeus_sim::PairResult& p) {
  json out = json::array();
  int i = 0;
  for (const auto& r : p.history)
    out.push_back({{"recurrence", ++i},
                   {"batch_size", r.config.batch_size},
                   {"power_limit_w", r.config.power_limit.value()},
                   {"tries", r.tries},
                   {"batch_sizes", r.batch_sizes},
                   {"energy_j", r.totals.energy.value()},
                   {"time_s", r.totals.time.count()},
                   {"cost", r.totals.cost}});
  return out;
}

void print_text(const zeus_sim::PairResult& p, const std::string& url, const std::string& job_id,
                const std::string& best_from) {
  std::printf("Trace-driven simulation (Zeus NSDI'23 traces) through the batch-size optimizer server at %s\n",
              url.c_str());
  std::printf("%s on %s, job %s, %d recurrences\n", p.workload.name.c_str(), p.gpu.c_str(), job_id.c_str(),
              p.recurrences);
  std::printf("chosen batch size: %d (power limit %.0f W; the %s)\n", p.converged.batch_size,
              p.converged.power_limit.value(), best_from.c_str());
  std::printf("optimum: %d @ %.0f W; energy saved against b0 %d @ %.0f W: %.1f %%\n\n", p.optimum.batch_size,
              p.optimum.power_limit.value(), p.baseline_config.batch_size, p.baseline_config.power_limit.value(),
              p.energy_improvement_pct());
  std::printf("%10s %10s %8s %6s  %s\n", "recurrence", "batch size", "limit W", "tries", "batch sizes tried");
  int i = 0;
  for (const auto& r : p.history) {
    std::string tried;
    for (int b : r.batch_sizes) tried += (tried.empty() ? "" : ",") + std::to_string(b);
    std::printf("%10d %10d %8.0f %6d  %s\n", ++i, r.config.batch_size, r.config.power_limit.value(), r.tries,
                tried.c_str());
  }
}

}  // namespace

void add_bso_simulate_command(CLI::App& bso, Context& ctx) {
  auto* sim = bso.add_subcommand(
      "simulate",
      "Replay one workload of Zeus's NSDI'23 traces through a live batch-size optimizer server (a trace-driven "
      "simulation, end to end: client, HTTP, server, database)");
  auto o = std::make_shared<BsoSimOpts>();
  sim->add_option("--gpu", o->gpu, "GPU model of the power trace (a40, p100, rtx6000, v100)")->required();
  sim->add_option("--workload", o->workload, "The workload (cifar100, imagenet, squad, librispeech, ...)")->required();
  sim->add_option("--eta", o->eta, "Weight of energy against time in the cost, 0 to 1 (default 0.5)")
      ->check(CLI::Range(0.0, 1.0));
  sim->add_option("--beta", o->beta, "Early stopping: a run stops past beta × the least cost seen (default 2)")
      ->check(positive_number());
  sim->add_option("--seed", o->seed, "Seed of the sampled training runs and the optimizer (default 1)");
  sim->add_option("--recurrences", o->recurrences, "How often the job recurs (default 2 × batch sizes × limits)")
      ->check(CLI::PositiveNumber);
  sim->add_option("--trace-dir", o->trace_dir, "Directory of the traces (default: erg's own copy)");
  auto* db = sim->add_option("--db", o->db, "Database of the server this command runs (default: a temporary SQLite)");
  auto* server = sim->add_option("--server", o->server, "Use the server at this URL (http://HOST:PORT) instead");
  db->excludes(server);
  sim->add_option("--job-id-prefix", o->job_id_prefix, "Prefix of the job id registered (default erg-bso-simulate)");
  sim->add_flag("--json", o->json, "One JSON object");
  sim->footer("See docs/bso-server.md.");

  sim->callback([&ctx, o] {
    std::string gpu = o->gpu;
    for (auto& c : gpu) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    const zeus_sim::Workload* workload = zeus_sim::find_workload(o->workload);
    if (!workload) throw CliError{kExitUsage, "unknown workload '" + o->workload + "'"};
    zeus_sim::Options opts;
    opts.eta = o->eta;
    opts.beta = o->beta;
    opts.seed = o->seed;
    if (o->recurrences > 0) opts.recurrences = o->recurrences;
    if (auto v = zeus_sim::validate(opts); !v) throw CliError{kExitUsage, v.error().message};
    const zeus_sim::Traces traces = load_zeus_traces(o->trace_dir);
    if (!traces.power.contains(gpu)) throw CliError{kExitUsage, "no power trace for GPU '" + o->gpu + "'"};

    std::optional<TempDir> tmp;
    std::unique_ptr<srv::Store> store;
    std::optional<LocalServer> local;
    std::string url = o->server;
    if (url.empty()) {
      std::string db_url = o->db;
      if (db_url.empty()) {
        tmp.emplace();
        db_url = "sqlite:///" + (tmp->path() / "bso.db").string();
      }
      auto opened = srv::open_store(db_url);
      if (!opened)
        throw CliError{opened.error().code == ErrorCode::kInvalidArgument ? kExitUsage : kExitFailure,
                       "--db: " + opened.error().message};
      store = std::move(*opened);
      local.emplace(*store);
      url = local->url();
    }
    auto client = bsc::Client::create(url);
    if (!client) throw CliError{kExitUsage, "--server: " + client.error().message};
    std::function<Result<int>(const std::string&)> best;
    if (store) best = [&store](const std::string& id) { return stored_best(*store, id); };
    const std::string best_from = store ? "optimizer's best, from the server's database" : "last run's batch size";
    bsc::ServerAgent agent(*client, o->job_id_prefix, gpu, best);
    auto r = zeus_sim::simulate(traces, gpu, *workload, opts, agent);
    if (!r) throw CliError{kExitFailure, r.error().message};

    if (o->json) {
      json j;
      j["simulated"] = true;
      j["kind"] = "trace-driven";
      j["traces"] = "Zeus NSDI'23";
      j["server"] = url;
      j["job_id"] = agent.job_id();
      j["eta"] = opts.eta;
      j["beta"] = *opts.beta;
      j["seed"] = opts.seed;
      j["chosen_batch_size"] = r->converged.batch_size;
      j["chosen_from"] = store ? "optimizer" : "last_run";
      j["pair"] = zeus_pair_json(*r);
      j["history"] = history_json(*r);
      std::cout << j.dump(2) << "\n";
    } else {
      print_text(*r, url, agent.job_id(), best_from);
    }
    ctx.exit_code = kExitOk;
  });
}

}  // namespace erg::cli
