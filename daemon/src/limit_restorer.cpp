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
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
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

std::string read_boot_id() {
  std::ifstream f("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(f, id);
  return id;
}

const char* kind_name(unsigned kind) {
  switch (kind) {
    case 0: return "power_limit";
    case 1: return "sm_clocks";
    default: return "memory_clocks";
  }
}

}  // namespace

std::shared_ptr<const ClientProcess> ClientProcess::adopt(pid_t pid, std::uint64_t start_time) {
  auto gone = [pid] { return std::shared_ptr<const ClientProcess>(new ClientProcess(pid, -1, 0, true)); };
  if (pid <= 0) return gone();
  int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  // The pid and start time after the pidfd is open: a pidfd of a reused pid names the wrong
  // process, so it is kept only when /proc still shows the recorded start time.
  auto st = stat_of(pid);
  if (!st || st->first != start_time || st->second) {
    if (fd >= 0) ::close(fd);
    return gone();
  }
  if (fd >= 0) ::fcntl(fd, F_SETFD, FD_CLOEXEC);
  return std::shared_ptr<const ClientProcess>(new ClientProcess(pid, fd, start_time, false));
}

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
    auto st = stat_of(pid);  // the start time names it across ergd restarts (claims.json)
    return std::shared_ptr<const ClientProcess>(new ClientProcess(pid, fd, st ? st->first : 0, false));
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

LimitRestorer::LimitRestorer(const DeviceSlots& devices, std::function<void(const std::string&)> log,
                             std::string state_dir)
    : devices_(devices),
      log_(std::move(log)),
      claims_(devices.gpus.size() * kKinds),
      generation_(devices.gpus.size() * kKinds, 0),
      default_(devices.gpus.size()),
      state_dir_(std::move(state_dir)),
      boot_id_(read_boot_id()) {
  wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (!state_dir_.empty()) load_recorded();
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
    persist();
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
    persist();
  }
  const std::uint64_t one = 1;
  if (wake_fd_ >= 0) (void)!::write(wake_fd_, &one, sizeof one);
}

void LimitRestorer::clocks_reset(unsigned gpu, Clocks domain) {
  std::lock_guard lock(mutex_);
  const unsigned k = slot(gpu, domain == Clocks::kSm ? kSmClocks : kMemoryClocks);
  ++generation_[k];
  claims_[k].reset();
  persist();
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
  // The record goes when the restore has run (restore() and reset_clocks() write the file): a
  // crash in between leaves it, and the next ergd restores again (the same checks make that
  // harmless: a limit changed since is left alone).
}

void LimitRestorer::persist() {
  if (state_dir_.empty()) return;
  nlohmann::json j{{"version", 1}, {"boot_id", boot_id_}, {"claims", nlohmann::json::array()}};
  for (unsigned k = 0; k < claims_.size(); ++k) {
    const auto& c = claims_[k];
    if (!c) continue;
    const unsigned gpu = k / kKinds;
    nlohmann::json e{{"gpu", gpu},
                     {"uuid", devices_.gpus[gpu].gpu->uuid()},
                     {"kind", kind_name(k % kKinds)},
                     {"pid", c->owner->pid()},
                     {"start_time", c->owner->start_time()}};
    if (k % kKinds == kPowerLimit) {
      e["limit_mw"] = c->limit.value();
      if (default_[gpu]) e["default_mw"] = default_[gpu]->value();
    } else {
      e["min_mhz"] = c->min.value();
      e["max_mhz"] = c->max.value();
    }
    j["claims"].push_back(std::move(e));
  }
  const std::string path = state_dir_ + "/claims.json", tmp = path + ".tmp";
  const std::string text = j.dump(1) + "\n";
  bool ok = false;
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd >= 0) {
    ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) && ::fsync(fd) == 0;
    ok = ::close(fd) == 0 && ok;
    ok = ok && ::rename(tmp.c_str(), path.c_str()) == 0;
  }
  if (!ok && !persist_failed_ && log_)
    log_("cannot record power-limit and clock owners in " + path + ": " + std::strerror(errno) +
         " (they are not restored if ergd restarts before their owners exit)");
  persist_failed_ = !ok;
}

