// One typed conformance suite for every Gpu implementation. Each backend supplies a fixture that
// yields its GPUs; every test below must hold for all of them. Where an implementation cannot do
// something by design, its capabilities say so and the test checks the documented answer
// (NotSupported, reset to the maximum limit, no reading timestamps) instead of skipping.
//
// Implementations covered:
//  - NvmlGpu: dlopen of the simulated libnvidia-ml.so.1, over several SKUs, including a
//    pre-Volta GPU without an energy counter, with field timestamps that are read times (the
//    default) and update times;
//  - AmdGpu: dlopen of the simulated libamd_smi.so (MI300X; MI210 and a dual-die MI250 on ABI 24);
//  - sim::FakeGpu, the in-process stand-in of measure/ and optimizer tests (one with a counter,
//    one without);
//  - when ergd is built: client::HybridGpu, the GPUs a job sees with ERG_DAEMON_SOCK set (local
//    NVML reads, setters through an ergd serving the same simulated machine on a Unix socket),
//    and client::RemoteGpu, everything through ergd (no local NVML).

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "erg/backends/amdsmi/discovery.hpp"
#include "erg/backends/nvml/discovery.hpp"
#include "erg/core/device.hpp"
#include "erg/sim/fake_devices.hpp"
#include "erg/sim/machine.hpp"
#include "erg/sim/spec.hpp"
#ifdef ERG_HAVE_DAEMON
#include <unistd.h>

#include "erg/client/remote.hpp"
#include "erg/daemon/daemon.hpp"
#endif

namespace erg {
namespace {

using std::chrono::nanoseconds;

/// NVML backend over a simulated machine with the given spec.
template <const char* Spec>
struct NvmlSimBackend {
  std::unique_ptr<sim::Machine> machine;
  std::vector<std::shared_ptr<Gpu>> gpus;

  void set_up() {
    auto spec = sim::parse_spec(Spec);
    ASSERT_TRUE(spec) << spec.error().message;
    auto m = sim::Machine::create_temp(*spec);
    ASSERT_TRUE(m) << m.error().message;
    machine = std::move(*m);
    machine->set_privilege(sim::Privilege::kEveryone);
    ASSERT_TRUE(machine->export_env());
    nvml::DiscoveryOptions opts;
    opts.cuda_visible_devices = std::optional<std::string>();  // all GPUs
    auto found = nvml::discover(opts);
    ASSERT_TRUE(found) << found.error().message;
    ASSERT_TRUE(found->unavailable.empty()) << found->unavailable.front().reason;
    gpus = found->gpus;
  }
  void load(unsigned gpu, double util) { ASSERT_TRUE(machine->set_utilization(gpu, util)); }
};

/// AMD SMI backend over a simulated machine (dlopen of the simulated libamd_smi.so). The start
/// check of the counter is skipped here (amd_acceptance_test covers it): it sleeps 0.5 s.
template <const char* Spec>
struct AmdSimBackend {
  std::unique_ptr<sim::Machine> machine;
  std::vector<std::shared_ptr<Gpu>> gpus;

  void set_up() {
    auto spec = sim::parse_spec(Spec);
    ASSERT_TRUE(spec) << spec.error().message;
    auto m = sim::Machine::create_temp(*spec);
    ASSERT_TRUE(m) << m.error().message;
    machine = std::move(*m);
    machine->set_privilege(sim::Privilege::kEveryone);
    ASSERT_TRUE(machine->export_env());
    amdsmi::DiscoveryOptions opts;
    opts.visible_devices = std::optional<std::string>();  // all GPUs
    opts.counter_check = std::chrono::milliseconds(0);
    auto found = amdsmi::discover(opts);
    ASSERT_TRUE(found) << found.error().message;
    for (const auto& u : found->unavailable)  // only the MI250's second die is noted
      ASSERT_NE(u.reason.find("secondary die"), std::string::npos) << u.reason;
    gpus = found->gpus;
  }
  void load(unsigned gpu, double util) { ASSERT_TRUE(machine->set_utilization(gpu, util)); }
};

/// Two in-process fakes: one with an energy counter, one without (like a pre-Volta GPU).
struct FakeBackend {
  std::vector<std::shared_ptr<sim::FakeGpu>> fakes;
  std::vector<std::shared_ptr<Gpu>> gpus;
  void set_up() {
    fakes = {std::make_shared<sim::FakeGpu>(0, true),
             std::make_shared<sim::FakeGpu>(1, false, "Fake GPU without counter")};
    gpus.assign(fakes.begin(), fakes.end());
  }
  void load(unsigned gpu, double util) {
    fakes[gpu]->set_power_mw(50000.0 + 200000.0 * util);
    fakes[gpu]->add_energy_mj(1000.0 * util);
  }
};

#ifdef ERG_HAVE_DAEMON
/// An in-process ergd serving `served` on a temporary Unix socket.
struct Ergd {
  std::unique_ptr<daemon::Daemon> daemon;
  std::string socket;

