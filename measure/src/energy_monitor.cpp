#include "erg/measure/energy_monitor.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>
#include <utility>

#include "erg/measure/counter_tracker.hpp"
#include "erg/measure/power_monitor.hpp"
#include "gpu_selection.hpp"

namespace erg::measure {
namespace {

/// How many update periods a window must span before its counter figure is trusted.
constexpr double kShortWindowPeriods = 2.0;

/// The driver's averaging window of the device_average domain (AMD MI200 and older: a trailing
/// 1 s average of socket power, their only power reading).
constexpr std::chrono::nanoseconds kAverageWindow{1'000'000'000};
/// A trailing average lags the power by half its window: the average's timeline integrated over
/// the window shifted later by this much is the window's energy (see compose()).
constexpr std::chrono::nanoseconds kAverageLag = kAverageWindow / 2;

/// The follower's plan for one GPU (see next_due()).
struct FollowPlan {
  std::int64_t next_due = 0;           // monitor ns; 0 = now
  std::int64_t probe_until = 0;        // fast probing until then (schedule not locked)
  std::int64_t next_probe = 0;         // when to probe fast again after a failed probe
  std::optional<std::int64_t> target;  // the update being waited for
  std::int64_t deadline = 0;           // give up on `target` after this
  bool dense = false;                  // polling densely for `target`
  bool guard = false;                  // the next read is the one just before `target`
  int dense_done = 0;                  // dense brackets since the schedule locked
  int misses = 0;                      // targets given up in a row
  double lead_ns = 0;                  // extra lead of dense polling (grows when an update came earlier)
  int target_reads = 0;                // reads made while waiting for `target`
  std::uint64_t relearns = 0;          // UpdateSchedule::relearns when last planned
};

struct GpuCounter {
  unsigned index;
  std::shared_ptr<Gpu> gpu;
  bool has_counter;
  std::optional<std::chrono::microseconds> period;  // the vendor's nominal period
  CounterTracker tracker;                           // mJ
  CounterHistory history;                           // accumulated mJ over monitor ns
  FollowPlan plan;
  std::optional<Error> error;  // last read error
  // The previous successful read (monitor ns): a counter anomaly is bridged from it.
  std::optional<std::int64_t> last_ok_t;
  // The most the GPU can draw (mW; its highest settable power limit with a margin for
  // excursions), the ceiling of a bridged span; negative when unknown.
  double peak_mw = -1.0;
  std::uint64_t failures = 0;  // reads that failed (each attempt)
  // An anomaly read cannot always tell whether an update the schedule puts within the jitter of
  // it (`index`) came before it (its increment then went with the anomaly) or is still to come.
  // The first change of value after it decides (see came_before); `owed` (one update at the
  // recent rate) is added if it came before.
  struct Pending {
    std::int64_t index = 0;
    double raw = 0.0;
    std::int64_t last_same_t = 0;  // the last read still showing `raw`
    double owed = 0.0;
  };
  std::optional<Pending> pending;
  // The instant power read with the counter's current value, lowest and highest over the reads
  // showing it (mW), and whether the next advance can be checked against them (see note_power):
  // every read since the value first showed carried power, and the value came by an ordinary
  // advance (not an anomaly, nor the first read).
  double shown_low_mw = 0.0;
  double shown_high_mw = 0.0;
  bool shown_checkable = false;
  // Checks since the last that disagreed in which the power moved and the advance agreed with it
  // (capped at kAlignedEvidence: the power readings sample what the counter counts).
  int aligned_evidence = 0;
  // Without a counter: the power domain integrated (instant where the GPU has it, else the 1 s
  // average, shifted by kAverageLag).
  PowerDomain integrated = PowerDomain::kDeviceInstant;
};

struct CpuCounter {
  unsigned index;
  std::shared_ptr<Cpu> cpu;
  bool dram;
  CounterTracker package;  // µJ
  CounterTracker dram_tracker;
  std::optional<Error> error;
  // Reads that failed: a window with one during it is affected (the backend may have dropped
  // the energy between two reads, e.g. around a counter reset).
  std::uint64_t failures = 0;
};

// Ended windows' map nodes kept for reuse: enough for the usual nesting of a few windows.
constexpr std::size_t kSpareWindowNodes = 8;

struct WindowState {
  std::chrono::nanoseconds start{0};
  std::chrono::nanoseconds start_wall{0};
  // Per GPU: the edge instant (the read's time), the counter's value there (final once the
  // update after the edge was read), the anomalies and failed reads so far, and whether the
  // edge's read succeeded (else its error).
  std::vector<std::int64_t> gpu_t;
  std::vector<double> gpu_mj;
  std::vector<char> gpu_final;
  // CounterEstimate::unread_ns and unread_from of a final value.
  std::vector<std::int64_t> gpu_unread;
  std::vector<std::int64_t> gpu_unread_from;
  // CounterEstimate::plain of a final value (the schedule was being relearned at the edge).
  std::vector<char> gpu_plain;
  std::vector<CounterAnomalies> gpu_anomalies;
  std::vector<std::uint64_t> gpu_failures_before;  // before the edge's read
  std::vector<std::uint64_t> gpu_failures_after;   // after it
  std::vector<char> gpu_read_ok;
  std::vector<std::optional<Error>> gpu_error;
  std::vector<double> cpu_uj;
  std::vector<double> dram_uj;
  std::vector<std::uint64_t> cpu_anomalies;
  // Per SoC: every rail's integrated energy at the edge (mJ), or why it could not be read.
  std::vector<std::vector<double>> soc_mj;
  std::vector<std::optional<Error>> soc_error;
};

/// CSV per RFC 4180: quote a field only when it needs it.
std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) {
    if (c == '"') q += '"';
    q += c;
  }
  return q + "\"";
}

std::string fmt_double(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6f", v);
  return buf;
}

}  // namespace

// The follower's cadence (see plan_next). Dense polling every 0.5 ms pins an update within
// ~0.5 ms; a value read 0.3 ms past the predicted update (plus three σ of jitter) sees it.
constexpr std::int64_t kPollNs = 500'000;
constexpr std::int64_t kAfterNs = 300'000;
constexpr std::int64_t kMinGapNs = 100'000;
// Probing (schedule not locked yet): densely for up to 1.5 s, then every 100 ms, and densely
// again every 10 s.
constexpr std::int64_t kProbeNs = 1'500'000'000;
constexpr std::int64_t kSlowPollNs = 100'000'000;
constexpr std::int64_t kReprobeNs = 10'000'000'000;
// Updates pinned by dense polling: each of the first 16 after the lock, then one in 10 (about
// one a second at 100 ms), which keeps the fitted phase within the jitter of the truth.
constexpr int kDenseAfterLock = 16;
constexpr std::int64_t kDenseEvery = 10;
constexpr std::int64_t kStampRecheckEvery = 50;
constexpr std::int64_t kNever = std::numeric_limits<std::int64_t>::max();
// A read that fails with an error that can pass (a timeout, an unknown driver error, I/O) is
// tried again at once, up to this many attempts in all; a lost GPU or a missing capability is not.
constexpr int kReadAttempts = 5;
// The ceiling of a bridged span: the highest settable power limit plus this share (a GPU's
// average power over a ~100 ms span stays within a few percent of its limit).
constexpr double kPeakMargin = 1.1;
// Shortfalls: a counter advance of one update below (1 − allowance) × what the power read around
// it says the update counted at the least (see note_power). Two allowances:
//  - loose, for a GPU whose power readings may sample only part of what its counter counts (a
//    counter of the whole period read against power averaged over its last 20 ms: V100, A40, A10,
//    T4, RTX 6000 as simulated): power that dips between two busy readings (a stall inside a
//    period) makes an honest update fall short of them. The least honest ratio seen on the
//    simulator's training loads was 0.93, on its harshest (idle a fifth of the time, ripples up to
//    90 % deep; 30 seeds × 30 s × 5 such GPUs) 0.57: flag below 0.4;
//  - tight, once the GPU's readings are shown to sample what its counter counts (A100 and H100
//    sample both over the same 25 ms of each period): honest ratios never fell below 0.99 there
//    (sensor noise 0.3 % per reading), on any load: flag below 0.9, so a step back of a tenth of
//    an update shows.
constexpr double kLooseAllowance = 0.6;
constexpr double kTightAllowance = 0.1;
// Alignment evidence: an update whose advance at the power read with it implies a span between
// the updates inside the reads' bracket of it, widened by this share (the two readings' noise,
// 0.3 % each, at about 5σ)...
constexpr double kAlignedNoise = 0.02;
// ...while the power read around it moved by at least this factor (busy to idle and back, a phase
// change: a reading of part of the period agrees with the whole period's count by chance when the
// change came early in the period, one time in four or five on the simulator)...
constexpr double kAlignedMove = 1.5;
// ...this many times since the last update that disagreed. Runs of chance agreement on a GPU whose
// readings sample part of the period reached 8 (the 30 seeds above, whose load changes phase-lock
// with the counter now and then).
constexpr int kAlignedEvidence = 16;
// An update is taken to lie within this many σ of its predicted time (the jitter estimate is
// fitted, so a margin over the 3σ a Gaussian schedule almost never leaves).
constexpr double kUpdateMarginSigmas = 4.0;

