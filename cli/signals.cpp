#include "signals.hpp"

#include <poll.h>
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

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

int pump_child_lines(int fd, pid_t pid, const std::function<void(const std::string&)>& handle) {
  std::string buffer;
  int status = 0;
  bool exited = false, eof = false;
  while (!exited) {
    if (!eof) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 100) > 0) {
        char buf[4096];
        const ssize_t got = ::read(fd, buf, sizeof buf);
        if (got > 0) {
          buffer.append(buf, static_cast<std::size_t>(got));
          for (std::size_t nl; (nl = buffer.find('\n')) != std::string::npos; buffer.erase(0, nl + 1))
            handle(buffer.substr(0, nl));
        } else if (got == 0 || errno != EINTR) {
          eof = true;
        }
      }
    }
    const pid_t w = ::waitpid(pid, &status, eof ? 0 : WNOHANG);
    if (w == pid) exited = true;
    if (w < 0 && errno != EINTR) break;
  }
  return status;
}

}  // namespace erg::cli
