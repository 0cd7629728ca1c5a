#pragma once
/// One NVIDIA GPU through NVML (private to the backend; reached through erg::Gpu).

#include <array>
#include <memory>
#include <optional>
#include <string>

#include "erg/backends/nvml/library.hpp"
#include "erg/core/device.hpp"

namespace erg::nvml {

class NvmlGpu final : public Gpu {
 public:
  /// Reads name, UUID and architecture and probes every capability once. Fails when the GPU
  /// answers its identity queries with an error other than NOT_SUPPORTED (e.g. GPU lost).
  static Result<std::shared_ptr<NvmlGpu>> create(std::shared_ptr<const Library> library, nvmlDevice_t device,
                                                 unsigned index, unsigned physical_index);

  [[nodiscard]] unsigned index() const override { return index_; }
  [[nodiscard]] unsigned physical_index() const override { return physical_index_; }
  [[nodiscard]] GpuVendor vendor() const override { return GpuVendor::kNvidia; }
  [[nodiscard]] const std::string& name() const override { return name_; }
  [[nodiscard]] const std::string& uuid() const override { return uuid_; }
  [[nodiscard]] const std::string& pci_address() const override { return pci_address_; }
  [[nodiscard]] const std::string& architecture() const override { return architecture_; }
  [[nodiscard]] const GpuCapabilities& capabilities() const override { return capabilities_; }

  Result<MilliJoules> total_energy() override;
  Result<EnergyReading> energy_reading() override;
  Result<MilliWatts> power(PowerDomain domain) override;
  Result<PowerReading> power_reading(PowerDomain domain) override;

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

  /// nvmlDeviceGetComputeRunningProcesses_v3 with the count protocol (the list may grow between
  /// the two calls: retried a few times with slack).
  Result<std::vector<GpuProcess>> running_processes() override;
  /// nvmlDeviceGetProcessUtilization(since): NOT_FOUND (no newer sample) is an empty list; on a
  /// MIG-enabled GPU kNotSupported saying so.
  Result<std::vector<ProcessUtilizationSample>> process_utilization(std::chrono::microseconds since) override;

 private:
  NvmlGpu(std::shared_ptr<const Library> library, nvmlDevice_t device, unsigned index, unsigned physical_index);

  void probe();
  /// Reads one nvmlDeviceGetFieldValues field as mW; checks the call's and the field's status.
  /// energy_reading() from the plain counter call (no timestamp, no power).
  void counter_reading(Result<EnergyReading>& out);
  Result<PowerReading> read_power_field(unsigned field_id, unsigned scope, std::string_view field_name);
  /// The mapped error for a failed call on this GPU.
  [[nodiscard]] Error error(nvmlReturn_t code, std::string_view what) const;
  /// kNotSupported: the library does not export `symbol`.
  [[nodiscard]] Error not_exported(std::string_view symbol) const;
  /// "GPU 1 (NVML index 3)" for messages.
  [[nodiscard]] std::string label() const;
  /// nvmlDeviceGetMigMode's current mode; nullopt when the driver cannot tell.
  [[nodiscard]] std::optional<bool> mig_enabled() const;
  Result<unsigned> to_mw(MilliWatts value, std::string_view what) const;
  Result<unsigned> to_mhz(Megahertz value, std::string_view what) const;

  std::shared_ptr<const Library> library_;  // keeps NVML loaded and initialized
  const Symbols& nvml_;                     // library_->sym()
  nvmlDevice_t device_;
  unsigned index_;
  unsigned physical_index_;
  std::string name_;
  std::string uuid_;
  std::string pci_address_;
  std::string architecture_ = "unknown";
  unsigned architecture_id_ = NVML_DEVICE_ARCH_UNKNOWN;
  GpuCapabilities capabilities_;
  /// Power scope that answered the probe, per PowerDomain; nullopt: domain not readable.
  std::array<std::optional<unsigned>, 3> power_scope_{};
};

}  // namespace erg::nvml
