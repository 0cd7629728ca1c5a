#pragma once
/// One CPU package read through the powercap tree: package energy and, where the package has a
/// `dram` sub-zone, DRAM energy, each accumulated to a monotonic 64-bit total.

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "erg/backends/rapl/keepalive.hpp"
#include "erg/backends/rapl/powercap.hpp"
#include "erg/backends/rapl/wrap_accumulator.hpp"
#include "erg/core/clock.hpp"
#include "erg/core/device.hpp"

namespace erg::rapl {

/// RAPL updates its counters about every 1 ms (AMD documents "every 1ms"; energymon reports a
/// 1000 µs interval).
inline constexpr std::chrono::microseconds kRaplUpdatePeriod{1000};

/// One energy domain: a zone directory holding `energy_uj`, and its counter range.
struct RaplDomain {
  std::filesystem::path dir;  ///< ROOT/intel-rapl:N or ROOT/intel-rapl:N/intel-rapl:N:M.
  std::uint64_t max_energy_range_uj = 0;
};

struct RaplCpuOptions {
  std::shared_ptr<const SysfsReader> reader;  ///< nullptr → default_reader().
  std::shared_ptr<const Clock> clock;         ///< Times reads for wrap inference; nullptr → steady.
  Watts max_power = kDefaultMaxPower;         ///< Per domain; see WrapAccumulator.
};

/// Per-domain counter statistics (quality metadata).
struct RaplCounterStats {
  std::uint64_t wraps = 0;                ///< Wraps counted (observed and inferred).
  std::uint64_t ambiguous_updates = 0;    ///< Reads after a gap long enough for several wraps.
  std::uint64_t implausible_updates = 0;  ///< Resets or corrupt readings (failed reads, not counted).
};

/// A CPU package. Thread-safe: one mutex guards both domains. Reads need read access to
/// `energy_uj` (root since CVE-2020-8694) — otherwise kNoPermission, whose message says to run as
/// root or through ergd.
class RaplCpu final : public Cpu {
 public:
  /// Reads the first value of each domain (the baseline: energies count from here).
  /// Errors: those of the first read of either domain (kNotFound, kNoPermission, kIo, ...).
  static Result<std::shared_ptr<RaplCpu>> create(unsigned index, std::string name, RaplDomain package,
                                                 std::optional<RaplDomain> dram, RaplCpuOptions options = {});

  [[nodiscard]] unsigned index() const override { return index_; }
  [[nodiscard]] const std::string& name() const override { return name_; }
  [[nodiscard]] const CpuCapabilities& capabilities() const override { return capabilities_; }

  /// Package energy since the baseline, µJ; monotonic, wraps compensated.
  /// Errors: kNotFound (the file vanished), kNoPermission, kIo (read failed or malformed content),
  /// each naming the file. A failed read leaves the total unchanged.
  Result<MicroJoules> package_energy() override;
  /// DRAM energy since the baseline, independent of the package counter. kNotSupported when the
  /// package has no DRAM domain; otherwise errors as package_energy().
  Result<MicroJoules> dram_energy() override;

  /// Reads every domain once so no wrap goes unseen (what the keepalive runs). The first error.
  Result<void> refresh();
  /// A task for Keepalive that calls refresh() on this package's state and ignores errors (they
  /// surface on the next package_energy()/dram_energy()). Holds the state, not this object.
  [[nodiscard]] Keepalive::Task keepalive_task() const;
  /// Shares ownership of the discovery's keepalive (it stops when the last RaplCpu goes). Not
  /// thread-safe: call before the object is shared (discover() does).
  void set_keepalive(std::shared_ptr<const Keepalive> keepalive) { keepalive_ = std::move(keepalive); }
  /// The keepalive reading this package, or nullptr.
  [[nodiscard]] const Keepalive* keepalive() const { return keepalive_.get(); }

  [[nodiscard]] const RaplDomain& package_domain() const;
  /// nullopt when there is no DRAM domain.
  [[nodiscard]] std::optional<RaplDomain> dram_domain() const;
  [[nodiscard]] RaplCounterStats package_stats() const;
  /// nullopt when there is no DRAM domain.
  [[nodiscard]] std::optional<RaplCounterStats> dram_stats() const;

  struct State;  // Shared with the keepalive task.

 private:
  RaplCpu(unsigned index, std::string name, std::shared_ptr<State> state);

  unsigned index_;
  std::string name_;
  CpuCapabilities capabilities_;
  std::shared_ptr<State> state_;
  std::shared_ptr<const Keepalive> keepalive_;
};

}  // namespace erg::rapl
