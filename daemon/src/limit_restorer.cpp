#include "limit_restorer.hpp"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace erg::daemon {
namespace {

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77  // Linux 6.5
#endif
#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434  // Linux 5.3
#endif

/// Field 22 of /proc/PID/stat (start time, clock ticks since boot) and whether the process is
/// a zombie; nullopt when there is no such process.
std::optional<std::pair<std::uint64_t, bool>> stat_of(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!f || !std::getline(f, text)) return std::nullopt;
  // The command name (field 2) is in parentheses and may hold spaces: fields count from the last ')'.
  const auto close = text.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream rest(text.substr(close + 1));
  std::string state, field;
  rest >> state;  // field 3
  for (int i = 4; i < 22 && (rest >> field); ++i) {
  }
  std::uint64_t start = 0;
  if (!(rest >> start)) return std::nullopt;
  return std::pair{start, state == "Z"};
}

std::string watts(MilliWatts limit) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f W", limit.value() / 1000.0);
  return buf;
}

std::string mhz_range(Megahertz min, Megahertz max) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "[%.0f, %.0f] MHz", min.value(), max.value());
  return buf;
}

}  // namespace

std::shared_ptr<const ClientProcess> ClientProcess::of(const Peer& peer) {
  if (!peer.unix_socket || !peer.pid || *peer.pid <= 0) return nullptr;
  const pid_t pid = *peer.pid;
  int fd = -1;
  // The socket's own pidfd names the process that connected, even if its pid was reused since.
  if (peer.socket_fd >= 0) {
    socklen_t len = sizeof fd;
    if (::getsockopt(peer.socket_fd, SOL_SOCKET, SO_PEERPIDFD, &fd, &len) != 0) fd = -1;
  }
  if (fd < 0) {
    fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
    if (fd < 0 && errno == ESRCH)  // it has exited already: its limit comes back at once
      return std::shared_ptr<const ClientProcess>(new ClientProcess(pid, -1, 0, true));
  }
  if (fd >= 0) {
    ::fcntl(fd, F_SETFD, FD_CLOEXEC);
    return std::shared_ptr<const ClientProcess>(new ClientProcess(pid, fd, 0, false));
  }
  auto st = stat_of(pid);  // no pidfds here: the pid and its start time
  if (!st || st->second) return std::shared_ptr<const ClientProcess>(new ClientProcess(pid, -1, 0, true));
  return std::shared_ptr<const ClientProcess>(new ClientProcess(pid, -1, st->first, false));
}

ClientProcess::~ClientProcess() {
  if (pidfd_ >= 0) ::close(pidfd_);
}

bool ClientProcess::exited() const {
  if (gone_) return true;
  if (pidfd_ >= 0) {
    pollfd p{pidfd_, POLLIN, 0};
    return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLIN | POLLHUP | POLLERR)) != 0;
  }
  auto st = stat_of(pid_);
  return !st || st->first != start_time_ || st->second;
}

LimitRestorer::LimitRestorer(const DeviceSlots& devices, std::function<void(const std::string&)> log)
    : devices_(devices),
      log_(std::move(log)),
      claims_(devices.gpus.size() * kKinds),
      generation_(devices.gpus.size() * kKinds, 0),
      default_(devices.gpus.size()) {
  wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  thread_ = std::thread([this] { watch_loop(); });
}

LimitRestorer::~LimitRestorer() {
  stop();
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

void LimitRestorer::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  if (wake_fd_ >= 0) {
    const std::uint64_t one = 1;
    (void)!::write(wake_fd_, &one, sizeof one);
  }
  if (thread_.joinable()) thread_.join();
}

void LimitRestorer::before_set(unsigned gpu) {
  {
    std::lock_guard lock(mutex_);
    if (default_[gpu]) return;
  }
  Gpu& g = *devices_.gpus[gpu].gpu;
  auto d = g.default_power_limit();
  if (!d) d = g.power_limit();  // no default to read: the limit ergd found before its first set
  if (!d) return;
  std::lock_guard lock(mutex_);
  if (!default_[gpu]) default_[gpu] = *d;
}

void LimitRestorer::claimed(unsigned gpu, std::shared_ptr<const ClientProcess> owner, MilliWatts limit) {
  {
    std::lock_guard lock(mutex_);
    const unsigned k = slot(gpu, kPowerLimit);
    ++generation_[k];
    if (owner && default_[gpu])
      claims_[k] = Claim{std::move(owner), limit, Megahertz(0.0), Megahertz(0.0), generation_[k]};
    else
      claims_[k].reset();  // a setter ergd cannot name: the limit stays, nobody owns it
  }
  const std::uint64_t one = 1;
  if (wake_fd_ >= 0) (void)!::write(wake_fd_, &one, sizeof one);
}

