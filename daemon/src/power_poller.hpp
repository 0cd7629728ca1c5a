#pragma once
// Demand-driven power polling: one thread per device that sleeps (no device calls) until the
// first subscriber arrives and goes back to sleep when the last one leaves. Every poller of a
// kind shares one Hub so a stream over several devices waits on one condition variable.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace erg::daemon {

struct Hub {
  std::mutex mutex;
  std::condition_variable cv;
};

class PowerPoller {
 public:
  /// `sample` reads the device and returns the event JSON when the value changed since the
  /// previous call (it keeps its own state), nullopt otherwise. Called only on this poller's
  /// thread. `reset` is called when polling starts, so the first sample after a pause is sent.
  PowerPoller(std::shared_ptr<Hub> hub, std::chrono::nanoseconds period,
              std::function<std::optional<std::string>()> sample, std::function<void()> reset)
      : hub_(std::move(hub)), period_(period), sample_(std::move(sample)), reset_(std::move(reset)), thread_([this] {
          run();
        }) {}
  ~PowerPoller() {
    {
      std::lock_guard lock(hub_->mutex);
      stop_ = true;
    }
    hub_->cv.notify_all();
    wake_.notify_all();
    thread_.join();
  }
  PowerPoller(const PowerPoller&) = delete;
  PowerPoller& operator=(const PowerPoller&) = delete;

  void subscribe() {
    {
      std::lock_guard lock(hub_->mutex);
      ++subscribers_;
    }
    wake_.notify_all();
  }
  void unsubscribe() {
    std::lock_guard lock(hub_->mutex);
    if (subscribers_ > 0) --subscribers_;
  }
  /// Under hub->mutex.
  [[nodiscard]] std::uint64_t seq_locked() const { return seq_; }
  [[nodiscard]] const std::string& event_locked() const { return event_; }
  [[nodiscard]] unsigned subscribers() const {
    std::lock_guard lock(hub_->mutex);
    return subscribers_;
  }

 private:
  void run() {
    std::unique_lock lock(hub_->mutex);
    for (;;) {
      wake_.wait(lock, [this] { return stop_ || subscribers_ > 0; });
      if (stop_) return;
      lock.unlock();
      reset_();
      auto next = std::chrono::steady_clock::now();
      lock.lock();
      while (!stop_ && subscribers_ > 0) {
        lock.unlock();
        auto event = sample_();
        lock.lock();
        if (event) {
          event_ = std::move(*event);
          ++seq_;
          hub_->cv.notify_all();
        }
        next += period_;
        auto now = std::chrono::steady_clock::now();
        if (next < now) next = now;
        wake_.wait_until(lock, next, [this] { return stop_ || subscribers_ == 0; });
      }
    }
  }

  std::shared_ptr<Hub> hub_;
  std::chrono::nanoseconds period_;
  std::function<std::optional<std::string>()> sample_;
  std::function<void()> reset_;
  std::condition_variable wake_;  // waits on hub_->mutex
  unsigned subscribers_ = 0;
  bool stop_ = false;
  std::uint64_t seq_ = 0;
  std::string event_;
  std::thread thread_;  // last
};

}  // namespace erg::daemon
