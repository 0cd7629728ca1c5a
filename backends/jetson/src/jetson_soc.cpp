#include "erg/backends/jetson/jetson_soc.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace erg::jetson {
namespace fs = std::filesystem;

namespace {

Result<std::int64_t> read_value(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int e = errno;
    return fail(e == EACCES || e == EPERM ? ErrorCode::kNoPermission
                : e == ENOENT             ? ErrorCode::kNotFound
                                          : ErrorCode::kIo,
                "cannot read " + path.string() + ": " + std::strerror(e));
  }
  char buf[64];
  const ssize_t n = ::read(fd, buf, sizeof buf);
  const int e = errno;
  ::close(fd);
  if (n < 0) return fail(ErrorCode::kIo, "cannot read " + path.string() + ": " + std::strerror(e));
  auto v = parse_value(std::string_view(buf, static_cast<std::size_t>(n)));
  if (!v) return fail(ErrorCode::kIo, path.string() + ": " + v.error().message);
  return v;
}

}  // namespace

Discovery discover(const DiscoveryOptions& options) {
  Discovery out;
  fs::path root = kDefaultHwmonRoot;
  if (options.root) {
    root = *options.root;
  } else if (const char* e = std::getenv(kHwmonRootEnv); e != nullptr && *e != '\0') {
    root = e;
  }
  std::vector<Error> problems;
  auto rails = scan_rails(root, &problems);
  for (auto& p : problems) out.unavailable.push_back({"jetson", p.code, p.message});
  if (!rails.empty()) out.socs.push_back(std::make_shared<JetsonSoc>(0, std::move(rails), options));
  return out;
}

JetsonSoc::JetsonSoc(unsigned index, std::vector<RailFiles> rails, const DiscoveryOptions& options)
    : index_(index),
      rails_(std::move(rails)),
      period_(options.sample_period.count() > 0 ? options.sample_period : kDefaultSamplePeriod),
      thread_wanted_(options.sampler_thread),
      clock_(options.clock != nullptr ? options.clock : &SteadyClock::instance()) {
  std::optional<std::chrono::milliseconds> slowest;
  for (const auto& r : rails_) {
    caps_.rails.push_back({r.label, r.kind});
    if (r.kind == RailKind::kTotal) caps_.has_total_rail = true;
    if (r.update_interval && (!slowest || *r.update_interval > *slowest)) slowest = r.update_interval;
  }
  if (slowest) caps_.update_period = std::chrono::duration_cast<std::chrono::microseconds>(*slowest);
  caps_.sample_period = period_;
  last_mw_.assign(rails_.size(), 0.0);
  energy_mj_.assign(rails_.size(), 0.0);
}

JetsonSoc::~JetsonSoc() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

Result<MilliWatts> JetsonSoc::read_rail(std::size_t i) const {
  const RailFiles& r = rails_[i];
  if (!r.power_uw.empty()) {
    auto uw = read_value(r.power_uw);
    if (!uw) return fail(uw.error());
    return MilliWatts(static_cast<double>(*uw) / 1000.0);
  }
  auto mv = read_value(r.voltage_mv);
  if (!mv) return fail(mv.error());
  auto ma = read_value(r.current_ma);
  if (!ma) return fail(ma.error());
  return MilliWatts(static_cast<double>(*mv) * static_cast<double>(*ma) / 1000.0);  // mV × mA = µW
}

Result<std::vector<MilliWatts>> JetsonSoc::rail_power() {
  std::vector<MilliWatts> out;
  for (std::size_t i = 0; i < rails_.size(); ++i) {
    auto p = read_rail(i);
    if (!p) return fail(p.error());
    out.push_back(*p);
  }
  return out;
}

void JetsonSoc::sample_locked() {
  const auto t = clock_->now();
  std::vector<double> mw(rails_.size());
  for (std::size_t i = 0; i < rails_.size(); ++i) {
    auto p = read_rail(i);
    mw[i] = p ? p->value() : last_mw_[i];  // a failed read holds the last power across the gap
  }
  if (last_t_ && t > *last_t_) {
    const double dt_s = std::chrono::duration<double>(t - *last_t_).count();
    for (std::size_t i = 0; i < rails_.size(); ++i) energy_mj_[i] += 0.5 * (last_mw_[i] + mw[i]) * dt_s;
  }
  if (!last_t_ || t > *last_t_) last_t_ = t;
  last_mw_ = std::move(mw);
  ++samples_;
}

void JetsonSoc::run() {
  std::unique_lock lk(mu_);
  auto next = std::chrono::steady_clock::now();
  while (!stop_) {
    next += period_;
    const auto now = std::chrono::steady_clock::now();
    if (next < now) next = now;  // late: no burst to catch up
    cv_.wait_until(lk, next, [this] { return stop_; });
    if (stop_) break;
    sample_locked();
  }
}

Result<std::vector<MilliJoules>> JetsonSoc::rail_energy() {
  std::unique_lock lk(mu_);
  if (!started_) {
    started_ = true;
    // The first sample is the integral's origin: a rail unreadable now is an error.
    for (std::size_t i = 0; i < rails_.size(); ++i) {
      auto p = read_rail(i);
      if (!p) {
        started_ = false;
        return fail(p.error());
      }
    }
    sample_locked();
    if (thread_wanted_) thread_ = std::thread([this] { run(); });
  } else {
    sample_locked();
  }
  std::vector<MilliJoules> out;
  out.reserve(energy_mj_.size());
  for (double e : energy_mj_) out.emplace_back(e);
  return out;
}

std::uint64_t JetsonSoc::samples() const {
  std::lock_guard lk(mu_);
  return samples_;
}

}  // namespace erg::jetson
