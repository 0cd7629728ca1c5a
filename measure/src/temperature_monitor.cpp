#include "erg/measure/temperature_monitor.hpp"

#include <algorithm>
#include <atomic>
#include <deque>
#include <mutex>
#include <string>

#include "erg/measure/periodic_sampler.hpp"
#include "gpu_selection.hpp"

namespace erg::measure {
namespace {

/// One GPU's readings with their own lock, so a query on one GPU never waits for another.
struct Slot {
  unsigned index = 0;  // erg index
  std::shared_ptr<Gpu> gpu;
  std::size_t capacity = 0;  // 0: unbounded
  // Touched by the sampling round only.
  int consecutive_errors = 0;
  std::optional<int> last;  // previous reading, stored or not (deduplication)

  mutable std::mutex mu;
  std::deque<TemperaturePoint> points;
  // Set (under mu) when the GPU stopped being sampled; from then on its temperature is unknown.
  std::optional<std::chrono::nanoseconds> stopped_at;
  std::optional<Error> stopped_error;
};

std::string gpu_name(unsigned index) { return "GPU " + std::to_string(index); }

}  // namespace

struct TemperatureMonitor::Impl {
  const Clock* clock = nullptr;
  std::chrono::microseconds period{};
  std::vector<unsigned> gpu_indices;
  std::vector<std::unique_ptr<Slot>> slots;
  std::atomic<std::uint64_t> rounds{0};
  mutable std::mutex errors_mu;
  std::vector<SamplingError> errors;
  std::unique_ptr<PeriodicSampler> sampler;

  void stop_slot(Slot& s, Error e) {
    {
      std::lock_guard lock(s.mu);
      if (s.stopped_at) return;
      s.stopped_at = clock->now();
      s.stopped_error = e;
    }
    std::lock_guard lock(errors_mu);
    errors.push_back({"gpu" + std::to_string(s.index), std::move(e)});
  }

  // One round at a time: the sampler's rounds and TemperatureMonitor::sample_once() share the
  // slots' error counts and last values.
  std::mutex round_mu;

  void sample_once() {
    std::lock_guard round(round_mu);
    for (auto& slot : slots) {
      Slot& s = *slot;
      {
        std::lock_guard lock(s.mu);
        if (s.stopped_at) continue;
      }
      auto t = s.gpu->temperature();
      const auto now = clock->now();
      if (!t) {
        // NotSupported or a lost GPU: stop at once (Zeus stops polling a GPU whose temperature
        // is not supported); a transient error is retried next round, a few times in a row.
        if (transient(t.error().code) && ++s.consecutive_errors < kGpuRetries) continue;
        stop_slot(s, t.error());
        continue;
      }
      s.consecutive_errors = 0;
      if (s.last && *s.last == *t) continue;  // unchanged: not stored
      s.last = *t;
      std::lock_guard lock(s.mu);
      s.points.push_back({now, *t});
      if (s.capacity > 0 && s.points.size() > s.capacity) s.points.pop_front();
    }
    rounds.fetch_add(1, std::memory_order_relaxed);
  }

