// Daemon: checks the configuration, owns the devices, the route groups' state, the router and
// the server, and wires them together. No route logic here (router.cpp and the *_routes files).

#include "erg/daemon/daemon.hpp"

#include <fcntl.h>
#include <linux/capability.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "device_slots.hpp"
#include "erg/daemon/auth.hpp"
#include "erg/exporters/prometheus/collector.hpp"
#include "router.hpp"
#include "server.hpp"
#include "streaming.hpp"

namespace erg::daemon {

using protocol::ApiGroup;

namespace {

bool has_cap_sys_admin() {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2]{};
  if (syscall(SYS_capget, &header, data) != 0) return false;
  return (data[CAP_SYS_ADMIN / 32].effective & (1u << (CAP_SYS_ADMIN % 32))) != 0;
}

Result<void> check_privilege(const Config& config, const Inventory& inventory) {
  if (config.enabled.count(ApiGroup::kGpuControl) && ::geteuid() != 0 && !has_cap_sys_admin())
    return fail(ErrorCode::kNoPermission,
                "API group gpu-control needs root or CAP_SYS_ADMIN (setting GPU power limits and clocks); run ergd "
                "as root or with AmbientCapabilities=CAP_SYS_ADMIN, or leave gpu-control out of --enable");
  if (config.enabled.count(ApiGroup::kCpuRead)) {
    for (const auto& u : inventory.unavailable)
      if (u.source == "rapl" && u.code == ErrorCode::kNoPermission)
        return fail(ErrorCode::kNoPermission,
                    "API group cpu-read needs read access to RAPL energy counters (" + u.reason +
                        "); run ergd as root or with CAP_DAC_READ_SEARCH, or leave cpu-read out of --enable");
  }
  return ok();
}

}  // namespace

struct Daemon::Impl {
  // Declaration order is construction order; destruction runs backwards, so the server goes
  // first, then the router, the streams' pollers, and last the devices' owner threads.
  Config config;
  DeviceSlots devices;
  std::unique_ptr<LimitRestorer> restorer;          // posts to the devices' owner threads: after them
  std::unique_ptr<AttributionSampler> attribution;  // reads the devices: after them
  std::shared_ptr<prom::Collector> exposition;
  std::unique_ptr<PowerStreams> streams;
  std::unique_ptr<Router> router;
  std::unique_ptr<Server> server;
  std::vector<std::string> warnings;  // the configuration's (the server adds its own at start)
  int state_lock = -1;                // flock(2) on STATE_DIR/lock while this daemon lives
  ~Impl() {
    if (state_lock >= 0) ::close(state_lock);
  }
};

