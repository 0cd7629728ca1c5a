#include "erg/backends/rapl/keepalive.hpp"

#include <algorithm>
#include <utility>

namespace erg::rapl {

std::chrono::nanoseconds keepalive_period(std::uint64_t max_range_uj, Watts max_power) {
  if (max_range_uj == 0 || max_power.value() <= 0.0) return kMaxKeepalivePeriod;  // No wrap to catch.
  // µJ / W = µs; a quarter of the shortest time one wrap can take.
  const double period_us = static_cast<double>(max_range_uj) / max_power.value() / 4.0;
  const double max_us = std::chrono::duration<double, std::micro>(kMaxKeepalivePeriod).count();
  if (period_us >= max_us) return kMaxKeepalivePeriod;
  const auto period = std::chrono::nanoseconds(static_cast<long long>(period_us * 1000.0));
  return std::clamp(period, kMinKeepalivePeriod, kMaxKeepalivePeriod);
}

Keepalive::Keepalive(std::vector<Task> tasks, std::chrono::nanoseconds period)
    : tasks_(std::move(tasks)), period_(std::max(period, kMinKeepalivePeriod)), thread_([this] { run(); }) {}

Keepalive::~Keepalive() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void Keepalive::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    if (wake_.wait_for(lock, period_, [this] { return stop_; })) return;
    lock.unlock();
    for (const auto& task : tasks_) task();
    rounds_.fetch_add(1, std::memory_order_acq_rel);
    lock.lock();
  }
}

}  // namespace erg::rapl
