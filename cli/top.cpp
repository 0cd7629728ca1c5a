// `erg top`: a live per-process view of every GPU, like `nvidia-smi pmon` with energy. Each
// interval: per GPU the processes (pid, command, container, pod), each one's share, attributed
// watts over the interval and joules since erg first saw it, every figure with its bound; the idle
// and unattributed parts, the GPU's total, and the energy of processes that have exited.
// measure::ProcessTracker does the attribution (docs/attribution.md). A MIG GPU is shown as not
// attributable with the reason, never as 0 W per process.
//
// On a terminal: a screen redrawn in place (alternate screen, raw input): q quits; Ctrl-C and
// SIGTERM quit too, and the terminal is restored on every exit path. Otherwise (or with --once)
// plain frames; --json prints one JSON object per interval.

#include <poll.h>
#include <sys/signalfd.h>
#include <termios.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "app.hpp"
#include "erg/measure/process_tracker.hpp"
#include "signals.hpp"

namespace erg::cli {
namespace {

/// Raw input (no line buffering, no echo; Ctrl-C still raises SIGINT) and the alternate screen
/// with the cursor hidden, undone in the destructor: every way out of `erg top` (q, a signal, an
/// error thrown to the CLI's edge) passes through it.
class TerminalGuard {
 public:
  TerminalGuard() {
    if (::tcgetattr(STDIN_FILENO, &saved_) != 0) return;
    termios raw = saved_;
    raw.c_lflag &= ~static_cast<tcflag_t>(ICANON | ECHO);
    raw.c_cc[VMIN] = 0;
    raw.c_cc[VTIME] = 0;
    if (::tcsetattr(STDIN_FILENO, TCSANOW, &raw) != 0) return;
    active_ = true;
    std::cout << "\x1b[?1049h\x1b[?25l" << std::flush;
  }
  ~TerminalGuard() {
    if (!active_) return;
    std::cout << "\x1b[?25h\x1b[?1049l" << std::flush;
    ::tcsetattr(STDIN_FILENO, TCSANOW, &saved_);
  }
  TerminalGuard(const TerminalGuard&) = delete;
  TerminalGuard& operator=(const TerminalGuard&) = delete;

