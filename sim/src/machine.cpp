#include "erg/sim/machine.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>
#include <utility>

#include "erg/core/file.hpp"
#include "erg/sim/hwmon_tree.hpp"
#include "erg/sim/powercap_tree.hpp"
#include "jetson_model.hpp"
#include "state.hpp"

namespace erg::sim {
namespace fs = std::filesystem;
using detail::Lock;
using detail::State;

// The state stores the sensor zoo's modes as the enums' values.
static_assert(static_cast<int>(Schedule::kGrid) == detail::kScheduleGrid &&
              static_cast<int>(Schedule::kRandomWalk) == detail::kScheduleRandomWalk &&
              static_cast<int>(Schedule::kPhaseJumps) == detail::kSchedulePhaseJumps &&
              static_cast<int>(Schedule::kSkips) == detail::kScheduleSkips &&
              static_cast<int>(Schedule::kPeriodChange) == detail::kSchedulePeriodChange);
static_assert(static_cast<int>(StampMode::kUpdate) == detail::kStampUpdate &&
              static_cast<int>(StampMode::kRead) == detail::kStampRead &&
              static_cast<int>(StampMode::kIntervalStart) == detail::kStampIntervalStart &&
              static_cast<int>(StampMode::kFloored) == detail::kStampFloored &&
              static_cast<int>(StampMode::kUnrelated) == detail::kStampUnrelated);
static_assert(static_cast<int>(Increment::kWhole) == detail::kIncrementWhole &&
              static_cast<int>(Increment::kPartial) == detail::kIncrementPartial &&
              static_cast<int>(Increment::kPartialNominal) == detail::kIncrementPartialNominal);
static_assert(static_cast<int>(AverageMode::kBoxcar) == detail::kAverageBoxcar &&
              static_cast<int>(AverageMode::kExponential) == detail::kAverageExponential);

namespace {

// Real-clock mode: the lease holder rewrites the powercap files every RAPL update period
// (hardware.md §4.3: "about every 1 ms"; the MSR time unit is 2^-10 s).
constexpr std::chrono::nanoseconds kPowercapQuantum{detail::kRaplPeriodNs};
/// Where a machine created on the virtual clock starts (1000 s: any fixed value).
constexpr std::int64_t kVirtualOrigin = 1'000'000'000'000;
// A lease holder that has not refreshed for this long is presumed stuck or gone.
constexpr std::int64_t kLeaseStaleNs = 200'000'000;
// How often an attached process that does not hold the lease looks at it (to take it over when
// the holder is gone or stuck): 10 wake-ups a second, not the holder's 1,000.
constexpr std::chrono::nanoseconds kLeaseCheckPeriod{100'000'000};
// RAPL units as the kernel applies them (intel_rapl_common): packages count in 61.035 µJ
// (ESU 14), server DRAM in a fixed 15.3 µJ; max_energy_range_uj = (2^32 − 1) × unit.
constexpr double kPackageUnitUj = 61.035;
constexpr double kDramUnitUj = 15.3;
// A counter started "near the wrap" is this many seconds of idle energy below the range.
constexpr double kNearWrapSeconds = 3.0;

/// GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx, deterministic per position.
std::string default_uuid(unsigned index) {
  const std::uint64_t a = detail::mix64(0x6572672d73696dULL + index);  // "erg-sim"
  const std::uint64_t b = detail::mix64(a ^ (0x1000ULL + index));
  char buf[64];
  std::snprintf(buf, sizeof buf, "GPU-%08x-%04x-%04x-%04x-%012llx", static_cast<unsigned>(a >> 32),
                static_cast<unsigned>((a >> 16) & 0xffff), static_cast<unsigned>(a & 0xffff),
                static_cast<unsigned>(b >> 48), static_cast<unsigned long long>(b & 0xffffffffffffULL));
  return buf;
}

bool pid_alive(int pid) { return pid > 0 && (::kill(pid, 0) == 0 || errno == EPERM); }

/// One energy file of the tree: where it is, how wide, and what it shows.
struct EnergyFile {
  int zone = 0, sub = -1;
  std::size_t width = 0;
  const detail::RaplDomain* (*domain)(const State&, unsigned) = nullptr;
  unsigned cpu = 0;
};

const detail::RaplDomain* package_of(const State& s, unsigned c) { return &s.cpus[c].package; }
const detail::RaplDomain* dram_of(const State& s, unsigned c) { return &s.cpus[c].dram_domain; }
const detail::RaplDomain* core_of(const State& s, unsigned c) { return &s.cpus[c].core_domain; }
const detail::RaplDomain* psys_of(const State& s, unsigned) { return &s.psys_domain; }

/// The tree's files in a fixed order (sub-zones: dram is :0 when present, core after it).
std::vector<EnergyFile> energy_files(const State& s) {
  std::vector<EnergyFile> files;
  for (unsigned c = 0; c < s.cpu_count; ++c) {
    const auto& cpu = s.cpus[c];
    const int zone = static_cast<int>(c);
    files.push_back({zone, -1, PowercapTree::width_for(cpu.package.range_uj), &package_of, c});
    int sub = 0;
    if (cpu.dram) files.push_back({zone, sub++, PowercapTree::width_for(cpu.dram_domain.range_uj), &dram_of, c});
    if (cpu.core) files.push_back({zone, sub++, PowercapTree::width_for(cpu.core_domain.range_uj), &core_of, c});
  }
  if (s.psys)
    files.push_back({static_cast<int>(s.cpu_count), -1, PowercapTree::width_for(s.psys_domain.range_uj), &psys_of, 0});
  return files;
}

/// The index in energy_files() of `cpu`'s package (or its DRAM) file; nullopt without DRAM.
std::optional<std::size_t> energy_file_index(const State& s, unsigned cpu, bool dram) {
  std::size_t i = 0;
  for (unsigned c = 0; c < cpu; ++c) i += 1 + (s.cpus[c].dram ? 1 : 0) + (s.cpus[c].core ? 1 : 0);
  if (!dram) return i;
  if (!s.cpus[cpu].dram) return std::nullopt;
  return i + 1;  // dram is the package's first sub-zone
}

/// The `name` a zone's file holds.
std::string zone_name(const EnergyFile& f) {
  return f.domain == &package_of ? "package-" + std::to_string(f.cpu)
         : f.domain == &dram_of  ? "dram"
         : f.domain == &core_of  ? "core"
                                 : "psys";
}

/// Opens an energy file for writing. The files are 0400 like the kernel's; their owner may still
/// write them after making them writable for the moment of the open (a descriptor keeps its access).
int open_for_write(const fs::path& file) {
  int fd = ::open(file.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd >= 0 || errno != EACCES) return fd;
  struct stat st {};
  if (::stat(file.c_str(), &st) != 0 || st.st_uid != ::geteuid()) return -1;
  if (::chmod(file.c_str(), (st.st_mode & 07777) | S_IWUSR) != 0) return -1;
  fd = ::open(file.c_str(), O_WRONLY | O_CLOEXEC);
  ::chmod(file.c_str(), st.st_mode & 07777);
  return fd;
}

Result<MachineSpec> spec_from_state(const State& s) {
  MachineSpec spec;
  spec.text = std::string(s.spec_text, ::strnlen(s.spec_text, sizeof s.spec_text));
  if (auto parsed = parse_spec(spec.text)) spec.model = parsed->model;
  spec.model.kind = s.faithful ? ModelKind::kFaithful : ModelKind::kIdeal;
  spec.model.seed = s.seed;
  spec.model.timestamps = s.stamp_update_time ? TimestampMeaning::kUpdateTime : TimestampMeaning::kReadTime;
  spec.model.rapl_start = static_cast<RaplStart>(s.rapl_start);
  spec.model.amdsmi_abi = static_cast<unsigned>(s.amdsmi_abi);
  for (unsigned i = 0; i < s.gpu_count; ++i) {
    const auto& g = s.gpus[i];
    if (g.sku_index < 0 || static_cast<std::size_t>(g.sku_index) >= all_skus().size())
      return fail(ErrorCode::kIo, "simulated machine state is corrupt (GPU " + std::to_string(i) + ")");
    GpuSpec gs{std::string(detail::sku_of(g).key), std::string(g.uuid)};
    gs.partial_sampling = g.partial_sampling != 0;
    gs.counter = static_cast<CounterMode>(g.counter_mode);
    // The sensor zoo, as far as the state keeps it (what the GPU does, not how it was asked).
    if (g.energy_ticks.schedule != detail::kScheduleGrid) gs.schedule = static_cast<Schedule>(g.energy_ticks.schedule);
    if (g.publish_delay_ns > 0) gs.publish_delay_ms = static_cast<double>(g.publish_delay_ns) / 1e6;
    if (g.stamp_mode >= 0) gs.stamps = static_cast<StampMode>(g.stamp_mode);
    if (g.partial_sampling != 0) gs.increment = static_cast<Increment>(g.increment);
    if (g.average != detail::kAverageBoxcar) gs.average = static_cast<AverageMode>(g.average);
    spec.gpus.push_back(std::move(gs));
  }
  for (unsigned c = 0; c < s.cpu_count; ++c) {
    CpuSpec cs;
    cs.dram = s.cpus[c].dram != 0;
    cs.core = s.cpus[c].core != 0;
    cs.idle_package_w = s.cpus[c].idle_package_w;
    cs.idle_dram_w = s.cpus[c].idle_dram_w;
    cs.max_energy_range_uj = s.cpus[c].max_energy_range_uj;
    spec.cpus.push_back(cs);
  }
  spec.psys = s.psys != 0;
  if (s.jetson.layout >= 0) spec.jetson = static_cast<JetsonLayout>(s.jetson.layout);
  return spec;
}

Result<fs::path> exe_dir() {
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return fail(ErrorCode::kNotFound, "cannot resolve /proc/self/exe");
  return exe.parent_path();
}

// --- temporary machines and their creators ------------------------------------------------
// create_temp names its directories kTempPrefix + 6 random characters and records its creator in
// kCreatorFile; reap_stale_temp removes the ones whose creator is gone (erg killed with SIGKILL
// never runs the destructor that removes them).
constexpr const char* kTempPrefix = "erg-sim-";
constexpr const char* kCreatorFile = "creator";
constexpr const char* kCreatorMagic = "erg-sim-creator 1";

/// The whole content of a small file (at most `limit` bytes); nullopt if it cannot be read.
/// Links are not followed (the files read live in directories other users can write).
std::optional<std::string> read_small(const fs::path& file, std::size_t limit = 1 << 16, bool follow = false) {
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC | (follow ? 0 : O_NOFOLLOW));
  if (fd < 0) return std::nullopt;
  std::string out;
  char buf[4096];
  while (out.size() < limit) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      ::close(fd);
      return std::nullopt;
    }
    if (n == 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return out;
}

/// This boot's id (/proc/sys/kernel/random/boot_id), "" if unknown: a pid recorded before a
/// reboot names no process of this boot (a temporary parent on disk outlives a reboot).
std::string boot_id() {
  auto text = read_small("/proc/sys/kernel/random/boot_id", 256, /*follow=*/true);
  if (!text) return {};
  while (!text->empty() && (text->back() == '\n' || text->back() == ' ')) text->pop_back();
  return *text;
}

/// A process's state letter and start time (clock ticks since boot; /proc/PID/stat fields 3
/// and 22): the pair (pid, start time) names one process for the whole boot, where the pid
/// alone may be reused.
struct ProcessStat {
  char state = '?';
  std::uint64_t start_ticks = 0;
};
std::optional<ProcessStat> process_stat(int pid) {
  auto text = read_small("/proc/" + std::to_string(pid) + "/stat", 4096, /*follow=*/true);
  if (!text) return std::nullopt;
  const auto paren = text->rfind(')');  // the command name (field 2) may hold spaces and ')'
  if (paren == std::string::npos) return std::nullopt;
  std::istringstream fields(text->substr(paren + 1));
  ProcessStat st;
  std::string field;
  for (int i = 3; i <= 22 && fields >> field; ++i) {
    if (i == 3) st.state = field.empty() ? '?' : field[0];
    if (i == 22) {
      st.start_ticks = std::strtoull(field.c_str(), nullptr, 10);
      return st;
    }
  }
  return std::nullopt;
}

struct Creator {
  int pid = 0;
  std::uint64_t start_ticks = 0;  ///< 0: unknown
  std::string boot;               ///< "": unknown
};

std::string creator_record() {
  const int pid = ::getpid();
  const auto st = process_stat(pid);
  return std::string(kCreatorMagic) + "\npid " + std::to_string(pid) + "\nstart " +
         std::to_string(st ? st->start_ticks : 0) + "\nboot " + boot_id() + "\n";
}

/// Parses a creator record; nullopt unless it is complete (magic line first, a pid, `boot`
/// last: a torn or foreign file is not a record).
std::optional<Creator> parse_creator(const std::string& text) {
  std::istringstream lines(text);
  std::string line;
  if (!std::getline(lines, line) || line != kCreatorMagic) return std::nullopt;
  Creator c;
  bool boot = false;
  while (std::getline(lines, line)) {
    const auto space = line.find(' ');
    const std::string key = line.substr(0, space);
    const std::string value = space == std::string::npos ? "" : line.substr(space + 1);
    if (key == "pid") c.pid = std::atoi(value.c_str());
    if (key == "start") c.start_ticks = std::strtoull(value.c_str(), nullptr, 10);
    if (key == "boot") c.boot = value, boot = true;
  }
  if (c.pid <= 0 || !boot) return std::nullopt;
  return c;
}

/// Whether the recorded creator still runs. Unsure (a process with that pid whose /proc entry
/// cannot be read) counts as alive.
bool creator_alive(const Creator& c) {
  if (!c.boot.empty()) {
    const std::string now = boot_id();
    if (!now.empty() && now != c.boot) return false;
  }
  const auto st = process_stat(c.pid);
  if (!st) return pid_alive(c.pid);
  if (st->state == 'Z' || st->state == 'X') return false;  // exited, not yet waited for
  return c.start_ticks == 0 || st->start_ticks == c.start_ticks;
}

using FileId = std::pair<dev_t, ino_t>;

/// The directory holding the state file `state` names (relative names against `cwd`).
std::optional<FileId> state_dir_id(const std::string& state, const fs::path& cwd) {
  if (state.empty()) return std::nullopt;
  fs::path p(state);
  if (p.is_relative()) p = cwd / p;
  struct stat st {};
  if (::stat(p.parent_path().c_str(), &st) != 0) return std::nullopt;
  return FileId{st.st_dev, st.st_ino};
}

/// The machine directories in use: named by this process's ERG_SIM_STATE, or by the
/// ERG_SIM_STATE a live process of this user started with (the children of a creator that
/// was killed may still run on its machine).
std::set<FileId> machines_in_use() {
  std::set<FileId> used;
  std::error_code ec;
  if (const char* mine = std::getenv("ERG_SIM_STATE"); mine != nullptr)
    if (auto id = state_dir_id(mine, fs::current_path(ec))) used.insert(*id);
  const std::string key = "ERG_SIM_STATE=";
  for (fs::directory_iterator it("/proc", ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    struct stat st {};
    if (::stat(it->path().c_str(), &st) != 0 || st.st_uid != ::geteuid()) continue;
    auto env = read_small(it->path() / "environ", 1 << 22, /*follow=*/true);
    if (!env) continue;
    for (std::size_t pos = 0; pos < env->size();) {
      std::size_t end_of = env->find('\0', pos);
      if (end_of == std::string::npos) end_of = env->size();
      if (env->compare(pos, key.size(), key) == 0)
        if (auto id = state_dir_id(env->substr(pos + key.size(), end_of - pos - key.size()), it->path() / "cwd"))
          used.insert(*id);
      pos = end_of + 1;
    }
  }
  return used;
}

bool valid_load(const Load& l) {
  return l.utilization >= 0.0 && l.utilization <= 1.0 && l.step.count() >= 0 && l.ripple_depth >= 0.0 &&
         l.ripple_depth <= 1.0 && l.ripple_duty >= 0.0 && l.ripple_duty <= 1.0;
}

}  // namespace

struct Machine::Impl {
  fs::path dir;
  fs::path powercap;
  bool owner = false;
  bool keep_dir = false;
  pid_t creator_pid = 0;
  MachineSpec spec;
  int fd = -1;
  State* s = nullptr;
  std::mutex write_mutex;  // serializes this process's powercap writes (updater vs advance)
  // Energy files kept open for writing (under write_mutex), and what each shows now.
  std::vector<EnergyFile> files;
  std::vector<int> file_fds;
  std::vector<std::uint64_t> written;
  // The hwmon value files of the Jetson rails (in_mV, curr_mA per rail), the same way.
  std::vector<int> hwmon_fds;
  std::vector<std::int64_t> hwmon_written;
  std::thread updater;
  bool leased = false;  // this process held the lease at its last refresh (under write_mutex)
  std::mutex stop_mutex;
  std::condition_variable stop_cv;
  bool stop = false;
  bool poke = false;  // look at the lease now, not at the next deadline (under stop_mutex)

