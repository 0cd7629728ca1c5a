#include "erg/measure/periodic_sampler.hpp"

#include <utility>

namespace erg::measure {

PeriodicSampler::PeriodicSampler(std::chrono::microseconds period, std::function<void()> round)
    : period_(period), round_(std::move(round)) {
  thread_ = std::thread([this] { run(); });
}

PeriodicSampler::~PeriodicSampler() { stop(); }

void PeriodicSampler::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  std::lock_guard join(join_mu_);
  if (thread_.joinable()) thread_.join();
}

void PeriodicSampler::run() {
  auto next = std::chrono::steady_clock::now();
  std::unique_lock lock(mu_);
  while (!stopping_) {
    next += period_;
    const auto now = std::chrono::steady_clock::now();
    if (next < now) next = now;  // fell behind: don't burst to catch up
    cv_.wait_until(lock, next, [this] { return stopping_; });
    if (stopping_) break;
    lock.unlock();
    round_();
    lock.lock();
  }
}

}  // namespace erg::measure