  void start(Inventory served) {
    static std::atomic<int> counter{0};
    socket = "/tmp/erg-conformance-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + ".sock";
    daemon::Config c;
    c.socket_path = socket;
    c.skip_privilege_check = true;
    c.allow_insecure_socket_dir = true;  // a socket in /tmp itself (sticky, shared)
    auto d = daemon::Daemon::create(c, std::move(served));
    ASSERT_TRUE(d) << d.error().message;
    daemon = std::move(*d);
    ASSERT_TRUE(daemon->start());
  }
  ~Ergd() {
    if (daemon) daemon->stop();
  }
};

/// The client's view with a daemon: each GPU a HybridGpu (local reads, setters via ergd).
template <const char* Spec>
struct ThroughErgd {
  NvmlSimBackend<Spec> local;
  Ergd ergd;
  std::vector<std::shared_ptr<Gpu>> gpus;

  void set_up() {
    local.set_up();
    Inventory served;
    served.gpus = local.gpus;
    ergd.start(std::move(served));
    Inventory mine;
    mine.gpus = local.gpus;
    auto inv = client::with_daemon(std::move(mine), client::Endpoint{ergd.socket});
    ASSERT_TRUE(inv.unavailable.empty()) << inv.unavailable.front().reason;
    gpus = inv.gpus;
    ASSERT_EQ(gpus.size(), local.gpus.size());
    for (auto& g : gpus) ASSERT_NE(dynamic_cast<client::HybridGpu*>(g.get()), nullptr);
  }
  void load(unsigned gpu, double util) { local.load(gpu, util); }
};

/// Everything through ergd: no local NVML, so the daemon's GPUs become RemoteGpus.
template <const char* Spec>
struct RemoteThroughErgd {
  NvmlSimBackend<Spec> served_by;  // the daemon's NVML
  Ergd ergd;
  std::vector<std::shared_ptr<Gpu>> gpus;