Daemon::Daemon(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Daemon::~Daemon() { stop(); }

Result<std::unique_ptr<Daemon>> Daemon::create(Config config, Inventory inventory) {
  if (!config.skip_privilege_check)
    if (auto r = check_privilege(config, inventory); !r) return fail(r.error());
  std::string signing_key;
  if (config.signing_key_path) {
    auto key = read_signing_key(*config.signing_key_path);
    if (!key) return fail(key.error());
    signing_key = std::move(*key);
  }
  std::vector<std::string> warnings;
  if (config.tcp && signing_key.empty()) {
    // A TCP peer has no uid: without tokens, every local user (and every host that can reach the
    // address) would share whatever a TCP peer may do (docs/security.md).
    if (!config.tcp_insecure)
      return fail(ErrorCode::kInvalidArgument,
                  "refusing --tcp " + *config.tcp +
                      " without --signing-key-path: any local user (and any host that can reach it) could use "
                      "ergd's API over TCP, where --allow-uid/--allow-gid cannot tell users apart; give "
                      "--signing-key-path (bearer tokens), or --tcp-insecure to open the API groups that have no "
                      "allow list to every TCP peer");
    std::string open;
    for (ApiGroup g : protocol::kAllApiGroups)
      if (config.enabled.count(g) != 0 && config.allow_uid.count(g) == 0 && config.allow_gid.count(g) == 0)
        open += (open.empty() ? "" : ", ") + std::string(protocol::to_string(g));
    warnings.push_back("--tcp-insecure: TCP peers are not authenticated; every TCP peer may use " +
                       (open.empty() ? std::string("no API group (every enabled group has an allow list)") : open) +
                       " and read what /metrics shows of them");
  }
  if (!(config.gpu_power_poll_hz > 0 && config.gpu_power_poll_hz <= 1000) ||
      !(config.cpu_power_poll_hz > 0 && config.cpu_power_poll_hz <= 1000))
    return fail(ErrorCode::kInvalidArgument, "poll rates must be in (0, 1000] Hz");

  auto impl = std::make_unique<Impl>();
  impl->config = std::move(config);
  impl->warnings = std::move(warnings);
  for (auto& gpu : inventory.gpus) {
    GpuSlot s;
    // zeusd validates the counter at start-up: NotSupported → cumulative_energy_available=false.
    auto e = gpu->total_energy();
    s.energy_available = e.has_value() || e.error().code != ErrorCode::kNotSupported;
    s.gpu = std::move(gpu);
    s.worker = std::make_unique<DeviceWorker>();
    impl->devices.gpus.push_back(std::move(s));
  }
  for (auto& cpu : inventory.cpus) impl->devices.cpus.push_back(CpuSlot{std::move(cpu)});

  std::vector<std::shared_ptr<Gpu>> gpus;
  std::vector<std::shared_ptr<Cpu>> cpus;
  for (const auto& s : impl->devices.gpus) gpus.push_back(s.gpu);
  for (const auto& s : impl->devices.cpus) cpus.push_back(s.cpu);
  prom::CollectorOptions metrics;
  metrics.node = impl->config.metrics_node.value_or(prom::host_name());
  metrics.labels = impl->config.metrics_labels;
  metrics.exporter = "ergd";
  metrics.simulated = inventory.simulated;
  metrics.socs = inventory.socs;  // Jetson rails on /metrics (read-only, no API group)
  auto collector = prom::Collector::create(std::move(gpus), std::move(cpus), std::move(metrics));
  if (!collector) return fail(collector.error());
  impl->exposition = std::move(*collector);
  impl->streams = std::make_unique<PowerStreams>(impl->devices, impl->config.gpu_power_poll_hz,
                                                 impl->config.cpu_power_poll_hz, impl->config.stream_peer_check);
  if (impl->config.restore_limits_on_exit && impl->config.enabled.count(ApiGroup::kGpuControl)) {
    std::string state_dir = impl->config.state_dir;
    if (!state_dir.empty()) {
      // Records another user could write would let them have ergd reset limits: the directory
      // must be root's (or ergd's) and closed to others, as the socket's is.
      struct stat st {};
      std::string why;
      if (::stat(state_dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
        why = "does not exist";
      else if (st.st_uid != 0 && st.st_uid != ::geteuid())
        why = "is owned by uid " + std::to_string(st.st_uid);
      else if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0)
        why = "is writable by other users";
      if (why.empty()) {
        // One ergd per state directory: another (a second instance, a test) must not rewrite
        // this one's records. The lock lives as long as the daemon.
        const std::string lock_path = state_dir + "/lock";
        impl->state_lock = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (impl->state_lock < 0)
          why = "cannot be locked (" + lock_path + ": " + std::strerror(errno) + ")";
        else if (::flock(impl->state_lock, LOCK_EX | LOCK_NB) != 0)
          why = "is in use by another ergd";
      }
      if (!why.empty()) {
        impl->warnings.push_back("state directory " + state_dir + " " + why +
                                 ": who owns each power limit and locked clocks is kept in memory only (not restored "
                                 "if ergd restarts before the owner exits); create it (systemd: StateDirectory=ergd) "
                                 "or pass --state-dir");
        state_dir.clear();
      }
    }
    impl->restorer = std::make_unique<LimitRestorer>(impl->devices, impl->config.event_log, state_dir);
  }
  if (impl->config.enabled.count(ApiGroup::kGpuRead) && impl->config.attribution_poll.count() > 0)
    impl->attribution = std::make_unique<AttributionSampler>(impl->devices, impl->config);
  impl->router = std::make_unique<Router>(impl->config, std::move(signing_key), impl->devices, *impl->streams,
                                          *impl->exposition, impl->restorer.get(), impl->attribution.get());
  return std::unique_ptr<Daemon>(new Daemon(std::move(impl)));
}

Result<void> Daemon::start() {
  if (!impl_->server) impl_->server = std::make_unique<Server>(*impl_->router, impl_->config);
  return impl_->server->start();
}

void Daemon::stop() {
  if (!impl_) return;
  impl_->streams->stop();  // streams end first, so their connection threads can finish
  if (impl_->server) impl_->server->stop();
  impl_->server.reset();
  if (impl_->restorer) impl_->restorer->stop();  // limits owned now stay (docs/ergd.md)
  if (impl_->attribution) impl_->attribution->stop();
  for (auto& g : impl_->devices.gpus) g.worker->drain();
}

const Config& Daemon::config() const { return impl_->config; }
std::uint16_t Daemon::tcp_port() const { return impl_->server ? impl_->server->tcp_port() : 0; }
std::vector<std::string> Daemon::warnings() const {
  std::vector<std::string> out = impl_->warnings;
  if (impl_->server)
    for (const auto& w : impl_->server->warnings()) out.push_back(w);
  return out;
}

unsigned Daemon::subscribers(bool gpu, unsigned id) const { return impl_->streams->subscribers(gpu, id); }

Reply Daemon::dispatch(const protocol::HttpRequest& request, const Peer& peer) {
  return impl_->router->dispatch(request, peer);
}

void Daemon::run_stream(const StreamSpec& spec, const std::function<bool(std::string_view)>& write,
                        const std::function<bool()>& closed) {
  impl_->router->run_stream(spec, write, closed);
}

}  // namespace erg::daemon
