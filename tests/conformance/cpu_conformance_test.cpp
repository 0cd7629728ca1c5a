// One typed conformance suite for every CPU energy backend that is built.
//
// Backends covered today: RAPL over the simulated machine's powercap tree, and RAPL over a
// hand-written tree with a psys zone and a package without DRAM.

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "erg/backends/rapl/discovery.hpp"
#include "erg/core/device.hpp"
#include "erg/sim/machine.hpp"
#include "erg/sim/powercap_tree.hpp"
#include "erg/sim/spec.hpp"
#include "process.hpp"

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

template <class Backend>
class CpuConformance : public ::testing::Test {
 protected:
  void SetUp() override { backend_.set_up(); }
  Backend backend_;
};

using CpuBackends = ::testing::Types<RaplOverSimulatedMachine, RaplOverHandWrittenTree>;
TYPED_TEST_SUITE(CpuConformance, CpuBackends);

TYPED_TEST(CpuConformance, DescribesItself) {
  for (auto& cpu : this->backend_.cpus) {
    EXPECT_FALSE(cpu->name().empty());
    const auto& caps = cpu->capabilities();
    if (caps.max_energy_range) {
      EXPECT_GT(caps.max_energy_range->value(), 0.0);
    }
    if (caps.update_period) {
      EXPECT_GT(caps.update_period->count(), 0);
    }
  }
  EXPECT_LT(this->backend_.cpus[0]->index(), this->backend_.cpus[1]->index());
}

TYPED_TEST(CpuConformance, EnergyStartsAtZeroAndGrows) {
  std::vector<double> before;
  for (auto& cpu : this->backend_.cpus) {
    auto e = cpu->package_energy();
    ASSERT_TRUE(e) << e.error().message;
    EXPECT_GE(e->value(), 0.0);
    before.push_back(e->value());
  }
  this->backend_.consume();
  for (std::size_t i = 0; i < this->backend_.cpus.size(); ++i) {
    auto e = this->backend_.cpus[i]->package_energy();
    ASSERT_TRUE(e);
    EXPECT_GT(e->value(), before[i]);
  }
}

TYPED_TEST(CpuConformance, DramMatchesCapability) {
  for (auto& cpu : this->backend_.cpus) {
    auto d = cpu->dram_energy();
    if (cpu->capabilities().dram) {
      ASSERT_TRUE(d) << d.error().message;
      EXPECT_GE(d->value(), 0.0);
    } else {
      ASSERT_FALSE(d);
      EXPECT_EQ(d.error().code, ErrorCode::kNotSupported);
    }
  }
}

}  // namespace
}  // namespace erg