void LimitRestorer::clocks_claimed(unsigned gpu, Clocks domain, std::shared_ptr<const ClientProcess> owner,
                                   Megahertz min, Megahertz max) {
  {
    std::lock_guard lock(mutex_);
    const unsigned k = slot(gpu, domain == Clocks::kSm ? kSmClocks : kMemoryClocks);
    ++generation_[k];
    if (owner)
      claims_[k] = Claim{std::move(owner), MilliWatts(0.0), min, max, generation_[k]};
    else
      claims_[k].reset();  // a setter ergd cannot name: the clocks stay locked, nobody owns them
  }
  const std::uint64_t one = 1;
  if (wake_fd_ >= 0) (void)!::write(wake_fd_, &one, sizeof one);
}

void LimitRestorer::clocks_reset(unsigned gpu, Clocks domain) {
  std::lock_guard lock(mutex_);
  const unsigned k = slot(gpu, domain == Clocks::kSm ? kSmClocks : kMemoryClocks);
  ++generation_[k];
  claims_[k].reset();
}

void LimitRestorer::restore_exited() {
  for (unsigned k = 0; k < claims_.size(); ++k) {
    auto& c = claims_[k];
    if (!c || !c->owner->exited()) continue;
    const unsigned gpu = k / kKinds;
    const auto kind = static_cast<Kind>(k % kKinds);
    const std::uint64_t generation = c->generation;
    const pid_t pid = c->owner->pid();
    const Claim claim = *c;
    c.reset();
    if (kind == kPowerLimit)
      devices_.gpus[gpu].worker->post(
          [this, gpu, generation, pid, set = claim.limit] { restore(gpu, generation, pid, set); });
    else
      devices_.gpus[gpu].worker->post([this, gpu, kind, generation, pid, claim] {
        reset_clocks(gpu, kind, generation, pid, claim.min, claim.max);
      });
  }
}

void LimitRestorer::reset_clocks(unsigned gpu, Kind kind, std::uint64_t generation, pid_t pid, Megahertz min,
                                 Megahertz max) {
  {
    std::lock_guard lock(mutex_);
    if (generation_[slot(gpu, kind)] != generation) return;  // set or reset again since
  }
  Gpu& g = *devices_.gpus[gpu].gpu;
  const char* domain = kind == kSmClocks ? "SM" : "memory";
  const std::string who = "GPU " + std::to_string(gpu) + ": process " + std::to_string(pid) + ", which locked its " +
                          domain + " clocks to " + mhz_range(min, max) + " through ergd, has exited; ";
  auto r = kind == kSmClocks ? g.reset_gpu_locked_clocks() : g.reset_memory_locked_clocks();
  if (log_) {
    if (r)
      log_(who + "reset its locked " + domain + " clocks");
    else
      log_(who + "could not reset its locked " + domain + " clocks: " + r.error().message);
  }
}

void LimitRestorer::restore(unsigned gpu, std::uint64_t generation, pid_t pid, MilliWatts set) {
  std::optional<MilliWatts> back;
  {
    std::lock_guard lock(mutex_);
    if (generation_[slot(gpu, kPowerLimit)] != generation) return;  // set again since: the new setter owns it
    back = default_[gpu];
  }
  if (!back) return;
  Gpu& g = *devices_.gpus[gpu].gpu;
  const std::string who = "GPU " + std::to_string(gpu) + ": process " + std::to_string(pid) +
                          ", which set its power limit to " + watts(set) + " through ergd, has exited; ";
  auto now = g.power_limit();
  if (now && now->value() != set.value()) {
    if (log_) log_(who + "its limit was changed outside ergd since (now " + watts(*now) + "), left as it is");
    return;
  }
  auto r = g.set_power_limit(*back);
  if (log_) {
    if (r)
      log_(who + "restored the default limit " + watts(*back));
    else
      log_(who + "could not restore the default limit " + watts(*back) + ": " + r.error().message);
  }
}

void LimitRestorer::watch_loop() {
  pthread_setname_np(pthread_self(), "ergd-restore");
  std::vector<pollfd> fds;
  std::vector<std::shared_ptr<const ClientProcess>> held;  // their pidfds stay open while polled
  for (;;) {
    bool fallback = false;
    held.clear();
    {
      std::lock_guard lock(mutex_);
      if (stopping_) return;
      restore_exited();
      fds.assign(1, pollfd{wake_fd_, POLLIN, 0});
      for (const auto& c : claims_) {
        if (!c) continue;
        held.push_back(c->owner);
        if (c->owner->pidfd() >= 0)
          fds.push_back(pollfd{c->owner->pidfd(), POLLIN, 0});
        else
          fallback = true;
      }
    }
    // A pidfd turns readable when its process exits; the others are looked at every period.
    const int timeout = fallback ? static_cast<int>(kFallbackPeriod.count()) : -1;
    const int n = ::poll(fds.data(), fds.size(), timeout);
    if (n < 0 && errno != EINTR) std::this_thread::sleep_for(kFallbackPeriod);  // not expected; do not spin
    if (fds[0].revents != 0) {
      std::uint64_t v = 0;
      (void)!::read(wake_fd_, &v, sizeof v);
    }
  }
}

}  // namespace erg::daemon
