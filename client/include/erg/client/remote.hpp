#pragma once
/// erg::Gpu and erg::Cpu over ergd (or zeusd): what an unprivileged process uses for the calls
/// that need privilege (power limits, clocks, persistence, RAPL energy).

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "erg/client/connection.hpp"
#include "erg/core/device.hpp"
#include "erg/core/discovery.hpp"
#include "erg/protocol/bodies.hpp"

namespace erg::client {

/// Requests with JSON replies. A non-200 reply becomes an Error whose code follows the status
/// (403 → kNoPermission, 400 → kInvalidArgument, ...) and whose message quotes the daemon.
class DaemonClient {
 public:
  explicit DaemonClient(Endpoint endpoint) : conn_(std::move(endpoint)) {}
  /// The endpoint from the environment, as Zeus's client reads it: a Unix socket from
  /// ERG_DAEMON_SOCK or ZEUSD_SOCK_PATH, else TCP from ERG_DAEMON_HOST_PORT or ZEUSD_HOST_PORT
  /// ("127.0.0.1:4938"); the bearer token from ERG_DAEMON_TOKEN or ZEUSD_TOKEN. nullopt when no
  /// endpoint is set; kInvalidArgument naming the variable when HOST:PORT is malformed.
  static Result<std::optional<Endpoint>> endpoint_from_env();

  Result<nlohmann::json> get(const std::string& target);
  Result<void> post(const std::string& target);
  Result<protocol::DiscoverBody> discover();
  Connection& connection() { return conn_; }

 private:
  Result<protocol::ParsedResponse> checked(std::string_view method, const std::string& target);
  Connection conn_;
};

/// A GPU served by the daemon (daemon id `remote_id`). Reads and setters all go through ergd.
/// Not available over the API (→ kNotSupported, and the capabilities say so): power domains
/// other than device_instant, default power limit (reset_power_limit sets the maximum limit),
/// clock lists, temperature, reading timestamps (energy_reading/power_reading carry no
/// updated_at), and the energy counter of a GPU the daemon reports without one. The uuid is
/// made up ("ergd-gpu-N"): the API does not report it.
class RemoteGpu final : public Gpu {
 public:
  RemoteGpu(std::shared_ptr<DaemonClient> client, unsigned index, unsigned remote_id,
            const protocol::DiscoverGpu& info);

  unsigned index() const override { return index_; }
  unsigned physical_index() const override { return remote_id_; }
  GpuVendor vendor() const override { return GpuVendor::kNvidia; }
  const std::string& name() const override { return name_; }
  const std::string& uuid() const override { return uuid_; }
  const std::string& pci_address() const override { return pci_address_; }
  const std::string& architecture() const override { return arch_; }
  const GpuCapabilities& capabilities() const override { return caps_; }

  Result<MilliJoules> total_energy() override;
  Result<MilliWatts> power(PowerDomain domain) override;
  Result<MilliWatts> power_limit() override;
  Result<PowerLimitConstraints> power_limit_constraints() override;
  Result<MilliWatts> default_power_limit() override;
  Result<void> set_power_limit(MilliWatts limit) override;
  Result<void> reset_power_limit() override;
  Result<bool> persistence_mode() override;
  Result<void> set_persistence_mode(bool enabled) override;
  Result<std::vector<Megahertz>> supported_memory_clocks() override;
  Result<std::vector<Megahertz>> supported_graphics_clocks(Megahertz memory_clock) override;
  Result<void> set_gpu_locked_clocks(Megahertz min, Megahertz max) override;
  Result<void> reset_gpu_locked_clocks() override;
  Result<void> set_memory_locked_clocks(Megahertz min, Megahertz max) override;
  Result<void> reset_memory_locked_clocks() override;
  Result<int> temperature() override;

