#pragma once
// The owner thread of one device: runs queued commands in order.

#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <thread>

namespace erg::daemon {

class DeviceWorker {
 public:
  DeviceWorker() : thread_([this] { run(); }) {}
  ~DeviceWorker() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    cv_.notify_one();
    thread_.join();
  }
  DeviceWorker(const DeviceWorker&) = delete;
  DeviceWorker& operator=(const DeviceWorker&) = delete;

  /// Enqueues `task`; false once stopping. Tasks must not throw.
  bool post(std::function<void()> task) {
    {
      std::lock_guard lock(mutex_);
      if (stop_) return false;
      queue_.push_back(std::move(task));
    }
    cv_.notify_one();
    return true;
  }

  /// Waits until every task queued before this call has run (tests, shutdown ordering).
  void drain() {
    std::promise<void> done;
    auto f = done.get_future();
    if (post([&done] { done.set_value(); })) f.wait();
  }

 private:
  void run() {
    std::unique_lock lock(mutex_);
    for (;;) {
      cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stop_ and nothing left: queued setters still run first
      auto task = std::move(queue_.front());
      queue_.pop_front();
      lock.unlock();
      task();
      lock.lock();
    }
  }

  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool stop_ = false;
  std::thread thread_;  // last
};

}  // namespace erg::daemon
