#include "erg/measure/proc_info.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

namespace erg::measure {
namespace {

namespace fs = std::filesystem;

Result<std::string> read_text(const fs::path& file) {
  std::ifstream f(file);
  if (!f) {
    std::error_code ec;
    if (!fs::exists(file, ec)) return fail(ErrorCode::kNotFound, file.string() + ": no such file (process gone?)");
    return fail(ErrorCode::kIo, file.string() + ": cannot read");
  }
  std::ostringstream out;
  out << f.rdbuf();
  return out.str();
}

std::vector<std::string_view> split_ws(std::string_view s) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
    const std::size_t j = i;
    while (i < s.size() && !std::isspace(static_cast<unsigned char>(s[i]))) ++i;
    if (i > j) out.push_back(s.substr(j, i - j));
  }
  return out;
}

bool to_u64(std::string_view s, std::uint64_t& v) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  return ec == std::errc() && p == s.data() + s.size();
}

bool is_hex(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; });
}

/// A 64-hex-digit container id at the start of `s` (after a runtime prefix).
std::optional<std::string> container_id_at(std::string_view s) {
  if (s.size() < 64 || !is_hex(s.substr(0, 64))) return std::nullopt;
  if (s.size() > 64 && std::isxdigit(static_cast<unsigned char>(s[64]))) return std::nullopt;
  return std::string(s.substr(0, 64));
}

/// Kubernetes pod UIDs: 36 characters with dashes (cgroupfs) or underscores (systemd).
std::optional<std::string> pod_uid_at(std::string_view s) {
  if (s.size() < 36) return std::nullopt;
  std::string uid(s.substr(0, 36));
  std::replace(uid.begin(), uid.end(), '_', '-');
  for (std::size_t i = 0; i < uid.size(); ++i) {
    const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash ? uid[i] != '-' : !std::isxdigit(static_cast<unsigned char>(uid[i]))) return std::nullopt;
  }
  return uid;
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

}  // namespace

Result<ProcStat> parse_proc_pid_stat(std::string_view text) {
  const auto open = text.find('(');
  const auto close = text.rfind(')');
  if (open == std::string_view::npos || close == std::string_view::npos || close < open)
    return fail(ErrorCode::kInvalidArgument, "/proc/<pid>/stat: no (comm) field");
  ProcStat st;
  std::uint64_t pid = 0;
  const auto head = split_ws(text.substr(0, open));
  if (head.size() != 1 || !to_u64(head[0], pid) || pid == 0 || pid > 0xffffffffu)
    return fail(ErrorCode::kInvalidArgument, "/proc/<pid>/stat: bad pid field");
  st.pid = static_cast<std::uint32_t>(pid);
  st.comm = std::string(text.substr(open + 1, close - open - 1));
  const auto rest = split_ws(text.substr(close + 1));
  // rest[0] is field 3 (state); field n is rest[n − 3].
  if (rest.size() < 20) return fail(ErrorCode::kInvalidArgument, "/proc/<pid>/stat: fewer than 22 fields");
  if (rest[0].size() != 1) return fail(ErrorCode::kInvalidArgument, "/proc/<pid>/stat: bad state field");
  st.state = rest[0][0];
  if (!to_u64(rest[11], st.utime) || !to_u64(rest[12], st.stime) || !to_u64(rest[19], st.starttime))
    return fail(ErrorCode::kInvalidArgument, "/proc/<pid>/stat: utime, stime or starttime is not a number");
  return st;
}

Result<ProcStat> read_proc_pid_stat(const fs::path& proc_root, std::uint32_t pid) {
  auto text = read_text(proc_root / std::to_string(pid) / "stat");
  if (!text) return fail(text.error());
  return parse_proc_pid_stat(*text);
}

