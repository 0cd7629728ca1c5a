// The shared state across processes, privilege, the powercap tree, and the robust mutex.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>

#include "sim_fixture.hpp"
#include "state.hpp"

namespace erg::sim {
namespace {

using namespace std::chrono_literals;
using testing::SimTest;
namespace fs = std::filesystem;

class MachineTest : public SimTest {};

int wait_child(pid_t pid) {
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::uint64_t read_u64(const fs::path& p) {
  std::ifstream f(p);
  std::uint64_t v = 0;
  f >> v;
  return v;
}
std::string read_text(const fs::path& p) {
  std::ifstream f(p);
  std::string s;
  std::getline(f, s);
  return s;
}

TEST_F(MachineTest, AnotherProcessSeesTheSameMachine) {
  start("2xA100,cpus=0");
  machine_->set_privilege(Privilege::kEveryone);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // Child: a fresh driver mapping and a fresh control-API attachment.
    auto& n = testing::Nvml::get();
    n.nvmlShutdown();
    if (n.nvmlInit_v2() != NVML_SUCCESS) ::_exit(1);
    nvmlDevice_t d = nullptr;
    if (n.nvmlDeviceGetHandleByIndex_v2(1, &d) != NVML_SUCCESS) ::_exit(2);
    if (n.nvmlDeviceSetPowerManagementLimit(d, 250000) != NVML_SUCCESS) ::_exit(3);
    auto m = Machine::attach(machine_->state_file());
    if (!m || (*m)->gpu_count() != 2 || (*m)->spec().gpus[1].sku != "A100") ::_exit(4);
    if (!(*m)->set_utilization(1, 0.5)) ::_exit(5);
    ::_exit(0);
  }
  ASSERT_EQ(wait_child(pid), 0);
  auto st = machine_->status(1);
  ASSERT_TRUE(st);
  EXPECT_EQ(st->power_limit.value(), 250000.0);
  EXPECT_EQ(st->utilization, 0.5);
  unsigned limit = 0;
  ASSERT_EQ(nvml_.nvmlDeviceGetPowerManagementLimit(dev(1), &limit), NVML_SUCCESS);
  EXPECT_EQ(limit, 250000u);
  EXPECT_EQ(machine_->status(0)->power_limit.value(), 400000.0);
}

TEST_F(MachineTest, StateIsSharedWithOtherUsers) {
  start("1xA100,cpus=0");
  struct stat st {};
  ASSERT_EQ(::stat(machine_->state_file().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0666u);
  ASSERT_EQ(::stat(machine_->dir().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0755, 0755u);
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to switch to an unprivileged user";
  machine_->set_privilege(Privilege::kRootOnly);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(10);  // nobody
    auto& n = testing::Nvml::get();
    n.nvmlShutdown();
    if (n.nvmlInit_v2() != NVML_SUCCESS) ::_exit(1);
    nvmlDevice_t d = nullptr;
    if (n.nvmlDeviceGetHandleByIndex_v2(0, &d) != NVML_SUCCESS) ::_exit(2);
    unsigned mw = 0;
    if (n.nvmlDeviceGetPowerUsage(d, &mw) != NVML_SUCCESS || mw == 0) ::_exit(3);
    if (n.nvmlDeviceSetPowerManagementLimit(d, 300000) != NVML_ERROR_NO_PERMISSION) ::_exit(4);
    ::_exit(0);
  }
  EXPECT_EQ(wait_child(pid), 0);
}

TEST_F(MachineTest, PowercapTreeIsLaidOutAsSysfs) {
  start(R"({"gpus":[],"cpus":[{"dram":true,"core":true},{"dram":true}],"psys":true})");
  const fs::path root = machine_->powercap_root();
  const fs::path sys = machine_->dir() / "sys";
  EXPECT_EQ(root, sys / "class" / "powercap");
  // Flat entries are symlinks into devices/virtual/powercap, as the kernel makes them.
  for (const char* e : {"intel-rapl", "intel-rapl:0", "intel-rapl:0:0", "intel-rapl:0:1", "intel-rapl:1",
                        "intel-rapl:1:0", "intel-rapl:2"}) {
    EXPECT_TRUE(fs::is_symlink(root / e)) << e;
    EXPECT_TRUE(fs::is_directory(root / e)) << e;
  }
  EXPECT_EQ(fs::read_symlink(root / "intel-rapl:0").string(), "../../devices/virtual/powercap/intel-rapl/intel-rapl:0");
  EXPECT_EQ(fs::read_symlink(root / "intel-rapl:1:0").string(),
            "../../devices/virtual/powercap/intel-rapl/intel-rapl:1/intel-rapl:1:0");
  const fs::path devices = sys / "devices" / "virtual" / "powercap" / "intel-rapl";
  EXPECT_TRUE(fs::is_directory(devices / "intel-rapl:0" / "intel-rapl:0:0")) << "nested too";
  EXPECT_EQ(read_text(root / "intel-rapl:0" / "name"), "package-0");
  EXPECT_EQ(read_text(root / "intel-rapl:0:0" / "name"), "dram");
  EXPECT_EQ(read_text(root / "intel-rapl:0" / "intel-rapl:0:1" / "name"), "core");
  EXPECT_EQ(read_text(root / "intel-rapl:1" / "name"), "package-1");
  EXPECT_EQ(read_text(root / "intel-rapl:1" / "intel-rapl:1:0" / "name"), "dram");
  EXPECT_FALSE(fs::exists(root / "intel-rapl:1:1")) << "Xeon servers have no core sub-zone";
  EXPECT_EQ(read_text(root / "intel-rapl:2" / "name"), "psys");
  // The kernel's modes since CVE-2020-8694, and Intel's counter ranges.
  struct stat st {};
  ASSERT_EQ(::stat((root / "intel-rapl:0" / "energy_uj").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0400u);
  ASSERT_EQ(::stat((root / "intel-rapl:0" / "max_energy_range_uj").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0444u);
  EXPECT_EQ(read_u64(root / "intel-rapl:0" / "max_energy_range_uj"), 262143328850u);
  EXPECT_EQ(read_u64(root / "intel-rapl:0:0" / "max_energy_range_uj"), 65712999613u);
}

TEST_F(MachineTest, IdealPowercapTreeFollowsCpuPowerAndWraps) {
  // Ideal model: exact µJ, counters from 0 (the test of exact arithmetic).
  start(
      R"({"gpus":[],"cpus":[{"dram":true,"core":true,"max_energy_range_uj":1000000},{"dram":false,"core":true}],"psys":true,"model":"ideal"})");
  const fs::path root = machine_->powercap_root();
  EXPECT_EQ(read_u64(root / "intel-rapl:0" / "max_energy_range_uj"), 1000000u);
  ASSERT_TRUE(machine_->set_cpu_power(0, Watts(50.0), Watts(5.0)));
  std::uint64_t prev = read_u64(root / "intel-rapl:0" / "energy_uj");
  int wraps = 0;
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(machine_->advance(7ms));  // 350 mJ per step: wraps every ~3 steps at 1 J
    const double truth_uj = machine_->true_cpu_energy(0)->value() * 1e6;
    const std::uint64_t now = read_u64(root / "intel-rapl:0" / "energy_uj");
    EXPECT_NEAR(static_cast<double>(now), std::fmod(std::floor(truth_uj), 1e6), 1.0);
    EXPECT_LT(now, 1000000u);
    if (now < prev) ++wraps;
    prev = now;
    const double dram_uj = machine_->true_dram_energy(0)->value() * 1e6;
    EXPECT_NEAR(static_cast<double>(read_u64(root / "intel-rapl:0" / "intel-rapl:0:0" / "energy_uj")),
                std::fmod(std::floor(dram_uj), 1e6), 1.0);
  }
  EXPECT_GE(wraps, 2);
  EXPECT_FALSE(machine_->true_dram_energy(1)) << "package 1 has no DRAM domain";
  // psys ⊇ packages + DRAM.
  const double psys = static_cast<double>(read_u64(root / "intel-rapl:2" / "energy_uj"));
  const double pkg1 = static_cast<double>(read_u64(root / "intel-rapl:1" / "energy_uj"));
  EXPECT_GT(psys, pkg1);
}

TEST_F(MachineTest, RaplCountersUpdateEveryMillisecondInHardwareUnits) {
  start("cpus=2,seed=5");
  const fs::path root = machine_->powercap_root();
  ASSERT_TRUE(machine_->set_cpu_power(0, Watts(120.0), Watts(12.0)));
  const fs::path pkg = root / "intel-rapl:0" / "energy_uj", dram = root / "intel-rapl:0:0" / "energy_uj";
  EXPECT_GT(read_u64(pkg), 0u) << "counters start at a seeded value";
  EXPECT_NE(read_u64(pkg), read_u64(root / "intel-rapl:1" / "energy_uj")) << "each domain its own";
  // One value per RAPL update (2^-10 s): stepping 0.25 ms at a time, the value changes about
  // every fourth step, and always by whole units (61.035 µJ packages, 15.3 µJ DRAM).
  int changes = 0;
  double counted = 0;
  std::uint64_t last = read_u64(pkg), last_dram = read_u64(dram);
  const double e0 = machine_->true_cpu_energy(0)->value();
  for (int i = 0; i < 400; ++i) {
    ASSERT_TRUE(machine_->advance(250us));
    const std::uint64_t v = read_u64(pkg), d = read_u64(dram);
    ASSERT_GE(v, last) << "no wrap expected from this seed's start";
    counted += static_cast<double>(v - last);
    if (v != last) {
      ++changes;
      const double units = static_cast<double>(v - last) / 61.035;
      EXPECT_NEAR(units, std::round(units), 0.02 + 1.0 / 61.035) << v << " " << last;
    }
    if (d != last_dram) {
      const double units = static_cast<double>(d - last_dram) / 15.3;
      EXPECT_NEAR(units, std::round(units), 0.02 + 1.0 / 15.3);
    }
    last = v, last_dram = d;
  }
  EXPECT_NEAR(changes, 100 * 1e6 / 976562.0, 2.0);
  // The counter tracks the noisy physics to within one update of energy (~120 mJ) and a unit.
  const double truth = (machine_->true_cpu_energy(0)->value() - e0) * 1e6;
  EXPECT_NEAR(counted, truth, 2 * 120.0 * 1e3);
  EXPECT_NEAR(truth, 120.0 * 0.1 * 1e6, 0.01 * 120.0 * 0.1 * 1e6) << "noise averages out over 100 ms";
}

TEST_F(MachineTest, RaplCountersCanStartNearTheWrap) {
  start("cpus=1,rapl=near-wrap");
  const fs::path pkg = machine_->powercap_root() / "intel-rapl:0" / "energy_uj";
  const std::uint64_t range = read_u64(machine_->powercap_root() / "intel-rapl:0" / "max_energy_range_uj");
  const std::uint64_t v0 = read_u64(pkg);
  EXPECT_GT(v0, range - 4 * 20 * 1000000ull) << "a few seconds of idle energy below the range";
  ASSERT_TRUE(machine_->advance(4s));
  EXPECT_LT(read_u64(pkg), v0) << "wrapped during an ordinary run";
}

TEST_F(MachineTest, RealClockUpdaterRefreshesTheFilesInPlace) {
  start("cpus=1", /*virtual_clock=*/false);
  ASSERT_TRUE(machine_->set_cpu_power(0, Watts(100.0), Watts(10.0)));
  const fs::path file = machine_->powercap_root() / "intel-rapl:0" / "energy_uj";
  // Kept open and read with pread from offset 0, as sysfs allows.
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  auto pread_u64 = [&] {
    char buf[64] = {};
    EXPECT_GT(::pread(fd, buf, sizeof buf - 1, 0), 0);
    return std::strtoull(buf, nullptr, 10);
  };
  // The file through the kept-open descriptor: never ahead of the simulator's own figure for the
  // latest RAPL update (the writer can lag under load, never lead), and it catches up with it —
  // the file is refreshed in place, so a descriptor opened once sees every new value.
  const std::uint64_t range =
      std::strtoull(read_text(machine_->powercap_root() / "intel-rapl:0" / "max_energy_range_uj").c_str(), nullptr, 10);
  auto ahead = [&](std::uint64_t v, std::uint64_t of) { return (v + range - of) % range; };  // v − of, modulo
  std::this_thread::sleep_for(50ms);
  const auto a = pread_u64();
  const auto model_a = *machine_->rapl_energy_uj(0);
  EXPECT_LE(ahead(model_a, a), range / 2) << "the file never leads the model: " << a << " vs " << model_a;
  std::this_thread::sleep_for(100ms);
  const auto target = *machine_->rapl_energy_uj(0);
  std::uint64_t b = pread_u64();
  for (int i = 0; i < 5000 && ahead(b, target) > range / 2; ++i) {
    std::this_thread::sleep_for(1ms);
    b = pread_u64();
  }
  ::close(fd);
  EXPECT_LE(ahead(b, target), range / 2) << "the kept-open file caught up with the model";
  // The model itself moved by about 100 W × 0.1 s since the first read (its RAPL resolution and
  // physics are tested above): the value the descriptor shows moved with it.
  EXPECT_GT(static_cast<double>(ahead(b, a)), 0.5 * 100.0 * 0.1 * 1e6);
}

TEST_F(MachineTest, LeaseMovesToAnAttachedProcessWhenTheHolderDies) {
  auto spec = parse_spec("cpus=1");
  ASSERT_TRUE(spec);
  const fs::path dir = fs::path(::testing::TempDir()) / ("erg_sim_lease_" + std::to_string(::getpid()));
  {
    auto m = Machine::create(*spec, dir, /*keep_dir=*/true);
    ASSERT_TRUE(m) << m.error().message;
    ASSERT_TRUE((*m)->set_cpu_power(0, Watts(200.0), Watts(0.0)));
  }  // the creator's lease is released
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    auto m = Machine::attach(dir / "state");
    if (!m) ::_exit(1);
    std::this_thread::sleep_for(30ms);  // take the lease
    char c = 1;
    (void)::write(ready[1], &c, 1);
    for (;;) ::pause();
  }
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  auto m = Machine::attach(dir / "state");
  ASSERT_TRUE(m);
  const fs::path file = (*m)->powercap_root() / "intel-rapl:0" / "energy_uj";
  std::this_thread::sleep_for(50ms);
  const auto a = read_u64(file);
  std::this_thread::sleep_for(50ms);
  EXPECT_GT(read_u64(file), a) << "the child (lease holder) keeps the files fresh";
  ::kill(pid, SIGKILL);
  wait_child(pid);
  std::this_thread::sleep_for(300ms);  // dead holder: the parent takes over
  const auto b = read_u64(file);
  std::this_thread::sleep_for(50ms);
  EXPECT_GT(read_u64(file), b) << "the surviving process took the lease over";
  m->reset();
  std::error_code ec;
  fs::remove_all(dir, ec);
  ::close(ready[0]);
  ::close(ready[1]);
}

/// Wake-ups so far of this process's powercap updater threads (found by their name): their
/// voluntary context switches, as the kernel counts them (each sleep is one). nullopt without one.
std::optional<std::uint64_t> updater_wakeups() {
  std::optional<std::uint64_t> sum;
  std::error_code ec;
  for (fs::directory_iterator it("/proc/self/task", ec), end; !ec && it != end; it.increment(ec)) {
    if (read_text(it->path() / "comm") != Machine::kPowercapUpdaterThread) continue;
    std::ifstream status(it->path() / "status");
    for (std::string line; std::getline(status, line);)
      if (line.rfind("voluntary_ctxt_switches:", 0) == 0)
        sum = sum.value_or(0) + std::stoull(line.substr(line.find(':') + 1));
  }
  return sum;
}

/// Wake-ups per second of this process's updater over `d`; -1 without the thread.
double updater_rate(std::chrono::milliseconds d) {
  const auto a = updater_wakeups();
  const auto t0 = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(d);
  const auto b = updater_wakeups();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return a && b ? static_cast<double>(*b - *a) / s : -1.0;
}

/// Milliseconds until `file` shows another value than `from` (polled every 2 ms), at most `limit`.
double ms_until_it_changes(const fs::path& file, std::uint64_t from, std::chrono::milliseconds limit) {
  const auto t0 = std::chrono::steady_clock::now();
  while (read_u64(file) == from && std::chrono::steady_clock::now() - t0 < limit) std::this_thread::sleep_for(2ms);
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

TEST_F(MachineTest, OnlyTheLeaseHolderWakesAtOneKilohertz) {
  auto spec = parse_spec("cpus=1");
  ASSERT_TRUE(spec);
  const fs::path dir = fs::path(::testing::TempDir()) / ("erg_sim_wakeups_" + std::to_string(::getpid()));
  auto m = Machine::create(*spec, dir, /*keep_dir=*/true);
  ASSERT_TRUE(m) << m.error().message;
  // The creator holds the lease: its updater writes the files once per RAPL period (2^-10 s).
  const double holder = updater_rate(500ms);
  std::printf("lease holder's updater: %.0f wake-ups/s\n", holder);
  EXPECT_GT(holder, 200.0) << "the holder refreshes the files at ~1 kHz";

  // An attached process that does nothing never holds the lease and only looks at it, 10 times a
  // second: counted over 2 s by the kernel (the updater thread's voluntary context switches).
  int out[2];
  ASSERT_EQ(::pipe(out), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    auto a = Machine::attach(dir / "state");
    if (!a) ::_exit(1);
    std::this_thread::sleep_for(200ms);
    const double rate = updater_rate(2000ms);
    (void)::write(out[1], &rate, sizeof rate);
    ::_exit(0);
  }
  double idle = -2.0;
  EXPECT_EQ(::read(out[0], &idle, sizeof idle), static_cast<ssize_t>(sizeof idle));
  EXPECT_EQ(wait_child(pid), 0);
  std::printf("idle attached process's updater: %.1f wake-ups/s\n", idle);
  EXPECT_LT(idle, 20.0) << "an idle attached process does not wake 1,000 times a second";
  EXPECT_GT(idle, 5.0) << "it still looks at the lease (to take it over)";
  ::close(out[0]);
  ::close(out[1]);
  m->reset();
  std::error_code ec;
  fs::remove_all(dir, ec);
}

TEST_F(MachineTest, AnIdleProcessTakesTheLeaseOverFromAStuckOrDepartedHolder) {
  auto spec = parse_spec("cpus=1");
  ASSERT_TRUE(spec);
  const fs::path dir = fs::path(::testing::TempDir()) / ("erg_sim_takeover_" + std::to_string(::getpid()));
  {
    auto m = Machine::create(*spec, dir, /*keep_dir=*/true);
    ASSERT_TRUE(m) << m.error().message;
    ASSERT_TRUE((*m)->set_cpu_power(0, Watts(100.0), Watts(0.0)));
  }  // the creator's lease is released
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    auto a = Machine::attach(dir / "state");  // takes the free lease at once
    if (!a) ::_exit(1);
    std::this_thread::sleep_for(50ms);
    char c = 1;
    (void)::write(ready[1], &c, 1);
    for (;;) ::pause();
  }
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  auto m = Machine::attach(dir / "state");
  ASSERT_TRUE(m);
  const fs::path file = (*m)->powercap_root() / "intel-rapl:0" / "energy_uj";
  EXPECT_LT(updater_rate(300ms), 20.0) << "the child holds the lease; this process only looks at it";

  // Stuck holder (stopped: alive, silent): taken over once its heartbeat is 200 ms old, at the
  // next look (every 100 ms) — not before, and within about 300 ms. Stopped while this process
  // holds the state's lock, so that it cannot stop holding it.
  {
    const int fd = ::open((dir / "state").c_str(), O_RDWR | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    void* addr = ::mmap(nullptr, sizeof(detail::State), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ASSERT_NE(addr, MAP_FAILED);
    auto* state = static_cast<detail::State*>(addr);
    ASSERT_EQ(::pthread_mutex_lock(&state->mutex), 0);
    ::kill(pid, SIGSTOP);
    int status = 0;
    ::waitpid(pid, &status, WUNTRACED);
    ::pthread_mutex_unlock(&state->mutex);
    ::munmap(addr, sizeof(detail::State));
    ::close(fd);
    ASSERT_TRUE(WIFSTOPPED(status));
  }
  std::this_thread::sleep_for(2ms);  // a write of this process's, if any, is done
  const std::uint64_t frozen = read_u64(file);
  const double stuck_ms = ms_until_it_changes(file, frozen, 2000ms);
  std::printf("a stopped holder's lease taken over after %.0f ms\n", stuck_ms);
  EXPECT_GT(stuck_ms, 150.0) << "a holder is stale only after 200 ms of silence";
  EXPECT_LT(stuck_ms, 600.0) << "stale time (200 ms) + the check period (100 ms), with slack for a loaded runner";
  const double taker = updater_rate(300ms);
  EXPECT_GT(taker, 200.0) << "the new holder refreshes at ~1 kHz";
  const std::uint64_t v0 = read_u64(file);
  std::this_thread::sleep_for(200ms);
  EXPECT_GT(read_u64(file), v0 + 10'000'000) << "the files keep advancing (100 W for 0.2 s is 2e7 uJ)";

  // The old holder resumes and finds the lease taken: it goes back to looking.
  ::kill(pid, SIGCONT);
  std::this_thread::sleep_for(100ms);
  EXPECT_GT(updater_rate(300ms), 200.0) << "the lease stays with this process";

  // This process's machine goes (the lease is released): the child takes over at its next look.
  m->reset();
  const std::uint64_t left = read_u64(file);
  const double departed_ms = ms_until_it_changes(file, left, 2000ms);
  std::printf("a departed holder's lease taken over after %.0f ms\n", departed_ms);
  EXPECT_LT(departed_ms, 400.0) << "within the check period (100 ms), with slack";
  const std::uint64_t w0 = read_u64(file);
  std::this_thread::sleep_for(200ms);
  EXPECT_GT(read_u64(file), w0 + 10'000'000) << "and the files keep advancing";
  ::kill(pid, SIGKILL);
  wait_child(pid);
  ::close(ready[0]);
  ::close(ready[1]);
  std::error_code ec;
  fs::remove_all(dir, ec);
}

TEST_F(MachineTest, LeavingTheVirtualClockRefreshesTheFilesAtOnce) {
  // On the virtual clock the updater only looks at the lease every 100 ms; leaving it wakes the
  // updater, which takes the lease and refreshes every RAPL period from then on.
  start("cpus=1", /*virtual_clock=*/true);
  ASSERT_TRUE(machine_->set_cpu_power(0, Watts(200.0), Watts(10.0)));
  const fs::path file = machine_->powercap_root() / "intel-rapl:0" / "energy_uj";
  std::this_thread::sleep_for(110ms);  // the updater waits until its next look, ~90 ms away
  const std::uint64_t before = read_u64(file);
  machine_->use_virtual_clock(false);
  const double ms = ms_until_it_changes(file, before, 2000ms);
  std::printf("files refreshed %.1f ms after leaving the virtual clock\n", ms);
  EXPECT_LT(ms, 50.0) << "not at the next 100 ms look";
}

TEST_F(MachineTest, RobustMutexSurvivesAKilledHolder) {
  start("1xA100,cpus=0");
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    auto m = Machine::attach(machine_->state_file());
    if (!m) ::_exit(1);
    // Take the shared lock and die holding it.
    int fd = ::open(machine_->state_file().c_str(), O_RDWR);
    void* addr = ::mmap(nullptr, sizeof(detail::State), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    auto* s = static_cast<detail::State*>(addr);
    ::pthread_mutex_lock(&s->mutex);
    char c = 1;
    (void)::write(ready[1], &c, 1);
    for (;;) ::pause();
  }
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  ::kill(pid, SIGKILL);
  wait_child(pid);
  // The next locker recovers (EOWNERDEAD → consistent) in the control API and in the driver.
  ASSERT_TRUE(machine_->set_utilization(0, 1.0));
  EXPECT_EQ(machine_->status(0)->utilization, 1.0);
  unsigned mw = 0;
  EXPECT_EQ(nvml_.nvmlDeviceGetPowerUsage(dev(0), &mw), NVML_SUCCESS);
  ::close(ready[0]);
  ::close(ready[1]);
}

TEST(MachinePaths, DriverLibraryPathAndEnv) {
  auto p = Machine::driver_library_path();
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->filename(), "libnvidia-ml.so.1");
  EXPECT_TRUE(fs::exists(*p));
  ::setenv("ERG_SIM_NVML_LIBRARY", "/opt/x/libnvidia-ml.so.1", 1);
  EXPECT_EQ(Machine::driver_library_path()->string(), "/opt/x/libnvidia-ml.so.1");
  ::unsetenv("ERG_SIM_NVML_LIBRARY");

  auto m = Machine::create_temp(*parse_spec("1xV100,cpus=2,psys"));
  ASSERT_TRUE(m);
  ASSERT_TRUE((*m)->export_env());
  EXPECT_EQ(std::string(std::getenv("ERG_SIM_STATE")), (*m)->state_file().string());
  EXPECT_EQ(std::string(std::getenv("ERG_POWERCAP_ROOT")), (*m)->powercap_root().string());
  EXPECT_EQ(std::string(std::getenv("ERG_SIMULATE")), "1xV100,cpus=2,psys");
  EXPECT_EQ(fs::path(std::getenv("ERG_NVML_LIBRARY")).filename(), "libnvidia-ml.so.1");
  auto attached = Machine::attach_from_env();
  ASSERT_TRUE(attached) << attached.error().message;
  EXPECT_EQ((*attached)->cpu_count(), 2u);
  EXPECT_TRUE((*attached)->spec().psys);
  EXPECT_EQ((*attached)->spec().text, "1xV100,cpus=2,psys");
  const fs::path dir = (*m)->dir();
  attached->reset();
  m->reset();
  EXPECT_FALSE(fs::exists(dir)) << "the creator removes its directory";
  EXPECT_FALSE(Machine::attach("/nonexistent/state"));
}

/// Sets an environment variable for the scope (restoring the old value after).
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old_)
      ::setenv(name_, old_->c_str(), 1);
    else
      ::unsetenv(name_);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

/// A record's text with one line ("pid", "start", "boot") replaced.
std::string with_line(const std::string& record, const std::string& key, const std::string& value) {
  std::istringstream lines(record);
  std::string out, line;
  while (std::getline(lines, line)) out += (line.rfind(key + " ", 0) == 0 ? key + " " + value : line) + "\n";
  return out;
}

std::string line_value(const std::string& record, const std::string& key) {
  std::istringstream lines(record);
  std::string line;
  while (std::getline(lines, line))
    if (line.rfind(key + " ", 0) == 0) return line.substr(key.size() + 1);
  return {};
}

TEST(TempMachines, StaleOnesAreRemovedAndNoOthers) {
  const fs::path parent = fs::path(::testing::TempDir()) / ("erg_sim_reap_" + std::to_string(::getpid()));
  fs::remove_all(parent);
  fs::create_directories(parent);
  ScopedEnv tmpdir("ERG_SIM_TMPDIR", parent.string());
  EXPECT_EQ(Machine::temp_parent(), parent);
  auto live = Machine::create_temp(*parse_spec("1xA100,cpus=0"));
  ASSERT_TRUE(live) << live.error().message;
  const std::string mine = [&] {
    std::ifstream f((*live)->dir() / "creator");
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }();
  ASSERT_EQ(line_value(mine, "pid"), std::to_string(::getpid())) << mine;
  ASSERT_NE(line_value(mine, "start"), "0") << "the creator's start time is recorded";

  const pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  ASSERT_GT(dead, 0);
  ASSERT_EQ(::waitpid(dead, nullptr, 0), dead);
  auto make = [&](const std::string& name, const std::optional<std::string>& record) {
    fs::create_directories(parent / name / "sys");
    std::ofstream(parent / name / "state") << "x";
    if (record) std::ofstream(parent / name / "creator") << *record;
    return parent / name;
  };
  const std::string dead_record = with_line(mine, "pid", std::to_string(dead));
  const auto gone = make("erg-sim-dead", dead_record);
  const auto reused = make("erg-sim-reused", with_line(mine, "start", line_value(mine, "start") + "1"));
  const auto rebooted = make("erg-sim-rebooted", with_line(mine, "boot", "00000000-0000-0000-0000-000000000000"));
  const auto alive = make("erg-sim-alive", mine);
  const auto no_record = make("erg-sim-kept", std::nullopt);
  const auto torn = make("erg-sim-torn", dead_record.substr(0, dead_record.find("boot")));
  const auto foreign = make("other-dead", dead_record);
  const auto named = make("erg-sim-named", dead_record);
  const auto target = make("elsewhere", dead_record);
  fs::create_directory_symlink(target, parent / "erg-sim-link");

  std::vector<fs::path> removed;
  {
    ScopedEnv state("ERG_SIM_STATE", (named / "state").string());
    removed = Machine::reap_stale_temp(parent);
  }
  std::sort(removed.begin(), removed.end());
  std::vector<fs::path> want{gone, rebooted, reused};
  std::sort(want.begin(), want.end());
  EXPECT_EQ(removed, want) << "dead creator, PID reused by another process, another boot";
  for (const auto& p : want) EXPECT_FALSE(fs::exists(p)) << p;
  for (const auto& p : {alive, no_record, torn, foreign, named, target, (*live)->dir()})
    EXPECT_TRUE(fs::exists(p)) << p << " is kept";
  EXPECT_TRUE(fs::is_symlink(parent / "erg-sim-link"));

  // create_temp reaps too: the directory this process's ERG_SIM_STATE named is stale now.
  auto next = Machine::create_temp(*parse_spec("1xA100,cpus=0"));
  ASSERT_TRUE(next) << next.error().message;
  EXPECT_FALSE(fs::exists(named));
  EXPECT_TRUE(fs::exists((*live)->dir()));
  const fs::path live_dir = (*live)->dir(), next_dir = (*next)->dir();
  live->reset();
  next->reset();
  EXPECT_FALSE(fs::exists(live_dir)) << "the creator removes its own";
  EXPECT_FALSE(fs::exists(next_dir));
  fs::remove_all(parent);
}

TEST(TempMachines, AMachineAChildProcessStillUsesIsKept) {
  const fs::path parent = fs::path(::testing::TempDir()) / ("erg_sim_inuse_" + std::to_string(::getpid()));
  fs::remove_all(parent);
  fs::create_directories(parent);
  ScopedEnv tmpdir("ERG_SIM_TMPDIR", parent.string());
  // A creator that dies without cleaning up, leaving a child that started with its ERG_SIM_STATE.
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t creator = ::fork();
  ASSERT_GE(creator, 0);
  if (creator == 0) {
    auto m = Machine::create_temp(*parse_spec("1xA100,cpus=0"));
    if (!m || !(*m)->export_env()) ::_exit(1);
    const pid_t user = ::fork();
    if (user == 0) {
      ::execl("/bin/sleep", "sleep", "30", static_cast<char*>(nullptr));
      ::_exit(127);
    }
    const std::string line = std::to_string(user) + " " + (*m)->dir().string() + "\n";
    (void)::write(ready[1], line.data(), line.size());
    ::_exit(0);  // no destructor: like SIGKILL
  }
  ::close(ready[1]);
  std::string line;
  char c = 0;
  while (::read(ready[0], &c, 1) == 1 && c != '\n') line += c;
  ::close(ready[0]);
  ASSERT_EQ(::waitpid(creator, nullptr, 0), creator);
  ASSERT_FALSE(line.empty());
  const pid_t user = std::stoi(line.substr(0, line.find(' ')));
  const fs::path dir = line.substr(line.find(' ') + 1);
  ASSERT_TRUE(fs::exists(dir));
  // Until the sleeper has exec'd, /proc shows the environment its creator was started with,
  // without the ERG_SIM_STATE the creator set later: wait for the exec (CI caught the race).
  auto started = [&] {
    std::ifstream in("/proc/" + std::to_string(user) + "/environ");
    const std::string env((std::istreambuf_iterator<char>(in)), {});
    return env.find("ERG_SIM_STATE=") != std::string::npos;
  };
  for (int i = 0; i < 500 && !started(); ++i) std::this_thread::sleep_for(10ms);
  ASSERT_TRUE(started()) << "the sleeper never ran";

  EXPECT_TRUE(Machine::reap_stale_temp(parent).empty());
  EXPECT_TRUE(fs::exists(dir)) << "a process started on the machine still runs";
  ::kill(user, SIGKILL);
  // The sleeper's parent is gone; whoever adopted it reaps it. Until then it is a zombie,
  // which uses nothing.
  for (int i = 0; i < 500 && fs::exists(dir); ++i) {
    (void)Machine::reap_stale_temp(parent);
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_FALSE(fs::exists(dir)) << "once nothing runs on it, it is removed";
  fs::remove_all(parent);
}

}  // namespace
}  // namespace erg::sim
