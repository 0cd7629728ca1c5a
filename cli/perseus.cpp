// `erg perseus ...`: Perseus, the pipeline-frequency optimizer (reference/zeus.md §6). `plan` turns
// a profile into the time–cost frontier of frequency plans; it needs no devices.
//
//   erg perseus plan --profile profile.csv --stages S --microbatches M --out plans/
//                    [--unit-ms 1] [--p2p-power-w 70] [--overwrite] [--json]
//   erg perseus serve --plan FILE [--scheduler point-solution|point-solution-3d] [--listen 127.0.0.1:7787]
//                     [--dump-dir D] [--max-job-idle S] [--rank-timeout S] [--max-connections N] [--json]
//   erg perseus serve --scheduler online --microbatches M [--unit-ms 1] [--p2p-power-w 70]
//                     [--frequency-step N | --frequencies F,...] [...as above]
//   erg perseus profile --out profile.csv [--sim-sku A100] [--stages 4] [--microbatches 8] [--forward-ms 30]
//                       [--stage-load 1,1.19,0.86,1.05] [--backward-ratio 2] [--frequency-step 1]
//                       [--stop-after-rises 5] [--window-s 1] [--seed 0] [--overwrite] [--json]

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <system_error>
#include <thread>

#include "app.hpp"
#include "erg/core/file.hpp"
#include "erg/optimizers/pipeline_frequency/planner.hpp"
#include "erg/optimizers/pipeline_frequency/profiler.hpp"
#include "erg/optimizers/pipeline_frequency/server/http_server.hpp"
#include "erg/optimizers/pipeline_frequency/server/service.hpp"
#include "erg/sim/sku.hpp"
#include "perseus_sim_pipeline.hpp"
#include "run_record.hpp"
#include "signals.hpp"

namespace erg::cli {
namespace {

namespace pf = erg::pipeline_frequency;
namespace fs = std::filesystem;

struct PlanOpts {
  std::string profile;
  int stages = 0;
  int micro_batches = 0;
  std::string out;
  double unit_ms = 1.0;
  double p2p_power_w = 70.0;
  bool overwrite = false;
  bool json = false;
};

int exit_for(const Error& e) {
  return e.code == ErrorCode::kInvalidArgument || e.code == ErrorCode::kNotFound ? kExitUsage : kExitFailure;
}

std::string zeus_name(std::size_t i) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "freqs_pipeline_%05zu.py", i);
  return buf;
}
std::string json_name(std::size_t i) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "plan_%05zu.json", i);
  return buf;
}

/// Files a previous `erg perseus plan` wrote: frontier.json, plan_NNNNN.json, freqs_pipeline_NNNNN.py.
bool ours(const std::string& name) {
  auto numbered = [&](std::string_view prefix, std::string_view suffix) {
    if (name.size() != prefix.size() + 5 + suffix.size() || !name.starts_with(prefix) || !name.ends_with(suffix))
      return false;
    for (std::size_t k = prefix.size(); k < prefix.size() + 5; ++k)
      if (name[k] < '0' || name[k] > '9') return false;
    return true;
  };
  return name == "frontier.json" || numbered("plan_", ".json") || numbered("freqs_pipeline_", ".py");
}

void prepare_out(const fs::path& dir, bool overwrite) {
  std::error_code ec;
  if (fs::exists(dir, ec)) {
    if (!fs::is_directory(dir, ec)) throw CliError{kExitUsage, "--out: " + dir.string() + " is not a directory"};
    std::vector<fs::path> stale;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      if (!overwrite || !ours(e.path().filename().string()))
        throw CliError{kExitUsage,
                       "--out: " + dir.string() +
                           (overwrite ? " holds files erg did not write (" + e.path().filename().string() + ")"
                                      : " is not empty (use a new directory, or --overwrite to replace "
                                        "the plans of an earlier run)")};
      stale.push_back(e.path());
    }
    if (ec) throw CliError{kExitFailure, "--out: cannot list " + dir.string() + ": " + ec.message()};
    // An earlier run may have written more plans; leaving them would mix two frontiers.
    for (const auto& p : stale)
      if (!fs::remove(p, ec)) throw CliError{kExitFailure, "cannot remove " + p.string() + ": " + ec.message()};
  } else if (!fs::create_directories(dir, ec)) {
    throw CliError{kExitFailure, "--out: cannot create " + dir.string() + ": " + ec.message()};
  }
}

