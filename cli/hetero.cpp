// `erg hetero plan`: splits a global batch over GPUs of different types and picks each GPU's power
// limit from per-type profiles (erg::hetero, docs/hetero.md). The plan is a prediction from the
// profiles; nothing runs on a GPU.
//
//   erg hetero plan --profile a10.csv --profile t4.csv:3 --global-batch 256 [--eta 0.5]
//                   [--method brute|heuristic|baseline|all] [--json]
//
// One --profile per GPU; FILE:COUNT stands for COUNT GPUs of that file's type.
//
//   erg hetero profile --gpu 0 --batch-sizes 16,32,64 --power-limits 100,125,150 --out a10.csv
//                      [--warmup-steps 5] [--measure-steps 20] [--idle-power W] [--gpu-type NAME] -- CMD...
//
// Runs CMD once per batch size × power limit (the limit set on the GPU first) and appends one row
// per configuration to the profile; an existing file is resumed. CMD reads ERG_HETERO_BATCH_SIZE,
// ERG_HETERO_WARMUP_STEPS and ERG_HETERO_MEASURE_STEPS, and writes on the descriptor in
// ERG_HETERO_FD a line "step" at the beginning of each step, "end" after its last one, or "oom"
// when the configuration cannot run. erg measures the GPU from the step after the warm-up steps
// to the step after the measured ones (or "end").

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "app.hpp"
#include "erg/measure/energy_monitor.hpp"
#include "erg/optimizers/hetero/planner.hpp"
#include "erg/optimizers/hetero/profile.hpp"
#include "erg/optimizers/hetero/profiler.hpp"
#include "run_record.hpp"
#include "signals.hpp"
#include "summary.hpp"

extern char** environ;