  ~Impl() {
    if (updater.joinable()) {
      {
        std::lock_guard lk(stop_mutex);
        stop = true;
      }
      stop_cv.notify_all();
      updater.join();
    }
    for (int f : file_fds)
      if (f >= 0) ::close(f);
    for (int f : hwmon_fds)
      if (f >= 0) ::close(f);
    if (s != nullptr) {
      {
        Lock lock(s);
        if (s->lease_pid == ::getpid()) s->lease_pid = 0;
      }
      ::munmap(s, sizeof(State));
    }
    if (fd >= 0) ::close(fd);
    if (owner && !keep_dir && ::getpid() == creator_pid) {
      std::error_code ec;
      fs::remove_all(dir, ec);
    }
  }

  Result<void> check_gpu(unsigned gpu) const {
    if (gpu >= s->gpu_count)
      return fail(ErrorCode::kNotFound, "simulated GPU " + std::to_string(gpu) + " does not exist (" +
                                            std::to_string(s->gpu_count) + " GPUs)");
    return ok();
  }
  Result<void> check_cpu(unsigned cpu) const {
    if (cpu >= s->cpu_count)
      return fail(ErrorCode::kNotFound, "simulated CPU " + std::to_string(cpu) + " does not exist (" +
                                            std::to_string(s->cpu_count) + " CPUs)");
    return ok();
  }

  /// Writes the powercap files that changed since the last write, from the current state
  /// (virtual clock, or lease holder). Values go in place through descriptors kept open.
  [[nodiscard]] bool has_files() const { return !spec.cpus.empty() || spec.psys || spec.jetson.has_value(); }

  Result<void> refresh_powercap(bool only_if_leaseholder, bool* holder = nullptr) {
    if (!has_files()) return ok();
    std::lock_guard wl(write_mutex);
    std::vector<std::uint64_t> values;
    std::vector<std::int64_t> rail_values;  // in_mV, curr_mA per rail
    std::vector<unsigned> rail_hwmon, rail_channel;
    {
      Lock lock(s, Lock::kRead);  // CPU state and the lease only: GPU readings stay valid
      const std::int64_t now = detail::sim_now(*s);
      if (only_if_leaseholder) {
        if (s->virtual_clock) return ok();  // advance() writes synchronously
        const int me = ::getpid();
        const std::int64_t mono = detail::monotonic_ns();
        const bool stale = mono - s->lease_heartbeat_ns > kLeaseStaleNs;
        if (s->lease_pid != me && s->lease_pid != 0 && pid_alive(s->lease_pid) && !stale) {
          leased = false;
          return ok();
        }
        s->lease_pid = me;
        s->lease_heartbeat_ns = mono;
        if (holder != nullptr) *holder = true;
        // Taken over: another process wrote the files meanwhile, so what this one wrote last is
        // no guide to what they show. Rewrite every file.
        if (!leased) written.assign(written.size(), ~std::uint64_t{0});
        leased = true;
      }
      detail::advance_cpus(*s, now);
      if (files.empty()) files = energy_files(*s);
      values.reserve(files.size());
      for (const auto& f : files) values.push_back(detail::rapl_value_uj(*s, *f.domain(*s, f.cpu)));
      // What every file shows as of `now`, recorded before the files are written (so a value read
      // there is found here) and under the shared lock (one writer at a time, whichever process).
      for (std::size_t i = 0; i < values.size(); ++i) record_as_of(i, now, values[i]);
      detail::advance_jetson(*s, now);
      for (unsigned i = 0; i < s->jetson.rail_count; ++i) {
        const auto& r = s->jetson.rails[i];
        rail_values.push_back(r.in_mv);
        rail_values.push_back(r.curr_ma);
        rail_hwmon.push_back(r.hwmon);
        rail_channel.push_back(r.channel);
      }
    }
    if (auto r = write_rails(rail_values, rail_hwmon, rail_channel); !r) return r;
    const PowercapTree tree(powercap);
    if (file_fds.size() != files.size()) {
      file_fds.assign(files.size(), -1);
      written.assign(files.size(), ~std::uint64_t{0});
    }
    for (std::size_t i = 0; i < files.size(); ++i) {
      if (values[i] == written[i]) continue;
      if (file_fds[i] < 0) {
        const fs::path path = tree.zone_dir(files[i].zone, files[i].sub) / "energy_uj";
        file_fds[i] = open_for_write(path);
        if (file_fds[i] < 0) return fail(ErrorCode::kIo, "cannot open " + path.string() + ": " + std::strerror(errno));
      }
      if (auto r = PowercapTree::write_energy(file_fds[i], values[i], files[i].width); !r) return r;
      written[i] = values[i];
    }
    return ok();
  }

