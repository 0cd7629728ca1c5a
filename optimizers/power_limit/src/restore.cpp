#include "erg/optimizers/power_limit/restore.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <unordered_set>
#include <utility>

namespace erg::power_limit {

struct detail::RestoreTargets {
  std::vector<std::shared_ptr<Gpu>> gpus;
  mutable std::mutex mutex;
  bool done = false;

  Result<void> restore() {
    std::lock_guard lock(mutex);
    if (done) return ok();
    done = true;
    Result<void> first = ok();
    for (auto& g : gpus) {
      auto r = g->reset_power_limit();
      if (!r && first) first = fail(r.error());
    }
    return first;
  }
};

namespace {

// Process-wide by nature: a signal reaches the process, not an object. The registry holds the
// guards that are alive; the watcher thread and the atexit handler restore them.
struct Registry {
  std::mutex mutex;
  std::unordered_set<std::shared_ptr<detail::RestoreTargets>> live;
  int pipe_write = -1;
  bool installed = false;
};

Registry& registry() {
  // Never destroyed: the atexit handler and the watcher thread may use it during exit.
  static auto* r = new Registry;
  return *r;
}

void restore_all() {
  std::unordered_set<std::shared_ptr<detail::RestoreTargets>> live;
  {
    std::lock_guard lock(registry().mutex);
    live = registry().live;
  }
  for (const auto& g : live) (void)g->restore();
}

volatile sig_atomic_t g_pipe_write = -1;

/// Async-signal-safe: one byte (the signal number) into the pipe; the watcher does the rest.
void on_signal(int sig) {
  const int fd = g_pipe_write;
  if (fd < 0) return;
  const unsigned char b = static_cast<unsigned char>(sig);
  const int saved = errno;
  (void)!::write(fd, &b, 1);
  errno = saved;
}

void watch(int fd) {
  for (;;) {
    unsigned char b = 0;
    const ssize_t n = ::read(fd, &b, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    const int sig = b;
    restore_all();
    // Then the signal's default action: the process ends as it would have without erg.
    ::signal(sig, SIG_DFL);
    ::kill(::getpid(), sig);
  }
}

}  // namespace

void install_signal_restore() {
  Registry& reg = registry();
  std::lock_guard lock(reg.mutex);
  if (reg.installed) return;
  reg.installed = true;
  std::atexit([] { restore_all(); });
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return;  // best effort: destructors and exit() still restore
  reg.pipe_write = fds[1];
  g_pipe_write = fds[1];
  // The watcher must not take the signals itself before they are handled: it only reads.
  std::thread(watch, fds[0]).detach();
  for (int sig : {SIGTERM, SIGINT}) {
    struct sigaction old {};
    if (::sigaction(sig, nullptr, &old) != 0) continue;
    const bool is_default = (old.sa_flags & SA_SIGINFO) == 0 && old.sa_handler == SIG_DFL;
    if (!is_default) continue;  // the program handles (or ignores) it: leave it so
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    ::sigaction(sig, &sa, nullptr);
  }
}

RestoreGuard::RestoreGuard(std::vector<std::shared_ptr<Gpu>> gpus, bool on_signals)
    : impl_(std::make_shared<detail::RestoreTargets>()) {
  impl_->gpus = std::move(gpus);
  if (on_signals) {
    install_signal_restore();
    std::lock_guard lock(registry().mutex);
    registry().live.insert(impl_);
  }
}

RestoreGuard::~RestoreGuard() { (void)restore(); }

Result<void> RestoreGuard::restore() {
  auto r = impl_->restore();
  std::lock_guard lock(registry().mutex);
  registry().live.erase(impl_);
  return r;
}

bool RestoreGuard::restored() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->done;
}

}  // namespace erg::power_limit