namespace erg::cli {
namespace {

using nlohmann::json;

struct PlanOpts {
  std::vector<std::string> profiles;
  int global_batch = 0;
  double eta = 0.5;
  std::string method = "heuristic";
  bool json = false;
};

/// "a.csv:2" → ("a.csv", 2); a suffix that is not a count stays part of the path.
std::pair<std::string, int> split_count(const std::string& spec) {
  const auto colon = spec.rfind(':');
  if (colon == std::string::npos || colon + 1 == spec.size()) return {spec, 1};
  const std::string tail = spec.substr(colon + 1);
  for (char c : tail)
    if (!std::isdigit(static_cast<unsigned char>(c))) return {spec, 1};
  if (tail.size() > 4 || std::stoi(tail) < 1)
    throw CliError{kExitUsage, "--profile " + spec + ": the GPU count must be 1 to 9999"};
  return {spec.substr(0, colon), std::stoi(tail)};
}

json gpu_json(std::size_t index, const hetero::GpuPlan& g) {
  return {{"index", index},
          {"gpu_type", g.gpu_type},
          {"batch_size", g.batch_size},
          {"power_limit_w", g.power_limit.value()},
          {"step_time_s", g.step_time.count()},
          {"avg_power_w", g.avg_power.value()},
          {"energy_j", g.energy.value()}};
}

json plan_json(const hetero::Plan& p) {
  json gpus = json::array();
  for (std::size_t i = 0; i < p.gpus.size(); ++i) gpus.push_back(gpu_json(i, p.gpus[i]));
  return {{"method", std::string(hetero::to_string(p.method))},
          {"step_time_s", p.step_time.count()},
          {"energy_j", p.energy.value()},
          {"cost", p.cost},
          {"max_power_sum_w", p.max_power_sum.value()},
          {"evaluations", p.evaluations},
          {"gpus", gpus}};
}

void print_plan(const hetero::Plan& p) {
  std::printf("%s: step %.4f s, energy %.2f J/step, cost %.2f\n", std::string(hetero::to_string(p.method)).c_str(),
              p.step_time.count(), p.energy.value(), p.cost);
  std::printf("  %-4s %-12s %8s %8s %10s %9s %10s\n", "gpu", "type", "batch", "limit W", "step s", "power W",
              "energy J");
  for (std::size_t i = 0; i < p.gpus.size(); ++i) {
    const auto& g = p.gpus[i];
    std::printf("  %-4zu %-12s %8d %8.0f %10.4f %9.1f %10.2f\n", i, g.gpu_type.c_str(), g.batch_size,
                g.power_limit.value(), g.step_time.count(), g.avg_power.value(), g.energy.value());
  }
}

void add_plan_command(CLI::App& hetero, Context& ctx) {
  auto* plan = hetero.add_subcommand(
      "plan",
      "Split a global batch over GPUs of different types and pick each GPU's power limit, minimizing Zeus's cost "
      "eta*energy + (1-eta)*sum(max power)*step time per step, from per-type profiles (a prediction; runs nothing)");
  auto o = std::make_shared<PlanOpts>();
  plan->add_option("--profile", o->profiles,
                   "Profile CSV of one GPU (repeat per GPU), or FILE:COUNT for COUNT GPUs of that type "
                   "(format: docs/hetero.md)")
      ->required();
  plan->add_option("--global-batch", o->global_batch, "Samples per data-parallel step, over all GPUs")
      ->required()
      ->check(CLI::PositiveNumber);
  plan->add_option("--eta", o->eta, "Weight of energy against time in the cost, 0 to 1 (default 0.5)")
      ->check(CLI::Range(0.0, 1.0));
  plan->add_option("--method", o->method,
                   "brute (exhaustive, exact), heuristic (default), baseline (even split at the highest limits), "
                   "or all (each, with the gaps)")
      ->check(CLI::IsMember({"brute", "heuristic", "baseline", "all"}));
  plan->add_flag("--json", o->json, "One JSON object");
  plan->footer(
      "Domain: per-GPU batch sizes between the type's smallest and largest profiled ones, step time and power "
      "interpolated linearly in between; profiled power limits only. A GPU that finishes early waits at the "
      "barrier at its type's idle_power_w.\n");

  plan->callback([&ctx, o] {
    // Each distinct file is read once; GPUs of one file share its profile.
    std::map<std::string, std::unique_ptr<hetero::Profile>> loaded;
    std::vector<const hetero::Profile*> gpus;
    json gpu_list = json::array();
    for (const auto& spec : o->profiles) {
      auto [path, count] = split_count(spec);
      auto& slot = loaded[path];
      if (!slot) {
        auto p = hetero::load_profile(path);
        if (!p) throw CliError{p.error().code == ErrorCode::kIo ? kExitFailure : kExitUsage, p.error().message};
        slot = std::make_unique<hetero::Profile>(std::move(*p));
      }
      for (int k = 0; k < count; ++k) {
        gpu_list.push_back({{"index", gpus.size()}, {"gpu_type", slot->gpu_type}, {"profile", path}});
        gpus.push_back(slot.get());
      }
    }
    const hetero::PlanRequest req{gpus, o->global_batch, o->eta};
    if (auto v = hetero::validate(req); !v) throw CliError{kExitUsage, v.error().message};

    std::vector<hetero::Method> methods;
    if (o->method == "all")
      methods = {hetero::Method::kBaseline, hetero::Method::kHeuristic, hetero::Method::kBrute};
    else
      methods = {*hetero::parse_method(o->method)};
    std::vector<hetero::Plan> plans;
    json skipped = json::object();
    for (auto m : methods) {
      auto p = hetero::plan(req, m);
      if (!p) {
        // With --method all a method that cannot plan (brute force too large, the even split
        // outside a domain) is reported; asked for alone, it is the command's error.
        if (methods.size() == 1) throw CliError{kExitUsage, p.error().message};
        skipped[std::string(hetero::to_string(m))] = p.error().message;
        continue;
      }
      plans.push_back(std::move(*p));
    }
    const hetero::Plan* best = nullptr;
    const hetero::Plan* base = nullptr;
    for (const auto& p : plans) {
      if (p.method == hetero::Method::kBrute) best = &p;
      if (p.method == hetero::Method::kBaseline) base = &p;
    }
    auto gap_pct = [](const hetero::Plan& p, const hetero::Plan& ref) { return 100 * (p.cost / ref.cost - 1); };

    {
      json j;
      j["kind"] = "hetero-plan";
      j["predicted"] = true;  // from the profiles, not a measurement
      j["eta"] = o->eta;
      j["global_batch"] = o->global_batch;
      j["gpus"] = gpu_list;
      json ps = json::object();
      for (const auto& p : plans) {
        json pj = plan_json(p);
        if (best) pj["gap_to_brute_pct"] = gap_pct(p, *best);
        if (base) {
          pj["energy_saving_vs_baseline_pct"] = 100 * (1 - p.energy / base->energy);
          pj["cost_saving_vs_baseline_pct"] = 100 * (1 - p.cost / base->cost);
        }
        ps[std::string(hetero::to_string(p.method))] = pj;
      }
      j["plans"] = ps;
      if (!skipped.empty()) j["skipped"] = skipped;
      record_event_if_recording("hetero.plan", j);  // `erg report` shows it under `erg run --record`
      if (o->json) std::cout << j.dump(2) << "\n";
    }
    if (!o->json) {
      std::printf("Heterogeneous plan (predicted from the profiles): %zu GPUs, global batch %d, eta %g\n\n",
                  gpus.size(), o->global_batch, o->eta);
      for (const auto& p : plans) {
        print_plan(p);
        if (best && &p != best) std::printf("  cost %.2f %% above brute force\n", gap_pct(p, *best));
        if (base && &p != base)
          std::printf("  vs baseline: energy %.1f %% lower, cost %.1f %% lower\n", 100 * (1 - p.energy / base->energy),
                      100 * (1 - p.cost / base->cost));
        std::printf("\n");
      }
      for (const auto& [m, why] : skipped.items())
        std::printf("%s: not planned: %s\n", m.c_str(), why.get<std::string>().c_str());
    }
    ctx.exit_code = kExitOk;
  });
}

// SIGINT/SIGTERM during `erg hetero profile`: forwarded to the running CMD; erg then stops after
// it has exited, restores the GPU's limit and exits 128 + the signal (the rows so far are kept).
volatile sig_atomic_t g_profile_child = 0;
volatile sig_atomic_t g_profile_signal = 0;

void on_profile_signal(int sig) {
  g_profile_signal = sig;
  // CMD runs in its own process group: the signal reaches what a shell CMD started, too.
  if (g_profile_child > 0) ::kill(-static_cast<pid_t>(g_profile_child), sig);
}

struct ProfileSignals {
  struct sigaction old_int {};
  struct sigaction old_term {};
  ProfileSignals() {
    g_profile_signal = 0;
    struct sigaction sa {};
    sa.sa_handler = on_profile_signal;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
  }
  ~ProfileSignals() {
    sigaction(SIGINT, &old_int, nullptr);
    sigaction(SIGTERM, &old_term, nullptr);
    g_profile_child = 0;
  }
  ProfileSignals(const ProfileSignals&) = delete;
  ProfileSignals& operator=(const ProfileSignals&) = delete;
};

struct ProfileOpts {
  unsigned gpu = 0;
  std::vector<int> batch_sizes;
  std::vector<double> power_limits;
  std::string out;
  std::string gpu_type;
  double idle_power = -1;  // < 0: measure
  unsigned warmup_steps = 5, measure_steps = 20;
  std::vector<std::string> command;
};

/// What one run of CMD reported.
struct ConfigRun {
  bool oom = false;
  unsigned measured_steps = 0;
  std::optional<measure::Measurement> window;
  int exit_code = 0;
};

/// Runs CMD for one configuration, measuring the window the step protocol marks.
ConfigRun run_configuration(const ProfileOpts& o, int batch, measure::EnergyMonitor& monitor) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw CliError{kExitFailure, std::string("pipe: ") + std::strerror(errno)};
  // The command's end on a low descriptor (one digit, for `echo step >&$ERG_HETERO_FD` in sh).
  const int child_fd = ::fcntl(fds[1], F_DUPFD, 3);
  ::close(fds[1]);
  if (child_fd < 0) throw CliError{kExitFailure, std::string("fcntl: ") + std::strerror(errno)};
  ::setenv("ERG_HETERO_FD", std::to_string(child_fd).c_str(), 1);
  ::setenv("ERG_HETERO_BATCH_SIZE", std::to_string(batch).c_str(), 1);
  ::setenv("ERG_HETERO_WARMUP_STEPS", std::to_string(o.warmup_steps).c_str(), 1);
  ::setenv("ERG_HETERO_MEASURE_STEPS", std::to_string(o.measure_steps).c_str(), 1);
  ::setenv("ERG_HETERO_GPU", std::to_string(o.gpu).c_str(), 1);
  std::vector<std::string> args = o.command;
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  const int rc = ::posix_spawnp(&pid, argv[0], nullptr, &attr, argv.data(), environ);
  posix_spawnattr_destroy(&attr);
  for (const char* v : {"ERG_HETERO_FD", "ERG_HETERO_BATCH_SIZE", "ERG_HETERO_WARMUP_STEPS", "ERG_HETERO_MEASURE_STEPS",
                        "ERG_HETERO_GPU"})
    ::unsetenv(v);
  ::close(child_fd);
  if (rc != 0) {
    ::close(fds[0]);
    throw CliError{rc == ENOENT ? 127 : 126, "cannot run '" + o.command[0] + "': " + std::strerror(rc)};
  }
  g_profile_child = pid;
  if (g_profile_signal != 0) ::kill(-pid, g_profile_signal);  // arrived while it was starting
  ConfigRun run;
  const std::string window = "__erg_hetero_profile";
  unsigned steps = 0;
  bool open = false, closed = false;
  std::string problem;
  auto close_window = [&] {
    if (!open || closed) return;
    auto m = monitor.end_window(window);
    if (!m)
      problem = m.error().message;
    else
      run.window = *m;
    closed = true;
  };
  auto handle = [&](const std::string& line) {
    if (line == "step") {
      ++steps;
      if (steps == o.warmup_steps + 1 && !open) {
        if (auto r = monitor.begin_window(window); !r)
          problem = r.error().message;
        else
          open = true;
      } else if (open && !closed && steps == o.warmup_steps + o.measure_steps + 1) {
        run.measured_steps = o.measure_steps;
        close_window();
      }
    } else if (line == "end") {
      if (open && !closed) {
        run.measured_steps = steps - o.warmup_steps;
        close_window();
      }
    } else if (line == "oom") {
      run.oom = true;
    }
  };
  const int status = pump_child_lines(fds[0], pid, handle);
  g_profile_child = 0;
  ::close(fds[0]);
  if (open && !closed) {
    // CMD ended without "end" after its measured steps started: the window ends with it.
    run.measured_steps = steps - o.warmup_steps;
    close_window();
  }
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : (WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 1);
  if (!problem.empty()) throw CliError{kExitFailure, "measuring: " + problem};
  return run;
}

void add_profile_command(CLI::App& hetero, Context& ctx) {
  auto* cmd = hetero.add_subcommand(
      "profile",
      "Profile one GPU over batch sizes x power limits: run CMD once per configuration with the limit set, "
      "measure its steps, append a row to the profile (an existing file is resumed)");
  auto o = std::make_shared<ProfileOpts>();
  cmd->add_option("--gpu", o->gpu, "The GPU to profile (erg index; default 0)");
  cmd->add_option("--batch-sizes", o->batch_sizes, "Per-GPU batch sizes, e.g. 16,32,64")
      ->required()
      ->delimiter(',')
      ->check(CLI::PositiveNumber);
  cmd->add_option("--power-limits", o->power_limits, "Power limits in W, e.g. 100,125,150")
      ->required()
      ->delimiter(',')
      ->check(positive_number());
  cmd->add_option("--out", o->out, "The profile CSV to write or resume")->required();
  cmd->add_option("--gpu-type", o->gpu_type, "The type's name in the profile (default: the GPU's name)");
  cmd->add_option("--idle-power", o->idle_power, "Power W of the GPU waiting at the barrier (default: measured, 2 s)")
      ->check(non_negative_number());
  cmd->add_option("--warmup-steps", o->warmup_steps, "Steps before the measurement (default 5)");
  cmd->add_option("--measure-steps", o->measure_steps, "Steps measured (default 20)")->check(CLI::PositiveNumber);
  cmd->add_option("command", o->command, "The job to run per configuration, after --");
  cmd->footer(
      "CMD reads ERG_HETERO_BATCH_SIZE, ERG_HETERO_WARMUP_STEPS, ERG_HETERO_MEASURE_STEPS (and ERG_HETERO_GPU) "
      "and writes to the descriptor in ERG_HETERO_FD a line \"step\" at the beginning of every step, \"end\" "
      "after its last step, or \"oom\" when the configuration cannot run (recorded infeasible). On the "
      "simulator: erg simulate load --batch-size $ERG_HETERO_BATCH_SIZE --samples-per-s R --steps N. The "
      "GPU's default power limit is restored at the end (also on SIGINT/SIGTERM, forwarded to CMD first; "
      "the rows so far stay and a second run resumes). See docs/hetero.md.\n");

  cmd->callback([&ctx, o] {
    if (o->command.empty())
      throw CliError{kExitUsage, "erg hetero profile needs a command after --, e.g. -- python3 step.py"};
    auto inventory = ctx.discover({o->gpu}, {});
    if (!inventory) throw CliError{kExitUsage, inventory.error().message};
    auto monitor = make_energy_monitor(*inventory, {o->gpu}, {}, /*settle=*/true);
    std::shared_ptr<Gpu> gpu;
    for (const auto& g : inventory->gpus)
      if (g->index() == o->gpu) gpu = g;
    if (!gpu) throw CliError{kExitUsage, "no GPU " + std::to_string(o->gpu)};
    auto limits = gpu->power_limit_constraints();
    if (!limits) throw CliError{kExitFailure, "GPU " + std::to_string(o->gpu) + ": " + limits.error().message};

    std::vector<hetero::ProfileRow> done;
    const bool resume = std::filesystem::exists(o->out);
    if (resume) {
      std::ifstream in(o->out);
      std::stringstream text;
      text << in.rdbuf();
      auto rows = hetero::parse_profile_rows(text.str(), o->out);
      if (!rows) throw CliError{kExitUsage, rows.error().message};
      done = std::move(*rows);
    }
    hetero::ProfileGrid grid;
    grid.gpu_type = !o->gpu_type.empty() ? o->gpu_type : (done.empty() ? gpu->name() : done.front().gpu_type);
    grid.batch_sizes = o->batch_sizes;
    for (double l : o->power_limits) grid.power_limits.emplace_back(l);
    grid.max_power_limit = Watts(limits->max);
    if (o->idle_power >= 0) {
      grid.idle_power = Watts(o->idle_power);
    } else if (!done.empty()) {
      grid.idle_power = done.front().idle_power;  // the resumed file's
    } else {
      // Nothing runs yet: the GPU idles as it will at the barrier.
      if (auto r = monitor->begin_window("__erg_hetero_idle"); !r) throw CliError{kExitFailure, r.error().message};
      std::this_thread::sleep_for(std::chrono::seconds(2));
      auto m = monitor->end_window("__erg_hetero_idle");
      if (!m) throw CliError{kExitFailure, m.error().message};
      grid.idle_power = Watts(std::round(m->gpu_energy().value() / m->time.count() * 100) / 100);
    }
    if (auto todo = hetero::remaining_configurations(grid, done); !todo)
      throw CliError{kExitUsage, o->out + ": " + todo.error().message};

    ProfileSignals signals;
    std::ofstream out(o->out, std::ios::app);
    if (!out) throw CliError{kExitFailure, o->out + ": cannot write"};
    if (!resume) out << hetero::kProfileHeader << "\n" << std::flush;
    struct Restore {
      std::shared_ptr<Gpu> gpu;
      ~Restore() { (void)gpu->reset_power_limit(); }
    } restore{gpu};
    unsigned ran = 0;
    auto run = [&](int b, Watts limit) -> Result<std::optional<hetero::Measurement>> {
      if (g_profile_signal != 0) return fail(ErrorCode::kUnavailable, "stopped by a signal");
      if (auto r = gpu->set_power_limit(limit); !r) return fail(r.error());
      const ConfigRun c = run_configuration(*o, b, *monitor);
      ++ran;
      if (g_profile_signal != 0) return fail(ErrorCode::kUnavailable, "stopped by a signal");
      if (c.oom) return std::optional<hetero::Measurement>();
      if (c.exit_code != 0)
        return fail(ErrorCode::kInvalidArgument, "'" + o->command[0] + "' exited with " + std::to_string(c.exit_code) +
                                                     " at batch " + std::to_string(b) +
                                                     " (write \"oom\" to mark a "
                                                     "configuration that cannot run)");
      if (!c.window || c.measured_steps == 0)
        return fail(ErrorCode::kInvalidArgument, "'" + o->command[0] + "' at batch " + std::to_string(b) +
                                                     " reported no measured step (needs more than " +
                                                     std::to_string(o->warmup_steps) + " \"step\" lines)");
      const double t = c.window->time.count();
      return std::optional<hetero::Measurement>(
          hetero::Measurement{Seconds(t / c.measured_steps), Watts(c.window->gpu_energy().value() / t)});
    };
    auto sink = [&](const hetero::ProfileRow& row) -> Result<void> {
      out << hetero::to_csv_row(row) << "\n" << std::flush;
      if (!out) return fail(ErrorCode::kIo, o->out + ": write failed");
      std::cerr << "erg: " << row.gpu_type << " batch " << row.batch_size << " @ " << row.power_limit.value() << " W: "
                << (row.measurement ? std::to_string(row.measurement->step_time.count()) + " s/step, " +
                                          std::to_string(row.measurement->avg_power.value()) + " W"
                                    : std::string("cannot run"))
                << "\n";
      return ok();
    };
    auto rows = hetero::run_profile(grid, done, run, sink);
    if (const int sig = g_profile_signal; sig != 0)
      throw CliError{128 + sig, "stopped by a signal; the rows measured so far are in " + o->out +
                                    " (run the same command again to resume)"};
    if (!rows) throw CliError{rows.error().code == ErrorCode::kIo ? kExitFailure : kExitUsage, rows.error().message};
    std::cout << o->out << ": " << rows->size() << " configurations of " << grid.gpu_type << " (" << ran << " run now, "
              << done.size() << " resumed)" << (inventory->simulated ? " (simulated)" : "") << "\n";
    ctx.exit_code = kExitOk;
  });
}

}  // namespace

void add_hetero_command(CLI::App& app, Context& ctx) {
  auto* hetero = app.add_subcommand(
      "hetero", "Heterogeneous GPUs: profile a GPU type, plan batch shares and power limits (docs/hetero.md)");
  hetero->require_subcommand(1);
  add_plan_command(*hetero, ctx);
  add_profile_command(*hetero, ctx);
}

}  // namespace erg::cli