 private:
  std::string ids() const { return "gpu_ids=" + std::to_string(remote_id_); }
  std::shared_ptr<DaemonClient> client_;
  unsigned index_, remote_id_;
  std::string name_, uuid_, pci_address_, arch_ = "unknown";
  GpuCapabilities caps_;
};

/// A local GPU whose reads stay local (NVML reads need no privilege) and whose setters go
/// through ergd. Every read, energy_reading and power_reading included, is the local GPU's, and
/// so are the capabilities (setters_need_privilege aside).
class HybridGpu final : public Gpu {
 public:
  HybridGpu(std::shared_ptr<Gpu> local, std::shared_ptr<RemoteGpu> remote);
  unsigned index() const override { return local_->index(); }
  unsigned physical_index() const override { return local_->physical_index(); }
  GpuVendor vendor() const override { return local_->vendor(); }
  const std::string& name() const override { return local_->name(); }
  const std::string& uuid() const override { return local_->uuid(); }
  const std::string& pci_address() const override { return local_->pci_address(); }
  const std::string& architecture() const override { return local_->architecture(); }
  const GpuCapabilities& capabilities() const override { return caps_; }
  Result<MilliJoules> total_energy() override { return local_->total_energy(); }
  /// Forwarded, so the driver's timestamps reach measure/ (capabilities are the local GPU's).
  Result<EnergyReading> energy_reading() override { return local_->energy_reading(); }
  Result<MilliWatts> power(PowerDomain d) override { return local_->power(d); }
  Result<PowerReading> power_reading(PowerDomain d) override { return local_->power_reading(d); }
  Result<MilliWatts> power_limit() override { return local_->power_limit(); }
  Result<PowerLimitConstraints> power_limit_constraints() override { return local_->power_limit_constraints(); }
  Result<MilliWatts> default_power_limit() override { return local_->default_power_limit(); }
  Result<void> set_power_limit(MilliWatts l) override { return remote_->set_power_limit(l); }
  Result<void> reset_power_limit() override;
  Result<bool> persistence_mode() override { return local_->persistence_mode(); }
  Result<void> set_persistence_mode(bool e) override { return remote_->set_persistence_mode(e); }
  Result<std::vector<Megahertz>> supported_memory_clocks() override { return local_->supported_memory_clocks(); }
  Result<std::vector<Megahertz>> supported_graphics_clocks(Megahertz m) override {
    return local_->supported_graphics_clocks(m);
  }
  Result<void> set_gpu_locked_clocks(Megahertz a, Megahertz b) override { return remote_->set_gpu_locked_clocks(a, b); }
  Result<void> reset_gpu_locked_clocks() override { return remote_->reset_gpu_locked_clocks(); }
  Result<void> set_memory_locked_clocks(Megahertz a, Megahertz b) override {
    return remote_->set_memory_locked_clocks(a, b);
  }
  Result<void> reset_memory_locked_clocks() override { return remote_->reset_memory_locked_clocks(); }
  Result<int> temperature() override { return local_->temperature(); }
  Result<std::vector<GpuProcess>> running_processes() override { return local_->running_processes(); }
  Result<std::vector<ProcessUtilizationSample>> process_utilization(std::chrono::microseconds since) override {
    return local_->process_utilization(since);
  }

 private:
  std::shared_ptr<Gpu> local_;
  std::shared_ptr<RemoteGpu> remote_;
  GpuCapabilities caps_;
};

/// A CPU package read through ergd's /cpu/get_cumulative_energy. Energies count from this
/// object's first read, like RaplCpu.
class RemoteCpu final : public Cpu {
 public:
  RemoteCpu(std::shared_ptr<DaemonClient> client, unsigned index, bool dram);
  unsigned index() const override { return index_; }
  const std::string& name() const override { return name_; }
  const CpuCapabilities& capabilities() const override { return caps_; }
  Result<MicroJoules> package_energy() override;
  Result<MicroJoules> dram_energy() override;

 private:
  Result<double> read(bool dram);
  std::shared_ptr<DaemonClient> client_;
  unsigned index_;
  std::string name_;
  CpuCapabilities caps_;
  std::mutex mutex_;
  std::optional<double> base_pkg_, base_dram_;
};

/// Puts ergd into an inventory from local discovery: every local GPU becomes a HybridGpu
/// (matched by physical index; a GPU the daemon lacks stays local); with no local NVML, the
/// daemon's GPUs become RemoteGpus; when local RAPL is unreadable (or absent) the daemon's CPUs
/// become RemoteCpus and the local "rapl" Unavailable entries are dropped. A daemon that cannot
/// be reached is recorded as Unavailable{"ergd", ...} and the local inventory is returned.
Inventory with_daemon(Inventory local, const Endpoint& endpoint);

}  // namespace erg::client
