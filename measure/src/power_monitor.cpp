#include "erg/measure/power_monitor.hpp"

#include <pthread.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "gpu_selection.hpp"

namespace erg::measure {
namespace {

constexpr std::chrono::microseconds kMaxPeriod{100'000};

/// One sampled series with its own lock, so queries on one device never wait for another.
struct Series {
  explicit Series(std::size_t capacity) : timeline(capacity) {}
  mutable std::mutex mu;
  Timeline timeline;
  // Set (under mu) when the device stopped being sampled: from then on no power or energy is
  // known for it, and queries reaching past it are errors, not the last sample held forever.
  std::optional<std::chrono::nanoseconds> stopped_at;
  std::optional<Error> stopped_error;
  // Driver stamps (GPU series; sampler thread only). A stamp is the sensor's update time only if
  // it lies between the previous read and this one when the value changed; stamps are used once
  // kStampsInside changes in a row agreed (kStampsInsideAgain after any disagreed), and never
  // to backdate a sample by more than the sensor's update period, nor before the last sample.
  std::optional<std::chrono::nanoseconds> prev_read_wall;
  std::optional<double> prev_watts;
  int stamps_inside = 0;
  int stamps_outside = 0;
  std::optional<std::chrono::nanoseconds> last_t;
};

constexpr int kStampsInside = 3;
constexpr int kStampsInsideAgain = 16;
constexpr std::chrono::nanoseconds kStampSlack{200'000};

struct GpuSlot {
  unsigned index;  // erg index
  std::shared_ptr<Gpu> gpu;
  std::map<PowerDomain, std::unique_ptr<Series>> series;
  bool failed = false;
  int consecutive_errors = 0;  // a transient error is retried next round, up to kGpuRetries in a row
  // The most a sample is backdated by a driver stamp: the sensor's update period.
  std::chrono::nanoseconds max_backdate{kMaxPeriod};
  std::shared_ptr<std::atomic<std::uint64_t>> read_errors = std::make_shared<std::atomic<std::uint64_t>>(0);
};

struct CpuSlot {
  unsigned index;
  std::shared_ptr<Cpu> cpu;
  std::unique_ptr<Series> package;
  std::unique_ptr<Series> dram;  // null without a DRAM domain
  bool failed = false;
  int consecutive_errors = 0;  // an I/O error is retried next round, up to kCpuRetries in a row
};

struct SocSlot {
  unsigned index;
  std::shared_ptr<Soc> soc;
  std::vector<std::unique_ptr<Series>> rails;  // capabilities().rails order
  bool failed = false;
  int consecutive_errors = 0;  // an I/O error is retried next round, up to kCpuRetries in a row
};

// Consecutive I/O errors after which a CPU stops being sampled (one is a glitch: a counter that
// read corrupt or reset, which RaplCpu reports and counts on from).
constexpr int kCpuRetries = 3;
// Consecutive rounds with a transient GPU error (a timeout, an unknown driver error) after which
// the GPU stops being sampled; a lost GPU stops at once.
constexpr int kGpuRetries = 5;

void stop_series(Series& s, std::chrono::nanoseconds t, const Error& e) {
  std::lock_guard lock(s.mu);
  if (s.stopped_at) return;
  s.stopped_at = t;
  s.stopped_error = e;
}

}  // namespace

struct PowerMonitor::Impl {
  const Clock* clock = nullptr;
  std::chrono::microseconds period{kMaxPeriod};
  std::vector<unsigned> gpu_indices;
  std::vector<PowerDomain> domains;
  std::vector<GpuSlot> gpus;
  std::vector<CpuSlot> cpus;
  std::vector<SocSlot> socs;

  mutable std::mutex errors_mu;
  std::vector<SamplingError> errors;
  std::atomic<std::uint64_t> rounds{0};

  std::mutex stop_mu;
  std::condition_variable stop_cv;
  bool stopping = false;
  std::thread thread;

  void record_error(std::string device, Error e) {
    std::lock_guard lock(errors_mu);
    errors.push_back({std::move(device), std::move(e)});
  }

  // One round at a time: the thread's rounds and PowerMonitor::sample_once() (callers that want
  // a round now, while the thread runs) share the slots' error bookkeeping.
  std::mutex round_mu;

  void sample_once() {
    std::lock_guard round(round_mu);
    for (auto& slot : gpus) {
      if (slot.failed) continue;
      for (auto& [domain, series] : slot.series) {
        auto p = slot.gpu->power_reading(domain);
        if (!p) {
          slot.read_errors->fetch_add(1, std::memory_order_relaxed);
          // A transient error skips this round (the timeline holds its last sample across the
          // gap); a lasting one, or a lost GPU, stops the GPU: reported, and its series end
          // there. The others continue.
          if (transient(p.error().code) && ++slot.consecutive_errors < kGpuRetries) break;
          slot.failed = true;
          const auto now = clock->now();
          for (auto& [d, s] : slot.series) stop_series(*s, now, p.error());
          record_error("gpu" + std::to_string(slot.index), p.error());
          break;
        }
        slot.consecutive_errors = 0;
        // Stamp the sample with the time the sensor produced it when the driver's stamps are
        // shown to be update times (see Series), not the time we happened to read it.
        auto t = clock->now();
        const double watts = Watts(p->power).value();
        Series& s = *series;
        if (p->updated_at) {
          const auto wall = clock->wall_now();
          if (s.prev_read_wall && s.prev_watts && watts != *s.prev_watts) {
            const bool inside =
                *p->updated_at >= *s.prev_read_wall - kStampSlack && *p->updated_at <= wall + kStampSlack;
            inside ? ++s.stamps_inside : (s.stamps_inside = 0, ++s.stamps_outside);
          }
          s.prev_read_wall = wall;
          const int need = s.stamps_outside > 0 ? kStampsInsideAgain : kStampsInside;
          const auto age = wall - *p->updated_at;
          if (s.stamps_inside >= need && age > std::chrono::nanoseconds(0)) t -= std::min(age, slot.max_backdate);
        }
        s.prev_watts = watts;
        if (s.last_t && t < *s.last_t) t = *s.last_t;  // the timeline never runs backwards
        s.last_t = t;
        std::lock_guard lock(series->mu);
        series->timeline.add_power(t, watts);
      }
    }
    for (auto& slot : cpus) {
      if (slot.failed) continue;
      auto e = slot.cpu->package_energy();
      auto t = clock->now();
      if (!e) {
        if (e.error().code != ErrorCode::kIo || ++slot.consecutive_errors >= kCpuRetries) {
          slot.failed = true;
          stop_series(*slot.package, t, e.error());
          if (slot.dram) stop_series(*slot.dram, t, e.error());
          record_error("cpu" + std::to_string(slot.index), e.error());
        }
        continue;
      }
      slot.consecutive_errors = 0;
      {
        std::lock_guard lock(slot.package->mu);
        slot.package->timeline.add_energy(t, Joules(*e).value());
      }
      if (slot.dram) {
        auto d = slot.cpu->dram_energy();
        if (d) {
          std::lock_guard lock(slot.dram->mu);
          slot.dram->timeline.add_energy(t, Joules(*d).value());
        }
      }
    }
    for (auto& slot : socs) {
      if (slot.failed) continue;
      auto p = slot.soc->rail_power();
      const auto t = clock->now();
      if (!p) {
        // As for CPUs: an I/O error (a sysfs read that failed once) is retried; anything else,
        // or errors in a row, stops the SoC's series there.
        if (p.error().code != ErrorCode::kIo || ++slot.consecutive_errors >= kCpuRetries) {
          slot.failed = true;
          for (auto& s : slot.rails) stop_series(*s, t, p.error());
          record_error("soc" + std::to_string(slot.index), p.error());
        }
        continue;
      }
      slot.consecutive_errors = 0;
      for (std::size_t r = 0; r < slot.rails.size() && r < p->size(); ++r) {
        std::lock_guard lock(slot.rails[r]->mu);
        slot.rails[r]->timeline.add_power(t, Watts((*p)[r]).value());
      }
    }
    rounds.fetch_add(1, std::memory_order_relaxed);
  }

  void run() {
    // Absolute deadlines on the steady clock so the rate does not drift with sampling cost.
    // create() took the first round.
    auto next = std::chrono::steady_clock::now();
    std::unique_lock lock(stop_mu);
    while (!stopping) {
      next += period;
      const auto now = std::chrono::steady_clock::now();
      if (next < now) next = now;  // fell behind: don't burst to catch up
      stop_cv.wait_until(lock, next, [this] { return stopping; });
      if (stopping) break;
      lock.unlock();
      sample_once();
      lock.lock();
    }
  }

  const GpuSlot* gpu_slot(unsigned index) const {
    for (const auto& s : gpus)
      if (s.index == index) return &s;
    return nullptr;
  }
  const CpuSlot* cpu_slot(unsigned index) const {
    for (const auto& s : cpus)
      if (s.index == index) return &s;
    return nullptr;
  }
  Result<const Series*> gpu_series(unsigned gpu, PowerDomain domain) const {
    const GpuSlot* slot = gpu_slot(gpu);
    if (slot == nullptr) return fail(ErrorCode::kNotFound, "GPU " + std::to_string(gpu) + " is not being monitored");
    auto it = slot->series.find(domain);
    if (it == slot->series.end())
      return fail(ErrorCode::kNotFound, "Power domain " + std::string(to_string(domain)) +
                                            " is not being monitored on GPU " + std::to_string(gpu));
    return it->second.get();
  }
  Result<const Series*> cpu_series(unsigned cpu, CpuDomain domain) const {
    const CpuSlot* slot = cpu_slot(cpu);
    if (slot == nullptr) return fail(ErrorCode::kNotFound, "CPU " + std::to_string(cpu) + " is not being monitored");
    const Series* s = domain == CpuDomain::kPackage ? slot->package.get() : slot->dram.get();
    if (s == nullptr) return fail(ErrorCode::kNotFound, "CPU " + std::to_string(cpu) + " has no DRAM domain");
    return s;
  }
  Result<const Series*> soc_series(unsigned soc, unsigned rail) const {
    for (const auto& s : socs) {
      if (s.index != soc) continue;
      if (rail >= s.rails.size())
        return fail(ErrorCode::kNotFound, "SoC " + std::to_string(soc) + " has no rail " + std::to_string(rail));
      return s.rails[rail].get();
    }
    return fail(ErrorCode::kNotFound, "SoC " + std::to_string(soc) + " is not being monitored");
  }
};

namespace {

/// The error for a query at `t` (nullopt: now) on a series that stopped before it.
std::optional<Error> stopped_before(const Series& s, std::optional<std::chrono::nanoseconds> t,
                                    const std::string& what) {
  if (!s.stopped_at || (t && *t < *s.stopped_at)) return std::nullopt;
  const ErrorCode code = s.stopped_error ? s.stopped_error->code : ErrorCode::kUnavailable;
  return Error{code, what + " stopped being sampled" + (s.stopped_error ? ": " + s.stopped_error->message : "")};
}

Result<Watts> power_of(const Series& s, std::optional<std::chrono::nanoseconds> time, const std::string& what) {
  std::lock_guard lock(s.mu);
  if (auto e = stopped_before(s, time, what)) return fail(*e);
  auto p = time ? s.timeline.nearest(*time) : s.timeline.latest();
  if (!p) return fail(ErrorCode::kUnavailable, "no power sample yet for " + what);
  return Watts(p->watts);
}

Result<std::vector<PowerPoint>> timeline_of(const Series& s, std::chrono::nanoseconds a, std::chrono::nanoseconds b) {
  std::lock_guard lock(s.mu);
  return s.timeline.between(a, b);
}

Result<Joules> energy_of(const Series& s, std::chrono::nanoseconds a, std::chrono::nanoseconds b,
                         std::chrono::nanoseconds now, const std::string& what) {
  if (b > now)
    return fail(ErrorCode::kInvalidArgument, "the interval for " + what + " ends " +
                                                 std::to_string(std::chrono::duration<double>(b - now).count()) +
                                                 " s in the future (no energy is reported for time not yet lived)");
  std::lock_guard lock(s.mu);
  // Energy past the moment the device stopped being sampled is unknown: an error, not the last
  // sample held to `b`.
  if (s.stopped_at && b > *s.stopped_at) return fail(*stopped_before(s, b, what));
  auto e = s.timeline.energy(a, b);
  if (!e) {
    if (e.error().code == ErrorCode::kUnavailable)
      return fail(ErrorCode::kUnavailable, "no power sample yet for " + what);
    return fail(e.error().code, what + ": " + e.error().message);
  }
  return Joules(*e);
}

Result<Watts> power_at_of(const Series& s, std::chrono::nanoseconds t, const std::string& what) {
  std::lock_guard lock(s.mu);
  if (auto e = stopped_before(s, t, what)) return fail(*e);
  auto p = s.timeline.power_at(t);
  if (!p) return fail(ErrorCode::kUnavailable, "no power sample at that time for " + what);
  return Watts(*p);
}

}  // namespace

PowerMonitor::PowerMonitor(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
PowerMonitor::~PowerMonitor() { stop(); }

Result<std::unique_ptr<PowerMonitor>> PowerMonitor::create(std::vector<std::shared_ptr<Gpu>> gpus,
                                                           std::vector<std::shared_ptr<Cpu>> cpus,
                                                           PowerMonitorOptions options) {
  auto impl = std::make_unique<Impl>();
  impl->clock = options.clock != nullptr ? options.clock : &SteadyClock::instance();

  auto selected = detail::select_gpu_indices(options.gpu_indices, gpus.size());
  if (!selected) return fail(selected.error());
  const std::vector<unsigned>& indices = *selected;

  // Domains: as requested (duplicates dropped), else every domain any sampled GPU supports.
  std::vector<PowerDomain> domains;
  for (auto d : options.domains)
    if (std::find(domains.begin(), domains.end(), d) == domains.end()) domains.push_back(d);
  if (domains.empty()) {
    for (auto d : {PowerDomain::kDeviceInstant, PowerDomain::kDeviceAverage, PowerDomain::kMemoryAverage})
      for (unsigned i : indices) {
        const auto& have = gpus[i]->capabilities().power_domains;
        if (std::find(have.begin(), have.end(), d) != have.end()) {
          domains.push_back(d);
          break;
        }
      }
  }
  for (unsigned i : indices) {
    GpuSlot slot{i, gpus[i], {}, false};
    const auto& caps = gpus[i]->capabilities();
    if (const auto u = caps.power_update_period ? caps.power_update_period : caps.energy_update_period)
      slot.max_backdate = *u;
    const auto& have = gpus[i]->capabilities().power_domains;
    for (auto d : domains)
      if (std::find(have.begin(), have.end(), d) != have.end())
        slot.series.emplace(d, std::make_unique<Series>(options.max_samples));
    impl->gpus.push_back(std::move(slot));
  }
  for (auto d : domains) {
    bool any = std::any_of(impl->gpus.begin(), impl->gpus.end(), [d](const GpuSlot& s) { return s.series.count(d); });
    if (!any)
      return fail(ErrorCode::kInvalidArgument,
                  "power domain " + std::string(to_string(d)) + " is not supported by any monitored GPU");
  }
  if (options.cpus) {
    for (auto& cpu : cpus) {
      CpuSlot slot{cpu->index(), cpu, std::make_unique<Series>(options.max_samples), nullptr, false};
      if (cpu->capabilities().dram) slot.dram = std::make_unique<Series>(options.max_samples);
      impl->cpus.push_back(std::move(slot));
    }
  }
  for (auto& soc : options.socs) {
    SocSlot slot{soc->index(), soc, {}, false};
    for (std::size_t r = 0; r < soc->capabilities().rails.size(); ++r)
      slot.rails.push_back(std::make_unique<Series>(options.max_samples));
    impl->socs.push_back(std::move(slot));
  }
  if (impl->gpus.empty() && impl->cpus.empty() && impl->socs.empty())
    return fail(ErrorCode::kInvalidArgument, "nothing to sample: no GPU, no CPU and no SoC");

  if (options.period) {
    if (options.period->count() <= 0) return fail(ErrorCode::kInvalidArgument, "sampling period must be positive");
    impl->period = *options.period;
  } else {
    std::vector<std::shared_ptr<Gpu>> sampled;
    for (unsigned i : indices) sampled.push_back(gpus[i]);
    impl->period = sampled.empty() ? kMaxPeriod : infer_sampling_period(sampled);
    // SoC rails: twice per sensor update, as for GPUs (their backends know the period).
    for (const auto& soc : options.socs)
      if (auto u = soc->capabilities().update_period)
        impl->period = std::min(impl->period, std::clamp(*u / 2, std::chrono::microseconds(1000), kMaxPeriod));
  }
  impl->gpu_indices = indices;
  impl->domains = domains;

  std::unique_ptr<PowerMonitor> monitor(new PowerMonitor(std::move(impl)));
  // The first round now: every timeline starts at creation.
  if (options.start_thread) monitor->impl_->sample_once();
  if (options.start_thread) {
    Impl* raw = monitor->impl_.get();
    raw->thread = std::thread([raw] { raw->run(); });
  }
  return monitor;
}

void PowerMonitor::stop() {
  if (!impl_) return;
  {
    std::lock_guard lock(impl_->stop_mu);
    impl_->stopping = true;
  }
  impl_->stop_cv.notify_all();
  if (impl_->thread.joinable()) impl_->thread.join();
}

void PowerMonitor::sample_once() { impl_->sample_once(); }
std::chrono::microseconds PowerMonitor::period() const { return impl_->period; }
const std::vector<unsigned>& PowerMonitor::gpu_indices() const { return impl_->gpu_indices; }
const std::vector<PowerDomain>& PowerMonitor::domains() const { return impl_->domains; }
std::uint64_t PowerMonitor::rounds() const { return impl_->rounds.load(std::memory_order_relaxed); }

std::optional<std::chrono::nanoseconds> PowerMonitor::sampler_cpu_time() const {
  if (!impl_->thread.joinable()) return std::nullopt;
  clockid_t cid;
  if (pthread_getcpuclockid(const_cast<std::thread&>(impl_->thread).native_handle(), &cid) != 0) return std::nullopt;
  timespec ts{};
  if (clock_gettime(cid, &ts) != 0) return std::nullopt;
  return std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec);
}

bool PowerMonitor::sampled(unsigned gpu, PowerDomain domain) const {
  return static_cast<bool>(impl_->gpu_series(gpu, domain));
}

std::uint64_t PowerMonitor::read_errors(unsigned gpu) const {
  for (const auto& g : impl_->gpus)
    if (g.index == gpu) return g.read_errors->load(std::memory_order_relaxed);
  return 0;
}

std::vector<SamplingError> PowerMonitor::errors() const {
  std::lock_guard lock(impl_->errors_mu);
  return impl_->errors;
}

Result<Watts> PowerMonitor::gpu_power(unsigned gpu, PowerDomain domain,
                                      std::optional<std::chrono::nanoseconds> time) const {
  auto s = impl_->gpu_series(gpu, domain);
  if (!s) return fail(s.error());
  return power_of(**s, time, "GPU " + std::to_string(gpu));
}

Result<std::vector<PowerPoint>> PowerMonitor::gpu_timeline(unsigned gpu, PowerDomain domain,
                                                           std::chrono::nanoseconds start,
                                                           std::chrono::nanoseconds end) const {
  auto s = impl_->gpu_series(gpu, domain);
  if (!s) return fail(s.error());
  return timeline_of(**s, start, end);
}

Result<Joules> PowerMonitor::gpu_energy(unsigned gpu, PowerDomain domain, std::chrono::nanoseconds start,
                                        std::chrono::nanoseconds end) const {
  auto s = impl_->gpu_series(gpu, domain);
  if (!s) return fail(s.error());
  return energy_of(**s, start, end, impl_->clock->now(), "GPU " + std::to_string(gpu));
}

Result<Watts> PowerMonitor::cpu_power(unsigned cpu, CpuDomain domain,
                                      std::optional<std::chrono::nanoseconds> time) const {
  auto s = impl_->cpu_series(cpu, domain);
  if (!s) return fail(s.error());
  return power_of(**s, time, "CPU " + std::to_string(cpu));
}

Result<std::vector<PowerPoint>> PowerMonitor::cpu_timeline(unsigned cpu, CpuDomain domain,
                                                           std::chrono::nanoseconds start,
                                                           std::chrono::nanoseconds end) const {
  auto s = impl_->cpu_series(cpu, domain);
  if (!s) return fail(s.error());
  return timeline_of(**s, start, end);
}

Result<Joules> PowerMonitor::cpu_energy(unsigned cpu, CpuDomain domain, std::chrono::nanoseconds start,
                                        std::chrono::nanoseconds end) const {
  auto s = impl_->cpu_series(cpu, domain);
  if (!s) return fail(s.error());
  return energy_of(**s, start, end, impl_->clock->now(), "CPU " + std::to_string(cpu));
}

Result<Watts> PowerMonitor::soc_power(unsigned soc, unsigned rail, std::optional<std::chrono::nanoseconds> time) const {
  auto s = impl_->soc_series(soc, rail);
  if (!s) return fail(s.error());
  return power_of(**s, time, "SoC " + std::to_string(soc) + " rail " + std::to_string(rail));
}

Result<std::vector<PowerPoint>> PowerMonitor::soc_timeline(unsigned soc, unsigned rail, std::chrono::nanoseconds start,
                                                           std::chrono::nanoseconds end) const {
  auto s = impl_->soc_series(soc, rail);
  if (!s) return fail(s.error());
  return timeline_of(**s, start, end);
}

Result<Joules> PowerMonitor::soc_energy(unsigned soc, unsigned rail, std::chrono::nanoseconds start,
                                        std::chrono::nanoseconds end) const {
  auto s = impl_->soc_series(soc, rail);
  if (!s) return fail(s.error());
  return energy_of(**s, start, end, impl_->clock->now(),
                   "SoC " + std::to_string(soc) + " rail " + std::to_string(rail));
}

Result<Watts> PowerMonitor::gpu_power_at(unsigned gpu, PowerDomain domain, std::chrono::nanoseconds time) const {
  auto s = impl_->gpu_series(gpu, domain);
  if (!s) return fail(s.error());
  return power_at_of(**s, time, "GPU " + std::to_string(gpu));
}

Result<Watts> PowerMonitor::cpu_power_at(unsigned cpu, CpuDomain domain, std::chrono::nanoseconds time) const {
  auto s = impl_->cpu_series(cpu, domain);
  if (!s) return fail(s.error());
  return power_at_of(**s, time, "CPU " + std::to_string(cpu));
}

std::size_t PowerMonitor::allocated_bytes() const {
  std::size_t n = 0;
  for (const auto& g : impl_->gpus)
    for (const auto& [d, s] : g.series) {
      std::lock_guard lock(s->mu);
      n += s->timeline.allocated_bytes();
    }
  for (const auto& c : impl_->cpus)
    for (const Series* s : {c.package.get(), c.dram.get()}) {
      if (s == nullptr) continue;
      std::lock_guard lock(s->mu);
      n += s->timeline.allocated_bytes();
    }
  for (const auto& c : impl_->socs)
    for (const auto& s : c.rails) {
      std::lock_guard lock(s->mu);
      n += s->timeline.allocated_bytes();
    }
  return n;
}

std::size_t PowerMonitor::stored_samples() const {
  std::size_t n = 0;
  for (const auto& g : impl_->gpus)
    for (const auto& [d, s] : g.series) {
      std::lock_guard lock(s->mu);
      n += s->timeline.size();
    }
  for (const auto& c : impl_->cpus) {
    for (const Series* s : {c.package.get(), c.dram.get()}) {
      if (s == nullptr) continue;
      std::lock_guard lock(s->mu);
      n += s->timeline.size();
    }
  }
  for (const auto& c : impl_->socs)
    for (const auto& s : c.rails) {
      std::lock_guard lock(s->mu);
      n += s->timeline.size();
    }
  return n;
}

std::optional<std::chrono::microseconds> infer_update_period(Gpu& gpu, std::chrono::milliseconds budget) {
  const auto& domains = gpu.capabilities().power_domains;
  PowerDomain domain = PowerDomain::kDeviceInstant;
  if (std::find(domains.begin(), domains.end(), domain) == domains.end()) {
    if (std::find(domains.begin(), domains.end(), PowerDomain::kDeviceAverage) == domains.end()) return std::nullopt;
    domain = PowerDomain::kDeviceAverage;
  }
  using clock = std::chrono::steady_clock;
  auto start = clock::now();
  // Two detectors run side by side. A driver that stamps its readings with the sensor's update
  // time (NVML field timestamps) shows each update even when the value repeats; a change of
  // value marks an update otherwise (Zeus's method). A driver whose stamps move on almost every
  // poll is stamping the query, not the update, so its stamps are ignored.
  std::optional<std::chrono::nanoseconds> last_stamp;
  std::optional<std::chrono::nanoseconds> stamp_shortest;
  int stamp_changes = 0;
  // A value change shows that an update happened inside a bracket: from the start of the
  // previous read to the end of this one. Two changes in a row were at least one period apart,
  // so the interval between them lies in [lo, hi] = [B.start - A.end, B.end - A.start], and
  // hi >= period for every pair. A late poll (preemption) widens a bracket: it lowers that
  // pair's lo and raises its hi, never the other way. So the period lies between
  //   L = the largest lo among pairs that may be one period apart (lo <= min hi), and
  //   H = the smallest hi,
  // and the estimate is the middle of [L, H]. A late poll followed by a prompt one cannot
  // shorten it, however many there are; a quiet machine gives a bracket of a few hundred µs.
  constexpr auto kTightBracket = std::chrono::microseconds(1500);
  struct Bracket {
    clock::time_point from;
    clock::time_point to;
  };
  std::optional<double> last_value;
  std::optional<clock::time_point> last_read_start;
  std::optional<Bracket> last_change;
  std::vector<std::pair<std::chrono::nanoseconds, std::chrono::nanoseconds>> pairs;  // (lo, hi)
  int tight_intervals = 0;
  int polls = 0;
  // Poll with a short sleep (not a busy loop) until a few updates were seen or time is up.
  // Stamps that move on (nearly) every poll stamp the query: only value changes count then.
  auto stamps_track = [&] { return stamp_changes * 2 < polls; };
  while (clock::now() - start < budget && tight_intervals < 5 && !(stamp_changes >= 6 && stamps_track())) {
    const auto read_start = clock::now();
    auto p = gpu.power_reading(domain);
    const auto read_end = clock::now();
    if (!p) return std::nullopt;
    ++polls;
    if (p->updated_at) {
      if (last_stamp && *p->updated_at != *last_stamp) {
        auto interval = *p->updated_at - *last_stamp;
        if (interval > std::chrono::nanoseconds(0) && (!stamp_shortest || interval < *stamp_shortest))
          stamp_shortest = interval;
        ++stamp_changes;
      }
      last_stamp = p->updated_at;
    }
    const double v = p->power.value();
    if (last_value && v != *last_value) {
      const Bracket change{*last_read_start, read_end};
      if (last_change) {
        using std::chrono::duration_cast;
        using std::chrono::nanoseconds;
        pairs.emplace_back(duration_cast<nanoseconds>(change.from - last_change->to),
                           duration_cast<nanoseconds>(change.to - last_change->from));
        const auto tight = [&](const Bracket& b) { return b.to - b.from <= kTightBracket; };
        if (tight(change) && tight(*last_change)) ++tight_intervals;
      }
      last_change = change;
    }
    last_value = v;
    last_read_start = read_start;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  std::optional<std::chrono::nanoseconds> value_shortest;
  if (!pairs.empty()) {
    auto high = pairs.front().second;
    for (const auto& [lo, hi] : pairs) high = std::min(high, hi);
    auto low = std::chrono::nanoseconds::min();
    for (const auto& [lo, hi] : pairs)
      if (lo <= high) low = std::max(low, lo);
    low = std::max(low, std::chrono::nanoseconds(0));
    value_shortest = low + (high - low) / 2;
  }
  const bool stamps_track_updates = stamp_shortest && stamps_track();
  std::optional<std::chrono::nanoseconds> shortest = stamps_track_updates ? stamp_shortest : value_shortest;
  if (!shortest) return std::nullopt;
  return std::chrono::duration_cast<std::chrono::microseconds>(*shortest);
}

std::chrono::microseconds infer_sampling_period(const std::vector<std::shared_ptr<Gpu>>& gpus) {
  std::map<std::string, std::optional<std::chrono::microseconds>> by_model;
  for (const auto& g : gpus)
    if (!by_model.count(g->name())) by_model[g->name()] = infer_update_period(*g);
  std::optional<std::chrono::microseconds> fastest;
  for (const auto& [name, p] : by_model)
    if (p && (!fastest || *p < *fastest)) fastest = p;
  if (!fastest) return kMaxPeriod;
  return std::min(kMaxPeriod, std::max(std::chrono::microseconds(1000), *fastest / 2));
}

}  // namespace erg::measure
