#include "erg/backends/rapl/rapl_cpu.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <fstream>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "erg/core/file.hpp"
#include "erg/sim/powercap_tree.hpp"
#include "temp_dir.hpp"

namespace erg::rapl {
namespace {

using namespace std::chrono_literals;

constexpr std::uint64_t kRange = 1'000'000;  // 1 J: small so tests wrap quickly.

// A package zone 0 with a dram sub-zone 0:0, both with range kRange, read with a virtual clock.
class RaplCpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(tree_.add_zone(0, "package-0", kRange));
    ASSERT_TRUE(tree_.add_zone(0, "dram", kRange, 0));
  }

  Result<std::shared_ptr<RaplCpu>> make(bool with_dram = true, Watts max_power = kDefaultMaxPower,
                                        std::shared_ptr<const SysfsReader> reader = nullptr) {
    std::optional<RaplDomain> dram;
    if (with_dram) dram = RaplDomain{tree_.zone_dir(0, 0), kRange};
    return RaplCpu::create(0, "package-0", RaplDomain{tree_.zone_dir(0), kRange}, dram,
                           RaplCpuOptions{std::move(reader), clock_, max_power});
  }

  void set_pkg(std::uint64_t raw) { ASSERT_TRUE(tree_.set_energy_uj(0, raw)); }
  void set_dram(std::uint64_t raw) { ASSERT_TRUE(tree_.set_energy_uj(0, raw, 0)); }

  static double uj(const Result<MicroJoules>& r) {
    EXPECT_TRUE(r) << (r ? "" : r.error().message);
    return r ? r->value() : -1.0;
  }

  testing::TempDir dir_;
  sim::PowercapTree tree_{dir_.path()};
  std::shared_ptr<VirtualClock> clock_ = std::make_shared<VirtualClock>();
};

TEST_F(RaplCpuTest, DescribesItself) {
  auto cpu = make();
  ASSERT_TRUE(cpu) << cpu.error().message;
  EXPECT_EQ((*cpu)->index(), 0u);
  EXPECT_EQ((*cpu)->name(), "package-0");
  const auto& caps = (*cpu)->capabilities();
  EXPECT_TRUE(caps.dram);
  ASSERT_TRUE(caps.max_energy_range);
  EXPECT_EQ(caps.max_energy_range->value(), static_cast<double>(kRange));
  EXPECT_EQ(caps.update_period, std::chrono::microseconds(1000));
  EXPECT_EQ((*cpu)->keepalive(), nullptr);
}

