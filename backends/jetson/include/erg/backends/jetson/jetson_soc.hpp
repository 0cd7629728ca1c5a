#pragma once
/// A Jetson module as an erg::Soc: its INA3221 rails read through hwmon, their power integrated
/// into energy by one sampler thread per module.
///
/// Integration: the INA3221 reports voltage and current, not energy, so JetsonSoc samples every
/// rail every `sample_period` (default 10 ms: the chip's readings change every 6.6 ms at its
/// default configuration — three channels × one sample × two 1.1 ms conversions — so each sample
/// sees a reading at most one update old, at about 100 reads of two small files per rail per
/// second) and adds the trapezoid between consecutive samples. rail_energy() samples once more
/// at the moment of the call, so a window's edges are read when they happen, not at the last
/// tick. The thread starts with the first rail_energy() call (listing devices starts none) and
/// stops in the destructor. This lives in the backend rather than in measure/ so that every
/// reader (overlapping windows, exporters) shares one integral, as the RAPL keepalive shares one
/// reader per discovery.

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "erg/backends/jetson/hwmon.hpp"
#include "erg/core/clock.hpp"
#include "erg/core/discovery.hpp"

namespace erg::jetson {

inline constexpr std::chrono::microseconds kDefaultSamplePeriod{10'000};

struct DiscoveryOptions {
  /// The hwmon class directory; else $ERG_HWMON_ROOT, else /sys/class/hwmon.
  std::optional<std::filesystem::path> root;
  std::chrono::microseconds sample_period = kDefaultSamplePeriod;
  /// Run the sampler thread (false: only rail_energy() calls sample; tests on a virtual clock).
  bool sampler_thread = true;
  /// Time source; nullptr = the steady clock. Must outlive the SoC.
  const Clock* clock = nullptr;
};

struct Discovery {
  std::vector<std::shared_ptr<Soc>> socs;  ///< One module when any INA3221 rail was found.
  std::vector<Unavailable> unavailable;    ///< source "jetson": monitors found but unreadable.
};

/// Finds the INA3221 rails. A machine without any (every non-Jetson host) gives nothing and no
/// Unavailable. Never prints. Privilege: none (the hwmon files are world-readable).
Discovery discover(const DiscoveryOptions& options = {});

class JetsonSoc final : public Soc {
 public:
  JetsonSoc(unsigned index, std::vector<RailFiles> rails, const DiscoveryOptions& options);
  ~JetsonSoc() override;
  JetsonSoc(const JetsonSoc&) = delete;
  JetsonSoc& operator=(const JetsonSoc&) = delete;

  [[nodiscard]] unsigned index() const override { return index_; }
  [[nodiscard]] const std::string& name() const override { return name_; }
  [[nodiscard]] const SocCapabilities& capabilities() const override { return caps_; }
  Result<std::vector<MilliWatts>> rail_power() override;
  Result<std::vector<MilliJoules>> rail_energy() override;
  /// Samples taken into the integral so far (thread and calls).
  [[nodiscard]] std::uint64_t samples() const;

 private:
  Result<MilliWatts> read_rail(std::size_t i) const;
  void sample_locked();  // under mu_
  void run();

  unsigned index_;
  std::string name_ = "Jetson";
  SocCapabilities caps_;
  std::vector<RailFiles> rails_;
  std::chrono::microseconds period_;
  bool thread_wanted_;
  const Clock* clock_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  bool started_ = false;
  std::optional<std::chrono::nanoseconds> last_t_;
  std::vector<double> last_mw_;
  std::vector<double> energy_mj_;
  std::uint64_t samples_ = 0;
  std::thread thread_;
};

}  // namespace erg::jetson