struct EnergyMonitor::Impl {
  const Clock* clock;
  EnergyMonitorOptions options;
  std::vector<unsigned> gpu_indices;
  std::vector<unsigned> cpu_indices;
  std::vector<GpuCounter> gpus;
  std::vector<CpuCounter> cpus;
  std::vector<std::shared_ptr<Soc>> socs;       // EnergyMonitorOptions::socs
  std::unique_ptr<PowerMonitor> power_monitor;  // for GPUs without an energy counter
  bool integrates_average = false;              // a GPU's energy comes from its 1 s average power
  int log_fd = -1;

  mutable std::mutex mu;
  using Windows = std::map<std::string, WindowState>;
  Windows windows;
  // Under mu: map nodes of ended windows, reused by the next begin_window (their vectors and
  // name keep their capacity), and the end edge's readings. A window edge in steady state
  // allocates nothing but the Measurement it returns.
  std::vector<Windows::node_type> spare_nodes;
  // Windows ended by end_window_later: their begin and end edges, until collected.
  std::map<std::string, std::pair<WindowState, WindowState>> ended;
  WindowState end_scratch;

  // The follower thread (follow_counters && follower_thread): waits on `wake` under `mu`.
  std::condition_variable wake;
  bool stopping = false;
  std::thread follower;

  ~Impl() {
    if (follower.joinable()) {
      {
        std::lock_guard lock(mu);
        stopping = true;
      }
      wake.notify_all();
      follower.join();
    }
    if (log_fd >= 0) ::close(log_fd);
  }

  bool estimates() const { return options.extrapolate_counters; }
  /// A schedule to make edges final against: continuous, or locked with enough pinned updates
  /// (stamps pin every update; brackets pin some) for its phase to hold within the jitter.
  static bool mature(const UpdateSchedule& s) {
    return s.continuous || (s.locked && (s.stamps_are_update_times.value_or(false) || s.fitted_updates >= 8));
  }

  /// Reads GPU `i` (under mu): feeds the tracker and the history, then makes final the begin
  /// edges of open windows that this read settles. Returns the read's time (monitor ns).
  /// `asked`: a time before this read asks the driver (a read's time after it is the next one's);
  /// nullopt: now.
  std::int64_t read_gpu(std::size_t i, std::chrono::nanoseconds wall_offset, std::optional<std::int64_t> asked = {}) {
    GpuCounter& g = gpus[i];
    if (!asked) asked = clock->now().count();
    auto r = g.gpu->energy_reading();
    for (int attempt = 1; !r && attempt < kReadAttempts && transient(r.error().code); ++attempt) {
      ++g.failures;
      r = g.gpu->energy_reading();
    }
    const std::int64_t t = clock->now().count();
    if (!r) {
      ++g.failures;
      g.error = r.error();
      return t;
    }
    // The tracker sees raw counter values; the history their monotonic accumulation. Should the
    // counter restart or step back, what it counted over the span since the last good read is
    // lost (after a restart, what it counted before the restart). The counter steps once per
    // update, so with a known schedule exactly the updates inside the span are lost: each is
    // bridged at the recent rate × the period. The follower reads just before and just after
    // each predicted update, so an anomaly usually falls in a span with no update: nothing is
    // lost and the figure stays exact. An update within the jitter of the anomaly read is left
    // to the reads after it (Pending). Before the schedule is known: the rate × the span.
    const double raw = r->energy.value();
    const std::optional<double> prev_raw = g.tracker.last_raw();
    const std::uint64_t anomalies_before = g.tracker.anomalies();
    const std::int64_t bridged_before = g.tracker.anomaly_record().bridged_ns;
    CounterBridge bridge;
    std::optional<GpuCounter::Pending> maybe;
    double undecided_ceiling = -1.0;
    const UpdateSchedule& sch = g.history.schedule();
    if (g.last_ok_t) {
      bridge.span_ns = std::max<std::int64_t>(0, t - *g.last_ok_t);
      double rate = g.history.recent_rate();                         // mJ/ns
      if (rate <= 0.0 && r->power) rate = r->power->value() * 1e-9;  // mW = mJ/s
      if (g.peak_mw > 0.0) bridge.ceiling = g.peak_mw * 1e-9 * static_cast<double>(bridge.span_ns);
      const auto pa = g.history.grid_position(*g.last_ok_t);
      if (pa && sch.period.count() > 0) {
        const double period = static_cast<double>(sch.period.count());
        const double margin = kUpdateMarginSigmas * static_cast<double>(sch.jitter.count());
        // The updates after the last one seen (which the read before the span showed) that
        // surely came before this read, and the next one if it may have.
        std::int64_t j = g.history.last_index().value_or(static_cast<std::int64_t>(std::floor(*pa))) + 1;
        std::int64_t sure = 0;
        auto at = [&](std::int64_t k) { return static_cast<double>(*g.history.predicted_time(k)); };
        while (at(j) + margin < static_cast<double>(t) && sure < 1'000'000) ++j, ++sure;
        bridge.updates = sure;
        bridge.per_update = rate * period;
        if (g.peak_mw > 0.0) bridge.per_update_ceiling = g.peak_mw * 1e-9 * period;
        undecided_ceiling = bridge.per_update_ceiling >= 0.0 ? std::max(bridge.per_update_ceiling, bridge.per_update)
                                                             : 2.0 * bridge.per_update;
        if (at(j) - margin < static_cast<double>(t)) maybe = GpuCounter::Pending{j, raw, t, bridge.per_update};
        // A stepped counter adds a period's worth at each update, however short the span.
        if (g.peak_mw > 0.0)
          bridge.ceiling =
              std::max(bridge.ceiling, bridge.per_update_ceiling * static_cast<double>(sure + (maybe ? 1 : 0)));
      } else {
        bridge.estimate = rate * static_cast<double>(bridge.span_ns);
      }
    }
    // A pending decision: the first change of value after the anomaly settles it (another
    // anomaly first leaves it undecided: its bound stands).
    if (g.pending && raw == g.pending->raw) {
      g.pending->last_same_t = t;
    } else if (g.pending) {
      if (raw > g.pending->raw && came_before(g, *g.pending, t, raw)) g.tracker.add_estimate(g.pending->owed);
      g.pending.reset();
    }
    g.tracker.update(raw, bridge);
    if (g.tracker.anomalies() != anomalies_before && maybe) {
      // The undecided update matters if the anomaly took it away should it have come before:
      // always after a step back; after a restart, only if `raw` holds no more updates than the
      // sure ones (else it holds that one too).
      if (g.tracker.raw_updates() <= bridge.updates) {
        g.pending = maybe;
        const bool spanned = g.tracker.anomaly_record().bridged_ns != bridged_before;
        g.tracker.add_undecided(undecided_ceiling, spanned ? 0 : bridge.span_ns);
      }
    }
    g.last_ok_t = t;
    g.error.reset();
    CounterRead read;
    read.t_ns = t;
    read.asked_ns = *asked;
    read.value = g.tracker.accumulated();
    if (r->updated_at) read.stamp_ns = (*r->updated_at - wall_offset).count();
    if (r->power) read.power = r->power->value();  // mW = mJ/s
    g.history.add(read);
    note_power(g, prev_raw, raw, read.power, g.tracker.anomalies() != anomalies_before);
    // Edges are made final only against a settled schedule: before the lock an update's time
    // (the first value's above all) is a guess, and the first few fitted updates can still move
    // the schedule by more than the jitter.
    if (estimates() && mature(g.history.schedule()))
      for (auto& [name, w] : windows) {
        if (i >= w.gpu_final.size() || w.gpu_final[i] || !g.history.final_at(w.gpu_t[i])) continue;
        if (auto v = g.history.value_at(w.gpu_t[i]))
          w.gpu_mj[i] = v->value, w.gpu_unread[i] = v->unread_ns, w.gpu_unread_from[i] = v->unread_from,
          w.gpu_plain[i] = v->plain ? 1 : 0, w.gpu_final[i] = 1;
      }
    return t;
  }

