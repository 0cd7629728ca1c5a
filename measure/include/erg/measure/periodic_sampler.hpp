#pragma once
/// PeriodicSampler: one background thread that calls a function every period, on absolute
/// deadlines (the rate does not drift with the function's cost; a late round is not followed by
/// a burst to catch up). RAII: the thread starts in the constructor and is joined in stop() or
/// the destructor; stop() wakes it at once rather than waiting out the period. Move-only through
/// unique_ptr. The sampling monitors (TemperatureMonitor) own one each.

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace erg::measure {

class PeriodicSampler {
 public:
  /// Starts the thread: `round` runs every `period` (> 0), first one period from now (callers
  /// that want a sample at once take it themselves before constructing, as create() does).
  /// `round` runs on the sampler's thread only, never concurrently with itself.
  PeriodicSampler(std::chrono::microseconds period, std::function<void()> round);
  ~PeriodicSampler();
  PeriodicSampler(const PeriodicSampler&) = delete;
  PeriodicSampler& operator=(const PeriodicSampler&) = delete;

  /// Stops and joins the thread. Idempotent; thread-safe. Must not be called from `round`.
  void stop();
  [[nodiscard]] std::chrono::microseconds period() const { return period_; }

 private:
  void run();

  const std::chrono::microseconds period_;
  const std::function<void()> round_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::mutex join_mu_;  // serializes concurrent stop() calls around join()
  std::thread thread_;
};

}  // namespace erg::measure
