#pragma once
/// In-process fake devices that implement the core interfaces at (almost) zero cost: every
/// reading is an atomic load of a value the test or benchmark sets. For logic tests of
/// measure/ and for benchmarks that must exclude driver cost. Thread-safe. Both pass the
/// conformance suites (tests/conformance); a FakeCpu's energies are the values the test sets,
/// which gives the interface's "since the first read" when the test starts them at 0.

#include <atomic>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "erg/core/device.hpp"

namespace erg::sim {

/// "0000:01:00.0" for fake GPU 0, "0000:02:00.0" for 1, ...
inline std::string fake_pci_address(unsigned index) {
  static constexpr char kHex[] = "0123456789abcdef";
  unsigned bus = (index + 1) & 0xffu;
  return std::string("0000:") + kHex[bus >> 4] + kHex[bus & 15] + ":00.0";
}

class FakeGpu final : public Gpu {
 public:
  FakeGpu(unsigned index, bool energy_counter = true, std::string name = "Fake GPU")
      : index_(index),
        name_(std::move(name)),
        uuid_("GPU-fake-" + std::to_string(index)),
        pci_address_(fake_pci_address(index)) {
    caps_.energy_counter = energy_counter;
    caps_.power_domains = {PowerDomain::kDeviceInstant, PowerDomain::kDeviceAverage};
    caps_.power_limit = true;
    caps_.clocks = true;
    caps_.persistence_mode = true;
    caps_.temperature = true;
    caps_.default_power_limit = true;
    // reading_timestamps stays false: readings carry no driver time (the Gpu defaults).
    if (energy_counter) caps_.energy_update_period = std::chrono::milliseconds(100);
  }

  /// Test controls.
  void set_energy_mj(double mj) { energy_mj_.store(mj, std::memory_order_relaxed); }
  void add_energy_mj(double mj) {
    double cur = energy_mj_.load(std::memory_order_relaxed);
    while (!energy_mj_.compare_exchange_weak(cur, cur + mj, std::memory_order_relaxed)) {
    }
  }
  void set_power_mw(double mw) { power_mw_.store(mw, std::memory_order_relaxed); }
  void set_failing(bool failing) { failing_.store(failing, std::memory_order_relaxed); }
  /// Replaces the set power with what `source` returns (in mW) on each read, e.g. a value that
  /// follows a clock or a read that stalls like a preempted thread. Set before the GPU is shared.
  void set_power_source(std::function<double()> source) { power_source_ = std::move(source); }
  GpuCapabilities& mutable_capabilities() { return caps_; }

  unsigned index() const override { return index_; }
  unsigned physical_index() const override { return index_; }
  GpuVendor vendor() const override { return GpuVendor::kNvidia; }
  const std::string& name() const override { return name_; }
  const std::string& uuid() const override { return uuid_; }
  const std::string& pci_address() const override { return pci_address_; }
  /// Set before the GPU is shared between threads.
  void set_pci_address(std::string address) { pci_address_ = std::move(address); }
  const std::string& architecture() const override { return arch_; }
  const GpuCapabilities& capabilities() const override { return caps_; }