  /// Checks an advance of the counter against the power read around it, then keeps the power
  /// read with the value now shown (under mu; see GpuCounter::shown_low_mw).
  ///
  /// A step back that coincides with an update (the follower's reads bracket each update, and
  /// the step lands inside the bracket) shows as an advance smaller than the update's: no
  /// decrease is ever read. An advance of one update (consecutive on the schedule) is expected
  /// to be at least the lowest power read from the earlier update through the newer one × the
  /// least time the reads leave between the two updates; one below (1 − allowance) × that is a
  /// shortfall: the window is flagged, with a bound of the most the span can have counted (the
  /// GPU's peak power × the most time between the updates) less the advance. The allowance is
  /// kLooseAllowance, or kTightAllowance once the GPU's power readings are shown to sample what
  /// its counter counts (see kAlignedEvidence).
  void note_power(GpuCounter& g, std::optional<double> prev_raw, double raw, std::optional<double> power_mw,
                  bool anomaly) {
    if (prev_raw && raw == *prev_raw) {
      if (!power_mw) {
        g.shown_checkable = false;
      } else {
        g.shown_low_mw = std::min(g.shown_low_mw, *power_mw);
        g.shown_high_mw = std::max(g.shown_high_mw, *power_mw);
      }
      return;
    }
    if (prev_raw && raw > *prev_raw && !anomaly && g.shown_checkable && power_mw && *power_mw > 0.0) {
      const UpdateSchedule& sch = g.history.schedule();
      const auto step = g.history.last_step();
      const double advance = raw - *prev_raw;
      // (The history's newest update is this advance: 1 mJ is the counter's resolution.)
      if (step && step->updates == 1 && step->least_span_ns > 0 && std::abs(step->increase - advance) < 0.5 &&
          sch.locked && !sch.continuous) {
        const double period = static_cast<double>(sch.period.count());
        // Alignment: the update's advance at the power read with it implies a span inside the
        // reads' bracket of it (widened by the sensors' noise), and the power moved.
        const double implied_ns = advance / (*power_mw * 1e-9);
        const bool agrees = implied_ns >= (1.0 - kAlignedNoise) * static_cast<double>(step->least_span_ns) &&
                            implied_ns <= (1.0 + kAlignedNoise) * static_cast<double>(step->most_span_ns);
        const double lo_mw = std::min(g.shown_low_mw, *power_mw), hi_mw = std::max(g.shown_high_mw, *power_mw);
        const bool moved = lo_mw > 0.0 && hi_mw >= kAlignedMove * lo_mw;
        const bool aligned = g.aligned_evidence >= kAlignedEvidence;
        // Increments scaled by the nominal period (not the actual one) are one period's worth.
        const double span = std::min(static_cast<double>(step->least_span_ns), period);
        const double low = lo_mw * 1e-9 * span;  // mJ
        const double allowance = aligned ? kTightAllowance : kLooseAllowance;
        if (advance < (1.0 - allowance) * low) {
          const double most_span = std::max(static_cast<double>(step->most_span_ns), period);
          const double peak_mw = g.peak_mw > 0.0 ? g.peak_mw : 2.0 * hi_mw;
          g.tracker.add_shortfall(peak_mw * 1e-9 * most_span - advance);
        }
        // (A shortfall's update disagrees too: after one the evidence is gathered again.)
        if (!agrees)
          g.aligned_evidence = 0;
        else if (moved && g.aligned_evidence < kAlignedEvidence)
          ++g.aligned_evidence;
      }
    }
    g.shown_low_mw = g.shown_high_mw = power_mw.value_or(0.0);
    g.shown_checkable = prev_raw && raw > *prev_raw && !anomaly && power_mw;
  }

  /// Whether update `p.index` came before the anomaly read, decided by the first read after it
  /// that shows a new value (`raw` at `t`): by time when the reads bracket that change within
  /// half a period (the change is then one update, placed on the grid), else by value (a
  /// starved reader sees several updates at once: their number, the increase over one update's
  /// worth, counted back from the last update due by `t`).
  static bool came_before(const GpuCounter& g, const GpuCounter::Pending& p, std::int64_t t, double raw) {
    const auto& sch = g.history.schedule();
    const double period = static_cast<double>(sch.period.count());
    const std::int64_t bracket = t - p.last_same_t;
    if (static_cast<double>(bracket) <= period / 2.0 || p.owed <= 0.0) {
      const auto at = g.history.grid_position(p.last_same_t + bracket / 2);
      return at && std::llround(*at) > p.index;
    }
    const auto at = g.history.grid_position(t);
    if (!at) return false;
    const std::int64_t seen = std::max<std::int64_t>(1, std::llround((raw - p.raw) / p.owed));
    const std::int64_t first = static_cast<std::int64_t>(std::floor(*at)) - seen + 1;
    return first > p.index;
  }

  std::chrono::nanoseconds wall_offset() const { return clock->wall_now() - clock->now(); }

