// One typed conformance suite for every GPU backend that is built. Each backend supplies a
// fixture that yields its GPUs; every test below must hold for all of them.
//
// Backends covered today: NVML (dlopen of the simulated libnvidia-ml.so.1) over several SKUs,
// including a pre-Volta GPU without an energy counter; and, when ergd is built, the client's
// GPUs as a job sees them with ERG_DAEMON_SOCK set (local NVML reads, setters through an ergd
// serving the same simulated machine on a Unix socket).

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "erg/backends/nvml/discovery.hpp"
#include "erg/core/device.hpp"
#include "erg/sim/machine.hpp"
#include "erg/sim/spec.hpp"
#ifdef ERG_HAVE_DAEMON
#include <unistd.h>

#include "erg/client/remote.hpp"
#include "erg/daemon/daemon.hpp"
#endif

namespace erg {
namespace {

/// NVML backend over a simulated machine with the given spec.
template <const char* Spec>
struct NvmlSimBackend {
  static constexpr const char* kName = Spec;
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

#ifdef ERG_HAVE_DAEMON
/// The client's view with a daemon: each GPU a HybridGpu (local reads, setters via ergd).
template <const char* Spec>
struct ThroughErgd {
  NvmlSimBackend<Spec> local;
  std::unique_ptr<daemon::Daemon> ergd;
  std::string socket = "/tmp/erg-conformance-" + std::to_string(::getpid()) + ".sock";
  std::vector<std::shared_ptr<Gpu>> gpus;
  sim::Machine* machine = nullptr;

  void set_up() {
    local.set_up();
    machine = local.machine.get();
    daemon::Config c;
    c.socket_path = socket;
    c.skip_privilege_check = true;
    Inventory served;
    served.gpus = local.gpus;
    auto d = daemon::Daemon::create(c, std::move(served));
    ASSERT_TRUE(d) << d.error().message;
    ergd = std::move(*d);
    ASSERT_TRUE(ergd->start());
    Inventory mine;
    mine.gpus = local.gpus;
    auto inv = client::with_daemon(std::move(mine), client::Endpoint{socket});
    ASSERT_TRUE(inv.unavailable.empty()) << inv.unavailable.front().reason;
    gpus = inv.gpus;
    for (auto& g : gpus) ASSERT_NE(dynamic_cast<client::HybridGpu*>(g.get()), nullptr);
  }
  ~ThroughErgd() {
    if (ergd) ergd->stop();
  }
  void load(unsigned gpu, double util) { local.load(gpu, util); }
};
#endif

inline constexpr char kA100[] = "2xA100";
inline constexpr char kMixed[] = "1xV100,1xP100,1xH100";
inline constexpr char kTuringAda[] = "1xRTX6000,1xA40";

template <class Backend>
class GpuConformance : public ::testing::Test {
 protected:
  void SetUp() override { backend_.set_up(); }
  Backend backend_;
};

using GpuBackends = ::testing::Types<NvmlSimBackend<kA100>, NvmlSimBackend<kMixed>, NvmlSimBackend<kTuringAda>
#ifdef ERG_HAVE_DAEMON
                                     ,
                                     ThroughErgd<kMixed>
#endif
                                     >;
TYPED_TEST_SUITE(GpuConformance, GpuBackends);

TYPED_TEST(GpuConformance, DescribesItself) {
  ASSERT_FALSE(this->backend_.gpus.empty());
  for (unsigned i = 0; i < this->backend_.gpus.size(); ++i) {
    auto& gpu = *this->backend_.gpus[i];
    EXPECT_EQ(gpu.index(), i);
    EXPECT_FALSE(gpu.name().empty());
    EXPECT_EQ(gpu.uuid().rfind("GPU-", 0), 0u) << gpu.uuid();
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
      ASSERT_FALSE(first);
      EXPECT_EQ(first.error().code, ErrorCode::kNotSupported);
      continue;
    }
    ASSERT_TRUE(first) << first.error().message;
    auto second = gpu->total_energy();
    ASSERT_TRUE(second);
    EXPECT_GE(second->value(), first->value());
  }
}

TYPED_TEST(GpuConformance, ListedPowerDomainsAreReadableOthersNotSupported) {
  for (auto& gpu : this->backend_.gpus) {
    const auto& domains = gpu->capabilities().power_domains;
    for (auto d : {PowerDomain::kDeviceInstant, PowerDomain::kDeviceAverage, PowerDomain::kMemoryAverage}) {
      auto p = gpu->power(d);
      bool listed = std::find(domains.begin(), domains.end(), d) != domains.end();
      if (listed) {
        ASSERT_TRUE(p) << gpu->name() << " " << to_string(d) << ": " << p.error().message;
        EXPECT_GE(p->value(), 0.0);
      } else {
        ASSERT_FALSE(p) << gpu->name() << " " << to_string(d);
        EXPECT_EQ(p.error().code, ErrorCode::kNotSupported);
      }
    }
  }
}

TYPED_TEST(GpuConformance, PowerLimitWithinConstraintsAndSettable) {
  for (auto& gpu : this->backend_.gpus) {
    auto range = gpu->power_limit_constraints();
    ASSERT_TRUE(range) << range.error().message;
    EXPECT_LT(range->min, range->max);
    auto limit = gpu->power_limit();
    ASSERT_TRUE(limit);
    EXPECT_GE(*limit, range->min);
    EXPECT_LE(*limit, range->max);
    auto def = gpu->default_power_limit();
    ASSERT_TRUE(def);

    ASSERT_TRUE(gpu->set_power_limit(range->min));
    EXPECT_EQ(gpu->power_limit()->value(), range->min.value());
    auto too_high = gpu->set_power_limit(range->max + MilliWatts(1000.0));
    ASSERT_FALSE(too_high);
    EXPECT_EQ(too_high.error().code, ErrorCode::kInvalidArgument);
    EXPECT_EQ(gpu->power_limit()->value(), range->min.value()) << "a rejected limit must change nothing";
    ASSERT_TRUE(gpu->reset_power_limit());
    EXPECT_EQ(gpu->power_limit()->value(), def->value());
  }
}

TYPED_TEST(GpuConformance, ClocksPersistenceAndTemperature) {
  for (auto& gpu : this->backend_.gpus) {
    auto mem = gpu->supported_memory_clocks();
    ASSERT_TRUE(mem) << mem.error().message;
    ASSERT_FALSE(mem->empty());
    auto gfx = gpu->supported_graphics_clocks(mem->front());
    ASSERT_TRUE(gfx) << gfx.error().message;
    ASSERT_FALSE(gfx->empty());
    for (auto c : *gfx) EXPECT_GT(c.value(), 0.0);

    ASSERT_TRUE(gpu->set_persistence_mode(true));
    EXPECT_TRUE(*gpu->persistence_mode());
    ASSERT_TRUE(gpu->set_persistence_mode(false));
    EXPECT_FALSE(*gpu->persistence_mode());

    auto t = gpu->temperature();
    ASSERT_TRUE(t) << t.error().message;
    EXPECT_GT(*t, 0);
    EXPECT_LT(*t, 120);
  }
}

}  // namespace
}  // namespace erg