void write(const fs::path& path, const std::string& text) {
  if (auto w = write_file_atomic(path, text); !w) throw CliError{kExitFailure, w.error().message};
}

struct ServeOpts {
  std::string plan;
  int micro_batches = 0;
  double unit_ms = 1.0;
  double p2p_power_w = 70.0;
  int frequency_step = 1;
  std::vector<int> frequencies;
  std::string scheduler = "point-solution";
  std::string listen = "127.0.0.1:7787";
  std::string dump_dir;
  long long max_job_idle_s = pf::server::kDefaultMaxJobIdle.count();
  double rank_timeout_s = static_cast<double>(pf::server::kDefaultRankTimeout.count());
  http_guard::Limits limits = pf::server::HttpOptions{}.limits;
  bool json = false;
};

/// `erg perseus serve`: Zeus's Perseus server over a chosen plan (docs/perseus.md).
void add_serve_command(CLI::App& perseus, Context& ctx) {
  namespace srv = pf::server;
  auto* serve = perseus.add_subcommand(
      "serve", "Serve Zeus's Perseus server API: training jobs register and fetch each rank's frequency schedule");
  auto o = std::make_shared<ServeOpts>();
  serve->add_option("--plan", o->plan,
                    "The plan: erg's plan_NNNNN.json or Zeus's freqs_pipeline_NNNNN.py (point-solution schedulers)");
  serve
      ->add_option("--scheduler", o->scheduler,
                   "point-solution (Zeus's PointSolution: one plan entry per rank), point-solution-3d (one entry "
                   "per pipeline stage, copied to its data- and tensor-parallel ranks) or online (no plan: profile "
                   "from the ranks' results during the first rounds, plan, then serve the fastest plan)")
      ->check(CLI::IsMember({"point-solution", "point-solution-3d", "online"}));
  serve->add_option("--microbatches", o->micro_batches, "online: micro-batches per iteration (required)")
      ->check(CLI::PositiveNumber);
  serve->add_option("--unit-ms", o->unit_ms, "online: time unit of the plan in ms (default 1)")
      ->check(positive_number());
  serve
      ->add_option("--p2p-power-w", o->p2p_power_w,
                   "online: power one GPU draws while blocked on pipeline communication, W (default 70)")
      ->check(non_negative_number());
  serve
      ->add_option("--frequency-step", o->frequency_step,
                   "online: sweep every N-th clock the ranks share, from the highest (default 1: all)")
      ->check(CLI::PositiveNumber);
  serve->add_option("--frequencies", o->frequencies, "online: the clocks to sweep, MHz (default: see --frequency-step)")
      ->delimiter(',')
      ->check(CLI::PositiveNumber);
  serve->add_option("--listen", o->listen, "HOST:PORT (default 127.0.0.1:7787; port 0 picks a free one)");
  serve->add_option("--dump-dir", o->dump_dir,
                    "Write ranks.json, N.sched.json and N.prof.json per job in a new folder under this one, "
                    "named for the job id with unsafe bytes replaced (docs/perseus.md; default: no dumps)");
  serve
      ->add_option("--max-job-idle", o->max_job_idle_s,
                   "Evict a job no request touched for this many seconds "
                   "(default 604800, a week; 0 never)")
      ->check(CLI::NonNegativeNumber);
  serve
      ->add_option("--rank-timeout", o->rank_timeout_s,
                   "Seconds a rank's GET /schedule waits for the others before the job is evicted and every "
                   "waiting rank answers 504 (default 600)")
      ->check(CLI::PositiveNumber);
  add_connection_options(*serve, o->limits);
  serve->add_flag("--json", o->json, "Print where it serves as one JSON line on stdout once listening");
  serve->footer("See docs/perseus.md.");
  serve->callback([&ctx, o, serve] {
    srv::ServiceOptions so;
    const bool online = o->scheduler == "online";
    if (online) {
      if (!o->plan.empty()) throw CliError{kExitUsage, "--plan: the online scheduler makes its own plan; leave it out"};
      if (o->micro_batches < 1) throw CliError{kExitUsage, "--scheduler online needs --microbatches"};
      so.scheduler.kind = srv::SchedulerKind::kOnline;
      auto& on = so.scheduler.online;
      on.micro_batches = o->micro_batches;
      on.unit_s = o->unit_ms / 1000.0;
      on.p2p_power_w = o->p2p_power_w;
      on.frequency_step = o->frequency_step;
      on.frequencies_mhz = o->frequencies;
      on.log = [](const std::string& line) { std::cerr << line << std::endl; };
    } else {
      for (const char* flag : {"--microbatches", "--unit-ms", "--p2p-power-w", "--frequency-step", "--frequencies"})
        if (serve->count(flag) > 0) throw CliError{kExitUsage, std::string(flag) + " is for --scheduler online only"};
      if (o->plan.empty()) throw CliError{kExitUsage, "--plan is required (unless --scheduler online)"};
      std::ifstream in(o->plan);
      if (!in) throw CliError{kExitUsage, "--plan: cannot read " + o->plan};
      std::stringstream text;
      text << in.rdbuf();
      auto plan = srv::parse_plan(text.str());
      if (!plan) throw CliError{kExitUsage, "--plan " + o->plan + ": " + plan.error().message};
      so.scheduler.kind =
          o->scheduler == "point-solution" ? srv::SchedulerKind::kPointSolution : srv::SchedulerKind::kPointSolution3D;
      so.scheduler.plan = std::move(*plan);
    }
    so.dump_data = !o->dump_dir.empty();
    if (so.dump_data) so.dump_dir = o->dump_dir;
    so.max_job_idle_time = std::chrono::seconds(o->max_job_idle_s);
    so.rank_timeout = std::chrono::milliseconds(static_cast<long long>(o->rank_timeout_s * 1000));
    srv::HttpOptions http;
    http.limits = o->limits;
    const auto colon = o->listen.rfind(':');
    try {
      if (colon == std::string::npos) throw std::invalid_argument("no port");
      http.host = o->listen.substr(0, colon);
      std::size_t used = 0;
      const std::string port = o->listen.substr(colon + 1);
      http.port = std::stoi(port, &used);
      if (used != port.size() || http.port < 0 || http.port > 65535) throw std::invalid_argument("port");
    } catch (const std::exception&) {
      throw CliError{kExitUsage, "--listen: expected HOST:PORT (got " + o->listen + ")"};
    }
    const auto stages = so.scheduler.plan.size();
    StopSignals signals;  // before the server's threads start, so they never take SIGINT/SIGTERM
    srv::Service service(std::move(so));
    auto server = srv::HttpServer::bind(service, http);
    if (!server) throw CliError{kExitFailure, server.error().message};
    std::thread serving([&] { (*server)->run(); });
    (*server)->wait_until_ready();
    const std::string url = "http://" + http.host + ":" + std::to_string((*server)->port());
    if (o->json)
      std::cout << nlohmann::json{{"url", url},
                                  {"port", (*server)->port()},
                                  {"scheduler", o->scheduler},
                                  {"plan_entries", online ? nlohmann::json(nullptr) : nlohmann::json(stages)}}
                       .dump()
                << std::endl;
    else if (online)
      std::cerr << "erg perseus: serving the online scheduler (" << o->micro_batches << " micro-batches) on " << url
                << "; GET /state/<job id> shows its phase and plan\n";
    else
      std::cerr << "erg perseus: serving " << o->plan << " (" << stages << " entries) on " << url << "\n";
    signals.wait(std::nullopt);
    (*server)->stop();
    serving.join();
    ctx.exit_code = kExitOk;
  });
}