  /// Reads every counter once (under mu) into `state`-shaped vectors.
  void read_counters(WindowState& s) {
    const auto offset = wall_offset();
    const std::size_t n = gpus.size();
    s.gpu_t.resize(n);
    s.gpu_mj.resize(n);
    s.gpu_final.resize(n);
    s.gpu_unread.assign(n, 0);
    s.gpu_unread_from.assign(n, 0);
    s.gpu_plain.assign(n, 0);
    s.gpu_anomalies.resize(n);
    s.gpu_failures_before.resize(n);
    s.gpu_failures_after.resize(n);
    s.gpu_read_ok.resize(n);
    s.gpu_error.resize(n);
    // Each read's "asked" time is the one before it (the first: now), saving a clock read per GPU.
    std::int64_t asked = clock->now().count();
    for (std::size_t i = 0; i < n; ++i) {
      auto& g = gpus[i];
      s.gpu_final[i] = 1;
      s.gpu_mj[i] = 0.0;
      s.gpu_t[i] = 0;
      s.gpu_failures_before[i] = g.failures;
      s.gpu_read_ok[i] = 1;
      if (s.gpu_error[i]) s.gpu_error[i].reset();
      if (g.has_counter) {
        s.gpu_t[i] = asked = read_gpu(i, offset, asked);
        if (g.error) s.gpu_read_ok[i] = 0, s.gpu_error[i] = g.error;
        s.gpu_mj[i] = g.tracker.accumulated();
        if (estimates() && !g.error) {
          if (auto v = g.history.value_at(s.gpu_t[i]))
            s.gpu_mj[i] = v->value, s.gpu_unread[i] = v->unread_ns, s.gpu_unread_from[i] = v->unread_from,
            s.gpu_plain[i] = v->plain ? 1 : 0, s.gpu_final[i] = v->final && mature(g.history.schedule()) ? 1 : 0;
        }
      }
      s.gpu_anomalies[i] = g.tracker.anomaly_record();
      s.gpu_failures_after[i] = g.failures;
    }
    s.cpu_uj.resize(cpus.size());
    s.dram_uj.resize(cpus.size());
    s.cpu_anomalies.resize(cpus.size());
    for (std::size_t i = 0; i < cpus.size(); ++i) {
      auto& c = cpus[i];
      auto e = c.cpu->package_energy();
      if (e) {
        c.package.update(e->value());
        c.error.reset();
      } else {
        c.error = e.error();
        ++c.failures;
      }
      if (c.dram) {
        auto d = c.cpu->dram_energy();
        if (d) {
          c.dram_tracker.update(d->value());
        } else {
          c.error = d.error();
          ++c.failures;
        }
      }
      s.cpu_uj[i] = c.package.accumulated();
      s.dram_uj[i] = c.dram_tracker.accumulated();
      s.cpu_anomalies[i] = c.package.anomalies() + c.dram_tracker.anomalies() + c.failures;
    }
    // SoC rails: the backend integrates them; each read brings the integral up to now.
    s.soc_mj.resize(socs.size());
    s.soc_error.resize(socs.size());
    for (std::size_t i = 0; i < socs.size(); ++i) {
      auto e = socs[i]->rail_energy();
      s.soc_mj[i].clear();
      s.soc_error[i].reset();
      if (e) {
        for (const auto& r : *e) s.soc_mj[i].push_back(r.value());
      } else {
        s.soc_error[i] = e.error();
      }
    }
  }

  /// The best value of GPU `i`'s counter at edge `t` now: final if it can be, else `fallback`
  /// (with no unread span).
  CounterEstimate edge_value(std::size_t i, std::int64_t t, double fallback) const {
    if (!estimates()) return CounterEstimate{fallback, false};
    auto v = gpus[i].history.value_at(t);
    return v ? *v : CounterEstimate{fallback, false};
  }

  // --- the follower -------------------------------------------------------------------------

  std::optional<std::int64_t> next_due() const {
    std::int64_t due = kNever;
    for (const auto& g : gpus)
      if (g.has_counter) due = std::min(due, g.plan.next_due);
    if (due == kNever) return std::nullopt;
    return due;
  }

  /// Performs the reads due at `now` (under mu).
  void follow_locked(std::int64_t now) {
    const auto offset = wall_offset();
    for (std::size_t i = 0; i < gpus.size(); ++i) {
      auto& g = gpus[i];
      if (!g.has_counter || g.plan.next_due > now) continue;
      const std::int64_t t = read_gpu(i, offset);
      if (g.error) {
        g.plan.next_due = t + kSlowPollNs;  // a failing GPU is retried, not hammered
        continue;
      }
      plan_next(g, t);
    }
  }

  /// Decides the follower's next read of `g` after a read at `t`.
  static void plan_next(GpuCounter& g, std::int64_t t) {
    FollowPlan& p = g.plan;
    const UpdateSchedule& sch = g.history.schedule();
    if (sch.relearns != p.relearns) {
      // The schedule was found contradicted: probe densely at once to learn it again.
      p.relearns = sch.relearns;
      p.probe_until = t + kProbeNs, p.next_probe = t + kReprobeNs;
    }
    if (!sch.locked) {
      // Probe: poll densely until three updates are pinned (about two periods).
      p.target.reset();
      p.guard = false;
      p.dense_done = 0;
      if (p.probe_until == 0) p.probe_until = t + kProbeNs, p.next_probe = t + kReprobeNs;
      if (t >= p.next_probe) p.probe_until = t + kProbeNs, p.next_probe = t + kReprobeNs;
      p.next_due = t + (t < p.probe_until ? kPollNs : kSlowPollNs);
      return;
    }
    if (sch.continuous) {
      p.next_due = t + kSlowPollNs;  // a read at the edge is current: nothing to follow
      return;
    }
    const double sigma = static_cast<double>(sch.jitter.count());
    const double period = static_cast<double>(sch.period.count());
    const auto last = g.history.last_index();
    if (p.target && p.guard) {
      // The read just before the target update: now the one just after it.
      p.guard = false;
      if (!(last && *last >= *p.target)) {
        if (const auto at = g.history.predicted_time(*p.target)) {
          p.next_due =
              std::max(static_cast<std::int64_t>(static_cast<double>(*at) + 3.0 * sigma) + kAfterNs, t + kMinGapNs);
          return;
        }
      }
    }
    if (p.target) {
      ++p.target_reads;
      if (last && *last >= *p.target) {
        if (p.dense) {
          ++p.dense_done;
          // Already there at the first dense read: it came earlier than the polling began, so
          // begin earlier next time (otherwise the fit would only ever see the late ones).
          if (p.target_reads == 1)
            p.lead_ns = std::min(period / 4.0, std::max(2.0 * p.lead_ns, period / 20.0));
          else
            p.lead_ns *= 0.95;
        }
        p.misses = 0;
      } else if (t < p.deadline) {
        p.dense = true;  // late (or polling around it): poll until it shows
        p.next_due = t + kPollNs;
        return;
      } else if (++p.misses >= 3) {
        // Three updates missed in a row: the schedule drifted. Probe again; the narrow brackets
        // refit it (or, far off, relock it).
        p.misses = 0;
        p.dense_done = 0;
        p.target.reset();
        p.probe_until = t + kProbeNs;
        p.next_due = t + kPollNs;
        return;
      }
    }
    // The next update that can still be ahead (skipping any the follower was too late for).
    std::int64_t j = last ? *last + 1 : 0;
    for (int guard = 0; guard < 100000; ++guard) {
      const auto at = g.history.predicted_time(j);
      if (!at || static_cast<double>(*at) + 3.0 * sigma >= static_cast<double>(t)) break;
      const double behind = (static_cast<double>(t) - static_cast<double>(*at)) / period;
      j += std::max<std::int64_t>(1, static_cast<std::int64_t>(behind) - 1);
    }
    const auto at = g.history.predicted_time(j);
    if (!at) {
      p.next_due = t + kPollNs;
      return;
    }
    p.target = j;
    p.guard = false;
    const bool stamps = sch.stamps_are_update_times.value_or(false);
    // Trusted stamps pin every update; one update in kStampRecheckEvery is still bracketed
    // densely, so stamps that stop agreeing with the reads are caught (CounterHistory).
    // An update seen earlier than expected (CounterHistory::wants_pinned_update) is pinned next.
    p.dense = stamps ? j % kStampRecheckEvery == 0
                     : (p.dense_done < kDenseAfterLock || j % kDenseEvery == 0 || g.history.wants_pinned_update());
    const double g_j = static_cast<double>(*at);
    p.target_reads = 0;
    if (p.dense) {
      // Begin early enough for the jitter (4σ) and a twentieth of a period at least: the
      // estimate of σ comes from these brackets and must not be cut short by them.
      const double lead = std::max({4.0 * sigma, period / 20.0, p.lead_ns});
      p.next_due = static_cast<std::int64_t>(g_j - lead) - kPollNs;
      p.deadline = static_cast<std::int64_t>(g_j + 4.0 * sigma + period / 4.0);
    } else {
      // Read just after the update, and first just before it: a counter anomaly (a step back, a
      // restart) then falls between two reads with no update between them, and the counter's
      // figure for every update survives it (see read_gpu).
      p.next_due = static_cast<std::int64_t>(g_j + 3.0 * sigma) + kAfterNs;
      p.deadline = static_cast<std::int64_t>(g_j + period / 2.0);
      const auto before = static_cast<std::int64_t>(g_j - kUpdateMarginSigmas * sigma) - kAfterNs;
      if (before > t + kMinGapNs) p.next_due = before, p.guard = true;
    }
    p.next_due = std::max(p.next_due, t + kMinGapNs);
  }

