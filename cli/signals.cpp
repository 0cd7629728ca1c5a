#include "signals.hpp"

#include <pthread.h>

#include <cerrno>
#include <ctime>

namespace erg::cli {

StopSignals::StopSignals() {
  sigemptyset(&set_);
  sigaddset(&set_, SIGINT);
  sigaddset(&set_, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set_, &old_);
}

StopSignals::~StopSignals() { pthread_sigmask(SIG_SETMASK, &old_, nullptr); }

std::optional<int> StopSignals::wait(std::optional<std::chrono::nanoseconds> timeout) {
  while (true) {
    int sig;
    if (timeout) {
      auto ns = timeout->count() < 0 ? 0 : timeout->count();
      timespec ts{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
      sig = sigtimedwait(&set_, nullptr, &ts);
    } else {
      sig = sigwaitinfo(&set_, nullptr);
    }
    if (sig > 0) return sig;
    if (errno == EAGAIN) return std::nullopt;  // timed out
    if (errno != EINTR) return std::nullopt;
  }
}

}  // namespace erg::cli