 private:
  termios saved_{};
  bool active_ = false;
};

/// A file descriptor closed on scope exit.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

/// "115.2 ± 14.1 W"
std::string with_bound(double v, double b, const char* unit) {
  return fmt("%.1f", v) + " ±" + fmt("%.1f", b) + " " + unit;
}

std::string shorten(const std::optional<std::string>& s, std::size_t n) {
  if (!s || s->empty()) return "-";
  return s->size() > n ? s->substr(0, n) : *s;
}

std::string or_dash(const std::string& s) { return s.empty() ? "-" : s; }

nlohmann::json opt_json(const std::optional<std::string>& s) {
  return s ? nlohmann::json(*s) : nlohmann::json(nullptr);
}

struct GpuView {
  unsigned index = 0;
  std::string name;
  std::unique_ptr<measure::ProcessTracker> tracker;
  std::optional<std::string> error;  ///< the last step failed: why
};

nlohmann::json frame_json(const std::vector<GpuView>& gpus, double time_s, double interval_s, bool simulated) {
  nlohmann::json j;
  j["time_s"] = time_s;
  j["interval_s"] = interval_s;
  j["simulated"] = simulated;
  j["gpus"] = nlohmann::json::array();
  for (const auto& g : gpus) {
    const auto& s = g.tracker->last();
    nlohmann::json o;
    o["index"] = g.index;
    o["name"] = g.name;
    o["error"] = g.error ? nlohmann::json(*g.error) : nlohmann::json(nullptr);
    o["attributable"] = s.attributable;
    o["reason"] = s.attributable ? nlohmann::json(nullptr) : nlohmann::json(s.reason);
    // The last interval's ends, wall time (Unix ns): the counter readings' times.
    o["interval_start_unix_ns"] = s.start.count();
    o["interval_end_unix_ns"] = s.end.count();
    o["power_w"] = s.measured_power.value();
    o["power_w_bound"] = s.measured_power_bound.value();
    o["energy_j"] = s.measured.value();
    o["energy_j_bound"] = s.measured_bound.value();
    o["idle_w"] = s.idle_power.value();
    o["idle_j"] = s.idle.value();
    o["idle_j_bound"] = s.idle_bound.value();
    o["unattributed_w"] = s.unattributed_power.value();
    o["unattributed_w_bound"] = s.unattributed_power_bound.value();
    o["unattributed_j"] = s.unattributed.value();
    o["unattributed_j_bound"] = s.unattributed_bound.value();
    o["exited_j"] = s.exited.value();
    o["exited_j_bound"] = s.exited_bound.value();
    o["exited_processes"] = s.exited_count;
    o["processes"] = nlohmann::json::array();
    for (const auto& p : s.processes) {
      nlohmann::json q;
      q["pid"] = p.pid;
      q["comm"] = p.comm;
      q["container"] = p.cgroup ? opt_json(p.cgroup->container_id) : nlohmann::json(nullptr);
      q["pod"] = p.cgroup ? opt_json(p.cgroup->pod_uid) : nlohmann::json(nullptr);
      q["memory_bytes"] = p.used_memory_bytes ? nlohmann::json(*p.used_memory_bytes) : nlohmann::json(nullptr);
      q["gpu_instance"] = p.gpu_instance ? nlohmann::json(*p.gpu_instance) : nlohmann::json(nullptr);
      if (s.attributable && s.end.count() != 0) {
        q["share"] = p.share;
        q["power_w"] = p.power.value();
        q["power_w_bound"] = p.power_bound.value();
        q["energy_j"] = p.energy.value();
        q["energy_j_bound"] = p.energy_bound.value();
      } else {  // never 0 W for a GPU that cannot be split (or before its first interval)
        for (const char* k : {"share", "power_w", "power_w_bound", "energy_j", "energy_j_bound"}) q[k] = nullptr;
      }
      o["processes"].push_back(std::move(q));
    }
    j["gpus"].push_back(std::move(o));
  }
  return j;
}

std::string frame_text(const std::vector<GpuView>& gpus, double time_s, double interval_s, bool simulated,
                       bool interactive, bool idle_model) {
  std::ostringstream out;
  char buf[512];
  std::snprintf(buf, sizeof buf, "erg top  %.1f s  interval %.1f s%s%s\n", time_s, interval_s,
                simulated ? "  (SIMULATED machine)" : "", interactive ? "  q quits" : "");
  out << buf;
  for (const auto& g : gpus) {
    const auto& s = g.tracker->last();
    out << "\n";
    if (g.error) {
      out << "GPU " << g.index << "  " << g.name << "  error: " << *g.error << "\n";
      continue;
    }
    std::snprintf(buf, sizeof buf, "GPU %u  %s  %s  total %s\n", g.index, g.name.c_str(),
                  with_bound(s.measured_power.value(), s.measured_power_bound.value(), "W").c_str(),
                  with_bound(s.measured.value(), s.measured_bound.value(), "J").c_str());
    out << buf;
    if (!s.attributable) out << "  not attributable: " << s.reason << "\n";
    std::snprintf(buf, sizeof buf, "  %8s %-16s %-12s %-12s %7s %18s %22s\n", "PID", "COMMAND", "CONTAINER", "POD",
                  "SHARE", "WATTS", "JOULES");
    out << buf;
    for (const auto& p : s.processes) {
      const std::string container = p.cgroup ? shorten(p.cgroup->container_id, 12) : "-";
      const std::string pod = p.cgroup ? shorten(p.cgroup->pod_uid, 12) : "-";
      if (s.attributable && s.end.count() == 0)
        std::snprintf(buf, sizeof buf, "  %8u %-16s %-12s %-12s %7s %18s %22s\n", p.pid, or_dash(p.comm).c_str(),
                      container.c_str(), pod.c_str(), "-", "measuring", "-");
      else if (s.attributable)
        std::snprintf(buf, sizeof buf, "  %8u %-16s %-12s %-12s %6.1f%% %18s %22s\n", p.pid, or_dash(p.comm).c_str(),
                      container.c_str(), pod.c_str(), p.share * 100.0,
                      with_bound(p.power.value(), p.power_bound.value(), "W").c_str(),
                      with_bound(p.energy.value(), p.energy_bound.value(), "J").c_str());
      else
        std::snprintf(buf, sizeof buf, "  %8u %-16s %-12s %-12s %7s %18s %22s\n", p.pid, or_dash(p.comm).c_str(),
                      container.c_str(), pod.c_str(), "-", "not attributable", "-");
      out << buf;
    }
    if (s.attributable) {
      if (idle_model)
        std::snprintf(buf, sizeof buf, "  %8s %-16s %-12s %-12s %7s %18s %22s\n", "", "(idle)", "", "", "",
                      (fmt("%.1f", s.idle_power.value()) + " W").c_str(),
                      with_bound(s.idle.value(), s.idle_bound.value(), "J").c_str());
      else  // no idle model: the processes carry the idle power
        std::snprintf(buf, sizeof buf, "  %8s %-16s %-12s %-12s %7s %18s %22s\n", "", "(idle: no model)", "", "", "",
                      "in processes", "-");
      out << buf;
      std::snprintf(buf, sizeof buf, "  %8s %-16s %-12s %-12s %7s %18s %22s\n", "", "(unattributed)", "", "", "",
                    with_bound(s.unattributed_power.value(), s.unattributed_power_bound.value(), "W").c_str(),
                    with_bound(s.unattributed.value(), s.unattributed_bound.value(), "J").c_str());
      out << buf;
      std::snprintf(buf, sizeof buf, "  %8s %-16s %-12s %-12s %7s %18s %22s\n", "",
                    ("(exited: " + std::to_string(s.exited_count) + ")").c_str(), "", "", "", "",
                    with_bound(s.exited.value(), s.exited_bound.value(), "J").c_str());
      out << buf;
    }
  }
  return out.str();
}

}  // namespace

void add_top_command(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand("top", "Live per-process GPU power and energy (q or Ctrl-C quits)");
  struct Opts {
    double interval = 1.0;
    bool once = false;
    bool json = false;
    std::vector<unsigned> gpus;
    double idle_power = 0.0;
    double idle_error = 0.0;
    double model_error = 0.05;
  };
  auto opts = std::make_shared<Opts>();
  cmd->add_option("--interval", opts->interval, "Seconds between frames (default 1)")->check(positive_number());
  cmd->add_flag("--once", opts->once, "Print one frame after one interval and exit");
  cmd->add_flag("--json", opts->json, "One JSON object per interval (newline-delimited) instead of the screen");
  cmd->add_option("--gpus", opts->gpus, "GPUs to show (erg indices); default all")->delimiter(',');
  cmd->add_option("--idle-power", opts->idle_power,
                  "The GPUs' idle power in W, calibrated while they ran nothing (default 0: processes are charged "
                  "the idle power too)")
      ->check(non_negative_number());
  cmd->add_option("--idle-error", opts->idle_error, "How far the idle power may be off, W (default 0)")
      ->check(non_negative_number());
  cmd->add_option("--model-error", opts->model_error,
                  "Relative error stated for the model (equal energy per unit of SM activity; default 0.05)")
      ->check(non_negative_number());
  cmd->footer(
      "WATTS: attributed power over the last interval; JOULES: attributed energy since erg top first saw the "
      "process; ± their bounds. See docs/attribution.md.");

  cmd->callback([&ctx, opts] {
    if (!(opts->model_error < 1.0)) throw CliError{kExitUsage, "--model-error must be below 1"};
    StopSignals signals;
    auto inventory = ctx.discover(opts->gpus);
    if (!inventory) throw CliError{kExitUsage, inventory.error().message};
    std::vector<unsigned> indices = opts->gpus;
    if (indices.empty())
      for (unsigned i = 0; i < inventory->gpus.size(); ++i) indices.push_back(i);
    if (indices.empty()) throw CliError{kExitFailure, "no GPU to show (see erg devices)"};

    measure::ProcessTrackerOptions to;
    to.attribution.idle.power = Watts(opts->idle_power);
    to.attribution.idle.error = Watts(opts->idle_error);
    to.attribution.model_error = opts->model_error;
    const Clock& clock = SteadyClock::instance();
    std::vector<GpuView> gpus;
    for (unsigned i : indices) {
      GpuView v;
      v.index = i;
      v.name = inventory->gpus.at(i)->name();
      v.tracker = std::make_unique<measure::ProcessTracker>(*inventory->gpus.at(i), clock, to);
      gpus.push_back(std::move(v));
    }
    auto step_all = [&] {
      for (auto& g : gpus) {
        auto s = g.tracker->step();
        if (s)
          g.error.reset();
        else
          g.error = s.error().message;
      }
    };

    const bool idle_model = opts->idle_power > 0.0;
    const bool tty_out = ::isatty(STDOUT_FILENO) == 1;
    const bool interactive = tty_out && !opts->json && !opts->once;
    const bool keys = interactive && ::isatty(STDIN_FILENO) == 1;
    // SIGINT and SIGTERM are blocked (StopSignals); a signalfd lets one poll wait for them and for q.
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    Fd sfd{::signalfd(-1, &set, SFD_CLOEXEC)};
    if (sfd.fd < 0) throw CliError{kExitFailure, "cannot wait for signals (signalfd failed)"};
    std::optional<TerminalGuard> terminal;
    if (interactive) terminal.emplace();

    // Waits until `deadline`; false when asked to quit (q, Ctrl-C, SIGTERM).
    auto wait_until = [&](std::chrono::nanoseconds deadline) {
      while (true) {
        const auto left = deadline - clock.now();
        if (left <= std::chrono::nanoseconds(0)) return true;
        pollfd fds[2] = {{sfd.fd, POLLIN, 0}, {STDIN_FILENO, POLLIN, 0}};
        const int ms = static_cast<int>(std::chrono::ceil<std::chrono::milliseconds>(left).count());
        const int n = ::poll(fds, keys ? 2 : 1, ms);
        if (n < 0 && errno != EINTR) return true;
        if (n <= 0) continue;
        if (fds[0].revents & POLLIN) {
          // Take the signal, or it would still be pending when StopSignals unblocks it at the end.
          signalfd_siginfo info{};
          (void)!::read(sfd.fd, &info, sizeof info);
          return false;
        }
        if (keys && (fds[1].revents & (POLLIN | POLLHUP))) {
          char c = 0;
          const ssize_t got = ::read(STDIN_FILENO, &c, 1);
          if (got <= 0) continue;
          if (c == 'q' || c == 'Q') return false;
        }
      }
    };

    const auto step =
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::duration<double>(opts->interval));
    const auto t0 = clock.now();
    step_all();  // the baseline: intervals start here
    auto next = t0 + step;
    bool first = true;
    while (wait_until(next)) {
      next += step;
      step_all();
      // The tracker attributes each interval one step late (once the driver has sampled past its
      // end): --once takes one more step 0.3 s later (two sample periods at NVIDIA's nominal 1/6 s)
      // so that its one frame has figures.
      if (opts->once) {
        if (!wait_until(clock.now() + std::chrono::milliseconds(300))) break;
        step_all();
      }
      const double t = std::chrono::duration<double>(clock.now() - t0).count();
      if (opts->json) {
        std::cout << frame_json(gpus, t, opts->interval, inventory->simulated).dump() << "\n" << std::flush;
      } else if (interactive) {
        std::cout << "\x1b[H\x1b[J" << frame_text(gpus, t, opts->interval, inventory->simulated, keys, idle_model)
                  << std::flush;
      } else {
        if (!first) std::cout << "\n";
        std::cout << frame_text(gpus, t, opts->interval, inventory->simulated, false, idle_model) << std::flush;
      }
      first = false;
      if (opts->once) break;
    }
    ctx.exit_code = kExitOk;
  });
}

}  // namespace erg::cli
