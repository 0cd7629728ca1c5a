#include "erg/backends/rapl/discovery.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include "erg/backends/rapl/keepalive.hpp"
#include "erg/backends/rapl/rapl_cpu.hpp"
#include "erg/sim/powercap_tree.hpp"
#include "temp_dir.hpp"

namespace erg::rapl {
namespace {

namespace fs = std::filesystem;

constexpr std::uint64_t kRange = 262'143'328'850;  // A common real max_energy_range_uj.

// Sets (or unsets, with nullptr) an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value != nullptr) {
      ::setenv(name, value, 1);
    } else {
      ::unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

class DiscoveryTest : public ::testing::Test {
 protected:
  DiscoveryOptions options(bool keepalive = false) const { return DiscoveryOptions{dir_.path(), keepalive}; }

  static std::shared_ptr<RaplCpu> rapl(const std::shared_ptr<Cpu>& cpu) {
    auto r = std::dynamic_pointer_cast<RaplCpu>(cpu);
    EXPECT_NE(r, nullptr);
    return r;
  }

  testing::TempDir dir_;
  sim::PowercapTree tree_{dir_.path()};
};

TEST_F(DiscoveryTest, NoTreeIsOneUnavailable) {
  const auto missing = dir_.path() / "nothing-here";
  auto found = discover(DiscoveryOptions{missing, true});
  EXPECT_TRUE(found.cpus.empty());
  ASSERT_EQ(found.unavailable.size(), 1u);
  EXPECT_EQ(found.unavailable[0].source, "rapl");
  EXPECT_EQ(found.unavailable[0].code, ErrorCode::kUnavailable);
  EXPECT_TRUE(found.unavailable[0].reason.starts_with("no RAPL powercap tree at " + missing.string() + " ("))
      << found.unavailable[0].reason;
}

TEST_F(DiscoveryTest, EmptyDirectoryIsNoTree) {
  auto found = discover(options());
  EXPECT_TRUE(found.cpus.empty());
  ASSERT_EQ(found.unavailable.size(), 1u);
  EXPECT_EQ(found.unavailable[0].code, ErrorCode::kUnavailable);
}

TEST_F(DiscoveryTest, DefaultRootsWhenNothingIsSet) {
  ScopedEnv env(kPowercapRootEnv, nullptr);
  if (find_powercap_root()) GTEST_SKIP() << "this machine has a real powercap tree";
  auto found = discover();
  EXPECT_TRUE(found.cpus.empty());
  ASSERT_EQ(found.unavailable.size(), 1u);
  EXPECT_EQ(found.unavailable[0].code, ErrorCode::kUnavailable);
  EXPECT_TRUE(found.unavailable[0].reason.starts_with("no RAPL powercap tree at /sys/class/powercap ("))
      << found.unavailable[0].reason;
  EXPECT_TRUE(contains(found.unavailable[0].reason, "/host/sys/class/powercap"));
}

TEST_F(DiscoveryTest, RootFromEnvironmentAndOptionWins) {
  ASSERT_TRUE(tree_.add_zone(0, "package-0", kRange));
  {
    ScopedEnv env(kPowercapRootEnv, dir_.path().c_str());
    EXPECT_EQ(find_powercap_root(), dir_.path());
    auto found = discover(DiscoveryOptions{std::nullopt, false});
    ASSERT_EQ(found.cpus.size(), 1u);
    EXPECT_TRUE(found.unavailable.empty());
  }
  {
    ScopedEnv env(kPowercapRootEnv, "/nonexistent/powercap");
    auto found = discover(options());
    EXPECT_EQ(found.cpus.size(), 1u);
    auto from_env = discover(DiscoveryOptions{std::nullopt, false});
    EXPECT_TRUE(from_env.cpus.empty());
    ASSERT_EQ(from_env.unavailable.size(), 1u);
    EXPECT_TRUE(contains(from_env.unavailable[0].reason, "/nonexistent/powercap"));
    EXPECT_TRUE(contains(from_env.unavailable[0].reason, "ERG_POWERCAP_ROOT"));
  }
}

TEST_F(DiscoveryTest, PackagesSortedByZoneNumber) {
  ASSERT_TRUE(tree_.add_zone(10, "package-10", kRange));
  ASSERT_TRUE(tree_.add_zone(2, "package-2", kRange));
  ASSERT_TRUE(tree_.add_zone(1, "psys", kRange));
  ASSERT_TRUE(tree_.add_zone(0, "package-0", kRange));
  auto found = discover(options());
  ASSERT_EQ(found.cpus.size(), 3u);
  EXPECT_EQ(found.cpus[0]->index(), 0u);
  EXPECT_EQ(found.cpus[1]->index(), 2u);
  EXPECT_EQ(found.cpus[2]->index(), 10u);
  EXPECT_EQ(found.cpus[2]->name(), "package-10");
  EXPECT_TRUE(found.unavailable.empty());
}

TEST_F(DiscoveryTest, DieZonesAreCpus) {
  ASSERT_TRUE(tree_.add_zone(0, "package-0-die-0", kRange));
  ASSERT_TRUE(tree_.add_zone(1, "package-0-die-1", kRange));
  auto found = discover(options());
  ASSERT_EQ(found.cpus.size(), 2u);
  EXPECT_EQ(found.cpus[1]->name(), "package-0-die-1");
}

TEST_F(DiscoveryTest, PsysCoreAndUncoreNeverCounted) {
  ASSERT_TRUE(tree_.add_zone(0, "package-0", kRange));
  ASSERT_TRUE(tree_.add_zone(0, "core", kRange, 0));
  ASSERT_TRUE(tree_.add_zone(0, "uncore", kRange, 1));
  ASSERT_TRUE(tree_.add_zone(0, "dram", kRange, 2));
  ASSERT_TRUE(tree_.add_zone(1, "psys", kRange));
  auto found = discover(options());
  ASSERT_EQ(found.cpus.size(), 1u);
  EXPECT_TRUE(found.unavailable.empty());
  auto cpu = rapl(found.cpus[0]);
  EXPECT_EQ(cpu->package_domain().dir, tree_.zone_dir(0));
  ASSERT_TRUE(cpu->dram_domain());
  EXPECT_EQ(cpu->dram_domain()->dir, tree_.zone_dir(0, 2));

  ASSERT_TRUE(tree_.set_energy_uj(0, 1000));
  ASSERT_TRUE(tree_.set_energy_uj(0, 700, 0));     // core
  ASSERT_TRUE(tree_.set_energy_uj(0, 200, 1));     // uncore
  ASSERT_TRUE(tree_.set_energy_uj(0, 30, 2));      // dram
  ASSERT_TRUE(tree_.set_energy_uj(1, 9'000'000));  // psys: the whole platform
  EXPECT_EQ(cpu->package_energy()->value(), 1000.0);
  EXPECT_EQ(cpu->dram_energy()->value(), 30.0);
}

TEST_F(DiscoveryTest, PsysOnlyTreeHasNoCpus) {
  ASSERT_TRUE(tree_.add_zone(0, "psys", kRange));
  auto found = discover(options());
  EXPECT_TRUE(found.cpus.empty());
  EXPECT_TRUE(found.unavailable.empty());
}

// Real sysfs: /sys/class/powercap/intel-rapl:N are links into /sys/devices/virtual/powercap, and
// the sub-zones appear both nested and as top-level links.
TEST_F(DiscoveryTest, SysfsLinksAreFollowedWithoutDoubleCounting) {
  ASSERT_TRUE(tree_.add_zone(0, "package-0", kRange));
  ASSERT_TRUE(tree_.add_zone(0, "dram", kRange, 0));
  const fs::path devices = dir_.path() / "devices";
  fs::create_directories(devices);
  fs::rename(tree_.zone_dir(0), devices / "intel-rapl:0");
  fs::create_directory_symlink(devices / "intel-rapl:0", dir_.path() / "intel-rapl:0");
  fs::create_directory_symlink(devices / "intel-rapl:0" / "intel-rapl:0:0", dir_.path() / "intel-rapl:0:0");

  auto found = discover(options());
  ASSERT_EQ(found.cpus.size(), 1u);  // intel-rapl:0:0 at the top level is no CPU.
  EXPECT_TRUE(found.unavailable.empty());
  auto cpu = rapl(found.cpus[0]);
  ASSERT_TRUE(cpu->dram_domain());
  EXPECT_EQ(cpu->dram_domain()->dir, tree_.zone_dir(0, 0));  // The nested view.
  ASSERT_TRUE(tree_.set_energy_uj(0, 40, 0));
  EXPECT_EQ(cpu->dram_energy()->value(), 40.0);
}

TEST_F(DiscoveryTest, TopLevelSubZonesWhenNoneAreNested) {
  ASSERT_TRUE(tree_.add_zone(0, "package-0", kRange));
  ASSERT_TRUE(tree_.add_zone(0, "dram", kRange, 0));
  fs::rename(tree_.zone_dir(0, 0), dir_.path() / "intel-rapl:0:0");
  auto found = discover(options());
  ASSERT_EQ(found.cpus.size(), 1u);
  auto cpu = rapl(found.cpus[0]);
  ASSERT_TRUE(cpu->dram_domain());
  EXPECT_EQ(cpu->dram_domain()->dir, dir_.path() / "intel-rapl:0:0");
}

class MissingFileTest : public DiscoveryTest, public ::testing::WithParamInterface<const char*> {};

TEST_P(MissingFileTest, ZoneUnavailableNamingTheFile) {
  ASSERT_TRUE(tree_.add_zone(0, "package-0", kRange));
  ASSERT_TRUE(tree_.add_zone(1, "package-1", kRange));
  const fs::path file = tree_.zone_dir(0) / GetParam();
  ASSERT_TRUE(fs::remove(file));
  auto found = discover(options());
  ASSERT_EQ(found.cpus.size(), 1u);
  EXPECT_EQ(found.cpus[0]->index(), 1u);
  ASSERT_EQ(found.unavailable.size(), 1u);
  EXPECT_EQ(found.unavailable[0].source, "rapl");
  EXPECT_EQ(found.unavailable[0].code, ErrorCode::kNotFound);
  EXPECT_TRUE(contains(found.unavailable[0].reason, file.string())) << found.unavailable[0].reason;
}

INSTANTIATE_TEST_SUITE_P(Files, MissingFileTest, ::testing::Values("name", "energy_uj", "max_energy_range_uj"));

TEST_F(DiscoveryTest, UnusableDramCostsOnlyTheDram) {
  ASSERT_TRUE(tree_.add_zone(0, "package-0", kRange));
  ASSERT_TRUE(tree_.add_zone(0, "dram", kRange, 0));
  const fs::path file = tree_.zone_dir(0, 0) / "energy_uj";
  ASSERT_TRUE(fs::remove(file));
  auto found = discover(options());
  ASSERT_EQ(found.cpus.size(), 1u);
  EXPECT_FALSE(found.cpus[0]->capabilities().dram);
  ASSERT_EQ(found.unavailable.size(), 1u);
  EXPECT_EQ(found.unavailable[0].code, ErrorCode::kNotFound);
  EXPECT_TRUE(contains(found.unavailable[0].reason, file.string()));
  EXPECT_TRUE(contains(found.unavailable[0].reason, "DRAM"));
}

TEST_F(DiscoveryTest, FirstReadIsTheBaselineAndDomainsAreIndependent) {
  ASSERT_TRUE(tree_.add_zone(0, "package-0", kRange));
  ASSERT_TRUE(tree_.add_zone(0, "dram", kRange, 0));
  ASSERT_TRUE(tree_.set_energy_uj(0, 5000));
  ASSERT_TRUE(tree_.set_energy_uj(0, kRange - 10, 0));
  auto found = discover(options());
  ASSERT_EQ(found.cpus.size(), 1u);
  auto& cpu = found.cpus[0];
  EXPECT_EQ(cpu->package_energy()->value(), 0.0);
  ASSERT_TRUE(tree_.set_energy_uj(0, 5100));
  ASSERT_TRUE(tree_.set_energy_uj(0, 15, 0));  // DRAM wraps.
  EXPECT_EQ(cpu->package_energy()->value(), 100.0);
  EXPECT_EQ(cpu->dram_energy()->value(), 25.0);
}

TEST_F(DiscoveryTest, OneKeepaliveSharedByTheDiscovery) {
  ASSERT_TRUE(tree_.add_zone(0, "package-0", kRange));
  ASSERT_TRUE(tree_.add_zone(0, "dram", 65'536'000'000, 0));
  ASSERT_TRUE(tree_.add_zone(1, "package-1", kRange));
  auto found = discover(options(true));
  ASSERT_EQ(found.cpus.size(), 2u);
  const Keepalive* keepalive = rapl(found.cpus[0])->keepalive();
  ASSERT_NE(keepalive, nullptr);
  EXPECT_EQ(rapl(found.cpus[1])->keepalive(), keepalive);
  // The smallest range of all domains sets the period: 65.5 kJ at 1000 W → 16.4 s.
  EXPECT_EQ(keepalive->period(), keepalive_period(65'536'000'000, kDefaultMaxPower));

  auto without = discover(options(false));
  ASSERT_EQ(without.cpus.size(), 2u);
  EXPECT_EQ(rapl(without.cpus[0])->keepalive(), nullptr);
}

TEST_F(DiscoveryTest, KeepaliveOutlivesDroppedCpus) {
  ASSERT_TRUE(tree_.add_zone(0, "package-0", 1000));  // Tiny range: a 1 ms keepalive.
  ASSERT_TRUE(tree_.add_zone(1, "package-1", 1000));
  auto found = discover(options(true));
  ASSERT_EQ(found.cpus.size(), 2u);
  auto second = rapl(found.cpus[1]);
  found.cpus.clear();  // The keepalive stays with the remaining CPU ...
  const Keepalive* keepalive = second->keepalive();
  ASSERT_NE(keepalive, nullptr);
  const auto start = keepalive->rounds();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (keepalive->rounds() < start + 3 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_GE(keepalive->rounds(), start + 3);
  second.reset();  // ... and stops and joins with the last one (a hang here fails by timeout).
}

}  // namespace
}  // namespace erg::rapl