TEST_F(RaplCpuTest, CreateReadsTheBaseline) {
  set_pkg(500'000);
  set_dram(7);
  auto cpu = make();
  ASSERT_TRUE(cpu);
  EXPECT_EQ(uj((*cpu)->package_energy()), 0.0);
  EXPECT_EQ(uj((*cpu)->dram_energy()), 0.0);
  set_pkg(500'123);
  EXPECT_EQ(uj((*cpu)->package_energy()), 123.0);
}

TEST_F(RaplCpuTest, SingleWrapAndWrapToExactlyZero) {
  set_pkg(900'000);
  auto cpu = make();
  ASSERT_TRUE(cpu);
  set_pkg(100'000);
  EXPECT_EQ(uj((*cpu)->package_energy()), 200'000.0);
  set_pkg(999'000);
  EXPECT_EQ(uj((*cpu)->package_energy()), 1'099'000.0);
  set_pkg(0);
  EXPECT_EQ(uj((*cpu)->package_energy()), 1'100'000.0);
  EXPECT_EQ((*cpu)->package_stats().wraps, 2u);
}

TEST_F(RaplCpuTest, SeveralWrapsBetweenReadsWithTime) {
  // Stated maximum 20 W: reads 10 ms apart cannot hide a wrap of this 1 J range (0.2 J max).
  auto cpu = make(false, Watts(20.0));
  ASSERT_TRUE(cpu);
  std::uint64_t true_uj = 0;
  for (int i = 0; i < 50; ++i) {  // 5 W for 0.5 s, one read per 10 ms (50 mJ each).
    clock_->advance(10ms);
    true_uj += 50'000;
    set_pkg(true_uj % kRange);
    ASSERT_EQ(uj((*cpu)->package_energy()), static_cast<double>(true_uj));
  }
  // Idle process, no keepalive: 1.3 s at 5 W = 6.5 J, six more wraps than the raw
  // value shows.
  clock_->advance(1300ms);
  true_uj += 6'500'000;
  set_pkg(true_uj % kRange);
  EXPECT_EQ(uj((*cpu)->package_energy()), static_cast<double>(true_uj));
  EXPECT_EQ((*cpu)->package_stats().ambiguous_updates, 1u);
}

TEST_F(RaplCpuTest, DramWrapsIndependently) {
  set_pkg(100);
  set_dram(990'000);
  auto cpu = make();
  ASSERT_TRUE(cpu);
  set_dram(10'000);  // DRAM wraps; the package does not.
  set_pkg(300);
  EXPECT_EQ(uj((*cpu)->dram_energy()), 20'000.0);
  EXPECT_EQ(uj((*cpu)->package_energy()), 200.0);
  set_pkg(50);  // Package wraps; DRAM does not.
  EXPECT_EQ(uj((*cpu)->package_energy()), 1'000'000.0 - 100.0 + 50.0);
  EXPECT_EQ(uj((*cpu)->dram_energy()), 20'000.0);
  EXPECT_EQ((*cpu)->package_stats().wraps, 1u);
  EXPECT_EQ((*cpu)->dram_stats()->wraps, 1u);
}

TEST_F(RaplCpuTest, NeverDecreases) {
  auto cpu = make();
  ASSERT_TRUE(cpu);
  double last = 0.0;
  std::uint64_t raw = 0;
  for (int i = 0; i < 200; ++i) {
    raw = (raw + 337'000) % kRange;
    set_pkg(raw);
    const double now = uj((*cpu)->package_energy());
    ASSERT_GE(now, last);
    last = now;
  }
  EXPECT_EQ(last, 200.0 * 337'000.0);
}

TEST_F(RaplCpuTest, ACorruptReadingIsAnErrorNotAWrap) {
  // Zone 1 with a real package range: a value below the last that no wrap explains (a torn or
  // corrupt reading, or a reset) fails that read, adds nothing, and counting goes on.
  constexpr std::uint64_t kRealRange = 262'143'328'850;
  ASSERT_TRUE(tree_.add_zone(1, "package-1", kRealRange));
  ASSERT_TRUE(tree_.set_energy_uj(1, 150'000'000'000));
  auto cpu = RaplCpu::create(1, "package-1", RaplDomain{tree_.zone_dir(1), kRealRange}, std::nullopt,
                             RaplCpuOptions{nullptr, clock_, kDefaultMaxPower});
  ASSERT_TRUE(cpu) << cpu.error().message;
  clock_->advance(10ms);
  ASSERT_TRUE(tree_.set_energy_uj(1, 150'000'001'000));
  EXPECT_EQ(uj((*cpu)->package_energy()), 1'000.0);
  clock_->advance(10ms);
  ASSERT_TRUE(tree_.set_energy_uj(1, 140'000'002'000));
  auto bad = (*cpu)->package_energy();
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, ErrorCode::kIo);
  EXPECT_NE(bad.error().message.find("corrupt"), std::string::npos) << bad.error().message;
  EXPECT_EQ((*cpu)->package_stats().wraps, 0u);
  EXPECT_EQ((*cpu)->package_stats().implausible_updates, 1u);
  clock_->advance(10ms);
  ASSERT_TRUE(tree_.set_energy_uj(1, 140'000'003'000));
  EXPECT_EQ(uj((*cpu)->package_energy()), 2'000.0) << "counts on from the new value";
}

TEST_F(RaplCpuTest, NoDramDomainIsNotSupported) {
  auto cpu = make(false);
  ASSERT_TRUE(cpu);
  EXPECT_FALSE((*cpu)->capabilities().dram);
  auto r = (*cpu)->dram_energy();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kNotSupported);
  EXPECT_FALSE((*cpu)->dram_stats());
}

/// Real sysfs semantics for kept-open files on a plain filesystem: kernfs answers ENODEV to a
/// read of an attribute whose zone was removed (a tmpfs file stays readable when unlinked).
class KernfsLikeReader final : public SysfsReader {
 public:
  [[nodiscard]] Result<std::string> read(const std::filesystem::path& path) const override {
    return PosixSysfsReader().read(path);
  }
  [[nodiscard]] Result<std::unique_ptr<SysfsFile>> open(const std::filesystem::path& path) const override {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) return fail(read_error(path, errno));
    auto inner = PosixSysfsReader().open(path);
    if (!inner) return fail(inner.error());
    struct File final : SysfsFile {
      std::unique_ptr<SysfsFile> inner;
      std::filesystem::path path;
      ino_t ino;
      Result<std::uint64_t> read_energy() override {
        struct stat now {};
        if (::stat(path.c_str(), &now) != 0 || now.st_ino != ino) return fail(read_error(path, ENODEV));
        return inner->read_energy();
      }
    };
    auto f = std::make_unique<File>();
    f->inner = std::move(*inner);
    f->path = path;
    f->ino = st.st_ino;
    return std::unique_ptr<SysfsFile>(std::move(f));
  }
};

TEST_F(RaplCpuTest, VanishedFileIsNotFoundAndTotalKept) {
  auto cpu = make(true, kDefaultMaxPower, std::make_shared<KernfsLikeReader>());
  ASSERT_TRUE(cpu);
  set_pkg(1000);
  EXPECT_EQ(uj((*cpu)->package_energy()), 1000.0);
  const auto file = tree_.zone_dir(0) / "energy_uj";
  std::filesystem::remove(file);
  auto r = (*cpu)->package_energy();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kNotFound);
  EXPECT_NE(r.error().message.find(file.string()), std::string::npos);
  EXPECT_EQ(uj((*cpu)->dram_energy()), 0.0);  // The other domain is unaffected.
  set_pkg(1500);
  EXPECT_EQ(uj((*cpu)->package_energy()), 1500.0);
}

TEST_F(RaplCpuTest, CreateFailsOnMissingEnergyFile) {
  std::filesystem::remove(tree_.zone_dir(0) / "energy_uj");
  auto cpu = make();
  ASSERT_FALSE(cpu);
  EXPECT_EQ(cpu.error().code, ErrorCode::kNotFound);
}

// Reads the real files but fails with a chosen errno for chosen paths (root cannot get EACCES
// from file modes, and nobody can make a tmpfs return EIO).
class FaultyReader final : public SysfsReader {
 public:
  [[nodiscard]] Result<std::string> read(const std::filesystem::path& path) const override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (auto it = faults_.find(path); it != faults_.end()) return fail(read_error(path, it->second));
    }
    return real_.read(path);
  }
  void fail_with(const std::filesystem::path& path, int err) {
    std::lock_guard<std::mutex> lock(mutex_);
    faults_[path] = err;
  }

 private:
  PosixSysfsReader real_;
  mutable std::mutex mutex_;
  std::map<std::filesystem::path, int> faults_;
};

TEST_F(RaplCpuTest, LaterErrorsKeepTheirCode) {
  auto reader = std::make_shared<FaultyReader>();
  auto cpu = make(true, kDefaultMaxPower, reader);
  ASSERT_TRUE(cpu);
  const auto pkg_file = tree_.zone_dir(0) / "energy_uj";
  const auto dram_file = tree_.zone_dir(0, 0) / "energy_uj";

  reader->fail_with(pkg_file, EACCES);
  auto denied = (*cpu)->package_energy();
  ASSERT_FALSE(denied);
  EXPECT_EQ(denied.error().code, ErrorCode::kNoPermission);
  EXPECT_EQ(denied.error().message, "cannot read " + pkg_file.string() +
                                        ": permission denied; RAPL energy needs root since CVE-2020-8694 — run as "
                                        "root or through ergd (ERG_DAEMON_SOCK)");

  reader->fail_with(dram_file, EIO);
  auto io = (*cpu)->dram_energy();
  ASSERT_FALSE(io);
  EXPECT_EQ(io.error().code, ErrorCode::kIo);
  EXPECT_NE(io.error().message.find(dram_file.string()), std::string::npos);

  EXPECT_FALSE((*cpu)->refresh());
}

/// Descriptors of this process open on `file`.
int open_descriptors_on(const std::filesystem::path& file) {
  int n = 0;
  std::error_code ec;
  const auto target = std::filesystem::canonical(file, ec);
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd", ec)) {
    std::error_code ec2;
    if (std::filesystem::read_symlink(e.path(), ec2) == target) ++n;
  }
  return n;
}

TEST_F(RaplCpuTest, KeepsEachEnergyFileOpenAndSeesInPlaceUpdates) {
  auto cpu = make();  // the real reader: PosixSysfsReader
  ASSERT_TRUE(cpu);
  const auto pkg = tree_.zone_dir(0) / "energy_uj";
  EXPECT_EQ(open_descriptors_on(pkg), 1) << "one descriptor, kept open";
  EXPECT_EQ(open_descriptors_on(tree_.zone_dir(0, 0) / "energy_uj"), 1);
  for (std::uint64_t raw = 0; raw < 200000; raw += 1000) {
    set_pkg(raw);  // rewritten in place, as sysfs content changes
    EXPECT_EQ(uj((*cpu)->package_energy()), static_cast<double>(raw));
  }
  EXPECT_EQ(open_descriptors_on(pkg), 1) << "reads reuse it (no open per read)";
}

TEST_F(RaplCpuTest, MalformedContentIsIo) {
  auto cpu = make();
  ASSERT_TRUE(cpu);
  {
    // In place, as sysfs content changes (the descriptor RaplCpu keeps open sees it).
    std::ofstream f(tree_.zone_dir(0) / "energy_uj", std::ios::trunc);
    f << "oops\n";
  }
  auto r = (*cpu)->package_energy();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kIo);
}

// With the clock frozen there is no time hint, so only the keepalive's reads can see the wraps.
TEST_F(RaplCpuTest, KeepaliveCatchesWrapsWhileIdle) {
  auto cpu = make();
  ASSERT_TRUE(cpu);
  auto keepalive = std::make_shared<const Keepalive>(std::vector<Keepalive::Task>{(*cpu)->keepalive_task()}, 1ms);
  (*cpu)->set_keepalive(keepalive);
  ASSERT_EQ((*cpu)->keepalive(), keepalive.get());

  auto wait_two_rounds = [&] {
    // Two completed rounds: at least one read started after the last write.
    const auto target = keepalive->rounds() + 2;
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    while (keepalive->rounds() < target && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(1ms);
    ASSERT_GE(keepalive->rounds(), target);
  };
  std::uint64_t true_uj = 0;
  for (int i = 0; i < 12; ++i) {  // Three full wraps, 250 mJ per step; the user never reads.
    true_uj += 250'000;
    set_pkg(true_uj % kRange);
    set_dram((2 * true_uj) % kRange);
    wait_two_rounds();
  }
  EXPECT_EQ(uj((*cpu)->package_energy()), static_cast<double>(true_uj));
  EXPECT_EQ(uj((*cpu)->dram_energy()), static_cast<double>(2 * true_uj));
  EXPECT_EQ((*cpu)->package_stats().wraps, 3u);
  EXPECT_EQ((*cpu)->dram_stats()->wraps, 6u);
}

TEST_F(RaplCpuTest, ConcurrentReadersSeeMonotonicTotals) {
  auto cpu = make();
  ASSERT_TRUE(cpu);
  auto keepalive = std::make_shared<const Keepalive>(std::vector<Keepalive::Task>{(*cpu)->keepalive_task()}, 1ms);
  (*cpu)->set_keepalive(keepalive);
  std::atomic<bool> stop{false};
  std::atomic<bool> ok{true};
  std::vector<std::thread> readers;
  for (int t = 0; t < 3; ++t) {
    readers.emplace_back([&] {
      double last = 0.0;
      while (!stop.load()) {
        auto r = (*cpu)->package_energy();
        if (!r || r->value() < last) ok = false;
        if (r) last = r->value();
      }
    });
  }
  std::uint64_t true_uj = 0;
  for (int i = 0; i < 200; ++i) {
    true_uj += 300'000;
    set_pkg(true_uj % kRange);
    // Read once after each write too, so no step goes unseen however the threads are scheduled.
    ASSERT_TRUE((*cpu)->package_energy());
  }
  std::this_thread::sleep_for(5ms);
  stop = true;
  for (auto& t : readers) t.join();
  EXPECT_TRUE(ok.load());
  EXPECT_EQ(uj((*cpu)->package_energy()), static_cast<double>(true_uj));
}

}  // namespace
}  // namespace erg::rapl