  void run_follower() {
    std::unique_lock lock(mu);
    while (!stopping) {
      const auto due = next_due();
      const std::int64_t now = clock->now().count();
      if (due && *due <= now) {
        follow_locked(now);
        continue;
      }
      const std::int64_t wait = due ? *due - now : 1'000'000'000;
      wake.wait_for(lock, std::chrono::nanoseconds(wait));
    }
  }

  /// Waits until every GPU counter updated after its end edge against a learned schedule
  /// (settle), reading each GPU when its history predicts the update (GPUs update on their own
  /// schedules: they are served in the order their updates are due, never one after the other);
  /// bounded by three periods past the edge. Not under mu.
  void settle(const std::vector<std::int64_t>& end_t) {
    std::vector<std::int64_t> deadline(gpus.size(), 0);
    for (std::size_t i = 0; i < gpus.size(); ++i) {
      const auto nominal =
          std::chrono::duration_cast<std::chrono::nanoseconds>(gpus[i].period.value_or(std::chrono::milliseconds(100)));
      deadline[i] = end_t[i] + 3 * nominal.count() + 50'000'000;
    }
    std::vector<std::int64_t> due(gpus.size(), kNever);
    for (;;) {
      std::int64_t next_due = kNever;
      {
        std::lock_guard lock(mu);
        const std::int64_t now = clock->now().count();
        for (std::size_t i = 0; i < gpus.size(); ++i) {
          auto& h = gpus[i].history;
          due[i] = kNever;
          // Settled: the update after the edge was read, against a learned schedule (before the
          // lock, update times inside wide brackets are guesses; the polling here pins the
          // updates that lock it, about three periods into a fresh monitor's life).
          if (!gpus[i].has_counter || gpus[i].error ||
              (h.final_at(end_t[i]) && (h.schedule().locked || h.schedule().relearning)))
            continue;
          if (h.schedule().locked) deadline[i] = std::max(deadline[i], end_t[i] + 3 * h.schedule().period.count());
          if (now >= deadline[i]) {
            // Past the bound: one last read (a starved thread may wake long after the update it
            // waited for), then the edge stays extrapolated.
            if (h.last_read_time().value_or(0) < deadline[i]) due[i] = now, next_due = std::min(next_due, now);
            continue;
          }
          // Unknown schedule: poll.
          due[i] = std::max(h.update_expected_after(end_t[i]).value_or(0), now + kPollNs);
          next_due = std::min(next_due, due[i]);
        }
      }
      if (next_due == kNever) return;
      clock->sleep_until(std::chrono::nanoseconds(next_due));
      // Every GPU that is due by now (all of them while polling, each one's own update time
      // otherwise): serving only the earliest would leave a tie polling one GPU alone.
      std::lock_guard lock(mu);
      const std::int64_t now = clock->now().count();
      const auto offset = wall_offset();
      for (std::size_t i = 0; i < gpus.size(); ++i)
        if (due[i] <= now) read_gpu(i, offset);
    }
  }

  bool syncs(bool sync) const { return sync && options.sync && !gpu_indices.empty(); }
  void sync_if(bool sync) {
    if (syncs(sync)) options.sync(gpu_indices);
  }

  void write_log_row(const Measurement& m) {
    if (log_fd < 0) return;
    std::string row;
    if (options.log_format == LogFormat::kCsv) {
      row = fmt_double(static_cast<double>(m.start_wall.count()) * 1e-9) + "," + csv_field(m.name) + "," +
            fmt_double(m.time.count());
      for (const auto& g : m.gpus) row += "," + (g.energy ? fmt_double(g.energy->value()) : std::string());
      for (const auto& c : m.cpus) {
        row += "," + fmt_double(c.package.value());
        if (c.dram) row += "," + fmt_double(c.dram->value());
      }
    } else {
      nlohmann::json j;
      j["start_time"] = static_cast<double>(m.start_wall.count()) * 1e-9;
      j["window_name"] = m.name;
      j["elapsed_time"] = m.time.count();
      for (const auto& g : m.gpus)
        j["gpu" + std::to_string(g.index) + "_energy"] =
            g.energy ? nlohmann::json(g.energy->value()) : nlohmann::json();
      for (const auto& c : m.cpus) {
        j["cpu" + std::to_string(c.index) + "_energy"] = c.package.value();
        if (c.dram) j["dram" + std::to_string(c.index) + "_energy"] = c.dram->value();
      }
      row = j.dump();
    }
    row += "\n";
    // One write(2) per row: a crash loses at most the row being written.
    const char* p = row.data();
    std::size_t left = row.size();
    while (left > 0) {
      ssize_t n = ::write(log_fd, p, left);
      if (n < 0) {
        if (errno == EINTR) continue;
        break;
      }
      p += n;
      left -= static_cast<std::size_t>(n);
    }
  }