  void set_up() {
    served_by.set_up();
    Inventory served;
    served.gpus = served_by.gpus;
    ergd.start(std::move(served));
    auto inv = client::with_daemon(Inventory{}, client::Endpoint{ergd.socket});
    ASSERT_TRUE(inv.unavailable.empty()) << inv.unavailable.front().reason;
    gpus = inv.gpus;
    ASSERT_EQ(gpus.size(), served_by.gpus.size());
    for (auto& g : gpus) ASSERT_NE(dynamic_cast<client::RemoteGpu*>(g.get()), nullptr);
  }
  void load(unsigned gpu, double util) { served_by.load(gpu, util); }
};
#endif

inline constexpr char kA100[] = "2xA100";
inline constexpr char kMixed[] = "1xV100,1xP100,1xH100";
inline constexpr char kTuringAda[] = "1xRTX6000,1xA40";
inline constexpr char kMI300X[] = "2xMI300X";
/// MI210 (average power only), MI250 (two dies; the second has no power of its own), ABI 24.
inline constexpr char kAmdMixed[] = "1xMI210,1xMI250,amdsmi=24";
/// Field timestamps are the sensors' update times (the default model stamps the read time).
inline constexpr char kUpdateStamps[] = "1xA100,1xV100,timestamps=update";

template <class Backend>
class GpuConformance : public ::testing::Test {
 protected:
  void SetUp() override { backend_.set_up(); }
  Backend backend_;
};

using GpuBackends =
    ::testing::Types<NvmlSimBackend<kA100>, NvmlSimBackend<kMixed>, NvmlSimBackend<kTuringAda>,
                     NvmlSimBackend<kUpdateStamps>, AmdSimBackend<kMI300X>, AmdSimBackend<kAmdMixed>, FakeBackend
#ifdef ERG_HAVE_DAEMON
                     ,
                     ThroughErgd<kMixed>, ThroughErgd<kUpdateStamps>, RemoteThroughErgd<kMixed>
#endif
                     >;
TYPED_TEST_SUITE(GpuConformance, GpuBackends);

constexpr PowerDomain kAllDomains[] = {PowerDomain::kDeviceInstant, PowerDomain::kDeviceAverage,
                                       PowerDomain::kMemoryAverage};

bool listed(const Gpu& gpu, PowerDomain d) {
  const auto& domains = gpu.capabilities().power_domains;
  return std::find(domains.begin(), domains.end(), d) != domains.end();
}

nanoseconds wall_now() {
  return std::chrono::duration_cast<nanoseconds>(std::chrono::system_clock::now().time_since_epoch());
}

/// A call the capabilities (or the domain list) say is unavailable fails with NotSupported.
template <class T>
void expect_not_supported(const Result<T>& r, const std::string& what) {
  ASSERT_FALSE(r) << what << ": succeeded, but the capabilities say it is not supported";
  EXPECT_EQ(r.error().code, ErrorCode::kNotSupported)
      << what << ": " << to_string(r.error().code) << ": " << r.error().message;
}

/// A reading's driver time must lie between a few update periods before the call (the value
/// may be that old; 2 s, the age measure/ still accepts, when the period is unknown) and the time
/// just after it. The slack covers the simulated driver's wall clock (steady clock plus an
/// offset taken at creation) drifting from the system clock.
void expect_plausible_stamp(nanoseconds stamp, nanoseconds before, nanoseconds after,
                            std::optional<std::chrono::microseconds> period, const std::string& what) {
  constexpr nanoseconds kSlack = std::chrono::milliseconds(1);
  const nanoseconds oldest = period ? nanoseconds(3 * *period) : nanoseconds(std::chrono::seconds(2));
  EXPECT_LE(stamp, after + kSlack) << what << ": updated_at is " << (stamp - after).count()
                                   << " ns after the call returned";
  EXPECT_GE(stamp, before - oldest - kSlack) << what << ": updated_at is " << (before - stamp).count()
                                             << " ns before the call, more than " << oldest.count() << " ns";
}

TYPED_TEST(GpuConformance, DescribesItself) {
  ASSERT_FALSE(this->backend_.gpus.empty());
  std::set<std::string> uuids;
  for (unsigned i = 0; i < this->backend_.gpus.size(); ++i) {
    auto& gpu = *this->backend_.gpus[i];
    EXPECT_EQ(gpu.index(), i);
    EXPECT_FALSE(gpu.name().empty());
    EXPECT_FALSE(gpu.uuid().empty());
    EXPECT_TRUE(uuids.insert(gpu.uuid()).second) << "duplicate uuid " << gpu.uuid();
    EXPECT_NE(gpu.architecture(), "");
    const auto& caps = gpu.capabilities();
    // Unknown is nullopt, never zero.
    if (caps.energy_update_period) {
      EXPECT_GT(caps.energy_update_period->count(), 0);
    }
    if (caps.power_update_period) {
      EXPECT_GT(caps.power_update_period->count(), 0);
    }
    EXPECT_FALSE(caps.power_domains.empty());
  }
}

TYPED_TEST(GpuConformance, EnergyCounterMatchesCapabilityAndNeverDecreases) {
  for (auto& gpu : this->backend_.gpus) {
    this->backend_.load(gpu->index(), 0.7);
    auto first = gpu->total_energy();
    if (!gpu->capabilities().energy_counter) {
      expect_not_supported(first, gpu->name());
      continue;
    }
    ASSERT_TRUE(first) << first.error().message;
    auto second = gpu->total_energy();
    ASSERT_TRUE(second);
    EXPECT_GE(second->value(), first->value());
  }
}

TYPED_TEST(GpuConformance, EnergyReadingIsTheCounterWithItsTime) {
  for (auto& gpu : this->backend_.gpus) {
    const auto& caps = gpu->capabilities();
    this->backend_.load(gpu->index(), 0.7);
    if (!caps.energy_counter) {
      auto r = gpu->energy_reading();
      expect_not_supported(r, gpu->name());
      continue;
    }
    for (int round = 0; round < 3; ++round) {
      auto before = gpu->total_energy();
      const auto wall_before = wall_now();
      auto r = gpu->energy_reading();
      const auto wall_after = wall_now();
      auto after = gpu->total_energy();
      ASSERT_TRUE(before && after) << gpu->name();
      ASSERT_TRUE(r) << gpu->name() << ": " << r.error().message;
      // The same monotonic counter as total_energy().
      EXPECT_GE(r->energy.value(), before->value()) << gpu->name();
      EXPECT_LE(r->energy.value(), after->value()) << gpu->name();
      if (r->power) {
        EXPECT_GE(r->power->value(), 0.0) << gpu->name();
      }
      EXPECT_EQ(r->updated_at.has_value(), caps.reading_timestamps)
          << gpu->name() << ": energy_reading().updated_at must be present exactly when the capabilities say "
          << "reading_timestamps (" << caps.reading_timestamps << ")";
      if (r->updated_at) {
        expect_plausible_stamp(*r->updated_at, wall_before, wall_after, caps.energy_update_period,
                               gpu->name() + " energy_reading");
      }
    }
  }
}

TYPED_TEST(GpuConformance, ListedPowerDomainsAreReadableOthersNotSupported) {
  for (auto& gpu : this->backend_.gpus) {
    for (auto d : kAllDomains) {
      auto p = gpu->power(d);
      if (listed(*gpu, d)) {
        ASSERT_TRUE(p) << gpu->name() << " " << to_string(d) << ": " << p.error().message;
        EXPECT_GE(p->value(), 0.0);
      } else {
        expect_not_supported(p, gpu->name() + " " + std::string(to_string(d)));
      }
    }
  }
}

TYPED_TEST(GpuConformance, PowerReadingIsThePowerWithItsTime) {
  for (auto& gpu : this->backend_.gpus) {
    const auto& caps = gpu->capabilities();
    this->backend_.load(gpu->index(), 0.7);
    for (auto d : kAllDomains) {
      const std::string what = gpu->name() + " " + std::string(to_string(d));
      const auto wall_before = wall_now();
      auto r = gpu->power_reading(d);
      const auto wall_after = wall_now();
      if (!listed(*gpu, d)) {
        expect_not_supported(r, what);
        continue;
      }
      ASSERT_TRUE(r) << what << ": " << r.error().message;
      EXPECT_GE(r->power.value(), 0.0) << what;
      EXPECT_EQ(r->updated_at.has_value(), caps.reading_timestamps)
          << what << ": power_reading().updated_at must be present exactly when the capabilities say "
          << "reading_timestamps (" << caps.reading_timestamps << ")";
      // Averages may update with the energy counter rather than the instant sensor: the
      // longer of the two periods bounds the age.
      auto period = caps.power_update_period;
      if (period && caps.energy_update_period) period = std::max(*period, *caps.energy_update_period);
      if (r->updated_at) {
        expect_plausible_stamp(*r->updated_at, wall_before, wall_after, period, what + " power_reading");
      }
    }
  }
}

TYPED_TEST(GpuConformance, PowerLimitWithinConstraintsAndSettable) {
  for (auto& gpu : this->backend_.gpus) {
    ASSERT_TRUE(gpu->capabilities().power_limit) << gpu->name();
    auto range = gpu->power_limit_constraints();
    ASSERT_TRUE(range) << range.error().message;
    EXPECT_LT(range->min, range->max);
    auto limit = gpu->power_limit();
    ASSERT_TRUE(limit);
    EXPECT_GE(*limit, range->min);
    EXPECT_LE(*limit, range->max);
    // Without a readable default, reset_power_limit sets the maximum (GpuCapabilities).
    auto def = gpu->default_power_limit();
    MilliWatts reset_to = range->max;
    if (gpu->capabilities().default_power_limit) {
      ASSERT_TRUE(def) << gpu->name() << ": " << def.error().message;
      EXPECT_GE(*def, range->min);
      EXPECT_LE(*def, range->max);
      reset_to = *def;
    } else {
      expect_not_supported(def, gpu->name());
    }

    ASSERT_TRUE(gpu->set_power_limit(range->min));
    EXPECT_EQ(gpu->power_limit()->value(), range->min.value());
    auto too_high = gpu->set_power_limit(range->max + MilliWatts(1000.0));
    ASSERT_FALSE(too_high);
    EXPECT_EQ(too_high.error().code, ErrorCode::kInvalidArgument);
    EXPECT_EQ(gpu->power_limit()->value(), range->min.value()) << "a rejected limit must change nothing";
    ASSERT_TRUE(gpu->reset_power_limit());
    EXPECT_EQ(gpu->power_limit()->value(), reset_to.value()) << gpu->name();
  }
}

TYPED_TEST(GpuConformance, ClockListsMatchCapability) {
  for (auto& gpu : this->backend_.gpus) {
    auto mem = gpu->supported_memory_clocks();
    if (!gpu->capabilities().clocks) {
      expect_not_supported(mem, gpu->name());
      auto gfx = gpu->supported_graphics_clocks(Megahertz(1000.0));
      expect_not_supported(gfx, gpu->name());
      continue;
    }
    ASSERT_TRUE(mem) << mem.error().message;
    ASSERT_FALSE(mem->empty());
    auto gfx = gpu->supported_graphics_clocks(mem->front());
    ASSERT_TRUE(gfx) << gfx.error().message;
    ASSERT_FALSE(gfx->empty());
    for (auto c : *gfx) EXPECT_GT(c.value(), 0.0);
  }
}

TYPED_TEST(GpuConformance, PersistenceModeMatchesCapability) {
  for (auto& gpu : this->backend_.gpus) {
    if (!gpu->capabilities().persistence_mode) {
      auto m = gpu->persistence_mode();
      expect_not_supported(m, gpu->name());
      continue;
    }
    ASSERT_TRUE(gpu->set_persistence_mode(true));
    EXPECT_TRUE(*gpu->persistence_mode());
    ASSERT_TRUE(gpu->set_persistence_mode(false));
    EXPECT_FALSE(*gpu->persistence_mode());
  }
}

TYPED_TEST(GpuConformance, TemperatureMatchesCapability) {
  for (auto& gpu : this->backend_.gpus) {
    auto t = gpu->temperature();
    if (!gpu->capabilities().temperature) {
      expect_not_supported(t, gpu->name());
      continue;
    }
    ASSERT_TRUE(t) << t.error().message;
    EXPECT_GT(*t, 0);
    EXPECT_LT(*t, 120);
  }
}

TYPED_TEST(GpuConformance, ProcessQueriesMatchCapability) {
  for (auto& gpu : this->backend_.gpus) {
    auto procs = gpu->running_processes();
    if (!gpu->capabilities().running_processes) {
      expect_not_supported(procs, gpu->name());
    } else {
      ASSERT_TRUE(procs) << gpu->name() << ": " << procs.error().message;
    }
    auto util = gpu->process_utilization(std::chrono::microseconds(0));
    if (!gpu->capabilities().process_utilization) {
      expect_not_supported(util, gpu->name());
    } else {
      ASSERT_TRUE(util) << gpu->name() << ": " << util.error().message;
      for (const auto& s : *util) EXPECT_LE(s.sm_percent, 100u) << gpu->name();
    }
  }
}

}  // namespace
}  // namespace erg
