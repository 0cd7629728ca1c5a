#pragma once
/// Clocks. Measurement code asks a `Clock` for the time so tests can substitute a
/// `VirtualClock` and get exact, repeatable durations.

#include <atomic>
#include <chrono>

namespace erg {

/// A monotonic time source. Thread-safe.
class Clock {
 public:
  virtual ~Clock() = default;
  /// Monotonic time since an arbitrary epoch.
  [[nodiscard]] virtual std::chrono::nanoseconds now() const = 0;
  /// Wall-clock time since the Unix epoch (for log timestamps).
  [[nodiscard]] virtual std::chrono::nanoseconds wall_now() const = 0;
  /// Waits until now() ≥ `t` (returns at once if it already is). A virtual clock moves itself
  /// there instead of waiting, so code that waits for time to pass runs on it unchanged.
  virtual void sleep_until(std::chrono::nanoseconds t) const;
};

/// CLOCK_MONOTONIC and CLOCK_REALTIME.
class SteadyClock final : public Clock {
 public:
  [[nodiscard]] std::chrono::nanoseconds now() const override;
  [[nodiscard]] std::chrono::nanoseconds wall_now() const override;
  /// The process-wide instance.
  static SteadyClock& instance();
};

/// A clock that only moves when told to. Thread-safe.
class VirtualClock final : public Clock {
 public:
  explicit VirtualClock(std::chrono::nanoseconds start = std::chrono::seconds(1),
                        std::chrono::nanoseconds wall_start = std::chrono::seconds(1'700'000'000))
      : now_(start.count()), wall_offset_(wall_start.count() - start.count()) {}
  [[nodiscard]] std::chrono::nanoseconds now() const override {
    return std::chrono::nanoseconds(now_.load(std::memory_order_acquire));
  }
  [[nodiscard]] std::chrono::nanoseconds wall_now() const override {
    return now() + std::chrono::nanoseconds(wall_offset_);
  }
  void advance(std::chrono::nanoseconds d) { now_.fetch_add(d.count(), std::memory_order_acq_rel); }
  void set(std::chrono::nanoseconds t) { now_.store(t.count(), std::memory_order_release); }
  /// Moves the clock forward to `t` (never back).
  void sleep_until(std::chrono::nanoseconds t) const override {
    long long cur = now_.load(std::memory_order_acquire);
    while (cur < t.count() && !now_.compare_exchange_weak(cur, t.count(), std::memory_order_acq_rel)) {
    }
  }

 private:
  mutable std::atomic<long long> now_;
  long long wall_offset_;
};

}  // namespace erg
