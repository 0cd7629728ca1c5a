// One typed conformance suite for every Cpu implementation that is built.
//
// Implementations covered: RaplCpu over the simulated machine's powercap tree and over a
// hand-written tree with a psys zone and a package without DRAM; sim::FakeCpu (the stand-in of
// measure/ tests; one package with DRAM, one without); and, when ergd is built,
// client::RemoteCpu (the daemon's RAPL read over its API, as a job without RAPL access sees it).

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "erg/backends/rapl/discovery.hpp"
#include "erg/core/device.hpp"
#include "erg/sim/fake_devices.hpp"
#include "erg/sim/machine.hpp"
#include "erg/sim/powercap_tree.hpp"
#include "erg/sim/spec.hpp"
#include "process.hpp"
#ifdef ERG_HAVE_DAEMON
#include <unistd.h>

#include "erg/client/remote.hpp"
#include "erg/daemon/daemon.hpp"
#endif

namespace erg {
namespace {

struct RaplOverSimulatedMachine {
  std::unique_ptr<sim::Machine> machine;
  std::vector<std::shared_ptr<Cpu>> cpus;
  void set_up() {
    auto m = sim::Machine::create_temp(*sim::parse_spec("1xA100,cpus=2"));
    ASSERT_TRUE(m) << m.error().message;
    machine = std::move(*m);
    machine->use_virtual_clock(true);
    rapl::DiscoveryOptions opts;
    opts.root = machine->powercap_root();
    cpus = rapl::discover(opts).cpus;
    ASSERT_EQ(cpus.size(), 2u);
  }
  void consume() { ASSERT_TRUE(machine->advance(std::chrono::milliseconds(500))); }
};

struct RaplOverHandWrittenTree {
  testing::TempDir dir;
  std::unique_ptr<sim::PowercapTree> tree;
  std::vector<std::shared_ptr<Cpu>> cpus;
  std::uint64_t raw = 1000;
  void set_up() {
    tree = std::make_unique<sim::PowercapTree>(dir.path() + "/powercap");
    ASSERT_TRUE(tree->add_zone(0, "package-0", 1'000'000'000ULL));
    ASSERT_TRUE(tree->add_zone(0, "core", 1'000'000'000ULL, 0));
    ASSERT_TRUE(tree->add_zone(0, "dram", 1'000'000'000ULL, 1));
    ASSERT_TRUE(tree->add_zone(1, "psys", 1'000'000'000ULL));
    ASSERT_TRUE(tree->add_zone(2, "package-1", 1'000'000'000ULL));
    rapl::DiscoveryOptions opts;
    opts.root = tree->root();
    cpus = rapl::discover(opts).cpus;
    ASSERT_EQ(cpus.size(), 2u) << "psys is not a CPU package";
  }
  void consume() {
    raw += 5'000'000;
    for (int zone : {0, 2}) ASSERT_TRUE(tree->set_energy_uj(zone, raw));
    ASSERT_TRUE(tree->set_energy_uj(0, raw / 2, 1));
  }
};

/// Two fakes counting from 0: package 0 with DRAM, package 1 without.
struct FakeBackend {
  std::vector<std::shared_ptr<sim::FakeCpu>> fakes;
  std::vector<std::shared_ptr<Cpu>> cpus;
  double uj = 0.0;
  void set_up() {
    fakes = {std::make_shared<sim::FakeCpu>(0, true), std::make_shared<sim::FakeCpu>(1, false)};
    cpus.assign(fakes.begin(), fakes.end());
  }
  void consume() {
    uj += 5'000'000.0;
    for (auto& f : fakes) f->set_energy_uj(uj, uj / 2);
  }
};

#ifdef ERG_HAVE_DAEMON
/// A job without RAPL access: the daemon's CPUs (RAPL over the simulated machine) through ergd.
struct RemoteThroughErgd {
  RaplOverSimulatedMachine served_by;
  std::unique_ptr<daemon::Daemon> ergd;
  std::string socket = "/tmp/erg-cpu-conformance-" + std::to_string(::getpid()) + ".sock";
  std::vector<std::shared_ptr<Cpu>> cpus;
  void set_up() {
    served_by.set_up();
    daemon::Config c;
    c.socket_path = socket;
    c.skip_privilege_check = true;
    c.allow_insecure_socket_dir = true;  // a socket in /tmp itself (sticky, shared)
    Inventory served;
    served.cpus = served_by.cpus;
    auto d = daemon::Daemon::create(c, std::move(served));
    ASSERT_TRUE(d) << d.error().message;
    ergd = std::move(*d);
    ASSERT_TRUE(ergd->start());
    auto inv = client::with_daemon(Inventory{}, client::Endpoint{socket});
    ASSERT_TRUE(inv.unavailable.empty()) << inv.unavailable.front().reason;
    cpus = inv.cpus;
    ASSERT_EQ(cpus.size(), served_by.cpus.size());
    for (auto& cpu : cpus) ASSERT_NE(dynamic_cast<client::RemoteCpu*>(cpu.get()), nullptr);
  }
  ~RemoteThroughErgd() {
    if (ergd) ergd->stop();
  }
  void consume() { served_by.consume(); }
};
#endif

template <class Backend>
class CpuConformance : public ::testing::Test {
 protected:
  void SetUp() override { backend_.set_up(); }
  Backend backend_;
};

using CpuBackends = ::testing::Types<RaplOverSimulatedMachine, RaplOverHandWrittenTree, FakeBackend
#ifdef ERG_HAVE_DAEMON
                                     ,
                                     RemoteThroughErgd
#endif
                                     >;
TYPED_TEST_SUITE(CpuConformance, CpuBackends);

TYPED_TEST(CpuConformance, DescribesItself) {
  ASSERT_GE(this->backend_.cpus.size(), 2u);
  for (auto& cpu : this->backend_.cpus) {
    EXPECT_FALSE(cpu->name().empty());
    const auto& caps = cpu->capabilities();
    // Unknown is nullopt, never zero.
    if (caps.max_energy_range) {
      EXPECT_GT(caps.max_energy_range->value(), 0.0);
    }
    if (caps.update_period) {
      EXPECT_GT(caps.update_period->count(), 0);
    }
  }
  for (std::size_t i = 1; i < this->backend_.cpus.size(); ++i)
    EXPECT_LT(this->backend_.cpus[i - 1]->index(), this->backend_.cpus[i]->index()) << "package index order";
}

TYPED_TEST(CpuConformance, EnergyStartsAtZeroAndGrows) {
  std::vector<double> before;
  for (auto& cpu : this->backend_.cpus) {
    auto e = cpu->package_energy();
    ASSERT_TRUE(e) << e.error().message;
    // Package energy counts from this object's first read.
    EXPECT_EQ(e->value(), 0.0) << cpu->name();
    before.push_back(e->value());
  }
  this->backend_.consume();
  for (std::size_t i = 0; i < this->backend_.cpus.size(); ++i) {
    auto e = this->backend_.cpus[i]->package_energy();
    ASSERT_TRUE(e) << e.error().message;
    EXPECT_GT(e->value(), before[i]) << this->backend_.cpus[i]->name();
  }
}

TYPED_TEST(CpuConformance, DramMatchesCapabilityStartsAtZeroAndGrows) {
  bool some_dram = false;
  for (auto& cpu : this->backend_.cpus) {
    auto d = cpu->dram_energy();
    if (cpu->capabilities().dram) {
      some_dram = true;
      ASSERT_TRUE(d) << d.error().message;
      EXPECT_EQ(d->value(), 0.0) << cpu->name() << ": DRAM energy counts from this object's first read";
    } else {
      ASSERT_FALSE(d) << cpu->name();
      EXPECT_EQ(d.error().code, ErrorCode::kNotSupported) << to_string(d.error().code) << ": " << d.error().message;
    }
  }
  EXPECT_TRUE(some_dram) << "every fixture has a package with DRAM, so the positive path runs";
  this->backend_.consume();
  for (auto& cpu : this->backend_.cpus) {
    if (!cpu->capabilities().dram) continue;
    auto d = cpu->dram_energy();
    ASSERT_TRUE(d) << d.error().message;
    EXPECT_GT(d->value(), 0.0) << cpu->name();
  }
}

}  // namespace
}  // namespace erg
