#pragma once
/// The RAPL keepalive: a background thread that reads every zone of one discovery often enough
/// that no wrap is missed while the process is idle.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "erg/core/units.hpp"

namespace erg::rapl {

inline constexpr std::chrono::nanoseconds kMinKeepalivePeriod = std::chrono::milliseconds(1);
inline constexpr std::chrono::nanoseconds kMaxKeepalivePeriod = std::chrono::seconds(60);

/// The keepalive period for the smallest counter range of a discovery:
/// max_range_uj / max_power / 4, clamped to [1 ms, 60 s]; 60 s when the range is 0 (unknown).
/// Why: at most max_power the counter needs at least max_range_uj / max_power to wrap once, so a
/// read every quarter of that sees every wrap (one decrease per wrap) with a 4× margin for a
/// late wake-up. 1 ms is RAPL's own update period (reading faster gains nothing); 60 s keeps an
/// idle process nearly free (a typical 262 kJ range at 1000 W gives 65 s). Below 1 ms (tiny
/// ranges, only seen in tests) the guarantee no longer holds; wrap inference covers the rest.
std::chrono::nanoseconds keepalive_period(std::uint64_t max_range_uj, Watts max_power);

/// Runs `tasks` every `period` on one thread. Starts in the constructor; the destructor stops it
/// promptly (condition variable, no sleep to wait out) and joins. Not copyable or movable: hold it
/// in a shared_ptr (every RaplCpu of a discovery shares one). Tasks must not throw and must not
/// destroy the Keepalive.
class Keepalive {
 public:
  using Task = std::function<void()>;
  Keepalive(std::vector<Task> tasks, std::chrono::nanoseconds period);
  ~Keepalive();
  Keepalive(const Keepalive&) = delete;
  Keepalive& operator=(const Keepalive&) = delete;
  Keepalive(Keepalive&&) = delete;
  Keepalive& operator=(Keepalive&&) = delete;

  [[nodiscard]] std::chrono::nanoseconds period() const { return period_; }
  /// Completed rounds (every task run once per round). Thread-safe.
  [[nodiscard]] std::uint64_t rounds() const { return rounds_.load(std::memory_order_acquire); }

 private:
  void run();

  std::vector<Task> tasks_;
  std::chrono::nanoseconds period_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::atomic<std::uint64_t> rounds_{0};
  std::thread thread_;  // Last: starts after every other member is initialised.
};

}  // namespace erg::rapl