Result<SystemCpuTime> parse_proc_stat(std::string_view text) {
  const auto eol = text.find('\n');
  const auto fields = split_ws(text.substr(0, eol));
  if (fields.empty() || fields[0] != "cpu")
    return fail(ErrorCode::kInvalidArgument, "/proc/stat: no \"cpu\" line first");
  if (fields.size() < 5) return fail(ErrorCode::kInvalidArgument, "/proc/stat: the cpu line has fewer than 4 times");
  std::uint64_t v[10] = {};
  for (std::size_t i = 1; i < fields.size() && i <= 10; ++i)
    if (!to_u64(fields[i], v[i - 1]))
      return fail(ErrorCode::kInvalidArgument, "/proc/stat: cpu field " + std::to_string(i) + " is not a number");
  // user nice system idle iowait irq softirq steal guest guest_nice (guest time is inside user).
  SystemCpuTime t;
  t.busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
  t.idle = v[3] + v[4];
  return t;
}

Result<SystemCpuTime> read_proc_stat(const fs::path& proc_root) {
  auto text = read_text(proc_root / "stat");
  if (!text) return fail(text.error());
  return parse_proc_stat(*text);
}

CgroupInfo parse_cgroup_path(std::string_view path) {
  CgroupInfo info;
  info.path = std::string(path);
  std::size_t i = 0;
  while (i < path.size()) {
    while (i < path.size() && path[i] == '/') ++i;
    const std::size_t j = path.find('/', i);
    std::string_view part = path.substr(i, j == std::string_view::npos ? std::string_view::npos : j - i);
    i = j == std::string_view::npos ? path.size() : j;
    if (part.empty()) continue;
    // systemd units: the innermost one.
    if (ends_with(part, ".scope") || ends_with(part, ".service")) info.systemd_unit = std::string(part);
    std::string_view unit = part;
    if (ends_with(unit, ".scope")) unit.remove_suffix(6);
    if (ends_with(unit, ".slice")) unit.remove_suffix(6);
    // Container ids: "docker-<id>.scope", "cri-containerd-<id>.scope", "crio-<id>.scope",
    // "libpod-<id>.scope" (systemd driver) or a bare "<id>" under docker/ or kubepods/ (cgroupfs).
    struct Prefix {
      std::string_view prefix, runtime;
    };
    for (const Prefix& p : {Prefix{"docker-", "docker"}, Prefix{"cri-containerd-", "containerd"},
                            Prefix{"crio-", "crio"}, Prefix{"libpod-", "podman"}}) {
      if (unit.substr(0, p.prefix.size()) == p.prefix) {
        if (auto id = container_id_at(unit.substr(p.prefix.size()));
            id && id->size() == unit.size() - p.prefix.size()) {
          info.container_id = *id;
          info.runtime = std::string(p.runtime);
        }
      }
    }
    if (unit.size() == 64 && is_hex(unit)) {
      info.container_id = std::string(unit);
      if (path.find("/docker/") != std::string_view::npos) info.runtime = "docker";
    }
    // Kubernetes: "kubepods-burstable-pod<uid>.slice" (systemd) or "pod<uid>" (cgroupfs); the QoS
    // class from "kubepods-<qos>" or "kubepods/<qos>"; guaranteed pods sit directly under kubepods.
    const auto pod = unit.rfind("pod");  // "kubepods-...-pod<uid>": the last one (hex holds no "pod")
    if (pod != std::string_view::npos && (pod == 0 || unit[pod - 1] == '-')) {
      if (auto uid = pod_uid_at(unit.substr(pod + 3)); uid && pod + 3 + 36 == unit.size()) {
        info.pod_uid = *uid;
        if (!info.qos_class) info.qos_class = "guaranteed";
      }
    }
    for (std::string_view qos : {"burstable", "besteffort"}) {
      if (unit == qos || unit == std::string("kubepods-") + std::string(qos)) info.qos_class = std::string(qos);
    }
  }
  if (!info.pod_uid && path.find("kubepods") == std::string_view::npos) info.qos_class.reset();
  return info;
}