  /// Records that energy file `i` shows `value` as of sim time `at`, in the file's ring (under the
  /// shared lock: one writer at a time). Each entry is a seqlock, as the GPU read snapshots are.
  void record_as_of(std::size_t i, std::int64_t at, std::uint64_t value) {
    if (i >= detail::kMaxEnergyFiles) return;
    std::atomic_ref count(s->powercap_as_of_count[i]);
    const std::uint64_t n = count.load(std::memory_order_relaxed);
    auto& e = s->powercap_as_of[i][n % detail::kAsOfRing];
    std::atomic_ref seq(e.seq);
    // Even base: a writer killed between its two stores (EOWNERDEAD) leaves the count odd.
    const std::uint64_t v = seq.load(std::memory_order_relaxed) & ~std::uint64_t{1};
    seq.store(v + 1, std::memory_order_relaxed);
    std::atomic_ref(e.as_of_ns).store(at, std::memory_order_release);
    std::atomic_ref(e.value_uj).store(value, std::memory_order_release);
    seq.store(v + 2, std::memory_order_release);
    count.store(n + 1, std::memory_order_release);
  }

  /// Writes the rails' hwmon files that changed (under write_mutex).
  Result<void> write_rails(const std::vector<std::int64_t>& values, const std::vector<unsigned>& hwmon,
                           const std::vector<unsigned>& channel) {
    if (values.empty()) return ok();
    if (hwmon_fds.size() != values.size()) {
      hwmon_fds.assign(values.size(), -1);
      hwmon_written.assign(values.size(), -1);
    }
    const HwmonTree tree(powercap.parent_path().parent_path());
    for (std::size_t k = 0; k < values.size(); ++k) {
      if (values[k] == hwmon_written[k]) continue;
      if (hwmon_fds[k] < 0) {
        const std::string n = std::to_string(channel[k / 2]);
        const fs::path path =
            tree.device_dir(hwmon[k / 2]) / (k % 2 == 0 ? "in" + n + "_input" : "curr" + n + "_input");
        hwmon_fds[k] = open_for_write(path);
        if (hwmon_fds[k] < 0) return fail(ErrorCode::kIo, "cannot open " + path.string() + ": " + std::strerror(errno));
      }
      if (auto r = HwmonTree::write_value(hwmon_fds[k], values[k]); !r) return r;
      hwmon_written[k] = values[k];
    }
    return ok();
  }