  Result<const Slot*> slot(unsigned gpu) const {
    for (const auto& s : slots)
      if (s->index == gpu) return s.get();
    return fail(ErrorCode::kNotFound, gpu_name(gpu) + " is not being monitored");
  }
};

TemperatureMonitor::TemperatureMonitor(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TemperatureMonitor::~TemperatureMonitor() { stop(); }

Result<std::unique_ptr<TemperatureMonitor>> TemperatureMonitor::create(std::vector<std::shared_ptr<Gpu>> gpus,
                                                                       TemperatureMonitorOptions options) {
  auto impl = std::make_unique<Impl>();
  impl->clock = options.clock != nullptr ? options.clock : &SteadyClock::instance();
  if (options.period.count() <= 0) return fail(ErrorCode::kInvalidArgument, "sampling period must be positive");
  impl->period = options.period;

  auto selected = detail::select_gpu_indices(options.gpu_indices, gpus.size());
  if (!selected) return fail(selected.error());
  const std::vector<unsigned>& indices = *selected;
  if (indices.empty()) return fail(ErrorCode::kInvalidArgument, "nothing to sample: no GPU");
  impl->gpu_indices = indices;
  for (unsigned i : indices) {
    auto s = std::make_unique<Slot>();
    s->index = i;
    s->gpu = gpus[i];
    s->capacity = options.max_samples;
    impl->slots.push_back(std::move(s));
  }
  // A GPU that says it has no temperature sensor is not polled at all.
  for (auto& s : impl->slots)
    if (!s->gpu->capabilities().temperature)
      impl->stop_slot(*s, Error{ErrorCode::kNotSupported, gpu_name(s->index) + ": temperature cannot be read"});

  std::unique_ptr<TemperatureMonitor> monitor(new TemperatureMonitor(std::move(impl)));
  if (options.start_thread) {
    Impl* raw = monitor->impl_.get();
    raw->sample_once();  // the first round now: every timeline starts at creation
    raw->sampler = std::make_unique<PeriodicSampler>(raw->period, [raw] { raw->sample_once(); });
  }
  return monitor;
}

void TemperatureMonitor::stop() {
  if (impl_ && impl_->sampler) impl_->sampler->stop();
}

void TemperatureMonitor::sample_once() { impl_->sample_once(); }
std::chrono::microseconds TemperatureMonitor::period() const { return impl_->period; }
const std::vector<unsigned>& TemperatureMonitor::gpu_indices() const { return impl_->gpu_indices; }
std::uint64_t TemperatureMonitor::rounds() const { return impl_->rounds.load(std::memory_order_relaxed); }

bool TemperatureMonitor::sampled(unsigned gpu) const {
  auto s = impl_->slot(gpu);
  if (!s) return false;
  std::lock_guard lock((*s)->mu);
  return !(*s)->stopped_at;
}

std::vector<SamplingError> TemperatureMonitor::errors() const {
  std::lock_guard lock(impl_->errors_mu);
  return impl_->errors;
}

Result<int> TemperatureMonitor::temperature(unsigned gpu, std::optional<std::chrono::nanoseconds> time) const {
  auto found = impl_->slot(gpu);
  if (!found) return fail(found.error());
  const Slot& s = **found;
  std::lock_guard lock(s.mu);
  if (s.stopped_at && (!time || *time >= *s.stopped_at)) {
    const Error& e = *s.stopped_error;
    return fail(e.code, gpu_name(gpu) + " stopped being sampled: " + e.message);
  }
  if (s.points.empty()) return fail(ErrorCode::kUnavailable, "no temperature reading yet for " + gpu_name(gpu));
  if (!time) return s.points.back().celsius;
  // Nearest stored reading; a tie goes to the earlier one.
  auto after = std::lower_bound(s.points.begin(), s.points.end(), *time,
                                [](const TemperaturePoint& p, std::chrono::nanoseconds t) { return p.time < t; });
  if (after == s.points.begin()) return after->celsius;
  if (after == s.points.end()) return s.points.back().celsius;
  auto before = std::prev(after);
  return (*time - before->time <= after->time - *time) ? before->celsius : after->celsius;
}

Result<std::vector<TemperaturePoint>> TemperatureMonitor::timeline(unsigned gpu, std::chrono::nanoseconds start,
                                                                   std::chrono::nanoseconds end) const {
  auto found = impl_->slot(gpu);
  if (!found) return fail(found.error());
  const Slot& s = **found;
  std::lock_guard lock(s.mu);
  auto first = std::lower_bound(s.points.begin(), s.points.end(), start,
                                [](const TemperaturePoint& p, std::chrono::nanoseconds t) { return p.time < t; });
  auto last = std::upper_bound(first, s.points.end(), end,
                               [](std::chrono::nanoseconds t, const TemperaturePoint& p) { return t < p.time; });
  return std::vector<TemperaturePoint>(first, last);
}

std::size_t TemperatureMonitor::stored_samples() const {
  std::size_t n = 0;
  for (const auto& s : impl_->slots) {
    std::lock_guard lock(s->mu);
    n += s->points.size();
  }
  return n;
}

}  // namespace erg::measure