Result<CgroupInfo> parse_proc_cgroup(std::string_view text) {
  std::optional<CgroupInfo> unified, with_container, first;
  std::size_t i = 0;
  while (i < text.size()) {
    const std::size_t eol = text.find('\n', i);
    std::string_view line = text.substr(i, eol == std::string_view::npos ? std::string_view::npos : eol - i);
    i = eol == std::string_view::npos ? text.size() : eol + 1;
    if (line.empty()) continue;
    const auto c1 = line.find(':');
    const auto c2 = c1 == std::string_view::npos ? c1 : line.find(':', c1 + 1);
    if (c2 == std::string_view::npos)
      return fail(ErrorCode::kInvalidArgument, "/proc/<pid>/cgroup: a line is not id:controllers:path");
    CgroupInfo info = parse_cgroup_path(line.substr(c2 + 1));
    if (line.substr(0, c2 + 1) == "0::") unified = info;
    if (!with_container && (info.container_id || info.pod_uid)) with_container = info;
    if (!first) first = info;
  }
  if (!first) return fail(ErrorCode::kInvalidArgument, "/proc/<pid>/cgroup: empty");
  if (unified && (unified->container_id || unified->pod_uid || !with_container)) return *unified;
  return with_container ? *with_container : *first;
}

Result<CgroupInfo> read_proc_cgroup(const fs::path& proc_root, std::uint32_t pid) {
  auto text = read_text(proc_root / std::to_string(pid) / "cgroup");
  if (!text) return fail(text.error());
  return parse_proc_cgroup(*text);
}

std::vector<ConsumerEnergy> group_processes(const ProcessAttribution& a, ConsumerLevel level,
                                            const std::function<std::optional<CgroupInfo>(std::uint32_t)>& cgroup_of) {
  std::map<std::string, ConsumerEnergy> groups;
  for (const auto& p : a.processes) {
    const std::optional<CgroupInfo> cg = cgroup_of(p.pid);
    std::string key = "unknown";
    if (cg) {
      if (level == ConsumerLevel::kPod && cg->pod_uid) {
        key = "pod:" + *cg->pod_uid;
      } else if (cg->container_id) {
        key = "container:" + *cg->container_id;
      } else if (cg->pod_uid) {
        key = "pod:" + *cg->pod_uid;
      } else {
        key = "host";
      }
    }
    auto [it, inserted] = groups.try_emplace(key);
    ConsumerEnergy& g = it->second;
    if (inserted) {
      g.key = key;
      if (cg) g.cgroup = *cg;
      if (level == ConsumerLevel::kPod && key.rfind("pod:", 0) == 0) {
        g.cgroup.container_id.reset();  // a pod has several
        g.cgroup.runtime.reset();
        g.cgroup.systemd_unit.reset();
      }
    }
    g.pids.push_back(p.pid);
    g.energy += p.energy;
    g.bound += p.bound;
  }
  std::vector<ConsumerEnergy> out;
  for (auto& [key, g] : groups) {
    std::sort(g.pids.begin(), g.pids.end());
    out.push_back(std::move(g));
  }
  return out;
}

std::vector<ConsumerEnergy> group_processes(const ProcessAttribution& a, ConsumerLevel level,
                                            const fs::path& proc_root) {
  return group_processes(a, level, [&](std::uint32_t pid) -> std::optional<CgroupInfo> {
    auto cg = read_proc_cgroup(proc_root, pid);
    if (!cg) return std::nullopt;
    return *cg;
  });
}

