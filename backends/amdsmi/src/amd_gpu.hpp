#pragma once
/// One AMD GPU (one die of an MI250) through AMD SMI (private to the backend; reached through
/// erg::Gpu).

#include <memory>
#include <optional>
#include <string>

#include "erg/backends/amdsmi/library.hpp"
#include "erg/core/device.hpp"

namespace erg::amdsmi {

class AmdGpu final : public Gpu {
 public:
  /// Reads name, PCI address and probes every capability once (the energy counter is then
  /// checked by discovery, see disable_energy_counter).
  static Result<std::shared_ptr<AmdGpu>> create(std::shared_ptr<const Library> library, amdsmi_processor_handle handle,
                                                unsigned index, unsigned physical_index);

  [[nodiscard]] unsigned index() const override { return index_; }
  [[nodiscard]] unsigned physical_index() const override { return physical_index_; }
  [[nodiscard]] GpuVendor vendor() const override { return GpuVendor::kAmd; }
  [[nodiscard]] const std::string& name() const override { return name_; }
  [[nodiscard]] const std::string& uuid() const override { return uuid_; }
  [[nodiscard]] const std::string& pci_address() const override { return pci_address_; }
  [[nodiscard]] const std::string& architecture() const override { return architecture_; }
  [[nodiscard]] const GpuCapabilities& capabilities() const override { return capabilities_; }

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

  // --- for discovery ---------------------------------------------------------------------
  /// The counter in µJ (count × resolution), read even when the capability is off.
  Result<double> raw_energy_uj();
  /// Socket power in W for the start check (current, else average); nullopt when N/A.
  std::optional<double> check_power_w();
  /// Turns the energy counter off (it failed the start check): energy is integrated from power.
  void disable_energy_counter() { capabilities_.energy_counter = false; }
  /// The odd die of an MI250: both socket power fields read N/A (its power is on its sibling).
  [[nodiscard]] bool secondary_die() const { return secondary_die_; }
  [[nodiscard]] std::string label() const;

 private:
  AmdGpu(std::shared_ptr<const Library> library, amdsmi_processor_handle handle, unsigned index,
         unsigned physical_index);
  void probe();
  [[nodiscard]] Error error(amdsmi_status_t status, std::string_view what) const;
  [[nodiscard]] Error not_exported(std::string_view symbol) const;
  Result<SocketPower> socket_power();
  Result<amdsmi_power_cap_info_t> cap_info();
  Result<amdsmi_clk_info_t> clock_info(amdsmi_clk_type_t type);
  Result<void> set_clock_range(amdsmi_clk_type_t type, Megahertz min, Megahertz max, std::string_view what);

  std::shared_ptr<const Library> library_;
  const Symbols& smi_;
  amdsmi_processor_handle handle_;
  unsigned index_;
  unsigned physical_index_;
  std::string name_;
  std::string uuid_;
  std::string pci_address_;
  std::string architecture_ = "unknown";
  GpuCapabilities capabilities_;
  bool secondary_die_ = false;
};

}  // namespace erg::amdsmi