  /// The measurement of window `name` from its begin edge `start` to the edge `end` (under mu).
  void compose(const std::string& name, const WindowState& start, const WindowState& end,
               const std::vector<std::optional<Watts>>& instant, Measurement& m) const {
    m.name = name;
    m.start_wall = start.start_wall;
    m.time = Seconds(static_cast<double>((end.start - start.start).count()) * 1e-9);
    for (std::size_t i = 0; i < gpus.size(); ++i) {
      const auto& g = gpus[i];
      GpuEnergy ge;
      ge.index = g.index;
      if (g.has_counter) {
        // Both edges at their best now: the begin edge is usually final already; the end edge is
        // final after settling, else extrapolated from the last update. An edge whose read failed
        // (after retries) is known only from reads around it: the begin edge from the history
        // (reads before it and after it), the end edge not at all (the GPU may have stopped).
        CounterEstimate begin;
        bool begin_known = true;
        if (start.gpu_final[i]) {
          begin.value = start.gpu_mj[i];
          begin.unread_ns = start.gpu_unread[i];
          begin.unread_from = start.gpu_unread_from[i];
          begin.plain = start.gpu_plain[i] != 0;
          begin_known = start.gpu_read_ok[i] || !estimates();
        } else if (!start.gpu_read_ok[i]) {
          auto v = estimates() ? g.history.value_at(start.gpu_t[i]) : std::nullopt;
          begin_known = v.has_value();
          if (v) begin = *v;
        } else {
          begin = edge_value(i, start.gpu_t[i], start.gpu_mj[i]);
        }
        if (!begin_known || !end.gpu_read_ok[i]) {
          const auto& err = !end.gpu_read_ok[i] ? end.gpu_error[i] : start.gpu_error[i];
          ge.error = Error{err ? err->code : ErrorCode::kInternal,
                           "GPU " + std::to_string(g.index) + " could not be read at the window's " +
                               (!end.gpu_read_ok[i] ? "end" : "start") + (err ? ": " + err->message : std::string())};
        } else {
          const CounterEstimate finish = edge_value(i, end.gpu_t[i], end.gpu_mj[i]);
          ge.energy = MilliJoules(std::max(0.0, finish.value - begin.value));
          // Both edges in one unread span count it once.
          const bool same = begin.unread_ns > 0 && finish.unread_ns > 0 && begin.unread_from == finish.unread_from;
          ge.unread = Seconds(static_cast<double>(begin.unread_ns + (same ? 0 : finish.unread_ns)) * 1e-9);
          ge.plain_difference = begin.plain || finish.plain;
          if (estimates() && !g.history.final_at(end.gpu_t[i])) {
            if (auto last = g.history.last_update_time())
              ge.extrapolated = Seconds(
                  static_cast<double>(std::max<std::int64_t>(0, end.gpu_t[i] - std::max(*last, start.gpu_t[i]))) *
                  1e-9);
          }
          if (!start.gpu_read_ok[i] && start.gpu_error[i]) ge.error = start.gpu_error[i];
        }
        ge.source = EnergySource::kCounter;
        const CounterAnomalies& a0 = start.gpu_anomalies[i];
        const CounterAnomalies& a1 = end.gpu_anomalies[i];
        ge.counter_restarts = a1.restarts - a0.restarts;
        ge.counter_backwards = a1.backwards - a0.backwards;
        ge.counter_shortfalls = a1.shortfalls - a0.shortfalls;
        ge.bridged = Seconds(static_cast<double>(a1.bridged_ns - a0.bridged_ns) * 1e-9);
        ge.error_bound = MilliJoules(std::max(0.0, a1.error_bound - a0.error_bound));
        ge.read_errors = end.gpu_failures_after[i] - start.gpu_failures_before[i];
        ge.affected =
            ge.counter_restarts + ge.counter_backwards + ge.counter_shortfalls + ge.read_errors > 0 || !ge.energy;
        const auto& sch = g.history.schedule();
        std::optional<std::chrono::nanoseconds> period;
        if (sch.locked && !sch.continuous)
          period = sch.period;
        else if (g.period)
          period = *g.period;
        if (period)
          ge.short_window = m.time.count() < kShortWindowPeriods * std::chrono::duration<double>(*period).count();
      } else {
        ge.source = EnergySource::kIntegrated;
        if (power_monitor) {
          auto e = g.integrated == PowerDomain::kDeviceAverage
                       ? average_energy(g, start.start, end.start, ge)
                       : power_monitor->gpu_energy(g.index, g.integrated, start.start, end.start);
          if (e) {
            ge.energy = *e;
          } else {
            ge.error = e.error();
            ge.affected = true;
          }
          const auto span = g.integrated == PowerDomain::kDeviceAverage
                                ? std::chrono::duration<double>(kAverageWindow).count()
                                : kShortWindowPeriods * std::chrono::duration<double>(power_monitor->period()).count();
          ge.short_window = m.time.count() < span;
        }
      }
      if (options.approx_instant_energy && ge.energy && ge.energy->value() == 0.0 && instant[i]) {
        ge.energy = *instant[i] * m.time;
        ge.source = EnergySource::kInstantApprox;
      }
      m.gpus.push_back(std::move(ge));
    }
    for (std::size_t i = 0; i < cpus.size(); ++i) {
      const auto& c = cpus[i];
      CpuEnergy ce;
      ce.index = c.index;
      ce.package = MicroJoules(end.cpu_uj[i] - start.cpu_uj[i]);
      if (c.dram) ce.dram = MicroJoules(end.dram_uj[i] - start.dram_uj[i]);
      ce.affected = end.cpu_anomalies[i] != start.cpu_anomalies[i];
      if (c.error) {
        ce.error = c.error;
        ce.affected = true;
      }
      m.cpus.push_back(std::move(ce));
    }
    for (std::size_t i = 0; i < socs.size(); ++i) m.socs.push_back(soc_energy(*socs[i], start, end, i));
  }

  /// Energy over [a, b] from a GPU's 1 s average power (no instant power, no counter). The
  /// driver's value at t is the mean power over [t - 1 s, t], so it lags the power by half the
  /// averaging window: its timeline integrated over [a + 0.5 s, b + 0.5 s] weighs the power at
  /// each moment of the window by one, and the power within 0.5 s of either edge by a ramp
  /// symmetric about the edge. That is exact while the power is constant or linear within 0.5 s
  /// of each edge; a step of ΔP there moves the figure by at most ΔP × 0.125 s per edge. The
  /// shifted end lies up to 0.5 s in the future when the window ends: with `settle`, end_window
  /// waits for it; otherwise (and for peeks) the part not yet lived is extrapolated at the latest
  /// average and reported in `extrapolated`.
  Result<Joules> average_energy(const GpuCounter& g, std::chrono::nanoseconds a, std::chrono::nanoseconds b,
                                GpuEnergy& ge) const {
    const auto from = a + kAverageLag, to = b + kAverageLag;
    const auto now = clock->now();
    const auto lived = std::min(to, now);
    Joules e{0.0};
    if (lived > from) {
      auto part = power_monitor->gpu_energy(g.index, PowerDomain::kDeviceAverage, from, lived);
      if (!part) return fail(part.error());
      e = *part;
    }
    const auto ahead = to - std::max(from, lived);
    if (ahead > std::chrono::nanoseconds(0)) {
      auto p = power_monitor->gpu_power(g.index, PowerDomain::kDeviceAverage);
      if (!p) return fail(p.error());
      e = e + *p * Seconds(std::chrono::duration<double>(ahead).count());
      ge.extrapolated = Seconds(std::chrono::duration<double>(ahead).count());
    }
    return e;
  }

  static SocEnergy soc_energy(const Soc& soc, const WindowState& start, const WindowState& end, std::size_t i) {
    SocEnergy se;
    se.index = soc.index();
    if (start.soc_error[i] || end.soc_error[i]) {
      se.error = end.soc_error[i] ? end.soc_error[i] : start.soc_error[i];
      return se;
    }
    const auto& rails = soc.capabilities().rails;
    Joules cpu{0.0}, gpu{0.0}, total_rail{0.0}, all{0.0};
    bool any_cpu = false, any_gpu = false;
    for (std::size_t r = 0; r < rails.size() && r < end.soc_mj[i].size() && r < start.soc_mj[i].size(); ++r) {
      const Joules e = MilliJoules(std::max(0.0, end.soc_mj[i][r] - start.soc_mj[i][r]));
      se.rails.push_back({rails[r].name, rails[r].kind, e});
      all = all + e;
      switch (rails[r].kind) {
        case RailKind::kCpu: cpu = cpu + e, any_cpu = true; break;
        case RailKind::kGpu: gpu = gpu + e, any_gpu = true; break;
        case RailKind::kTotal: total_rail = total_rail + e; break;
        default: break;
      }
    }
    if (any_cpu) se.cpu = cpu;
    if (any_gpu) se.gpu = gpu;
    se.total = soc.capabilities().has_total_rail ? total_rail : all;
    return se;
  }
};

