#include "erg/client/remote.hpp"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string_view>

#include "erg/protocol/status.hpp"

namespace erg::client {
namespace {

std::string fmt_u(double v) { return std::to_string(static_cast<unsigned long long>(std::llround(v < 0 ? 0 : v))); }

Error not_supported(const char* what) {
  return Error{ErrorCode::kNotSupported, std::string(what) + " is not available through ergd"};
}

/// "domain:bus:device.function" in hex, any case and domain width (zeusd's `0000:07:00.0`,
/// NVML's `00000000:07:00.0`) → one number; nullopt if it is not such an address.
std::optional<std::uint64_t> pci_key(std::string_view a) {
  auto c2 = a.rfind(':');
  auto c1 = c2 == std::string_view::npos ? c2 : a.rfind(':', c2 - 1);
  auto dot = a.rfind('.');
  if (c1 == std::string_view::npos || dot == std::string_view::npos || dot < c2) return std::nullopt;
  std::uint64_t parts[4];
  std::string_view fields[4] = {a.substr(0, c1), a.substr(c1 + 1, c2 - c1 - 1), a.substr(c2 + 1, dot - c2 - 1),
                                a.substr(dot + 1)};
  for (int i = 0; i < 4; ++i) {
    auto r = std::from_chars(fields[i].data(), fields[i].data() + fields[i].size(), parts[i], 16);
    if (fields[i].empty() || r.ec != std::errc() || r.ptr != fields[i].data() + fields[i].size()) return std::nullopt;
  }
  if (parts[0] > 0xffffffffu || parts[1] > 0xff || parts[2] > 0x1f || parts[3] > 7) return std::nullopt;
  return (parts[0] << 16) | (parts[1] << 8) | (parts[2] << 3) | parts[3];
}

}  // namespace

Result<std::optional<Endpoint>> DaemonClient::endpoint_from_env() {
  auto env = [](std::initializer_list<const char*> vars) -> std::pair<const char*, std::string> {
    for (const char* var : vars) {
      const char* v = std::getenv(var);
      if (v != nullptr && *v != '\0') return {var, v};
    }
    return {nullptr, ""};
  };
  Endpoint e;
  e.token = env({"ERG_DAEMON_TOKEN", "ZEUSD_TOKEN"}).second;
  if (auto [var, sock] = env({"ERG_DAEMON_SOCK", "ZEUSD_SOCK_PATH"}); var != nullptr) {
    e.socket_path = sock;  // the Unix socket wins over TCP, as in Zeus's client
    return std::optional<Endpoint>(std::move(e));
  }
  auto [var, host_port] = env({"ERG_DAEMON_HOST_PORT", "ZEUSD_HOST_PORT"});
  if (var == nullptr) return std::optional<Endpoint>();
  auto colon = host_port.rfind(':');
  unsigned port = 0;
  const char* digits = host_port.data() + (colon == std::string::npos ? 0 : colon + 1);
  auto r = std::from_chars(digits, host_port.data() + host_port.size(), port);
  if (colon == std::string::npos || colon == 0 || r.ec != std::errc() || r.ptr != host_port.data() + host_port.size() ||
      port == 0 || port > 65535)
    return fail(ErrorCode::kInvalidArgument,
                std::string(var) + "='" + host_port + "' is not HOST:PORT (e.g. 127.0.0.1:4938)");
  e.host = host_port.substr(0, colon);
  if (e.host == "localhost") e.host = "127.0.0.1";  // IPv4 addresses only (ergd listens on loopback)
  e.port = static_cast<std::uint16_t>(port);
  return std::optional<Endpoint>(std::move(e));
}

Result<protocol::ParsedResponse> DaemonClient::checked(std::string_view method, const std::string& target) {
  auto r = conn_.request(method, target);
  if (!r) return fail(r.error());
  if (r->status != 200) {
    std::string path = target.substr(0, target.find('?'));
    // ergd names each device's error code beside zeusd's messages: a lost GPU stays a lost GPU
    // (and a timeout stays transient) for the caller, not a generic 500.
    ErrorCode code = protocol::error_code_for_status(r->status);
    if (auto body = protocol::parse_json_object(r->body); body && body->contains("error_codes")) {
      const auto& codes = (*body)["error_codes"];
      if (codes.is_object() && codes.size() == 1 && codes.begin()->is_string())
        if (auto c = parse_error_code(codes.begin()->get<std::string>())) code = *c;
    }
    return fail(code, conn_.describe() + ": " + path + " failed with " + std::to_string(r->status) + ": " + r->body);
  }
  return r;
}

Result<nlohmann::json> DaemonClient::get(const std::string& target) {
  auto r = checked("GET", target);
  if (!r) return fail(r.error());
  return protocol::parse_json_object(r->body);
}

Result<void> DaemonClient::post(const std::string& target) {
  auto r = checked("POST", target);
  if (!r) return fail(r.error());
  return ok();
}

Result<protocol::DiscoverBody> DaemonClient::discover() {
  auto r = checked("GET", "/discover");
  if (!r) return fail(r.error());
  return protocol::parse_discover(r->body);
}

RemoteGpu::RemoteGpu(std::shared_ptr<DaemonClient> client, unsigned index, unsigned remote_id,
                     const protocol::DiscoverGpu& info)
    : client_(std::move(client)),
      index_(index),
      remote_id_(remote_id),
      name_(info.name),
      uuid_("ergd-gpu-" + std::to_string(remote_id)),
      pci_address_(info.pci_address) {
  caps_.energy_counter = info.cumulative_energy_available;
  caps_.power_domains = {PowerDomain::kDeviceInstant};
  caps_.power_limit = true;
  caps_.persistence_mode = true;
  caps_.setters_need_privilege = false;  // ergd holds the privilege
  // Not over the API: default limit, clock lists, temperature, reading timestamps (false above).
}

Result<MilliJoules> RemoteGpu::total_energy() {
  // The daemon answers 400 for a GPU without a counter (zeusd maps NotSupported there too),
  // which would read as InvalidArgument: its discovery already said there is none.
  if (!caps_.energy_counter)
    return fail(ErrorCode::kNotSupported, "ergd reports no energy counter for GPU " + std::to_string(remote_id_));
  auto j = client_->get("/gpu/get_cumulative_energy?" + ids());
  if (!j) return fail(j.error());
  return MilliJoules(static_cast<double>(j->at(std::to_string(remote_id_)).at("energy_mj").get<std::uint64_t>()));
}
Result<MilliWatts> RemoteGpu::power(PowerDomain domain) {
  if (domain != PowerDomain::kDeviceInstant) return fail(not_supported("this power domain"));
  auto j = client_->get("/gpu/get_power?" + ids());
  if (!j) return fail(j.error());
  return MilliWatts(static_cast<double>(j->at("power_mw").at(std::to_string(remote_id_)).get<std::uint32_t>()));
}
Result<MilliWatts> RemoteGpu::power_limit() {
  auto j = client_->get("/gpu/get_power_limit?" + ids());
  if (!j) return fail(j.error());
  return MilliWatts(static_cast<double>(j->at(std::to_string(remote_id_)).at("power_limit_mw").get<std::uint32_t>()));
}
Result<PowerLimitConstraints> RemoteGpu::power_limit_constraints() {
  auto j = client_->get("/gpu/get_power_limit_constraints?" + ids());
  if (!j) return fail(j.error());
  const auto& e = j->at(std::to_string(remote_id_));
  return PowerLimitConstraints{MilliWatts(e.at("min_power_limit_mw").get<double>()),
                               MilliWatts(e.at("max_power_limit_mw").get<double>())};
}
Result<MilliWatts> RemoteGpu::default_power_limit() { return fail(not_supported("the default power limit")); }
Result<void> RemoteGpu::set_power_limit(MilliWatts limit) {
  return client_->post("/gpu/set_power_limit?" + ids() + "&power_limit_mw=" + fmt_u(limit.value()) + "&block=true");
}
Result<void> RemoteGpu::reset_power_limit() {
  auto c = power_limit_constraints();
  if (!c) return fail(c.error());
  return set_power_limit(c->max);
}
Result<bool> RemoteGpu::persistence_mode() {
  auto j = client_->get("/gpu/get_persistence_mode?" + ids());
  if (!j) return fail(j.error());
  return j->at(std::to_string(remote_id_)).at("enabled").get<bool>();
}
Result<void> RemoteGpu::set_persistence_mode(bool enabled) {
  return client_->post("/gpu/set_persistence_mode?" + ids() + "&enabled=" + (enabled ? "true" : "false") +
                       "&block=true");
}
Result<std::vector<Megahertz>> RemoteGpu::supported_memory_clocks() { return fail(not_supported("the clock list")); }
Result<std::vector<Megahertz>> RemoteGpu::supported_graphics_clocks(Megahertz) {
  return fail(not_supported("the clock list"));
}
Result<void> RemoteGpu::set_gpu_locked_clocks(Megahertz min, Megahertz max) {
  return client_->post("/gpu/set_gpu_locked_clocks?" + ids() + "&min_clock_mhz=" + fmt_u(min.value()) +
                       "&max_clock_mhz=" + fmt_u(max.value()) + "&block=true");
}
Result<void> RemoteGpu::reset_gpu_locked_clocks() {
  return client_->post("/gpu/reset_gpu_locked_clocks?" + ids() + "&block=true");
}
Result<void> RemoteGpu::set_memory_locked_clocks(Megahertz min, Megahertz max) {
  return client_->post("/gpu/set_mem_locked_clocks?" + ids() + "&min_clock_mhz=" + fmt_u(min.value()) +
                       "&max_clock_mhz=" + fmt_u(max.value()) + "&block=true");
}
Result<void> RemoteGpu::reset_memory_locked_clocks() {
  return client_->post("/gpu/reset_mem_locked_clocks?" + ids() + "&block=true");
}
Result<int> RemoteGpu::temperature() { return fail(not_supported("the temperature")); }

HybridGpu::HybridGpu(std::shared_ptr<Gpu> local, std::shared_ptr<RemoteGpu> remote)
    : local_(std::move(local)), remote_(std::move(remote)), caps_(local_->capabilities()) {
  caps_.setters_need_privilege = false;
}
Result<void> HybridGpu::reset_power_limit() {
  auto d = local_->default_power_limit();
  if (!d) return remote_->reset_power_limit();
  return remote_->set_power_limit(*d);
}

RemoteCpu::RemoteCpu(std::shared_ptr<DaemonClient> client, unsigned index, bool dram)
    : client_(std::move(client)), index_(index), name_("package-" + std::to_string(index)) {
  caps_.dram = dram;
}

Result<double> RemoteCpu::read(bool dram) {
  auto j = client_->get("/cpu/get_cumulative_energy?cpu_ids=" + std::to_string(index_) +
                        "&cpu=" + (dram ? "false" : "true") + "&dram=" + (dram ? "true" : "false"));
  if (!j) return fail(j.error());
  const auto& v = j->at(std::to_string(index_)).at(dram ? "dram_energy_uj" : "cpu_energy_uj");
  if (v.is_null())
    return fail(ErrorCode::kNotSupported, "ergd reports no DRAM domain for CPU " + std::to_string(index_));
  return static_cast<double>(v.get<std::uint64_t>());
}

Result<MicroJoules> RemoteCpu::package_energy() {
  auto v = read(false);
  if (!v) return fail(v.error());
  std::lock_guard lock(mutex_);
  if (!base_pkg_) base_pkg_ = *v;
  return MicroJoules(*v - *base_pkg_);
}

Result<MicroJoules> RemoteCpu::dram_energy() {
  if (!caps_.dram) return fail(ErrorCode::kNotSupported, "CPU " + std::to_string(index_) + " has no DRAM domain");
  auto v = read(true);
  if (!v) return fail(v.error());
  std::lock_guard lock(mutex_);
  if (!base_dram_) base_dram_ = *v;
  return MicroJoules(*v - *base_dram_);
}

Inventory with_daemon(Inventory local, const Endpoint& endpoint) {
  auto client = std::make_shared<DaemonClient>(endpoint);
  auto info = client->discover();
  if (!info) {
    local.unavailable.push_back({"ergd", info.error().code, info.error().message});
    return local;
  }
  bool control = false, cpu_read = false;
  for (const auto& g : info->enabled_api_groups) {
    control = control || g == "gpu-control";
    cpu_read = cpu_read || g == "cpu-read";
  }
  // The daemon's GPU that is this local one: the same PCI address where both know it (the
  // daemon may see a different device set or order), else the same vendor index.
  // PCI addresses compare as numbers (case and domain width vary between tools).
  auto daemon_gpu = [&](const Gpu& gpu) -> const protocol::DiscoverGpu* {
    if (auto mine = pci_key(gpu.pci_address())) {
      bool daemon_knows_pci = false;
      for (const auto& d : info->gpus) {
        auto theirs = pci_key(d.pci_address);
        if (theirs == mine) return &d;
        daemon_knows_pci = daemon_knows_pci || theirs.has_value();
      }
      if (daemon_knows_pci) return nullptr;  // not served by this daemon
    }
    for (const auto& d : info->gpus)
      if (d.id == gpu.physical_index()) return &d;
    return nullptr;
  };
  if (!local.gpus.empty()) {
    if (control)
      for (auto& gpu : local.gpus) {
        if (const auto* d = daemon_gpu(*gpu))
          gpu = std::make_shared<HybridGpu>(gpu, std::make_shared<RemoteGpu>(client, gpu->index(), d->id, *d));
      }
  } else {
    for (unsigned i = 0; i < info->gpus.size(); ++i)
      local.gpus.push_back(std::make_shared<RemoteGpu>(client, i, i, info->gpus[i]));
  }
  bool rapl_denied = false;
  for (const auto& u : local.unavailable) rapl_denied = rapl_denied || u.source == "rapl";
  if (cpu_read && local.cpus.empty() && !info->cpus.empty()) {
    for (const auto& c : info->cpus) local.cpus.push_back(std::make_shared<RemoteCpu>(client, c.id, c.dram_available));
    if (rapl_denied) std::erase_if(local.unavailable, [](const Unavailable& u) { return u.source == "rapl"; });
  }
  return local;
}

}  // namespace erg::client