  void start_updater() {
    if (!has_files()) return;
    // SYS/class: there whether the machine has a powercap tree, a hwmon tree or both.
    const fs::path classes = powercap.parent_path();
    if (::access(classes.c_str(), R_OK | X_OK) != 0) return;
    {
      // Another user's simulation: its files are not ours to write.
      struct stat st {};
      if (::stat(classes.c_str(), &st) != 0 || (st.st_uid != ::geteuid() && ::geteuid() != 0)) return;
    }
    updater = std::thread([this] {
      // Absolute deadlines: one write per RAPL period, without drifting by the write's cost.
      auto next = std::chrono::steady_clock::now();
      std::unique_lock lk(stop_mutex);
      while (!stop) {
        lk.unlock();
        bool holder = false;
        (void)refresh_powercap(/*only_if_leaseholder=*/true, &holder);
        lk.lock();
        // Only the lease holder writes every RAPL period; the others look at the lease now and
        // then (a stale holder is taken over within kLeaseStaleNs + kLeaseCheckPeriod).
        next += holder ? kPowercapQuantum : kLeaseCheckPeriod;
        const auto now = std::chrono::steady_clock::now();
        if (next < now) next = now;
        if (stop_cv.wait_until(lk, next, [this] { return stop || poke; }) && poke) {
          poke = false;
          next = std::chrono::steady_clock::now();  // poked: refresh now, and count deadlines from here
        }
      }
    });
    // Named before anyone looks (top, the wake-up tests read /proc/self/task/*/comm).
    ::pthread_setname_np(updater.native_handle(), kPowercapUpdaterThread);
  }
};

Machine::Machine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Machine::~Machine() = default;

Result<std::unique_ptr<Machine>> Machine::create(const MachineSpec& spec, const fs::path& dir, bool keep_dir,
                                                 bool virtual_clock) {
  if (spec.gpus.size() > detail::kMaxGpus || spec.cpus.size() > detail::kMaxCpus)
    return fail(ErrorCode::kInvalidArgument, "a simulated machine has at most 16 GPUs and 8 CPU packages");
  std::vector<const Sku*> skus;
  for (const auto& g : spec.gpus) {
    const Sku* sku = lookup_sku(g.sku);
    if (sku == nullptr) sku = sku_by_key(g.sku);  // a card's second die
    if (sku == nullptr) return fail(ErrorCode::kInvalidArgument, "unknown simulated GPU '" + g.sku + "'");
    skus.push_back(sku);
  }
  // A dual-die card's dies come as a pair: the first die, then its second die.
  for (std::size_t i = 0; i < skus.size(); ++i) {
    const bool pair_start = !skus[i]->second_die.empty();
    if (pair_start && (i + 1 >= skus.size() || skus[i + 1]->key != skus[i]->second_die))
      return fail(ErrorCode::kInvalidArgument, "simulated " + std::string(skus[i]->key) + " needs its second die next");
    if (skus[i]->secondary_die && (i == 0 || skus[i - 1]->second_die != skus[i]->key))
      return fail(ErrorCode::kInvalidArgument, "simulated " + std::string(skus[i]->key) + " without its first die");
  }
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return fail(ErrorCode::kIo, "cannot create " + dir.string() + ": " + ec.message());
  // Readable and traversable by other users, so an unprivileged process can attach.
  ::chmod(dir.c_str(), 0755);

  auto impl = std::make_unique<Impl>();
  impl->dir = dir;
  PowercapTree tree = PowercapTree::sysfs(dir / "sys");
  impl->powercap = tree.root();
  impl->keep_dir = keep_dir;
  impl->creator_pid = ::getpid();
  impl->spec = spec;

  const fs::path state_path = dir / "state";
  std::string text = spec.text;
  if (text.size() >= detail::kSpecTextSize) text.resize(detail::kSpecTextSize - 1);
  if (impl->powercap.string().size() >= detail::kPathSize)
    return fail(ErrorCode::kInvalidArgument, "simulation directory path too long: " + dir.string());

  // Build the state in a temporary file and rename it into place, so an attacher never maps a
  // half-initialized state.
  fs::path tmp = state_path;
  tmp += ".new";
  int fd = ::open(tmp.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0) return fail(ErrorCode::kIo, "cannot create " + tmp.string() + ": " + std::strerror(errno));
  ::fchmod(fd, 0666);  // shared with other users (not subject to umask)
  impl->fd = fd;
  if (::ftruncate(fd, sizeof(State)) != 0)
    return fail(ErrorCode::kIo, "cannot size " + tmp.string() + ": " + std::strerror(errno));
  void* addr = ::mmap(nullptr, sizeof(State), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (addr == MAP_FAILED) return fail(ErrorCode::kIo, "cannot map " + tmp.string() + ": " + std::strerror(errno));
  State* s = new (addr) State{};
  if (int rc = detail::init_mutex(s); rc != 0) {
    ::munmap(addr, sizeof(State));
    return fail(ErrorCode::kInternal, std::string("cannot initialize the shared mutex: ") + std::strerror(rc));
  }
  impl->s = s;

  const bool faithful = spec.model.kind == ModelKind::kFaithful;
  timespec wall{};
  ::clock_gettime(CLOCK_REALTIME, &wall);
  // On the virtual clock, time starts at a fixed origin and the wall offset is whole
  // milliseconds: times computed in floating point from absolute nanoseconds (by the model, by a
  // monitor sleeping until a predicted update) then round the same way in every run. From
  // CLOCK_MONOTONIC they rounded differently (1 ns apart, then diverging), and two machines of
  // one seed driven the same way were not identical. Wall time stays right to the millisecond.
  const std::int64_t now = virtual_clock ? kVirtualOrigin : detail::monotonic_ns();
  s->wall_offset_ns = static_cast<std::int64_t>(wall.tv_sec) * 1'000'000'000LL + wall.tv_nsec - now;
  if (virtual_clock) s->wall_offset_ns -= s->wall_offset_ns % 1'000'000;
  s->created_ns = now;
  s->virtual_clock = virtual_clock ? 1 : 0;
  s->virtual_ns = now;
  s->privilege = static_cast<std::int32_t>(Privilege::kRootOnly);
  s->faithful = faithful ? 1 : 0;
  s->seed = spec.model.seed;
  s->stamp_update_time = spec.model.timestamp_meaning() == TimestampMeaning::kUpdateTime ? 1 : 0;
  s->rapl_start = static_cast<std::int32_t>(spec.model.rapl());
  s->amdsmi_abi = static_cast<std::int32_t>(spec.model.amdsmi_abi);
  s->gpu_count = static_cast<std::uint32_t>(spec.gpus.size());
  s->cpu_count = static_cast<std::uint32_t>(spec.cpus.size());
  s->psys = spec.psys ? 1 : 0;
  std::memcpy(s->spec_text, text.data(), text.size());
  const std::string pc = impl->powercap.string();
  std::memcpy(s->powercap_root, pc.data(), pc.size());
  for (unsigned i = 0; i < s->gpu_count; ++i) {
    auto& g = s->gpus[i];
    detail::GpuInit init;
    init.sku_index = static_cast<int>(skus[i] - all_skus().data());
    init.position = i;
    init.seed = spec.model.seed;
    init.faithful = faithful;
    init.partial_sampling = spec.gpus[i].partial_sampling ? (*spec.gpus[i].partial_sampling ? 1 : 0) : -1;
    init.energy_period_ms = spec.gpus[i].energy_period_ms.value_or(0.0);
    init.jitter_ms = spec.gpus[i].jitter_ms.value_or(-1.0);
    const GpuSpec& zoo = spec.gpus[i];
    init.schedule = static_cast<std::int32_t>(zoo.schedule.value_or(Schedule::kGrid));
    init.phase_jump_s = zoo.phase_jump_s.value_or(init.phase_jump_s);
    init.skip_share = zoo.skip_share.value_or(init.skip_share);
    init.change_at_s = zoo.change_at_s.value_or(init.change_at_s);
    init.period_after_ms = zoo.period_after_ms.value_or(init.period_after_ms);
    init.publish_delay_ms = zoo.publish_delay_ms.value_or(0.0);
    init.stamps = zoo.stamps ? static_cast<std::int32_t>(*zoo.stamps) : -1;
    init.stamp_unit_ms = zoo.stamp_unit_ms.value_or(init.stamp_unit_ms);
    init.increment = zoo.increment ? static_cast<std::int32_t>(*zoo.increment) : -1;
    init.average = static_cast<std::int32_t>(zoo.average.value_or(AverageMode::kBoxcar));
    detail::init_gpu(g, init, now);
    g.counter_mode = static_cast<std::int32_t>(spec.gpus[i].counter);
    std::string uuid = spec.gpus[i].uuid.value_or(default_uuid(i));
    if (uuid.size() >= sizeof g.uuid) uuid.resize(sizeof g.uuid - 1);
    std::memcpy(g.uuid, uuid.data(), uuid.size());
    impl->spec.gpus[i].uuid = uuid;
    impl->spec.gpus[i].sku = std::string(skus[i]->key);
    impl->spec.gpus[i].partial_sampling = g.partial_sampling != 0;
  }

  // CPU packages: counters in the hardware's units, starting where the model says.
  const RaplStart start = spec.model.rapl();
  auto init_domain = [&](detail::RaplDomain& d, double power_w, double unit_uj, std::uint64_t range_uj,
                         std::uint64_t salt) {
    d.power_w = d.step_power_w = power_w;
    d.unit_uj = faithful ? unit_uj : 1.0;
    d.range_uj = range_uj;
    const double range_j = static_cast<double>(range_uj) * 1e-6;
    switch (start) {
      case RaplStart::kZero: d.start_j = 0.0; break;
      case RaplStart::kNearWrap: d.start_j = std::max(0.0, range_j - kNearWrapSeconds * std::max(power_w, 1.0)); break;
      case RaplStart::kRandom:
      default: d.start_j = range_j * detail::uniform01(detail::mix64(spec.model.seed ^ (0x7261706cULL + salt)));
    }
  };
  for (unsigned c = 0; c < s->cpu_count; ++c) {
    auto& cpu = s->cpus[c];
    const auto& cs = spec.cpus[c];
    cpu.dram = cs.dram ? 1 : 0;
    cpu.core = cs.core ? 1 : 0;
    cpu.idle_package_w = cs.idle_package_w;
    cpu.idle_dram_w = cs.dram ? cs.idle_dram_w : 0.0;
    const std::uint64_t range = cs.max_energy_range_uj == 0 ? CpuSpec{}.max_energy_range_uj : cs.max_energy_range_uj;
    cpu.max_energy_range_uj = range;
    // A custom package range (tests) applies to every domain of the package.
    const bool default_range = range == CpuSpec{}.max_energy_range_uj;
    init_domain(cpu.package, cs.idle_package_w, kPackageUnitUj, range, c * 4 + 0);
    init_domain(cpu.dram_domain, cpu.idle_dram_w, kDramUnitUj, default_range ? kDramEnergyRangeUj : range, c * 4 + 1);
    init_domain(cpu.core_domain, 0.6 * cs.idle_package_w, kPackageUnitUj, range, c * 4 + 2);
  }
  if (s->psys) {
    double platform = s->psys_extra_w;
    for (unsigned c = 0; c < s->cpu_count; ++c) platform += s->cpus[c].package.power_w + s->cpus[c].dram_domain.power_w;
    init_domain(s->psys_domain, platform, kPackageUnitUj, CpuSpec{}.max_energy_range_uj, 4 * detail::kMaxCpus);
  }
  s->cpu_last_ns = now;
  s->cpu_step_index = 0;
  s->rapl_next_ns = now + static_cast<std::int64_t>(detail::uniform01(detail::mix64(spec.model.seed ^ 0x5241504cULL)) *
                                                    static_cast<double>(detail::kRaplPeriodNs));
  if (spec.jetson) detail::init_jetson(*s, *spec.jetson, now);
  s->version = detail::kVersion;
  s->size = sizeof(State);
  std::atomic_ref(s->magic).store(detail::kMagic, std::memory_order_release);  // last: the state is complete

  // The powercap tree, laid out as sysfs: intel-rapl:N = package-N with its dram (N:0, when
  // present) and core sub-zones; psys after the packages.
  std::size_t file_index = 0;
  for (const auto& f : energy_files(*s)) {
    const detail::RaplDomain* d = f.domain(*s, f.cpu);
    impl->record_as_of(file_index++, s->cpu_last_ns, detail::rapl_value_uj(*s, *d));
    if (auto r = tree.add_zone(f.zone, zone_name(f), d->range_uj, f.sub, detail::rapl_value_uj(*s, *d)); !r)
      return fail(r.error());
  }
  // The hwmon class: always there (ERG_HWMON_ROOT points at it, so a simulated machine never
  // reads the host's sensors); a Jetson's INA3221 chips as hwmon1.. after a thermal sensor.
  const HwmonTree hwmon(dir / "sys");
  if (auto r = hwmon.create_root(); !r) return fail(r.error());
  if (spec.jetson) {
    if (auto r = hwmon.add_other(0, "soc_thermal"); !r) return fail(r.error());
    const auto& j = s->jetson;
    for (unsigned i = 0; i < j.rail_count;) {
      const unsigned address = j.rails[i].address, index = j.rails[i].hwmon;
      std::vector<HwmonTree::Channel> channels;
      for (unsigned ch = 1; ch <= 3; ++ch) channels.push_back({ch, "", 5000});
      const unsigned interval = detail::jetson_update_interval_ms(*s, i);
      for (; i < j.rail_count && j.rails[i].address == address; ++i)
        channels[j.rails[i].channel - 1] = {j.rails[i].channel, j.rails[i].label, j.rails[i].shunt_uohm};
      if (auto r = hwmon.add_ina3221(index, address, channels, j.samples, interval); !r) return fail(r.error());
    }
    for (unsigned i = 0; i < j.rail_count; ++i) {
      const std::string n = std::to_string(j.rails[i].channel);
      if (auto r = hwmon.set_value(j.rails[i].hwmon, "in" + n + "_input", j.rails[i].in_mv); !r) return fail(r.error());
      if (auto r = hwmon.set_value(j.rails[i].hwmon, "curr" + n + "_input", j.rails[i].curr_ma); !r)
        return fail(r.error());
    }
  }
  std::error_code ignore;
  for (const char* d : {"sys", "sys/class", "sys/class/powercap", "sys/class/hwmon", "sys/devices",
                        "sys/devices/virtual", "sys/devices/virtual/powercap"})
    if (fs::exists(dir / d, ignore)) ::chmod((dir / d).c_str(), 0755);

  if (::rename(tmp.c_str(), state_path.c_str()) != 0)
    return fail(ErrorCode::kIo, "cannot create " + state_path.string() + ": " + std::strerror(errno));
  impl->owner = true;  // from here on the directory is ours to remove
  impl->start_updater();
  return std::unique_ptr<Machine>(new Machine(std::move(impl)));
}

fs::path Machine::temp_parent() {
  if (const char* d = std::getenv("ERG_SIM_TMPDIR"); d != nullptr && *d != '\0') return d;
  if (::access("/dev/shm", W_OK | X_OK) == 0) return "/dev/shm";
  const char* tmpdir = std::getenv("TMPDIR");
  return tmpdir != nullptr && *tmpdir != '\0' ? tmpdir : "/tmp";
}

std::vector<fs::path> Machine::reap_stale_temp(const fs::path& parent) {
  struct Candidate {
    fs::path dir;
    FileId id;
  };
  std::vector<Candidate> stale;
  std::error_code ec;
  for (fs::directory_iterator it(parent, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::path dir = it->path();
    if (dir.filename().string().rfind(kTempPrefix, 0) != 0) continue;
    struct stat st {};
    if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::geteuid()) continue;
    auto text = read_small(dir / kCreatorFile, 4096);
    if (!text) continue;
    auto creator = parse_creator(*text);
    if (!creator || creator_alive(*creator)) continue;
    stale.push_back({dir, FileId{st.st_dev, st.st_ino}});
  }
  std::vector<fs::path> removed;
  if (stale.empty()) return removed;
  const auto used = machines_in_use();  // only now: it reads every process's environment
  for (const auto& c : stale) {
    if (used.count(c.id) != 0) continue;
    std::error_code rm;
    fs::remove_all(c.dir, rm);
    if (!rm) removed.push_back(c.dir);
  }
  return removed;
}

Result<std::unique_ptr<Machine>> Machine::create_temp(const MachineSpec& spec, bool virtual_clock) {
  const fs::path base = temp_parent();
  (void)reap_stale_temp(base);
  std::string tmpl = (base / (std::string(kTempPrefix) + "XXXXXX")).string();
  if (::mkdtemp(tmpl.data()) == nullptr)
    return fail(ErrorCode::kIo, "cannot create a temporary directory in " + tmpl + ": " + std::strerror(errno));
  // The record goes in first (complete or absent: written aside and renamed), so a directory
  // being set up is never taken for a stale one.
  if (auto r = write_file_atomic(fs::path(tmpl) / kCreatorFile, creator_record(), 0644); !r) {
    std::error_code ec;
    fs::remove_all(tmpl, ec);
    return fail(r.error());
  }
  auto m = create(spec, tmpl, false, virtual_clock);
  if (!m) {
    std::error_code ec;
    fs::remove_all(tmpl, ec);
  }
  return m;
}

Result<std::unique_ptr<Machine>> Machine::attach(const fs::path& state_file) {
  auto impl = std::make_unique<Impl>();
  impl->dir = state_file.parent_path();
  int fd = ::open(state_file.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    const int e = errno;
    return fail(e == EACCES ? ErrorCode::kNoPermission : ErrorCode::kNotFound,
                "cannot open simulated machine state " + state_file.string() + ": " + std::strerror(e));
  }
  impl->fd = fd;
  struct stat st {};
  if (::fstat(fd, &st) != 0 || static_cast<std::size_t>(st.st_size) < sizeof(State))
    return fail(ErrorCode::kInvalidArgument, state_file.string() + " is not a simulated machine state");
  void* addr = ::mmap(nullptr, sizeof(State), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (addr == MAP_FAILED)
    return fail(ErrorCode::kIo, "cannot map " + state_file.string() + ": " + std::strerror(errno));
  impl->s = static_cast<State*>(addr);
  State* s = impl->s;
  if (s->magic != detail::kMagic || s->version != detail::kVersion || s->size != sizeof(State)) {
    ::munmap(addr, sizeof(State));
    impl->s = nullptr;
    return fail(ErrorCode::kInvalidArgument, state_file.string() + " is not a simulated machine state (version " +
                                                 std::to_string(detail::kVersion) + ")");
  }
  {
    Lock lock(s);
    auto spec = spec_from_state(*s);
    if (!spec) return fail(spec.error());
    impl->spec = std::move(*spec);
    impl->powercap = fs::path(std::string(s->powercap_root, ::strnlen(s->powercap_root, sizeof s->powercap_root)));
  }
  impl->start_updater();
  return std::unique_ptr<Machine>(new Machine(std::move(impl)));
}

Result<std::unique_ptr<Machine>> Machine::attach_from_env() {
  const char* state = std::getenv("ERG_SIM_STATE");
  if (state == nullptr || *state == '\0') return fail(ErrorCode::kNotFound, "ERG_SIM_STATE is not set");
  return attach(state);
}

Result<void> Machine::export_env() const {
  auto lib = driver_library_path();
  if (!lib) return fail(lib.error());
  ::setenv("ERG_SIM_STATE", state_file().c_str(), 1);
  ::setenv("ERG_NVML_LIBRARY", lib->c_str(), 1);
  // The simulated libamd_smi.so is built and installed beside the simulated libnvidia-ml.so.1.
  ::setenv("ERG_AMDSMI_LIBRARY", (lib->parent_path() / "libamd_smi.so").c_str(), 1);
  ::setenv("ERG_POWERCAP_ROOT", powercap_root().c_str(), 1);
  ::setenv("ERG_HWMON_ROOT", hwmon_root().c_str(), 1);
  ::setenv("ERG_SIMULATE", impl_->spec.text.c_str(), 1);
  return ok();
}

Result<fs::path> Machine::driver_library_path() {
  const char* env = std::getenv("ERG_SIM_NVML_LIBRARY");
  if (env != nullptr && *env != '\0') return fs::path(env);
  std::error_code ec;
  if (auto d = exe_dir()) {
    fs::path installed = *d / ".." / "lib" / "erg" / "sim" / "libnvidia-ml.so.1";
    if (fs::exists(installed, ec)) return installed.lexically_normal();
  }
#ifdef ERG_SIM_BUILD_DRIVER_PATH
  if (fs::exists(ERG_SIM_BUILD_DRIVER_PATH, ec)) return fs::path(ERG_SIM_BUILD_DRIVER_PATH);
#endif
#ifdef ERG_SIM_INSTALL_DRIVER_PATH  // a program linked against an installed erg (find_package(erg))
  if (fs::exists(ERG_SIM_INSTALL_DRIVER_PATH, ec)) return fs::path(ERG_SIM_INSTALL_DRIVER_PATH);
#endif
  return fail(ErrorCode::kNotFound,
              "the simulated libnvidia-ml.so.1 was not found (set ERG_SIM_NVML_LIBRARY or build target erg_sim_nvml)");
}

const fs::path& Machine::dir() const { return impl_->dir; }
fs::path Machine::state_file() const { return impl_->dir / "state"; }
fs::path Machine::powercap_root() const { return impl_->powercap; }
fs::path Machine::hwmon_root() const { return impl_->powercap.parent_path() / "hwmon"; }
const MachineSpec& Machine::spec() const { return impl_->spec; }
unsigned Machine::gpu_count() const { return static_cast<unsigned>(impl_->spec.gpus.size()); }
unsigned Machine::cpu_count() const { return static_cast<unsigned>(impl_->spec.cpus.size()); }

void Machine::use_virtual_clock(bool on) {
  State* s = impl_->s;
  Lock lock(s);
  const std::int64_t now = detail::sim_now(*s);
  detail::advance_all(*s, now);
  if (on && !s->virtual_clock) {
    s->virtual_ns = now;
    s->virtual_clock = 1;
  } else if (!on && s->virtual_clock) {
    // Continue in real time from where the virtual clock stands (sim time stays monotonic).
    s->real_offset_ns = s->virtual_ns - detail::monotonic_ns();
    s->virtual_clock = 0;
    // This process's updater looked at the lease every 100 ms while the clock was virtual: it
    // takes the lease (when free or stale) and refreshes the files now.
    {
      std::lock_guard lk(impl_->stop_mutex);
      impl_->poke = true;
    }
    impl_->stop_cv.notify_all();
  }
}

Result<void> Machine::advance(std::chrono::nanoseconds d) {
  if (d.count() < 0) return fail(ErrorCode::kInvalidArgument, "cannot advance the clock backwards");
  {
    State* s = impl_->s;
    Lock lock(s);
    if (!s->virtual_clock)
      return fail(ErrorCode::kInvalidArgument, "advance() needs the virtual clock (use_virtual_clock(true))");
    s->virtual_ns += d.count();
    detail::advance_all(*s, s->virtual_ns);
  }
  return impl_->refresh_powercap(/*only_if_leaseholder=*/false);
}

std::chrono::nanoseconds Machine::now() const {
  State* s = impl_->s;
  Lock lock(s, Lock::kRead);
  return std::chrono::nanoseconds(detail::sim_now(*s));
}

std::chrono::nanoseconds Machine::wall_now() const {
  State* s = impl_->s;
  Lock lock(s, Lock::kRead);
  return std::chrono::nanoseconds(detail::sim_now(*s) + s->wall_offset_ns);
}

Result<void> Machine::set_utilization(unsigned gpu, double utilization) {
  if (!(utilization >= 0.0 && utilization <= 1.0))
    return fail(ErrorCode::kInvalidArgument, "utilization must be within 0..1");
  return set_load(gpu, Load{utilization, std::chrono::nanoseconds(0), 0.0, 0.2});
}

Result<void> Machine::set_load(unsigned gpu, const Load& load) {
  if (auto r = impl_->check_gpu(gpu); !r) return r;
  if (!valid_load(load))
    return fail(ErrorCode::kInvalidArgument,
                "a load needs utilization, ripple_depth and ripple_duty within 0..1 and a step ≥ 0");
  State* s = impl_->s;
  Lock lock(s);
  const std::int64_t now = detail::sim_now(*s);
  auto apply = [&](detail::GpuState& g, double utilization) {
    detail::advance_gpu(g, now);
    const double before = detail::mean_power_w(g);
    g.utilization = utilization;
    g.step_ns = load.step.count();
    g.ripple_depth = load.ripple_depth;
    g.ripple_duty = load.ripple_duty;
    g.load_origin_ns = now;
    detail::controls_changed(g, before);
  };
  auto& g = s->gpus[gpu];
  apply(g, load.utilization);
  // A dual-die card: one physics and one sensor, on the first die, busy with the mean of what
  // each die was asked (the second die's own model draws nothing).
  const Sku& sku = detail::sku_of(g);
  if (sku.secondary_die || !sku.second_die.empty()) {
    const unsigned first = sku.secondary_die ? gpu - 1 : gpu;
    g.die_utilization = load.utilization;
    apply(s->gpus[first], 0.5 * (s->gpus[first].die_utilization + s->gpus[first + 1].die_utilization));
  }
  return ok();
}

Result<void> Machine::set_thermal_drift(unsigned gpu, const ThermalDrift& drift) {
  if (auto r = impl_->check_gpu(gpu); !r) return r;
  if (!(drift.celsius_per_s >= 0.0) || !(drift.leakage_per_celsius >= 0.0) || !(drift.max_rise_celsius >= 0.0) ||
      drift.max_rise_celsius > 100.0 || !(drift.cooling_time_constant_s >= 0.0))
    return fail(ErrorCode::kInvalidArgument, "a thermal drift needs values ≥ 0 and a max_rise_celsius of at most 100");
  State* s = impl_->s;
  Lock lock(s);
  auto& g = s->gpus[gpu];
  if (g.faithful == 0) return fail(ErrorCode::kNotSupported, "thermal drift needs the faithful model");
  detail::advance_gpu(g, detail::sim_now(*s));
  g.drift_c_per_s = drift.celsius_per_s;
  g.drift_leak_per_c = drift.leakage_per_celsius;
  g.drift_max_c = drift.max_rise_celsius;
  g.drift_tau_s = drift.cooling_time_constant_s;
  if (drift.celsius_per_s == 0.0) g.drift_c = 0.0;
  return ok();
}

Result<std::chrono::nanoseconds> Machine::run_work(unsigned gpu, double work, double utilization) {
  if (!(utilization > 0.0 && utilization <= 1.0))
    return fail(ErrorCode::kInvalidArgument, "run_work needs a utilization within (0, 1]");
  return run_work(gpu, work, Load{utilization, std::chrono::nanoseconds(0), 0.0, 0.2});
}

Result<std::chrono::nanoseconds> Machine::run_work(unsigned gpu, double work, const Load& load) {
  if (auto r = impl_->check_gpu(gpu); !r) return fail(r.error());
  if (!(work >= 0.0)) return fail(ErrorCode::kInvalidArgument, "work must be ≥ 0");
  if (!(load.utilization > 0.0) || !valid_load(load) || load.ripple_depth >= 1.0)
    return fail(ErrorCode::kInvalidArgument, "run_work needs a load with utilization within (0, 1]");
  if (auto r = set_load(gpu, load); !r) return fail(r.error());
  State* s = impl_->s;
  std::int64_t start = 0;
  double target = 0.0;
  bool virtual_clock = false;
  {
    Lock lock(s, Lock::kRead);
    auto& g = s->gpus[gpu];
    start = g.last_ns;
    target = g.work + work;
    virtual_clock = s->virtual_clock != 0;
  }
  if (virtual_clock) {
    // Step the model until the work is done (power and rate change with the control loop and the
    // ripple, so the finish time is found by integration), then move the whole machine there.
    for (;;) {
      std::int64_t stopped = 0;
      {
        Lock lock(s, Lock::kRead);
        auto& g = s->gpus[gpu];
        stopped = detail::advance_gpu_until_work(g, g.last_ns + 1'000'000'000, target);
        if (g.work < target) continue;
      }
      if (auto r = advance(std::chrono::nanoseconds(std::max<std::int64_t>(0, stopped - impl_->s->virtual_ns))); !r)
        return fail(r.error());
      break;
    }
  } else {
    for (;;) {
      double left = 0.0, rate = 0.0;
      {
        Lock lock(s, Lock::kRead);
        auto& g = s->gpus[gpu];
        detail::advance_gpu(g, detail::sim_now(*s));
        left = target - g.work;
        rate = g.work_rate;
      }
      if (left <= 0.0) break;
      // Sleep until the predicted finish, at most 5 ms at a time (the limit may change meanwhile).
      const double secs = rate > 0.0 ? std::min(left / rate, 0.005) : 0.005;
      std::this_thread::sleep_for(std::chrono::duration<double>(std::max(secs, 50e-6)));
    }
  }
  std::int64_t end = 0;
  {
    Lock lock(s);
    auto& g = s->gpus[gpu];
    end = detail::sim_now(*s);
    detail::advance_gpu(g, end);
    const double before = detail::mean_power_w(g);
    g.utilization = 0.0;
    g.step_ns = 0;
    g.load_origin_ns = end;
    detail::controls_changed(g, before);
  }
  return std::chrono::nanoseconds(end - start);
}

Result<void> Machine::set_cpu_power(unsigned cpu, Watts package, Watts dram) {
  if (auto r = impl_->check_cpu(cpu); !r) return r;
  if (!(package.value() >= 0.0) || !(dram.value() >= 0.0))
    return fail(ErrorCode::kInvalidArgument, "CPU power must be ≥ 0 W");
  State* s = impl_->s;
  Lock lock(s);
  detail::advance_cpus(*s, detail::sim_now(*s));
  auto& c = s->cpus[cpu];
  c.package.power_w = package.value();
  c.dram_domain.power_w = c.dram ? dram.value() : 0.0;
  if (!s->faithful) {
    // Ideal: exact from this instant (faithful: from the next physics step, like the noise).
    c.package.step_power_w = c.package.power_w;
    c.dram_domain.step_power_w = c.dram_domain.power_w;
    c.core_domain.step_power_w = 0.6 * c.package.power_w;
    double platform = s->psys_extra_w;
    for (unsigned i = 0; i < s->cpu_count; ++i)
      platform += s->cpus[i].package.step_power_w + (s->cpus[i].dram ? s->cpus[i].dram_domain.step_power_w : 0.0);
    s->psys_domain.step_power_w = platform;
  }
  return ok();
}

const ModelSpec& Machine::model() const { return impl_->spec.model; }

Result<Joules> Machine::true_energy(unsigned gpu) {
  if (auto r = impl_->check_gpu(gpu); !r) return fail(r.error());
  State* s = impl_->s;
  Lock lock(s, Lock::kRead);
  auto& g = s->gpus[gpu];
  detail::advance_gpu(g, detail::sim_now(*s));
  return Joules(g.energy_j);
}

Result<Joules> Machine::sensor_energy_at(unsigned gpu, std::chrono::nanoseconds t) {
  if (auto r = impl_->check_gpu(gpu); !r) return fail(r.error());
  State* s = impl_->s;
  Lock lock(s, Lock::kRead);
  auto& g = s->gpus[gpu];
  if (!detail::sku_of(g).has_energy_counter)
    return fail(ErrorCode::kNotFound, "simulated GPU " + std::to_string(gpu) + " has no energy counter");
  detail::advance_gpu(g, detail::sim_now(*s));
  double j = 0.0;
  if (detail::sensor_energy_at(g, t.count(), j)) return Joules(j);
  if (t.count() >= g.energy_ticks.last_ns)
    return fail(ErrorCode::kUnavailable, "the sensor has not updated after that time yet");
  return fail(ErrorCode::kNotFound, "that time is older than the sensor updates kept");
}

Result<SensorInfo> Machine::sensor_info(unsigned gpu) {
  if (auto r = impl_->check_gpu(gpu); !r) return fail(r.error());
  State* s = impl_->s;
  Lock lock(s, Lock::kRead);
  auto& g = s->gpus[gpu];
  detail::advance_gpu(g, detail::sim_now(*s));
  SensorInfo info;
  info.energy_period = std::chrono::nanoseconds(g.energy_ticks.period_ns);
  info.power_period = std::chrono::nanoseconds(g.shared_ticks ? g.energy_ticks.period_ns : g.power_ticks.period_ns);
  info.jitter = std::chrono::nanoseconds(static_cast<std::int64_t>(g.energy_ticks.jitter_ns));
  info.power_jitter = std::chrono::nanoseconds(
      static_cast<std::int64_t>(g.shared_ticks ? g.energy_ticks.jitter_ns : g.power_ticks.jitter_ns));
  info.gain = g.gain;
  info.partial_sampling = g.partial_sampling != 0;
  info.sampled_window = std::chrono::nanoseconds(g.partial_sampling ? g.sample_window_ns : 0);
  info.last_update = std::chrono::nanoseconds(g.energy_ticks.last_ns);
  info.next_update = std::chrono::nanoseconds(g.energy_ticks.next_ns);
  info.utilization_period = std::chrono::nanoseconds(g.procs.ticks.period_ns);
  info.utilization_jitter = std::chrono::nanoseconds(static_cast<std::int64_t>(g.procs.ticks.jitter_ns));
  const auto& et = g.energy_ticks;
  info.schedule = static_cast<Schedule>(et.schedule);
  if (et.schedule == detail::kSchedulePhaseJumps) info.phase_jump_every = std::chrono::nanoseconds(et.every_ns);
  if (et.schedule == detail::kScheduleSkips) info.skip_share = et.skip_share;
  if (et.schedule == detail::kSchedulePeriodChange) {
    info.period_change_at = std::chrono::nanoseconds(et.event_ns);
    info.period_after = std::chrono::nanoseconds(et.period_after_ns);
  }
  info.publish_delay = std::chrono::nanoseconds(g.publish_delay_ns);
  info.stamps = static_cast<StampMode>(detail::nvml_stamp_mode(*s, g));
  info.stamp_unit = std::chrono::microseconds(g.stamp_unit_us);
  info.stamp_offset = std::chrono::nanoseconds(g.stamp_offset_ns);
  info.stamp_drift = g.stamp_rate;
  info.increment = static_cast<Increment>(g.increment);
  info.nominal_period = std::chrono::nanoseconds(g.nominal_period_ns);
  info.average = static_cast<AverageMode>(g.average);
  return info;
}

Result<Joules> Machine::physical_energy_at(unsigned gpu, std::chrono::nanoseconds t) {
  if (auto r = impl_->check_gpu(gpu); !r) return fail(r.error());
  State* s = impl_->s;
  Lock lock(s, Lock::kRead);
  auto& g = s->gpus[gpu];
  detail::advance_gpu(g, detail::sim_now(*s));
  if (t.count() > g.last_ns) return fail(ErrorCode::kUnavailable, "the simulated GPU has not reached that time yet");
  double j = 0.0;
  if (detail::physical_energy_at(g, t.count(), j)) return Joules(j);
  return fail(ErrorCode::kNotFound, "that time is older than the physical energy kept (about the last 20 s)");
}

namespace {

/// Applies the process table's demand as the GPU's load (after a change of the table).
void apply_process_load(detail::GpuState& g, std::int64_t now) {
  const double before = detail::mean_power_w(g);
  g.utilization = detail::process_activity(g);
  g.step_ns = 0;
  g.ripple_depth = 0.0;
  g.load_origin_ns = now;
  detail::controls_changed(g, before);
}

detail::ProcSlot* find_process(detail::GpuState& g, std::uint32_t pid) {
  for (auto& p : g.procs.slots)
    if (p.pid != 0 && static_cast<std::uint32_t>(p.pid) == pid) return &p;
  return nullptr;
}

}  // namespace

Result<void> Machine::set_process(unsigned gpu, const SimProcess& process) {
  if (auto r = impl_->check_gpu(gpu); !r) return r;
  if (process.pid == 0 || process.pid > 0x7fffffffu)
    return fail(ErrorCode::kInvalidArgument, "a process needs a pid > 0");
  if (!(process.share >= 0.0 && process.share <= 1.0))
    return fail(ErrorCode::kInvalidArgument, "a process's share must be within 0..1");
  if (!(process.intensity > 0.0 && process.intensity <= 1.0))
    return fail(ErrorCode::kInvalidArgument, "a process's intensity must be within (0, 1]");
  State* s = impl_->s;
  Lock lock(s);
  const std::int64_t now = detail::sim_now(*s);
  auto& g = s->gpus[gpu];
  detail::advance_gpu(g, now);
  detail::reap_exited(g);
  detail::ProcSlot* slot = find_process(g, process.pid);
  if (slot == nullptr) {
    for (auto& p : g.procs.slots)
      if (p.pid == 0) {
        slot = &p;
        *slot = detail::ProcSlot{};
        break;
      }
  }
  if (slot == nullptr)
    return fail(ErrorCode::kUnavailable,
                "GPU " + std::to_string(gpu) + " already runs " + std::to_string(detail::kMaxProcs) + " processes");
  slot->pid = static_cast<std::int32_t>(process.pid);
  slot->share = process.share;
  slot->intensity = process.intensity;
  slot->used_memory = process.used_memory_bytes;
  slot->real = process.real ? 1 : 0;
  slot->gpu_instance = process.gpu_instance ? static_cast<std::int32_t>(*process.gpu_instance) : -1;
  apply_process_load(g, now);
  return ok();
}

Result<void> Machine::set_process_share(unsigned gpu, std::uint32_t pid, double share) {
  if (auto r = impl_->check_gpu(gpu); !r) return r;
  if (!(share >= 0.0 && share <= 1.0))
    return fail(ErrorCode::kInvalidArgument, "a process's share must be within 0..1");
  State* s = impl_->s;
  Lock lock(s);
  const std::int64_t now = detail::sim_now(*s);
  auto& g = s->gpus[gpu];
  detail::advance_gpu(g, now);
  detail::ProcSlot* slot = find_process(g, pid);
  if (slot == nullptr)
    return fail(ErrorCode::kNotFound, "no process " + std::to_string(pid) + " on GPU " + std::to_string(gpu));
  slot->share = share;
  apply_process_load(g, now);
  return ok();
}

Result<void> Machine::remove_process(unsigned gpu, std::uint32_t pid) {
  if (auto r = impl_->check_gpu(gpu); !r) return r;
  State* s = impl_->s;
  Lock lock(s);
  const std::int64_t now = detail::sim_now(*s);
  auto& g = s->gpus[gpu];
  detail::advance_gpu(g, now);
  detail::ProcSlot* slot = find_process(g, pid);
  if (slot == nullptr)
    return fail(ErrorCode::kNotFound, "no process " + std::to_string(pid) + " on GPU " + std::to_string(gpu));
  *slot = detail::ProcSlot{};
  apply_process_load(g, now);
  return ok();
}

Result<std::vector<SimProcess>> Machine::processes(unsigned gpu) {
  if (auto r = impl_->check_gpu(gpu); !r) return fail(r.error());
  State* s = impl_->s;
  Lock lock(s);
  const std::int64_t now = detail::sim_now(*s);
  auto& g = s->gpus[gpu];
  detail::advance_gpu(g, now);
  if (detail::reap_exited(g)) apply_process_load(g, now);
  std::vector<SimProcess> out;
  for (const auto& p : g.procs.slots) {
    if (p.pid == 0) continue;
    SimProcess sp{static_cast<std::uint32_t>(p.pid), p.share, p.used_memory, p.real != 0, std::nullopt, p.intensity};
    if (p.gpu_instance >= 0) sp.gpu_instance = static_cast<unsigned>(p.gpu_instance);
    out.push_back(sp);
  }
  return out;
}

Result<ProcessTruth> Machine::process_truth(unsigned gpu) {
  if (auto r = impl_->check_gpu(gpu); !r) return fail(r.error());
  State* s = impl_->s;
  Lock lock(s, Lock::kRead);
  auto& g = s->gpus[gpu];
  detail::advance_gpu(g, detail::sim_now(*s));
  ProcessTruth t;
  t.idle = Joules(g.procs.idle_j);
  t.unattributed = Joules(g.procs.unattributed_j);
  for (const auto& p : g.procs.slots)
    if (p.pid != 0)
      t.processes.push_back({static_cast<std::uint32_t>(p.pid), Joules(p.energy_j),
                             std::chrono::nanoseconds(static_cast<std::int64_t>(p.busy_s * 1e9))});
  return t;
}

Result<ProcessTruth> Machine::process_truth_at(unsigned gpu, std::chrono::nanoseconds t) {
  if (auto r = impl_->check_gpu(gpu); !r) return fail(r.error());
  State* s = impl_->s;
  Lock lock(s, Lock::kRead);
  auto& g = s->gpus[gpu];
  detail::advance_gpu(g, detail::sim_now(*s));
  const auto& tab = g.procs;
  const std::uint64_t n = tab.truth_count;
  for (std::uint64_t k = n > detail::kTruthRing ? n - detail::kTruthRing : 0; k < n; ++k) {
    const auto i = static_cast<std::size_t>(k % detail::kTruthRing);
    if (std::llabs(tab.truth_t[i] - t.count()) > 1'000'000) continue;
    ProcessTruth out;
    out.idle = Joules(tab.truth_idle[i]);
    out.unattributed = Joules(tab.truth_unattributed[i]);
    for (unsigned j = 0; j < detail::kMaxProcs; ++j)
      if (tab.truth_pid[i][j] != 0)
        out.processes.push_back({static_cast<std::uint32_t>(tab.truth_pid[i][j]), Joules(tab.truth_energy[i][j]),
                                 std::chrono::nanoseconds(static_cast<std::int64_t>(tab.truth_busy[i][j] * 1e9))});
    return out;
  }
  return fail(ErrorCode::kNotFound, "no energy-counter update of GPU " + std::to_string(gpu) +
                                        " within 1 ms of that time among the latest kept");
}

Result<std::vector<SimUtilSample>> Machine::utilization_samples(unsigned gpu) {
  if (auto r = impl_->check_gpu(gpu); !r) return fail(r.error());
  State* s = impl_->s;
  Lock lock(s, Lock::kRead);
  auto& g = s->gpus[gpu];
  detail::advance_gpu(g, detail::sim_now(*s));
  std::vector<SimUtilSample> out;
  const std::uint64_t n = g.procs.ring_count;
  for (std::uint64_t k = n > detail::kUtilRing ? n - detail::kUtilRing : 0; k < n; ++k) {
    const auto& u = g.procs.ring[k % detail::kUtilRing];
    out.push_back({static_cast<std::uint32_t>(u.pid), std::chrono::nanoseconds(u.time_ns), u.sm});
  }
  return out;
}

Result<void> Machine::set_utilization_period(unsigned gpu, std::chrono::nanoseconds period) {
  if (auto r = impl_->check_gpu(gpu); !r) return r;
  if (period < std::chrono::milliseconds(10) || period > std::chrono::seconds(10))
    return fail(ErrorCode::kInvalidArgument, "the utilization sample period must be within 10 ms .. 10 s");
  State* s = impl_->s;
  Lock lock(s);
  const std::int64_t now = detail::sim_now(*s);
  auto& g = s->gpus[gpu];
  detail::advance_gpu(g, now);
  detail::set_utilization_period(g, period.count(), now);
  return ok();
}

Result<void> Machine::set_process_info_stride(unsigned bytes) {
  if (bytes != 24 && bytes != 32)
    return fail(ErrorCode::kInvalidArgument, "the process info stride is 24 or 32 bytes, not " + std::to_string(bytes));
  State* s = impl_->s;
  Lock lock(s);
  s->process_info_stride = static_cast<std::int32_t>(bytes);
  return ok();
}

Result<void> Machine::set_mig_mode(unsigned gpu, bool enabled) {
  if (auto r = impl_->check_gpu(gpu); !r) return r;
  State* s = impl_->s;
  Lock lock(s);
  const Sku& sku = detail::sku_of(s->gpus[gpu]);
  if (sku.vendor != Vendor::kNvidia || sku.arch < 7)
    return fail(ErrorCode::kNotSupported, "MIG needs an NVIDIA GPU of Ampere or newer; GPU " + std::to_string(gpu) +
                                              " is " + std::string(sku.name));
  s->gpus[gpu].procs.mig = enabled ? 1 : 0;
  return ok();
}

Result<Joules> Machine::true_cpu_energy(unsigned cpu) {
  if (auto r = impl_->check_cpu(cpu); !r) return fail(r.error());
  State* s = impl_->s;
  Lock lock(s, Lock::kRead);
  detail::advance_cpus(*s, detail::sim_now(*s));
  return Joules(s->cpus[cpu].package.energy_j);
}

Result<Joules> Machine::true_dram_energy(unsigned cpu) {
  if (auto r = impl_->check_cpu(cpu); !r) return fail(r.error());
  State* s = impl_->s;
  Lock lock(s, Lock::kRead);
  if (!s->cpus[cpu].dram)
    return fail(ErrorCode::kNotSupported, "simulated CPU " + std::to_string(cpu) + " has no DRAM domain");
  detail::advance_cpus(*s, detail::sim_now(*s));
  return Joules(s->cpus[cpu].dram_domain.energy_j);
}

Result<std::uint64_t> Machine::rapl_energy_uj(unsigned cpu, bool dram) {
  auto r = rapl_reading(cpu, dram);
  if (!r) return fail(r.error());
  return r->uj;
}

Result<Machine::RaplReading> Machine::rapl_reading(unsigned cpu, bool dram) {
  if (auto r = impl_->check_cpu(cpu); !r) return fail(r.error());
  State* s = impl_->s;
  Lock lock(s, Lock::kRead);
  if (dram && !s->cpus[cpu].dram)
    return fail(ErrorCode::kNotSupported, "simulated CPU " + std::to_string(cpu) + " has no DRAM domain");
  const std::int64_t now = detail::sim_now(*s);
  detail::advance_cpus(*s, now);
  return RaplReading{std::chrono::nanoseconds(now),
                     detail::rapl_value_uj(*s, dram ? s->cpus[cpu].dram_domain : s->cpus[cpu].package)};
}

Result<std::chrono::nanoseconds> Machine::powercap_as_of(unsigned cpu, bool dram, std::uint64_t value_uj) {
  if (auto r = impl_->check_cpu(cpu); !r) return fail(r.error());
  State* s = impl_->s;
  const auto index = energy_file_index(*s, cpu, dram);  // the layout is fixed at creation
  if (!index) return fail(ErrorCode::kNotSupported, "simulated CPU " + std::to_string(cpu) + " has no DRAM domain");
  if (*index >= detail::kMaxEnergyFiles) return fail(ErrorCode::kNotFound, "no energy file for that domain");
  // Lock-free against the writer: each entry is a seqlock. The latest record of the value wins
  // (a value unchanged over several refreshes is the counter's as of the last of them).
  std::optional<std::int64_t> found;
  for (unsigned k = 0; k < detail::kAsOfRing; ++k) {
    auto& e = s->powercap_as_of[*index][k];
    std::atomic_ref seq(e.seq);
    for (int attempt = 0; attempt < 1000; ++attempt) {
      const std::uint64_t a = seq.load(std::memory_order_acquire);
      if (a % 2 != 0) continue;  // being written
      const std::int64_t at = std::atomic_ref(e.as_of_ns).load(std::memory_order_acquire);
      const std::uint64_t v = std::atomic_ref(e.value_uj).load(std::memory_order_acquire);
      if (seq.load(std::memory_order_acquire) != a) continue;
      if (a != 0 && v == value_uj && (!found || at > *found)) found = at;
      break;
    }
  }
  if (!found)
    return fail(ErrorCode::kNotFound, "value " + std::to_string(value_uj) + " is not among the last " +
                                          std::to_string(detail::kAsOfRing) + " recorded for that energy file");
  return std::chrono::nanoseconds(*found);
}

std::vector<Machine::PowercapZone> Machine::powercap_zones() const {
  State* s = impl_->s;
  Lock lock(s, Lock::kRead);
  std::vector<PowercapZone> zones;
  for (const auto& f : energy_files(*s)) zones.push_back({f.zone, f.sub, zone_name(f), f.domain(*s, f.cpu)->range_uj});
  return zones;
}

Result<std::uint64_t> Machine::powercap_energy_uj(std::size_t index) {
  State* s = impl_->s;
  Lock lock(s, Lock::kRead);
  const auto files = energy_files(*s);
  if (index >= files.size())
    return fail(ErrorCode::kNotFound, "the powercap tree has " + std::to_string(files.size()) + " energy zones, not " +
                                          std::to_string(index + 1));
  detail::advance_cpus(*s, detail::sim_now(*s));
  return detail::rapl_value_uj(*s, *files[index].domain(*s, files[index].cpu));
}

Result<GpuStatus> Machine::status(unsigned gpu) {
  if (auto r = impl_->check_gpu(gpu); !r) return fail(r.error());
  State* s = impl_->s;
  Lock lock(s, Lock::kRead);
  auto& g = s->gpus[gpu];
  detail::advance_gpu(g, detail::sim_now(*s));
  GpuStatus st;
  st.utilization = g.utilization;
  st.power_limit = MilliWatts(g.limit_mw);
  st.effective_sm_clock = Megahertz(detail::reported_clock_mhz(g));
  st.target_sm_clock = Megahertz(g.target_clock_mhz);
  st.power = Watts(g.power_w);
  st.mean_power = Watts(detail::mean_power_w(g));
  st.persistence = g.persistence != 0;
  st.lost = g.lost != 0;
  st.work_done = g.work;
  st.drift_celsius = g.drift_c;
  st.locked_sm_min = Megahertz(g.locked_min_mhz);
  st.locked_sm_max = Megahertz(g.locked_max_mhz);
  st.locked_mem_min = Megahertz(g.mem_locked_min_mhz);
  st.locked_mem_max = Megahertz(g.mem_locked_max_mhz);
  return st;
}

Result<void> Machine::inject_error(unsigned gpu, SimCall call, int nvml_return, int count) {
  if (auto r = impl_->check_gpu(gpu); !r) return r;
  if (static_cast<int>(call) < 0 || call >= SimCall::kCount) return fail(ErrorCode::kInvalidArgument, "bad SimCall");
  State* s = impl_->s;
  Lock lock(s);
  auto& g = s->gpus[gpu];
  detail::FaultSlot* slot = nullptr;
  for (auto& f : g.faults)
    if (f.call == static_cast<int>(call)) slot = &f;
  if (slot == nullptr)
    for (auto& f : g.faults)
      if (f.call < 0 || f.remaining == 0) {
        slot = &f;
        break;
      }
  if (slot == nullptr) return fail(ErrorCode::kInternal, "too many faults injected on one GPU (max 8)");
  slot->call = static_cast<int>(call);
  slot->nvml_return = nvml_return;
  slot->remaining = count;
  return ok();
}

Result<void> Machine::clear_faults(unsigned gpu) {
  if (auto r = impl_->check_gpu(gpu); !r) return r;
  State* s = impl_->s;
  Lock lock(s);
  for (auto& f : s->gpus[gpu].faults) f = detail::FaultSlot{};
  return ok();
}

Result<void> Machine::set_lost(unsigned gpu, bool lost) {
  if (auto r = impl_->check_gpu(gpu); !r) return r;
  State* s = impl_->s;
  Lock lock(s);
  s->gpus[gpu].lost = lost ? 1 : 0;
  return ok();
}

Result<void> Machine::reset_energy_counter(unsigned gpu) {
  if (auto r = impl_->check_gpu(gpu); !r) return r;
  State* s = impl_->s;
  Lock lock(s);
  auto& g = s->gpus[gpu];
  detail::advance_gpu(g, detail::sim_now(*s));
  // The counter reads 0 now; the next update adds that period's energy.
  g.counter_offset_mj = g.counter_start_mj + detail::visible_sensor_energy_j(g) * 1000.0;
  return ok();
}

Result<void> Machine::energy_counter_backwards(unsigned gpu, MilliJoules amount) {
  if (auto r = impl_->check_gpu(gpu); !r) return r;
  if (!(amount.value() >= 0.0)) return fail(ErrorCode::kInvalidArgument, "amount must be ≥ 0");
  State* s = impl_->s;
  Lock lock(s);
  s->gpus[gpu].counter_offset_mj += amount.value();
  return ok();
}

void Machine::set_privilege(Privilege p) {
  State* s = impl_->s;
  Lock lock(s);
  s->privilege = static_cast<std::int32_t>(p);
}

Result<std::uint64_t> Machine::call_count(unsigned gpu, SimCall call) {
  if (auto r = impl_->check_gpu(gpu); !r) return fail(r.error());
  if (static_cast<int>(call) < 0 || call >= SimCall::kCount) return fail(ErrorCode::kInvalidArgument, "bad SimCall");
  State* s = impl_->s;
  // The driver counts lock-free reads without the lock: atomic loads, no lock needed.
  auto& g = s->gpus[gpu];
  auto count = [&](unsigned i) { return std::atomic_ref(g.calls[i]).load(std::memory_order_relaxed); };
  if (call == SimCall::kAny) {
    std::uint64_t n = 0;
    for (unsigned i = 1; i < static_cast<unsigned>(SimCall::kCount); ++i) n += count(i);
    return n;
  }
  return count(static_cast<unsigned>(call));
}

Result<std::uint64_t> Machine::lock_free_reads(unsigned gpu) {
  if (auto r = impl_->check_gpu(gpu); !r) return fail(r.error());
  auto& g = impl_->s->gpus[gpu];
  const std::uint64_t locked = std::atomic_ref(g.locked_calls).load(std::memory_order_relaxed);
  std::uint64_t all = 0;
  for (unsigned i = 1; i < static_cast<unsigned>(SimCall::kCount); ++i)
    all += std::atomic_ref(g.calls[i]).load(std::memory_order_relaxed);
  return all > locked ? all - locked : 0;
}

std::vector<PowerLimitCall> Machine::power_limit_log(std::uint64_t* dropped) const {
  State* s = impl_->s;
  Lock lock(s, Lock::kRead);
  const std::uint64_t n = s->limit_log_count;
  const std::uint64_t first = n > detail::kLimitLogSize ? n - detail::kLimitLogSize : 0;
  if (dropped != nullptr) *dropped = first;
  std::vector<PowerLimitCall> out;
  out.reserve(static_cast<std::size_t>(n - first));
  for (std::uint64_t k = first; k < n; ++k) {
    const auto& e = s->limit_log[k % detail::kLimitLogSize];
    out.push_back(PowerLimitCall{e.gpu, MilliWatts(e.limit_mw), std::chrono::nanoseconds(e.time_ns), e.nvml_return});
  }
  return out;
}

void Machine::clear_power_limit_log() {
  State* s = impl_->s;
  Lock lock(s, Lock::kRead);
  s->limit_log_count = 0;
}

}  // namespace erg::sim

namespace erg::sim {

void MachineClock::sleep_until(std::chrono::nanoseconds t) const {
  auto& m = const_cast<Machine&>(machine_);
  const auto now = m.now();
  if (now >= t) return;
  if (m.advance(t - now)) return;  // virtual: time moves when told
  Clock::sleep_until(t);           // real: wait
}

}  // namespace erg::sim

namespace erg::sim {

namespace {
int rail_index(const State& s, const std::string& label) {
  for (unsigned i = 0; i < s.jetson.rail_count; ++i)
    if (label == s.jetson.rails[i].label) return static_cast<int>(i);
  return -1;
}
Error no_rail(const std::string& label) {
  return Error{ErrorCode::kNotFound, "the simulated machine has no Jetson rail '" + label + "'"};
}
}  // namespace

std::vector<std::string> Machine::rail_labels() const {
  std::vector<std::string> out;
  Lock lock(impl_->s, Lock::kRead);
  for (unsigned i = 0; i < impl_->s->jetson.rail_count; ++i) out.emplace_back(impl_->s->jetson.rails[i].label);
  return out;
}

Result<void> Machine::set_rail_power(const std::string& label, Watts mean) {
  if (!(mean.value() >= 0.0)) return fail(ErrorCode::kInvalidArgument, "rail power must be ≥ 0 W");
  {
    State* s = impl_->s;
    Lock lock(s);
    const int i = rail_index(*s, label);
    if (i < 0) return fail(no_rail(label));
    detail::advance_jetson(*s, detail::sim_now(*s));
    s->jetson.rails[i].power_w = mean.value();
  }
  return ok();
}

Result<Joules> Machine::true_rail_energy(const std::string& label) {
  State* s = impl_->s;
  Lock lock(s, Lock::kRead);
  const int i = rail_index(*s, label);
  if (i < 0) return fail(no_rail(label));
  detail::advance_jetson(*s, detail::sim_now(*s));
  return Joules(s->jetson.rails[i].energy_j);
}

Result<std::uint64_t> Machine::rail_updates(const std::string& label) {
  State* s = impl_->s;
  Lock lock(s, Lock::kRead);
  const int i = rail_index(*s, label);
  if (i < 0) return fail(no_rail(label));
  detail::advance_jetson(*s, detail::sim_now(*s));
  return s->jetson.rails[i].updates;
}

}  // namespace erg::sim