/// `erg perseus guard-clocks`: the guardian a rank starts (client/clock_guardian.hpp). Reads its
/// standard input to the end; "done" there means the rank reset its clocks itself; anything else
/// (end of file: the rank died, SIGKILL included) resets GPU N's SM and memory locked clocks.
void add_guard_command(CLI::App& perseus, Context& ctx) {
  auto* guard = perseus.add_subcommand(
      "guard-clocks",
      "Started by a Perseus rank (not by hand): wait for the rank to end; unless it says \"done\" on standard "
      "input first, reset the GPU's locked SM and memory clocks");
  auto gpu = std::make_shared<unsigned>(0);
  auto pid = std::make_shared<long>(0);
  guard->add_option("--gpu", *gpu, "The GPU's index (the rank's environment, so the same index)")->required();
  guard->add_option("--pid", *pid, "The rank's process id (for the log line)");
  guard->callback([&ctx, gpu, pid] {
    std::string got;
    char buf[64];
    for (;;) {
      const ssize_t n = ::read(STDIN_FILENO, buf, sizeof buf);
      if (n > 0) {
        got.append(buf, static_cast<std::size_t>(n));
        if (got.size() > 64) got.erase(0, got.size() - 64);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      break;
    }
    if (got.size() >= 4 && got.compare(got.size() - 4, 4, "done") == 0) {
      ctx.exit_code = kExitOk;
      return;
    }
    const std::string who = "erg perseus guard-clocks: rank process " + std::to_string(*pid);
    auto inventory = ctx.discover();
    if (!inventory) throw CliError{kExitFailure, who + " ended; cannot open the devices: " + inventory.error().message};
    std::shared_ptr<Gpu> g;
    for (const auto& candidate : inventory->gpus)
      if (candidate->index() == *gpu) g = candidate;
    if (!g) throw CliError{kExitFailure, who + " ended; there is no GPU " + std::to_string(*gpu)};
    auto sm = g->reset_gpu_locked_clocks();
    auto mem = g->reset_memory_locked_clocks();
    std::string line = who + " ended without resetting GPU " + std::to_string(*gpu) + "'s clocks: ";
    line += sm ? "SM clocks reset" : "SM clocks: " + sm.error().message;
    line += mem ? ", memory clocks reset" : ", memory clocks: " + mem.error().message;
    std::cerr << line << "\n";
    ctx.exit_code = sm ? kExitOk : kExitFailure;
  });
}

struct ProfileOpts {
  std::string out;
  std::string sku = "A100";
  int stages = 4;
  int micro_batches = 8;
  double forward_ms = 30.0;
  std::vector<double> stage_load;
  double backward_ratio = 2.0;
  int frequency_step = 1;
  int stop_after_rises = 5;
  double window_s = 1.0;
  unsigned long long seed = 0;
  bool overwrite = false;
  bool json = false;
};

/// `erg perseus profile`: Perseus's profiling sweep on a simulated pipeline (docs/perseus.md).
void add_profile_command(CLI::App& perseus, Context& ctx) {
  auto* profile = perseus.add_subcommand(
      "profile",
      "Profile a simulated pipeline for `erg perseus plan`: per stage, forward and backward, the time and energy of "
      "one micro-batch at each GPU clock from the highest down (stopping after energy rises 5 times in a row), and "
      "the power of a GPU blocked on P2P communication. Runs on the simulated machine only (faithful model, virtual "
      "clock); the output is labelled simulated");
  auto o = std::make_shared<ProfileOpts>();
  profile->add_option("--out", o->out, "The profile CSV to write (stage,instruction,frequency,time,energy)")
      ->required();
  profile->add_option("--sim-sku", o->sku, "Simulated GPU model of every stage (default A100; see `erg simulate`)");
  profile->add_option("--stages", o->stages, "Pipeline stages, one GPU each (default 4)")->check(CLI::Range(1, 64));
  profile->add_option("--microbatches", o->micro_batches, "Micro-batches per iteration (default 8; for the summary)")
      ->check(CLI::PositiveNumber);
  profile
      ->add_option("--forward-ms", o->forward_ms,
                   "One micro-batch's forward on a stage of load 1 at the highest clock, ms (default 30)")
      ->check(positive_number());
  profile
      ->add_option("--stage-load", o->stage_load,
                   "Per stage, a factor on its work (one per stage; default 1, 1.19, 0.86, 1.05 repeating: "
                   "imbalanced stages)")
      ->delimiter(',')
      ->check(positive_number());
  profile->add_option("--backward-ratio", o->backward_ratio, "Backward work / forward work (default 2)")
      ->check(positive_number());
  profile
      ->add_option("--frequency-step", o->frequency_step,
                   "Try every N-th supported clock from the highest (default 1: all)")
      ->check(CLI::PositiveNumber);
  profile
      ->add_option("--stop-after-rises", o->stop_after_rises,
                   "Stop a stage's instruction after energy rose this many clocks in a row (default 5; 0: all)")
      ->check(CLI::NonNegativeNumber);
  profile->add_option("--window-s", o->window_s, "Measuring window per clock, simulated s (default 1)")
      ->check(positive_number());
  profile->add_option("--seed", o->seed, "Seed of the simulated machine (default 0)");
  profile->add_flag("--overwrite", o->overwrite, "Replace --out if it exists");
  profile->add_flag("--json", o->json, "Print a JSON summary (rows, clocks, measured P2P-blocking power)");
  profile->footer(
      "Then: erg perseus plan --profile FILE --stages S --microbatches M --p2p-power-w W. See docs/perseus.md.");
  profile->callback([&ctx, o] {
    namespace sim = pf::simulated;
    std::error_code ec;
    if (!o->overwrite && fs::exists(o->out, ec))
      throw CliError{kExitUsage, "--out: " + o->out + " exists (use --overwrite to replace it)"};
    if (!o->stage_load.empty() && static_cast<int>(o->stage_load.size()) != o->stages)
      throw CliError{kExitUsage, "--stage-load: " + std::to_string(o->stage_load.size()) + " factors for " +
                                     std::to_string(o->stages) + " stages (give one per stage)"};
    if (o->sku.empty() || o->sku.find_first_of(",= ") != std::string::npos)
      throw CliError{kExitUsage, "--sim-sku: expected a GPU model such as A100 (got '" + o->sku + "')"};
    if (const auto* known = erg::sim::lookup_sku(o->sku);
        known != nullptr && known->vendor != erg::sim::Vendor::kNvidia)
      throw CliError{kExitUsage, "--sim-sku " + o->sku +
                                     ": the simulated pipeline locks clocks through NVML; choose an NVIDIA GPU "
                                     "(A100, H100, V100, ...)"};
    static constexpr std::array<double, 4> kLoad = {1.0, 1.19, 0.86, 1.05};
    sim::PipelineConfig config;
    config.spec = std::to_string(o->stages) + "x" + o->sku + ",cpus=0,seed=" + std::to_string(o->seed);
    config.micro_batches = o->micro_batches;
    for (int s = 0; s < o->stages; ++s) {
      const double load = o->stage_load.empty() ? kLoad[static_cast<std::size_t>(s) % kLoad.size()]
                                                : o->stage_load[static_cast<std::size_t>(s)];
      const double f = o->forward_ms / 1000.0 * load;
      config.stages.push_back(sim::StageWork{f, f * o->backward_ratio});
    }
    auto made = sim::SimulatedPipeline::create(config);
    if (!made)
      throw CliError{made.error().code == ErrorCode::kInvalidArgument ? kExitUsage : kExitFailure,
                     "--sim-sku " + o->sku + ": " + made.error().message};
    auto& pipe = **made;
    const auto started = pipe.machine().now();
    pf::SweepOptions sweep;
    sweep.stages = o->stages;
    sweep.stop_after_rises = o->stop_after_rises;
    for (std::size_t i = 0; i < pipe.frequencies().size(); i += static_cast<std::size_t>(o->frequency_step))
      sweep.frequencies_mhz.push_back(pipe.frequencies()[i]);
    auto result = pf::sweep_frequencies(
        sweep, [&](int s, pf::Instruction i, int mhz) { return pipe.measure_instruction(s, i, mhz, o->window_s); });
    if (!result) throw CliError{kExitFailure, "profiling: " + result.error().message};
    std::vector<double> p2p;
    double p2p_mean = 0;
    for (int s = 0; s < o->stages; ++s) {
      auto w = pipe.measure_blocking_power(s, o->window_s);
      if (!w) throw CliError{kExitFailure, "P2P-blocking power: " + w.error().message};
      p2p.push_back(*w);
      p2p_mean += *w / o->stages;
    }
    write(o->out, pf::to_profile_csv(*result));
    nlohmann::json rows_per = nlohmann::json::array();
    for (int s = 0; s < o->stages; ++s)
      for (const auto i : {pf::Instruction::kForward, pf::Instruction::kBackward}) {
        const auto n = std::count_if(result->rows.begin(), result->rows.end(),
                                     [&](const pf::ProfileRow& r) { return r.stage == s && r.instruction == i; });
        rows_per.push_back({{"stage", s}, {"instruction", pf::to_string(i)}, {"rows", n}});
      }
    nlohmann::json work = nlohmann::json::array();
    for (const auto& w : config.stages)
      work.push_back({{"forward_ms", w.forward * 1000}, {"backward_ms", w.backward * 1000}});
    const double virtual_s = std::chrono::duration<double>(pipe.machine().now() - started).count();
    nlohmann::json j = {{"simulated", true},
                        {"spec", config.spec},
                        {"model", "faithful"},
                        {"stages", o->stages},
                        {"micro_batches", o->micro_batches},
                        {"stage_work_at_max_clock", work},
                        {"frequencies_offered", sweep.frequencies_mhz},
                        {"stop_after_rises", o->stop_after_rises},
                        {"rows", result->rows.size()},
                        {"rows_per_instruction", rows_per},
                        {"p2p_power_w", p2p_mean},
                        {"p2p_power_w_per_stage", p2p},
                        {"out", o->out},
                        {"simulated_time_s", virtual_s}};
    if (o->json) {
      std::cout << j.dump(2) << "\n";
    } else {
      std::printf(
          "simulated: %d stages on %s (faithful model, virtual clock): %zu rows at up to %zu clocks -> %s\n"
          "simulated: P2P-blocking power %.1f W (measured on the simulated GPUs)\n"
          "next: erg perseus plan --profile %s --stages %d --microbatches %d --p2p-power-w %.1f --out plans/\n",
          o->stages, config.spec.c_str(), result->rows.size(), sweep.frequencies_mhz.size(), o->out.c_str(), p2p_mean,
          o->out.c_str(), o->stages, o->micro_batches, p2p_mean);
    }
    ctx.exit_code = kExitOk;
  });
}

}  // namespace

