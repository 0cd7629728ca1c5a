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

std::chrono::nanoseconds SteadyClock::now() const { return read(CLOCK_MONOTONIC); }
std::chrono::nanoseconds SteadyClock::wall_now() const { return read(CLOCK_REALTIME); }
SteadyClock& SteadyClock::instance() {
  static SteadyClock clock;
  return clock;
}

}  // namespace erg