EnergyMonitor::EnergyMonitor(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
EnergyMonitor::~EnergyMonitor() = default;

Result<std::unique_ptr<EnergyMonitor>> EnergyMonitor::create(std::vector<std::shared_ptr<Gpu>> gpus,
                                                             std::vector<std::shared_ptr<Cpu>> cpus,
                                                             EnergyMonitorOptions options) {
  auto impl = std::make_unique<Impl>();
  impl->clock = options.clock != nullptr ? options.clock : &SteadyClock::instance();

  auto selected = detail::select_gpu_indices(options.gpu_indices, gpus.size());
  if (!selected) return fail(selected.error());
  impl->gpu_indices = std::move(*selected);
  std::vector<unsigned> old_gpus;
  for (unsigned i : impl->gpu_indices) {
    const auto& caps = gpus[i]->capabilities();
    const auto nominal = caps.energy_update_period.value_or(std::chrono::milliseconds(100));
    impl->gpus.push_back(GpuCounter{i,
                                    gpus[i],
                                    caps.energy_counter,
                                    caps.energy_update_period,
                                    {},
                                    CounterHistory(std::chrono::duration_cast<std::chrono::nanoseconds>(nominal)),
                                    {},
                                    {}});
    if (caps.energy_counter && caps.power_limit)
      if (auto c = gpus[i]->power_limit_constraints(); c && c->max.value() > 0.0)
        impl->gpus.back().peak_mw = c->max.value() * kPeakMargin;
    // Not followed: never due.
    if (!options.follow_counters || !caps.energy_counter) impl->gpus.back().plan.next_due = kNever;
    if (!caps.energy_counter) {
      old_gpus.push_back(i);
      // No instant power (AMD MI200 and older report only a 1 s average): integrate the average.
      const auto& have = caps.power_domains;
      if (std::find(have.begin(), have.end(), PowerDomain::kDeviceInstant) == have.end() &&
          std::find(have.begin(), have.end(), PowerDomain::kDeviceAverage) != have.end()) {
        impl->gpus.back().integrated = PowerDomain::kDeviceAverage;
        impl->integrates_average = true;
      }
    }
  }

  if (options.cpu_indices) {
    for (unsigned want : *options.cpu_indices) {
      auto it = std::find_if(cpus.begin(), cpus.end(), [want](const auto& c) { return c->index() == want; });
      if (it == cpus.end())
        return fail(ErrorCode::kNotFound, "CPU package " + std::to_string(want) + " is not available");
      impl->cpu_indices.push_back(want);
      impl->cpus.push_back(CpuCounter{want, *it, (*it)->capabilities().dram, {}, {}, {}});
    }
  } else {
    for (auto& c : cpus) {
      impl->cpu_indices.push_back(c->index());
      impl->cpus.push_back(CpuCounter{c->index(), c, c->capabilities().dram, {}, {}, {}});
    }
  }

  impl->socs = options.socs;

  if (!old_gpus.empty()) {
    PowerMonitorOptions pm;
    pm.gpu_indices = old_gpus;
    pm.cpus = false;
    pm.clock = impl->clock;
    pm.period = options.power_sample_period;
    // Each GPU's series is sampled where it has it; a GPU that has both samples both (the
    // average is then unused), which only costs a read.
    pm.domains = {PowerDomain::kDeviceInstant};
    if (impl->integrates_average) {
      const bool any_instant = std::any_of(impl->gpus.begin(), impl->gpus.end(), [](const GpuCounter& g) {
        return !g.has_counter && g.integrated == PowerDomain::kDeviceInstant;
      });
      pm.domains = any_instant ? std::vector<PowerDomain>{PowerDomain::kDeviceInstant, PowerDomain::kDeviceAverage}
                               : std::vector<PowerDomain>{PowerDomain::kDeviceAverage};
    }
    auto monitor = PowerMonitor::create(gpus, {}, pm);
    if (!monitor) return fail(monitor.error());
    impl->power_monitor = std::move(*monitor);
  }

  if (options.log_file) {
    std::error_code ec;
    if (options.log_file->has_parent_path()) std::filesystem::create_directories(options.log_file->parent_path(), ec);
    int fd = ::open(options.log_file->c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0)
      return fail(ErrorCode::kIo, "cannot create log file " + options.log_file->string() + ": " + std::strerror(errno));
    impl->log_fd = fd;
    if (options.log_format == LogFormat::kCsv) {
      // Zeus's exact header first, then CPU and DRAM columns.
      std::string header = "start_time,window_name,elapsed_time";
      for (unsigned i : impl->gpu_indices) header += ",gpu" + std::to_string(i) + "_energy";
      for (const auto& c : impl->cpus) {
        header += ",cpu" + std::to_string(c.index) + "_energy";
        if (c.dram) header += ",dram" + std::to_string(c.index) + "_energy";
      }
      header += "\n";
      if (::write(fd, header.data(), header.size()) != static_cast<ssize_t>(header.size()))
        return fail(ErrorCode::kIo,
                    "cannot write log file " + options.log_file->string() + ": " + std::strerror(errno));
    }
  }
  impl->spare_nodes.reserve(kSpareWindowNodes);  // recycling a node never allocates
  impl->options = std::move(options);
  if (impl->options.follow_counters && impl->options.follower_thread && impl->next_due()) {
    Impl* raw = impl.get();
    impl->follower = std::thread([raw] { raw->run_follower(); });
  }
  return std::unique_ptr<EnergyMonitor>(new EnergyMonitor(std::move(impl)));
}

Result<void> EnergyMonitor::begin_window(const std::string& name, bool sync, bool restart) {
  if (impl_->syncs(sync)) {
    {  // fail before waiting for the devices
      std::lock_guard lock(impl_->mu);
      if (!restart && impl_->windows.count(name))
        return fail(ErrorCode::kAlreadyExists, "Measurement window '" + name + "' already exists");
    }
    impl_->sync_if(sync);
  }
  std::lock_guard lock(impl_->mu);
  auto& windows = impl_->windows;
  auto it = windows.find(name);
  if (it != windows.end() && !restart)
    return fail(ErrorCode::kAlreadyExists, "Measurement window '" + name + "' already exists");
  // Read into a detached node first: the window opens (or restarts) only once its counters are
  // read, so a read that throws leaves no half-started window behind.
  Impl::Windows::node_type node;
  if (!impl_->spare_nodes.empty()) {
    node = std::move(impl_->spare_nodes.back());
    impl_->spare_nodes.pop_back();
  } else {
    Impl::Windows one;
    one.emplace(name, WindowState{});
    node = one.extract(one.begin());
  }
  WindowState& s = node.mapped();
  s.start_wall = impl_->clock->wall_now();
  s.start = impl_->clock->now();
  impl_->read_counters(s);
  if (it != windows.end()) {  // restart: the new start replaces the old one
    std::swap(it->second, s);
    if (impl_->spare_nodes.size() < kSpareWindowNodes) impl_->spare_nodes.push_back(std::move(node));
  } else {
    node.key() = name;
    windows.insert(std::move(node));
  }
  return ok();
}

Result<void> EnergyMonitor::restart_window(const std::string& name, bool sync) {
  return begin_window(name, sync, true);
}

Result<void> EnergyMonitor::cancel_window(const std::string& name, bool sync) {
  if (impl_->syncs(sync)) {
    {
      std::lock_guard lock(impl_->mu);
      if (!impl_->windows.count(name))
        return fail(ErrorCode::kNotFound, "Measurement window '" + name + "' does not exist");
    }
    impl_->sync_if(sync);
  }
  std::lock_guard lock(impl_->mu);
  if (impl_->windows.erase(name) == 0)
    return fail(ErrorCode::kNotFound, "Measurement window '" + name + "' does not exist");
  return ok();
}

std::vector<std::string> EnergyMonitor::reset_windows() {
  std::lock_guard lock(impl_->mu);
  std::vector<std::string> names;
  for (const auto& [n, s] : impl_->windows) names.push_back(n);
  impl_->windows.clear();
  impl_->ended.clear();  // windows ended by end_window_later and not collected are dropped too
  return names;
}

Result<Measurement> EnergyMonitor::end_window(const std::string& name, bool sync) {
  if (impl_->syncs(sync) || impl_->options.approx_instant_energy) {
    std::lock_guard lock(impl_->mu);  // fail before reading power or waiting for the devices
    if (!impl_->windows.count(name))
      return fail(ErrorCode::kNotFound, "Measurement window '" + name + "' does not exist");
  }
  // Instant power is read before synchronizing, as Zeus does, so it reflects the work.
  std::vector<std::optional<Watts>> instant;
  if (impl_->options.approx_instant_energy) {
    instant.resize(impl_->gpus.size());
    for (std::size_t i = 0; i < impl_->gpus.size(); ++i) {
      auto p = impl_->gpus[i].gpu->power(PowerDomain::kDeviceInstant);
      if (p) instant[i] = Watts(*p);
    }
  }
  impl_->sync_if(sync);

  Measurement m;
  m.gpus.reserve(impl_->gpus.size());
  m.cpus.reserve(impl_->cpus.size());
  Impl::Windows::node_type node;
  std::vector<std::int64_t> settle_at;
  std::optional<std::chrono::nanoseconds> average_until;
  // The end edge's reads: in the monitor's scratch (no allocation on the hot path), or, when
  // settling releases the lock, in this call's own copy (another end_window reuses the scratch).
  WindowState settled_end;
  {
    std::lock_guard lock(impl_->mu);
    auto it = impl_->windows.find(name);
    if (it == impl_->windows.end())
      return fail(ErrorCode::kNotFound, "Measurement window '" + name + "' does not exist");
    node = impl_->windows.extract(it);
    WindowState& end = impl_->end_scratch;
    end.start = impl_->clock->now();
    impl_->read_counters(end);
    if (impl_->options.settle && impl_->estimates()) settle_at = end.gpu_t;
    // A GPU measured by its 1 s average: settling waits until the average has covered the end
    // edge (kAverageLag past it; see average_energy).
    if (impl_->options.settle && impl_->integrates_average) average_until = end.start + kAverageLag;
    if (!settle_at.empty() || average_until) settled_end = end;
  }
  // Settling sleeps: never under the monitor's lock (other windows and the follower go on).
  if (!settle_at.empty()) impl_->settle(settle_at);
  if (average_until) impl_->clock->sleep_until(*average_until);
  {
    std::lock_guard lock(impl_->mu);
    const WindowState& start = node.mapped();
    const WindowState& end = settle_at.empty() && !average_until ? impl_->end_scratch : settled_end;
    impl_->compose(name, start, end, instant, m);
    impl_->write_log_row(m);
    if (impl_->spare_nodes.size() < kSpareWindowNodes) impl_->spare_nodes.push_back(std::move(node));
  }
  return m;
}

Result<void> EnergyMonitor::end_window_later(const std::string& name, bool sync) {
  {
    std::lock_guard lock(impl_->mu);
    if (!impl_->windows.count(name))
      return fail(ErrorCode::kNotFound, "Measurement window '" + name + "' does not exist");
    if (impl_->ended.count(name))
      return fail(ErrorCode::kAlreadyExists, "Measurement window '" + name + "' ended earlier is not collected yet");
  }
  impl_->sync_if(sync);
  std::lock_guard lock(impl_->mu);
  auto it = impl_->windows.find(name);
  if (it == impl_->windows.end()) return fail(ErrorCode::kNotFound, "Measurement window '" + name + "' does not exist");
  // Another end_window_later of the name may have ended one while the lock was released.
  auto [slot, inserted] = impl_->ended.try_emplace(name);
  if (!inserted)
    return fail(ErrorCode::kAlreadyExists, "Measurement window '" + name + "' ended earlier is not collected yet");
  slot->second.second.start = impl_->clock->now();
  impl_->read_counters(slot->second.second);
  slot->second.first = std::move(it->second);
  impl_->windows.erase(it);
  return ok();
}

Result<Measurement> EnergyMonitor::collect_window(const std::string& name) {
  std::vector<std::int64_t> settle_at;
  std::optional<std::chrono::nanoseconds> average_until;
  {
    std::lock_guard lock(impl_->mu);
    auto it = impl_->ended.find(name);
    if (it == impl_->ended.end())
      return fail(ErrorCode::kNotFound, "No measurement window '" + name + "' awaits collection");
    const WindowState& end = it->second.second;
    if (impl_->estimates()) settle_at = end.gpu_t;
    if (impl_->integrates_average) average_until = end.start + kAverageLag;
  }
  // Never under the lock; returns at once where the updates after the edge were read already.
  if (!settle_at.empty()) impl_->settle(settle_at);
  if (average_until) impl_->clock->sleep_until(*average_until);
  Measurement m;
  std::lock_guard lock(impl_->mu);
  auto it = impl_->ended.find(name);
  if (it == impl_->ended.end())
    return fail(ErrorCode::kNotFound, "No measurement window '" + name + "' awaits collection");
  const std::vector<std::optional<Watts>> no_instant(impl_->gpus.size());
  impl_->compose(name, it->second.first, it->second.second, no_instant, m);
  impl_->write_log_row(m);
  impl_->ended.erase(it);
  return m;
}

Result<Measurement> EnergyMonitor::peek_window(const std::string& name) {
  Measurement m;
  std::lock_guard lock(impl_->mu);
  auto it = impl_->windows.find(name);
  if (it == impl_->windows.end()) return fail(ErrorCode::kNotFound, "Measurement window '" + name + "' does not exist");
  WindowState& end = impl_->end_scratch;
  end.start = impl_->clock->now();
  impl_->read_counters(end);
  const std::vector<std::optional<Watts>> no_instant(impl_->gpus.size());
  impl_->compose(name, it->second, end, no_instant, m);
  return m;
}

const std::vector<unsigned>& EnergyMonitor::gpu_indices() const { return impl_->gpu_indices; }
const std::vector<unsigned>& EnergyMonitor::cpu_indices() const { return impl_->cpu_indices; }
PowerMonitor* EnergyMonitor::power_monitor() const { return impl_->power_monitor.get(); }

std::vector<std::string> EnergyMonitor::open_windows() const {
  std::lock_guard lock(impl_->mu);
  std::vector<std::string> names;
  for (const auto& [n, s] : impl_->windows) names.push_back(n);
  return names;
}

}  // namespace erg::measure

namespace erg::measure {

Result<UpdateSchedule> EnergyMonitor::counter_schedule(unsigned gpu) const {
  std::lock_guard lock(impl_->mu);
  for (const auto& g : impl_->gpus)
    if (g.index == gpu) {
      if (!g.has_counter) return fail(ErrorCode::kNotFound, "GPU " + std::to_string(gpu) + " has no energy counter");
      return g.history.schedule();
    }
  return fail(ErrorCode::kNotFound, "GPU " + std::to_string(gpu) + " is not being monitored");
}

std::optional<std::chrono::nanoseconds> EnergyMonitor::next_follow_time() const {
  std::lock_guard lock(impl_->mu);
  auto due = impl_->next_due();
  if (!due) return std::nullopt;
  return std::chrono::nanoseconds(*due);
}

void EnergyMonitor::follow() {
  std::lock_guard lock(impl_->mu);
  impl_->follow_locked(impl_->clock->now().count());
}

}  // namespace erg::measure