void add_perseus_command(CLI::App& app, Context& ctx) {
  auto* perseus = app.add_subcommand("perseus", "Perseus: GPU frequency plans for pipeline-parallel training");
  perseus->require_subcommand(1);
  auto* plan = perseus->add_subcommand(
      "plan",
      "Plan GPU frequencies for a synchronous 1F1B pipeline from a profile: the time–cost frontier from the "
      "cheapest plan to the fastest, one plan per time unit (Phillips–Dessouky); needs no devices");
  auto o = std::make_shared<PlanOpts>();
  plan->add_option("--profile", o->profile,
                   "Profile CSV with columns stage, instruction (forward|backward), frequency (MHz), time (s), "
                   "energy (J)")
      ->required();
  plan->add_option("--stages", o->stages, "Pipeline stages (must match the profile)")
      ->required()
      ->check(CLI::PositiveNumber);
  plan->add_option("--microbatches", o->micro_batches, "Micro-batches per iteration")
      ->required()
      ->check(CLI::PositiveNumber);
  plan->add_option("--out", o->out, "Directory for frontier.json, plan_NNNNN.json and Zeus's freqs_pipeline_NNNNN.py")
      ->required();
  plan->add_option("--unit-ms", o->unit_ms, "Time unit of the plans in ms (default 1)")->check(positive_number());
  plan->add_option("--p2p-power-w", o->p2p_power_w,
                   "Power a GPU draws while blocked on pipeline communication, W (default 70, as Zeus)")
      ->check(non_negative_number());
  plan->add_flag("--overwrite", o->overwrite, "Replace the plans an earlier run wrote in --out");
  plan->add_flag("--json", o->json, "Print a JSON summary of the frontier");
  plan->footer(
      "Plan 0 is the cheapest (every computation at its slowest efficient frequency); higher numbers are faster. "
      "See docs/perseus.md.");

  plan->callback([&ctx, o] {
    auto profile = pf::read_profile_csv(o->profile);
    if (!profile) throw CliError{exit_for(profile.error()), "--profile: " + profile.error().message};
    pf::PlannerOptions options;
    options.stages = o->stages;
    options.micro_batches = o->micro_batches;
    options.unit_s = o->unit_ms / 1000.0;
    options.p2p_power_w = o->p2p_power_w;
    auto frontier = pf::plan_pipeline(*profile, options);
    if (!frontier) {
      const auto& m = frontier.error().message;
      throw CliError{exit_for(frontier.error()),
                     (m.starts_with("the profile has ") && m.find(" stage") != std::string::npos
                          ? "--stages " + std::to_string(o->stages) + ": "
                          : std::string()) +
                         m};
    }

    const fs::path dir = o->out;
    prepare_out(dir, o->overwrite);
    const auto& plans = frontier->plans;
    for (std::size_t i = 0; i < plans.size(); ++i) {
      write(dir / zeus_name(i), pf::to_zeus_plan_file(plans[i], i));
      write(dir / json_name(i), pf::plan_to_json(plans[i], i, 2) + "\n");
    }
    write(dir / "frontier.json", pf::frontier_to_json(*frontier) + "\n");

    const auto& cheap = plans.front();
    const auto& fast = plans.back();
    {
      nlohmann::json frontier_json = nlohmann::json::array();
      for (std::size_t i = 0; i < plans.size(); ++i)
        frontier_json.push_back({{"index", i},
                                 {"time_s", plans[i].time_s},
                                 {"cost_j", plans[i].cost_j},
                                 {"energy_j", plans[i].energy_j},
                                 {"file", zeus_name(i)}});
      nlohmann::json j = {{"profile", o->profile},
                          {"stages", o->stages},
                          {"micro_batches", o->micro_batches},
                          {"unit_s", options.unit_s},
                          {"p2p_power_w", options.p2p_power_w},
                          {"out", dir.string()},
                          {"plans", plans.size()},
                          {"iterations", frontier->iterations},
                          {"frontier", frontier_json}};
      record_event_if_recording("perseus.frontier", j);  // `erg report` shows it under `erg run --record`
      if (o->json) std::cout << j.dump(2) << "\n";
    }
    if (!o->json) {
      std::printf("%zu plans in %s (plan 0 cheapest, plan %zu fastest; modelled, not measured)\n", plans.size(),
                  dir.string().c_str(), plans.size() - 1);
      std::printf("%8s %12s %16s %16s\n", "plan", "time s", "effective J", "energy J");
      // The ends and about ten points between them.
      const std::size_t stride = std::max<std::size_t>(1, plans.size() / 10);
      for (std::size_t i = 0; i < plans.size(); i += stride) {
        const std::size_t k = i + stride >= plans.size() ? plans.size() - 1 : i;
        std::printf("%8zu %12.4f %16.3f %16.3f\n", k, plans[k].time_s, plans[k].cost_j, plans[k].energy_j);
        if (k == plans.size() - 1) break;
      }
      auto change = [](double now, double before, const char* what) {
        const double pct = 100.0 * (now / before - 1);
        char buf[128];
        std::snprintf(buf, sizeof buf, "%.1f %% %s %s", std::abs(pct), pct < 0 ? "less" : "more", what);
        return std::string(buf);
      };
      std::printf("fastest vs cheapest: %s, %s, %s\n", change(fast.time_s, cheap.time_s, "time").c_str(),
                  change(fast.cost_j, cheap.cost_j, "effective energy").c_str(),
                  change(fast.energy_j, cheap.energy_j, "energy with P2P blocking").c_str());
      std::size_t least = 0;
      for (std::size_t i = 1; i < plans.size(); ++i)
        if (plans[i].energy_j < plans[least].energy_j) least = i;
      std::printf("least energy with P2P blocking: plan %zu, %.4f s, %.3f J\n", least, plans[least].time_s,
                  plans[least].energy_j);
    }
    ctx.exit_code = kExitOk;
  });
  add_serve_command(*perseus, ctx);
  add_profile_command(*perseus, ctx);
  add_guard_command(*perseus, ctx);
}

}  // namespace erg::cli