void LimitRestorer::load_recorded() {
  const std::string path = state_dir_ + "/claims.json";
  std::ifstream in(path);
  if (!in) return;  // none yet
  auto j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("claims") || !j["claims"].is_array()) {
    if (log_) log_(path + " is not a claims record ergd wrote; ignored");
    return;
  }
  const bool same_boot =
      j.contains("boot_id") && j["boot_id"].is_string() && j["boot_id"] == boot_id_ && !boot_id_.empty();
  std::lock_guard lock(mutex_);
  for (const auto& e : j["claims"]) {
    // A record of the wrong shape is skipped, never fatal: ergd starts whatever the file holds.
    auto number = [&](const char* key) { return e.contains(key) && e[key].is_number(); };
    if (!e.is_object() || !e.contains("uuid") || !e["uuid"].is_string() || !e.contains("kind") ||
        !e["kind"].is_string() || !number("pid") || !number("start_time") ||
        (e.contains("limit_mw") && !number("limit_mw")) || (e.contains("default_mw") && !number("default_mw")) ||
        (e.contains("min_mhz") && !number("min_mhz")) || (e.contains("max_mhz") && !number("max_mhz"))) {
      if (log_) log_(path + ": a malformed record skipped");
      continue;
    }
    const std::string uuid = e.value("uuid", std::string());
    const std::string kind = e.value("kind", std::string());
    std::optional<unsigned> gpu;
    for (unsigned g = 0; g < devices_.gpus.size(); ++g)
      if (devices_.gpus[g].gpu->uuid() == uuid) gpu = g;
    unsigned kk = kind == "power_limit" ? kPowerLimit : kind == "sm_clocks" ? kSmClocks : kMemoryClocks;
    if (!gpu || (kind != "power_limit" && kind != "sm_clocks" && kind != "memory_clocks")) continue;
    const pid_t pid = static_cast<pid_t>(e["pid"].get<double>());
    if (!same_boot) {
      if (log_)
        log_("GPU " + std::to_string(*gpu) + ": " + kind + " set through an ergd of an earlier boot by process " +
             std::to_string(pid) + ": the driver reset it at boot; record dropped");
      continue;
    }
    auto owner = ClientProcess::adopt(pid, static_cast<std::uint64_t>(e["start_time"].get<double>()));
    const unsigned k = slot(*gpu, static_cast<Kind>(kk));
    ++generation_[k];
    auto get = [&](const char* key) { return e.contains(key) ? e[key].get<double>() : 0.0; };
    Claim c{std::move(owner), MilliWatts(get("limit_mw")), Megahertz(get("min_mhz")), Megahertz(get("max_mhz")),
            generation_[k]};
    if (kk == kPowerLimit) {
      if (!e.contains("default_mw")) continue;
      default_[*gpu] = MilliWatts(get("default_mw"));
    }
    if (log_)
      log_("GPU " + std::to_string(*gpu) + ": took up the " + kind + " claim of process " + std::to_string(pid) +
           " recorded by an earlier ergd" + (c.owner->exited() ? " (it has exited: restoring)" : " (it still runs)"));
    claims_[k] = std::move(c);
  }
  // The watcher restores those whose owner has exited as soon as it starts.
}

void LimitRestorer::reset_clocks(unsigned gpu, Kind kind, std::uint64_t generation, pid_t pid, Megahertz min,
                                 Megahertz max) {
  {
    std::lock_guard lock(mutex_);
    if (generation_[slot(gpu, kind)] != generation) return;  // set or reset again since
  }
  Gpu& g = *devices_.gpus[gpu].gpu;
  const char* domain = kind == kSmClocks ? "SM" : "memory";
  struct Persist {
    LimitRestorer* self;
    ~Persist() {
      std::lock_guard lock(self->mutex_);
      self->persist();
    }
  } written_after{this};
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
  struct Persist {
    LimitRestorer* self;
    ~Persist() {
      std::lock_guard lock(self->mutex_);
      self->persist();
    }
  } written_after{this};
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
