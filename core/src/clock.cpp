#include "erg/core/clock.hpp"

#include <ctime>

namespace erg {
namespace {
std::chrono::nanoseconds read(clockid_t id) {
  timespec ts{};
  clock_gettime(id, &ts);
  return std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec);
}
}  // namespace

void Clock::sleep_until(std::chrono::nanoseconds t) const {
  // Short, absolute sleeps until the clock says so: correct for any clock that moves by itself.
  for (auto now = this->now(); now < t; now = this->now()) {
    const auto left = t - now;
    timespec ts{static_cast<time_t>(left.count() / 1'000'000'000), static_cast<long>(left.count() % 1'000'000'000)};
    nanosleep(&ts, nullptr);
  }
}

std::chrono::nanoseconds SteadyClock::now() const { return read(CLOCK_MONOTONIC); }
std::chrono::nanoseconds SteadyClock::wall_now() const { return read(CLOCK_REALTIME); }
SteadyClock& SteadyClock::instance() {
  static SteadyClock clock;
  return clock;
}

}  // namespace erg
