#pragma once
/// What /proc says about a process, for attribution (issue 23): its CPU time (to split CPU
/// package energy) and its cgroup (to map it to a container and a Kubernetes pod). Parsing is a
/// pure function over the file's bytes; readers take the proc root (`/proc`, or a fake tree in
/// tests, or `/host/proc` in a container).

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "erg/core/clock.hpp"
#include "erg/core/device.hpp"
#include "erg/core/result.hpp"
#include "erg/core/units.hpp"
#include "erg/measure/process_attribution.hpp"

namespace erg::measure {

/// The fields of /proc/<pid>/stat that attribution uses. Times are in clock ticks (USER_HZ,
/// sysconf(_SC_CLK_TCK), 100 on Linux).
struct ProcStat {
  std::uint32_t pid = 0;
  std::string comm;  ///< the executable's name (field 2, without the parentheses)
  char state = '?';
  std::uint64_t utime = 0;      ///< user-mode ticks (field 14)
  std::uint64_t stime = 0;      ///< kernel-mode ticks (field 15)
  std::uint64_t starttime = 0;  ///< ticks after boot when it started (field 22): tells a reused pid
  [[nodiscard]] std::uint64_t cpu_ticks() const { return utime + stime; }
};

/// Parses /proc/<pid>/stat. The name may hold spaces and parentheses: it runs to the last ')'.
/// InvalidArgument naming what is wrong for anything else.
Result<ProcStat> parse_proc_pid_stat(std::string_view text);
/// Reads and parses `proc_root/<pid>/stat`. NotFound when the process is gone.
Result<ProcStat> read_proc_pid_stat(const std::filesystem::path& proc_root, std::uint32_t pid);

/// The machine-wide CPU time of /proc/stat's first line ("cpu ..."), in ticks.
struct SystemCpuTime {
  std::uint64_t busy = 0;  ///< user + nice + system + irq + softirq + steal
  std::uint64_t idle = 0;  ///< idle + iowait
};
Result<SystemCpuTime> parse_proc_stat(std::string_view text);
Result<SystemCpuTime> read_proc_stat(const std::filesystem::path& proc_root);

/// Where a cgroup path places a process. Kubernetes namespaces and pod names are never in a
/// cgroup path (they need the kubelet or the API server); only the pod's UID is.
struct CgroupInfo {
  std::string path;                         ///< the unified (v2) path, else the first v1 path with a container
  std::optional<std::string> container_id;  ///< 64 hex digits (Docker, containerd, CRI-O, Podman)
  std::optional<std::string> runtime;       ///< "docker", "containerd", "crio", "podman"
  std::optional<std::string> pod_uid;       ///< Kubernetes pod UID, with dashes
  std::optional<std::string> qos_class;     ///< "guaranteed", "burstable" or "besteffort" (Kubernetes)
  std::optional<std::string> systemd_unit;  ///< the innermost systemd unit ("session-3.scope", "nginx.service")
};

/// What a cgroup path shows (any of the shapes the cgroupfs and systemd drivers write).
CgroupInfo parse_cgroup_path(std::string_view path);
/// Parses /proc/<pid>/cgroup: prefers the unified hierarchy's line ("0::/path"); on a v1-only
/// host the first line whose path shows a container, else the first line. InvalidArgument for
/// text that has no "id:controllers:path" line.
Result<CgroupInfo> parse_proc_cgroup(std::string_view text);
Result<CgroupInfo> read_proc_cgroup(const std::filesystem::path& proc_root, std::uint32_t pid);

/// How to group processes: by container, or by Kubernetes pod (a pod's containers together).
enum class ConsumerLevel { kContainer, kPod };

/// One container's or pod's part of a ProcessAttribution.
struct ConsumerEnergy {
  /// "pod:<uid>", "container:<id>", "host" (a process in no container) or "unknown" (its
  /// cgroup could not be read: the process is gone).
  std::string key;
  CgroupInfo cgroup;                ///< of its first process (pod level: the pod's fields)
  std::vector<std::uint32_t> pids;  ///< ascending
  Joules energy{0.0};               ///< Σ of its processes
  Joules bound{0.0};                ///< Σ of their bounds (errors shared by the processes add up)
};

/// Groups a process attribution by container or pod; `cgroup_of(pid)` gives a process's cgroup
/// (nullopt: unknown). The groups' energies sum to a.attributed(). Sorted by key.
std::vector<ConsumerEnergy> group_processes(const ProcessAttribution& a, ConsumerLevel level,
                                            const std::function<std::optional<CgroupInfo>(std::uint32_t)>& cgroup_of);
/// group_processes with each pid's cgroup read from `proc_root`.
std::vector<ConsumerEnergy> group_processes(const ProcessAttribution& a, ConsumerLevel level,
                                            const std::filesystem::path& proc_root);

/// One process's CPU time over an interval.
struct ProcessCpuTime {
  std::uint32_t pid = 0;
  std::uint64_t ticks = 0;  ///< utime + stime at the end − at the start
};

struct CpuProcessEnergy {
  std::uint32_t pid = 0;
  Joules energy{0.0};
  Joules bound{0.0};
  Seconds cpu_time{0.0};
};

/// CPU package energy split among processes by their CPU time.
struct CpuAttribution {
  Joules measured{0.0};
  Joules idle{0.0};  ///< the idle model's power × duration (min with measured)
  Joules idle_bound{0.0};
  /// The active energy of CPU time not in the list (other processes, the kernel's own work)
  /// plus any rounding: measured − idle − Σ processes, so the parts sum to the measured energy.
  Joules other{0.0};
  Joules other_bound{0.0};
  std::vector<CpuProcessEnergy> processes;  ///< in the order given
};

/// Splits a CPU package's measured energy over an interval: idle from the idle model (a zero
/// model leaves everything active), the rest by each process's share of the machine's busy CPU
/// time (the /proc/stat busy delta over the same interval). Bound on process i: its share of the
/// energy's and the idle model's errors, plus the active energy times the tick rounding of both
/// counters (2 ticks each, read at both ends) relative to the busy time, plus model_error of its
/// figure (every busy CPU second is taken to cost the same energy). InvalidArgument: a zero
/// duration, negative energy/error, a process with more ticks than the machine's busy time.
Result<CpuAttribution> attribute_cpu_energy(const EnergySegment& package, std::uint64_t busy_ticks,
                                            std::span<const ProcessCpuTime> processes, const IdleModel& idle,
                                            double ticks_per_second = 100.0, double model_error = 0.1);

/// Reads a CPU package and /proc for attribute_cpu_energy: the package counter, /proc/stat and
/// each listed process's /proc/<pid>/stat at begin() and end(). A process that is gone at end(),
/// or whose pid now names another process (another start time), is charged nothing: its CPU time
/// falls into `other`. The Cpu and clock must outlive the meter; not thread-safe.
class CpuProcessMeter {
 public:
  /// `ticks_per_second`: USER_HZ (sysconf(_SC_CLK_TCK); 100 on Linux).
  CpuProcessMeter(Cpu& cpu, const Clock& clock, std::filesystem::path proc_root, IdleModel idle,
                  double ticks_per_second = 100.0);
  /// Starts an interval for `pids`. Errors: the package's, /proc/stat's (a pid already gone is
  /// left out, not an error).
  Result<void> begin(std::span<const std::uint32_t> pids);
  /// Ends it and attributes: `energy_error` is the package figure's error bound as a share of it.
  /// InvalidArgument without begin().
  Result<CpuAttribution> end(double energy_error = 0.02);

 private:
  struct Start {
    std::uint64_t ticks = 0, starttime = 0;
  };
  Cpu& cpu_;
  const Clock& clock_;
  std::filesystem::path proc_root_;
  IdleModel idle_;
  double ticks_per_second_;
  bool begun_ = false;
  double energy0_uj_ = 0.0;
  std::chrono::nanoseconds t0_{0};
  std::uint64_t busy0_ = 0;
  std::vector<std::pair<std::uint32_t, Start>> starts_;
};

}  // namespace erg::measure
