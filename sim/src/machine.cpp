#include "erg/sim/machine.hpp"

#include <fcntl.h>
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
#include <thread>

#include "erg/sim/powercap_tree.hpp"
#include "state.hpp"

namespace erg::sim {
namespace fs = std::filesystem;
using detail::Lock;
using detail::State;

namespace {

// Real-clock mode: the lease holder rewrites the powercap files every 10 ms. Real RAPL counters
// update about every 1 ms (hardware.md §4.3); 10 ms keeps a 2-core CI machine idle enough while
// still being finer than any window a test measures.
constexpr std::chrono::milliseconds kPowercapQuantum{10};
// A lease holder that has not refreshed for this long is presumed stuck or gone.
constexpr std::int64_t kLeaseStaleNs = 200'000'000;
// Share of package energy attributed to the `core` sub-zone.
constexpr double kCoreShare = 0.6;

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

/// GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx, deterministic per position.
std::string default_uuid(unsigned index) {
  const std::uint64_t a = splitmix64(0x6572672d73696dULL + index);  // "erg-sim"
  const std::uint64_t b = splitmix64(a ^ (0x1000ULL + index));
  char buf[64];
  std::snprintf(buf, sizeof buf, "GPU-%08x-%04x-%04x-%04x-%012llx", static_cast<unsigned>(a >> 32),
                static_cast<unsigned>((a >> 16) & 0xffff), static_cast<unsigned>(a & 0xffff),
                static_cast<unsigned>(b >> 48), static_cast<unsigned long long>(b & 0xffffffffffffULL));
  return buf;
}

bool pid_alive(int pid) { return pid > 0 && (::kill(pid, 0) == 0 || errno == EPERM); }

/// Energy values of the powercap tree, taken under the lock and written after it.
struct PowercapSnapshot {
  struct Cpu {
    bool dram;
    std::uint64_t range, package_uj, core_uj, dram_uj;
  };
  std::vector<Cpu> cpus;
  bool psys = false;
  std::uint64_t psys_range = 0, psys_uj = 0;
};

std::uint64_t wrap_uj(double joules, std::uint64_t range) {
  const double uj = std::floor(joules * 1e6);
  if (uj <= 0) return 0;
  return static_cast<std::uint64_t>(std::fmod(uj, static_cast<double>(range)));
}

PowercapSnapshot snapshot(const State& s) {
  PowercapSnapshot snap;
  for (unsigned c = 0; c < s.cpu_count; ++c) {
    const auto& cpu = s.cpus[c];
    const std::uint64_t r = cpu.max_energy_range_uj;
    snap.cpus.push_back(
        {cpu.dram != 0, r, wrap_uj(cpu.package_j, r), wrap_uj(cpu.package_j * kCoreShare, r), wrap_uj(cpu.dram_j, r)});
  }
  snap.psys = s.psys != 0;
  snap.psys_range = CpuSpec{}.max_energy_range_uj;  // psys has its own (default) counter range
  snap.psys_uj = wrap_uj(s.psys_j, snap.psys_range);
  return snap;
}

int core_sub(bool dram) { return dram ? 1 : 0; }

Result<void> write_snapshot(const PowercapTree& tree, const PowercapSnapshot& snap) {
  PowercapTree t = tree;
  for (unsigned c = 0; c < snap.cpus.size(); ++c) {
    const auto& cpu = snap.cpus[c];
    const int zone = static_cast<int>(c);
    if (auto r = t.set_energy_uj(zone, cpu.package_uj); !r) return r;
    if (cpu.dram)
      if (auto r = t.set_energy_uj(zone, cpu.dram_uj, 0); !r) return r;
    if (auto r = t.set_energy_uj(zone, cpu.core_uj, core_sub(cpu.dram)); !r) return r;
  }
  if (snap.psys) return t.set_energy_uj(static_cast<int>(snap.cpus.size()), snap.psys_uj);
  return ok();
}

Result<MachineSpec> spec_from_state(const State& s) {
  MachineSpec spec;
  spec.text = std::string(s.spec_text, ::strnlen(s.spec_text, sizeof s.spec_text));
  for (unsigned i = 0; i < s.gpu_count; ++i) {
    const auto& g = s.gpus[i];
    if (g.sku_index < 0 || static_cast<std::size_t>(g.sku_index) >= all_skus().size())
      return fail(ErrorCode::kIo, "simulated machine state is corrupt (GPU " + std::to_string(i) + ")");
    spec.gpus.push_back(GpuSpec{std::string(detail::sku_of(g).key), std::string(g.uuid)});
  }
  for (unsigned c = 0; c < s.cpu_count; ++c) {
    CpuSpec cs;
    cs.dram = s.cpus[c].dram != 0;
    cs.idle_package_w = s.cpus[c].idle_package_w;
    cs.idle_dram_w = s.cpus[c].idle_dram_w;
    cs.max_energy_range_uj = s.cpus[c].max_energy_range_uj;
    spec.cpus.push_back(cs);
  }
  spec.psys = s.psys != 0;
  return spec;
}

Result<fs::path> exe_dir() {
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return fail(ErrorCode::kNotFound, "cannot resolve /proc/self/exe");
  return exe.parent_path();
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
  std::thread updater;
  std::mutex stop_mutex;
  std::condition_variable stop_cv;
  bool stop = false;

  ~Impl() {
    if (updater.joinable()) {
      {
        std::lock_guard lk(stop_mutex);
        stop = true;
      }
      stop_cv.notify_all();
      updater.join();
    }
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

  /// Writes the powercap files from the current state (virtual clock, or lease holder).
  Result<void> refresh_powercap(bool only_if_leaseholder) {
    if (spec.cpus.empty() && !spec.psys) return ok();
    std::lock_guard wl(write_mutex);
    PowercapSnapshot snap;
    {
      Lock lock(s, Lock::kRead);  // CPU state and the lease only: GPU readings stay valid
      const std::int64_t now = detail::sim_now(*s);
      if (only_if_leaseholder) {
        if (s->virtual_clock) return ok();  // advance() writes synchronously
        const int me = ::getpid();
        const std::int64_t mono = detail::monotonic_ns();
        const bool stale = mono - s->lease_heartbeat_ns > kLeaseStaleNs;
        if (s->lease_pid != me && s->lease_pid != 0 && pid_alive(s->lease_pid) && !stale) return ok();
        s->lease_pid = me;
        s->lease_heartbeat_ns = mono;
      }
      detail::advance_cpus(*s, now);
      snap = snapshot(*s);
    }
    return write_snapshot(PowercapTree(powercap), snap);
  }

  void start_updater() {
    if (spec.cpus.empty() && !spec.psys) return;
    if (::access(powercap.c_str(), W_OK) != 0) return;  // e.g. another user's simulation: read only
    updater = std::thread([this] {
      std::unique_lock lk(stop_mutex);
      while (!stop) {
        lk.unlock();
        (void)refresh_powercap(/*only_if_leaseholder=*/true);
        lk.lock();
        stop_cv.wait_for(lk, kPowercapQuantum, [this] { return stop; });
      }
    });
  }
};

Machine::Machine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Machine::~Machine() = default;

Result<std::unique_ptr<Machine>> Machine::create(const MachineSpec& spec, const fs::path& dir, bool keep_dir) {
  if (spec.gpus.size() > detail::kMaxGpus || spec.cpus.size() > detail::kMaxCpus)
    return fail(ErrorCode::kInvalidArgument, "a simulated machine has at most 16 GPUs and 8 CPU packages");
  std::vector<const Sku*> skus;
  for (const auto& g : spec.gpus) {
    const Sku* sku = lookup_sku(g.sku);
    if (sku == nullptr) return fail(ErrorCode::kInvalidArgument, "unknown simulated GPU '" + g.sku + "'");
    skus.push_back(sku);
  }
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return fail(ErrorCode::kIo, "cannot create " + dir.string() + ": " + ec.message());
  // Readable and traversable by other users, so an unprivileged process can attach.
  ::chmod(dir.c_str(), 0755);

  auto impl = std::make_unique<Impl>();
  impl->dir = dir;
  impl->powercap = dir / "powercap";
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

  timespec wall{};
  ::clock_gettime(CLOCK_REALTIME, &wall);
  const std::int64_t now = detail::monotonic_ns();
  s->wall_offset_ns = static_cast<std::int64_t>(wall.tv_sec) * 1'000'000'000LL + wall.tv_nsec - now;
  s->privilege = static_cast<std::int32_t>(Privilege::kRootOnly);
  s->gpu_count = static_cast<std::uint32_t>(spec.gpus.size());
  s->cpu_count = static_cast<std::uint32_t>(spec.cpus.size());
  s->psys = spec.psys ? 1 : 0;
  s->cpu_last_ns = now;
  std::memcpy(s->spec_text, text.data(), text.size());
  const std::string pc = impl->powercap.string();
  std::memcpy(s->powercap_root, pc.data(), pc.size());
  for (unsigned i = 0; i < s->gpu_count; ++i) {
    auto& g = s->gpus[i];
    const int index = static_cast<int>(skus[i] - all_skus().data());
    detail::init_gpu(g, index, now);
    std::string uuid = spec.gpus[i].uuid.value_or(default_uuid(i));
    if (uuid.size() >= sizeof g.uuid) uuid.resize(sizeof g.uuid - 1);
    std::memcpy(g.uuid, uuid.data(), uuid.size());
    impl->spec.gpus[i].uuid = uuid;
    impl->spec.gpus[i].sku = std::string(skus[i]->key);
  }
  for (unsigned c = 0; c < s->cpu_count; ++c) {
    auto& cpu = s->cpus[c];
    const auto& cs = spec.cpus[c];
    cpu.dram = cs.dram ? 1 : 0;
    cpu.idle_package_w = cpu.package_w = cs.idle_package_w;
    cpu.idle_dram_w = cpu.dram_w = cs.dram ? cs.idle_dram_w : 0.0;
    cpu.max_energy_range_uj = cs.max_energy_range_uj == 0 ? CpuSpec{}.max_energy_range_uj : cs.max_energy_range_uj;
  }
  s->version = detail::kVersion;
  s->size = sizeof(State);
  std::atomic_ref(s->magic).store(detail::kMagic, std::memory_order_release);  // last: the state is complete

  // The powercap tree: intel-rapl:N = package-N with dram (N:0, when present) and core
  // sub-zones; psys after the packages.
  PowercapTree tree(impl->powercap);
  for (unsigned c = 0; c < s->cpu_count; ++c) {
    const int zone = static_cast<int>(c);
    const auto range = s->cpus[c].max_energy_range_uj;
    if (auto r = tree.add_zone(zone, "package-" + std::to_string(c), range); !r) return fail(r.error());
    if (s->cpus[c].dram)
      if (auto r = tree.add_zone(zone, "dram", range, 0); !r) return fail(r.error());
    if (auto r = tree.add_zone(zone, "core", range, core_sub(s->cpus[c].dram != 0)); !r) return fail(r.error());
  }
  if (s->psys) {
    const auto range = CpuSpec{}.max_energy_range_uj;  // psys has its own (default) counter range
    if (auto r = tree.add_zone(static_cast<int>(s->cpu_count), "psys", range); !r) return fail(r.error());
  }
  if (s->cpu_count > 0 || s->psys) ::chmod(impl->powercap.c_str(), 0755);

  if (::rename(tmp.c_str(), state_path.c_str()) != 0)
    return fail(ErrorCode::kIo, "cannot create " + state_path.string() + ": " + std::strerror(errno));
  impl->owner = true;  // from here on the directory is ours to remove
  impl->start_updater();
  return std::unique_ptr<Machine>(new Machine(std::move(impl)));
}

Result<std::unique_ptr<Machine>> Machine::create_temp(const MachineSpec& spec) {
  const char* tmpdir = std::getenv("TMPDIR");
  std::string tmpl = std::string(tmpdir != nullptr && *tmpdir != '\0' ? tmpdir : "/tmp") + "/erg-sim-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr)
    return fail(ErrorCode::kIo, "cannot create a temporary directory in " + tmpl + ": " + std::strerror(errno));
  auto m = create(spec, tmpl, false);
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
  ::setenv("ERG_POWERCAP_ROOT", powercap_root().c_str(), 1);
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
  return fail(ErrorCode::kNotFound,
              "the simulated libnvidia-ml.so.1 was not found (set ERG_SIM_NVML_LIBRARY or build target erg_sim_nvml)");
}

const fs::path& Machine::dir() const { return impl_->dir; }
fs::path Machine::state_file() const { return impl_->dir / "state"; }
fs::path Machine::powercap_root() const { return impl_->powercap; }
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
  if (auto r = impl_->check_gpu(gpu); !r) return r;
  if (!(utilization >= 0.0 && utilization <= 1.0))
    return fail(ErrorCode::kInvalidArgument, "utilization must be within 0..1");
  State* s = impl_->s;
  Lock lock(s);
  auto& g = s->gpus[gpu];
  detail::advance_gpu(g, detail::sim_now(*s));
  g.utilization = utilization;
  detail::recompute_gpu(g);
  return ok();
}

Result<std::chrono::nanoseconds> Machine::run_work(unsigned gpu, double work, double utilization) {
  if (auto r = impl_->check_gpu(gpu); !r) return fail(r.error());
  if (!(work >= 0.0)) return fail(ErrorCode::kInvalidArgument, "work must be ≥ 0");
  if (!(utilization > 0.0 && utilization <= 1.0))
    return fail(ErrorCode::kInvalidArgument, "run_work needs a utilization within (0, 1]");
  State* s = impl_->s;
  std::int64_t start = 0;
  double target = 0.0;
  bool virtual_clock = false;
  double rate = 0.0;
  {
    Lock lock(s);
    auto& g = s->gpus[gpu];
    start = detail::sim_now(*s);
    detail::advance_gpu(g, start);
    g.utilization = utilization;
    detail::recompute_gpu(g);
    target = g.work + work;
    virtual_clock = s->virtual_clock != 0;
    rate = g.work_rate;
  }
  if (virtual_clock) {
    // Exact finish time: the rate is constant until the next control event.
    const auto dt = std::chrono::nanoseconds(static_cast<std::int64_t>(std::ceil(work / rate * 1e9)));
    if (auto r = advance(dt); !r) return fail(r.error());
  } else {
    for (;;) {
      double left = 0.0;
      {
        Lock lock(s);
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
    g.utilization = 0.0;
    detail::recompute_gpu(g);
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
  s->cpus[cpu].package_w = package.value();
  s->cpus[cpu].dram_w = s->cpus[cpu].dram ? dram.value() : 0.0;
  return ok();
}

Result<Joules> Machine::true_energy(unsigned gpu) {
  if (auto r = impl_->check_gpu(gpu); !r) return fail(r.error());
  State* s = impl_->s;
  Lock lock(s);
  auto& g = s->gpus[gpu];
  detail::advance_gpu(g, detail::sim_now(*s));
  return Joules(g.energy_j);
}

Result<Joules> Machine::true_cpu_energy(unsigned cpu) {
  if (auto r = impl_->check_cpu(cpu); !r) return fail(r.error());
  State* s = impl_->s;
  Lock lock(s);
  detail::advance_cpus(*s, detail::sim_now(*s));
  return Joules(s->cpus[cpu].package_j);
}

Result<Joules> Machine::true_dram_energy(unsigned cpu) {
  if (auto r = impl_->check_cpu(cpu); !r) return fail(r.error());
  State* s = impl_->s;
  Lock lock(s);
  if (!s->cpus[cpu].dram)
    return fail(ErrorCode::kNotSupported, "simulated CPU " + std::to_string(cpu) + " has no DRAM domain");
  detail::advance_cpus(*s, detail::sim_now(*s));
  return Joules(s->cpus[cpu].dram_j);
}

Result<GpuStatus> Machine::status(unsigned gpu) {
  if (auto r = impl_->check_gpu(gpu); !r) return fail(r.error());
  State* s = impl_->s;
  Lock lock(s);
  auto& g = s->gpus[gpu];
  detail::advance_gpu(g, detail::sim_now(*s));
  GpuStatus st;
  st.utilization = g.utilization;
  st.power_limit = MilliWatts(g.limit_mw);
  st.effective_sm_clock = Megahertz(g.clock_mhz);
  st.power = Watts(g.power_w);
  st.persistence = g.persistence != 0;
  st.lost = g.lost != 0;
  st.work_done = g.work;
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
  // Counting restarts now: the next tick reports only the energy since this instant.
  g.counter_base_mj = g.energy_j * 1000.0;
  return ok();
}

Result<void> Machine::energy_counter_backwards(unsigned gpu, MilliJoules amount) {
  if (auto r = impl_->check_gpu(gpu); !r) return r;
  if (!(amount.value() >= 0.0)) return fail(ErrorCode::kInvalidArgument, "amount must be ≥ 0");
  State* s = impl_->s;
  Lock lock(s);
  s->gpus[gpu].counter_base_mj += amount.value();
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

}  // namespace erg::sim