  Result<MilliJoules> total_energy() override {
    if (failing_.load(std::memory_order_relaxed)) return fail(ErrorCode::kGpuLost, "fake GPU lost");
    if (!caps_.energy_counter) return fail(ErrorCode::kNotSupported, "no energy counter");
    return MilliJoules(energy_mj_.load(std::memory_order_relaxed));
  }
  Result<MilliWatts> power(PowerDomain d) override {
    if (failing_.load(std::memory_order_relaxed)) return fail(ErrorCode::kGpuLost, "fake GPU lost");
    for (auto have : caps_.power_domains)
      if (have == d) return MilliWatts(power_source_ ? power_source_() : power_mw_.load(std::memory_order_relaxed));
    return fail(ErrorCode::kNotSupported, "domain not supported");
  }
  Result<MilliWatts> power_limit() override {
    if (failing_.load(std::memory_order_relaxed)) return fail(ErrorCode::kGpuLost, "fake GPU lost");
    return MilliWatts(limit_mw_.load());
  }
  Result<PowerLimitConstraints> power_limit_constraints() override {
    return PowerLimitConstraints{MilliWatts(100000.0), MilliWatts(300000.0)};
  }
  Result<MilliWatts> default_power_limit() override { return MilliWatts(300000.0); }
  Result<void> set_power_limit(MilliWatts l) override {
    if (failing_.load(std::memory_order_relaxed)) return fail(ErrorCode::kGpuLost, "fake GPU lost");
    if (l.value() < 100000.0 || l.value() > 300000.0) return fail(ErrorCode::kInvalidArgument, "out of range");
    limit_mw_.store(l.value());
    return ok();
  }
  Result<void> reset_power_limit() override { return set_power_limit(MilliWatts(300000.0)); }
  Result<bool> persistence_mode() override { return persistence_.load(); }
  Result<void> set_persistence_mode(bool on) override {
    persistence_.store(on);
    return ok();
  }
  Result<std::vector<Megahertz>> supported_memory_clocks() override {
    return std::vector<Megahertz>{Megahertz(1215.0)};
  }
  Result<std::vector<Megahertz>> supported_graphics_clocks(Megahertz) override {
    return std::vector<Megahertz>{Megahertz(1410.0), Megahertz(1005.0), Megahertz(210.0)};
  }
  Result<void> set_gpu_locked_clocks(Megahertz lo, Megahertz hi) override {
    sm_lo_.store(lo.value()), sm_hi_.store(hi.value());
    return ok();
  }
  Result<void> reset_gpu_locked_clocks() override {
    sm_lo_.store(0.0), sm_hi_.store(0.0);
    return ok();
  }
  Result<void> set_memory_locked_clocks(Megahertz lo, Megahertz hi) override {
    mem_lo_.store(lo.value()), mem_hi_.store(hi.value());
    return ok();
  }
  Result<void> reset_memory_locked_clocks() override {
    mem_lo_.store(0.0), mem_hi_.store(0.0);
    return ok();
  }
  /// Test observation: the locked SM (memory) clock range, MHz; (0, 0) when not locked.
  std::pair<double, double> locked_gpu_clocks() const { return {sm_lo_.load(), sm_hi_.load()}; }
  std::pair<double, double> locked_memory_clocks() const { return {mem_lo_.load(), mem_hi_.load()}; }
  Result<int> temperature() override { return 40; }

 private:
  unsigned index_;
  std::string name_;
  std::string uuid_;
  std::string pci_address_;
  std::string arch_ = "ampere";
  GpuCapabilities caps_;
  std::atomic<double> energy_mj_{0.0};
  std::atomic<double> power_mw_{50000.0};
  std::atomic<double> limit_mw_{300000.0};
  std::atomic<bool> persistence_{false};
  std::atomic<bool> failing_{false};
  std::atomic<double> sm_lo_{0.0}, sm_hi_{0.0}, mem_lo_{0.0}, mem_hi_{0.0};
  std::function<double()> power_source_;
};

class FakeCpu final : public Cpu {
 public:
  explicit FakeCpu(unsigned index, bool dram = true) : index_(index), name_("package-" + std::to_string(index)) {
    caps_.dram = dram;
    caps_.update_period = std::chrono::milliseconds(1);
  }
  void set_energy_uj(double pkg, double dram) {
    package_uj_.store(pkg, std::memory_order_relaxed);
    dram_uj_.store(dram, std::memory_order_relaxed);
  }
  /// The next `reads` package reads fail with Io (as RaplCpu reports a corrupt reading).
  void fail_package_reads(int reads) { failing_reads_.store(reads, std::memory_order_relaxed); }
  unsigned index() const override { return index_; }
  const std::string& name() const override { return name_; }
  const CpuCapabilities& capabilities() const override { return caps_; }
  Result<MicroJoules> package_energy() override {
    if (failing_reads_.load(std::memory_order_relaxed) > 0) {
      failing_reads_.fetch_sub(1, std::memory_order_relaxed);
      return fail(ErrorCode::kIo, name_ + ": injected read failure");
    }
    return MicroJoules(package_uj_.load(std::memory_order_relaxed));
  }
  Result<MicroJoules> dram_energy() override {
    if (!caps_.dram) return fail(ErrorCode::kNotSupported, "no DRAM domain");
    return MicroJoules(dram_uj_.load(std::memory_order_relaxed));
  }

 private:
  unsigned index_;
  std::string name_;
  CpuCapabilities caps_;
  std::atomic<double> package_uj_{0.0};
  std::atomic<double> dram_uj_{0.0};
  std::atomic<int> failing_reads_{0};
};

}  // namespace erg::sim