Result<CpuAttribution> attribute_cpu_energy(const EnergySegment& package, std::uint64_t busy_ticks,
                                            std::span<const ProcessCpuTime> processes, const IdleModel& idle,
                                            double ticks_per_second, double model_error) {
  if (package.end <= package.start)
    return fail(ErrorCode::kInvalidArgument, "attribute_cpu_energy: the interval ends before it starts");
  if (package.energy.value() < 0.0 || package.error_bound.value() < 0.0)
    return fail(ErrorCode::kInvalidArgument, "attribute_cpu_energy: negative energy or error bound");
  if (!(ticks_per_second > 0.0)) return fail(ErrorCode::kInvalidArgument, "attribute_cpu_energy: ticks per second ≤ 0");
  if (!(model_error >= 0.0 && model_error < 1.0))
    return fail(ErrorCode::kInvalidArgument, "attribute_cpu_energy: model_error must be within [0, 1)");
  for (const auto& p : processes)
    if (p.ticks > busy_ticks)
      return fail(ErrorCode::kInvalidArgument, "attribute_cpu_energy: pid " + std::to_string(p.pid) +
                                                   " has more CPU ticks than the machine's busy time");
  const double t = std::chrono::duration<double>(package.end - package.start).count();
  const double e = package.energy.value();
  CpuAttribution a;
  a.measured = package.energy;
  const double idle_j = std::clamp(idle.power.value() * t, 0.0, e);
  const double idle_err = idle.error.value() * t;
  a.idle = Joules(idle_j);
  a.idle_bound = Joules(idle_err + (e > 0.0 ? package.error_bound.value() * idle_j / e : 0.0));
  const double active = e - idle_j;
  double sum = 0.0;
  // Each tick counter is read at both ends: ±1 tick each, so ±2 on a difference.
  const double busy = static_cast<double>(busy_ticks);
  for (const auto& p : processes) {
    CpuProcessEnergy pe;
    pe.pid = p.pid;
    pe.cpu_time = Seconds(static_cast<double>(p.ticks) / ticks_per_second);
    if (busy > 0.0) {
      const double w = static_cast<double>(p.ticks) / busy;
      pe.energy = Joules(active * w);
      const double dw = busy > 2.0 ? (2.0 + 2.0 * w) / (busy - 2.0) : 1.0;
      pe.bound = Joules(std::abs(active) * std::min(1.0, dw) + w * (package.error_bound.value() + idle_err) +
                        model_error * std::abs(pe.energy.value()));
    }
    sum += pe.energy.value();
    a.processes.push_back(pe);
  }
  a.other = Joules(e - idle_j - sum);
  double bounds = 0.0;
  for (const auto& p : a.processes) bounds += p.bound.value();
  a.other_bound = Joules(bounds + package.error_bound.value() + idle_err);
  return a;
}

// --- CpuProcessMeter ---------------------------------------------------------------------------

CpuProcessMeter::CpuProcessMeter(Cpu& cpu, const Clock& clock, fs::path proc_root, IdleModel idle,
                                 double ticks_per_second)
    : cpu_(cpu), clock_(clock), proc_root_(std::move(proc_root)), idle_(idle), ticks_per_second_(ticks_per_second) {}

Result<void> CpuProcessMeter::begin(std::span<const std::uint32_t> pids) {
  auto e = cpu_.package_energy();
  if (!e) return fail(e.error());
  auto sys = read_proc_stat(proc_root_);
  if (!sys) return fail(sys.error());
  starts_.clear();
  for (std::uint32_t pid : pids) {
    auto st = read_proc_pid_stat(proc_root_, pid);
    if (!st) continue;  // already gone
    starts_.push_back({pid, Start{st->cpu_ticks(), st->starttime}});
  }
  energy0_uj_ = e->value();
  t0_ = clock_.now();
  busy0_ = sys->busy;
  begun_ = true;
  return ok();
}

Result<CpuAttribution> CpuProcessMeter::end(double energy_error) {
  if (!begun_) return fail(ErrorCode::kInvalidArgument, "CpuProcessMeter::end without begin");
  if (!(energy_error >= 0.0)) return fail(ErrorCode::kInvalidArgument, "CpuProcessMeter::end: negative energy error");
  auto e = cpu_.package_energy();
  if (!e) return fail(e.error());
  auto sys = read_proc_stat(proc_root_);
  if (!sys) return fail(sys.error());
  const std::chrono::nanoseconds t1 = clock_.now();
  const std::uint64_t busy = sys->busy >= busy0_ ? sys->busy - busy0_ : 0;
  std::vector<ProcessCpuTime> times;
  for (const auto& [pid, start] : starts_) {
    auto st = read_proc_pid_stat(proc_root_, pid);
    if (!st || st->starttime != start.starttime || st->cpu_ticks() < start.ticks) continue;  // gone or reused
    times.push_back({pid, std::min(st->cpu_ticks() - start.ticks, busy)});
  }
  begun_ = false;
  const double joules = (e->value() - energy0_uj_) * 1e-6;
  const EnergySegment package{t0_, t1 > t0_ ? t1 : t0_ + std::chrono::nanoseconds(1), Joules(joules),
                              Joules(energy_error * std::abs(joules)), Watts(0.0)};
  return attribute_cpu_energy(package, busy, times, idle_, ticks_per_second_);
}

}  // namespace erg::measure
