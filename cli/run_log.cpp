#include "run_log.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <set>

namespace erg::cli {

using namespace std::chrono_literals;

// --- TimelineLog ------------------------------------------------------------------------------

struct TimelineLog::Series {
  std::string device;
  std::string domain;
  bool gpu = true;
  unsigned index = 0;
  PowerDomain gpu_domain{};
  measure::CpuDomain cpu_domain{};
  bool started = false;              ///< Its t0 row was written (or found not to exist).
  std::chrono::nanoseconds last{0};  ///< Time of the last row written.
};

namespace {

struct Row {
  std::chrono::nanoseconds time;
  std::size_t series;
  double watts;
};

}  // namespace

Result<std::unique_ptr<TimelineLog>> TimelineLog::create(const std::string& path, const measure::PowerMonitor& monitor,
                                                         std::vector<unsigned> cpus, std::chrono::nanoseconds t0,
                                                         const Clock& clock) {
  std::unique_ptr<TimelineLog> log(new TimelineLog());
  log->path_ = path;
  log->tmp_path_ = path + ".tmp." + std::to_string(::getpid());
  log->monitor_ = &monitor;
  log->clock_ = &clock;
  log->t0_ = t0;
  for (unsigned g : monitor.gpu_indices())
    for (auto d : monitor.domains()) {
      if (!monitor.sampled(g, d)) continue;
      Series s;
      s.device = "gpu" + std::to_string(g);
      s.domain = std::string(to_string(d));
      s.index = g;
      s.gpu_domain = d;
      log->series_.push_back(s);
    }
  for (unsigned c : cpus)
    for (auto [domain, label] :
         {std::pair{measure::CpuDomain::kPackage, "package"}, std::pair{measure::CpuDomain::kDram, "dram"}}) {
      Series s;
      s.device = "cpu" + std::to_string(c);
      s.domain = label;
      s.gpu = false;
      s.index = c;
      s.cpu_domain = domain;
      log->series_.push_back(s);
    }
  log->fd_ = ::open(log->tmp_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
  if (log->fd_ < 0) return fail(ErrorCode::kIo, "cannot write " + path + ": " + std::strerror(errno));
  ::fchmod(log->fd_, 0644);  // as write_file_atomic: not subject to the umask
  if (auto r = log->append("time_s,device,domain,power_w\n"); !r) return fail(r.error());
  return log;
}

TimelineLog::~TimelineLog() {
  if (fd_ >= 0) ::close(fd_);
  if (!published_ && !tmp_path_.empty()) ::unlink(tmp_path_.c_str());
}

Result<void> TimelineLog::publish() {
  std::lock_guard lock(mu_);
  if (published_) return ok();
  if (::rename(tmp_path_.c_str(), path_.c_str()) != 0)
    return fail(ErrorCode::kIo, "cannot write " + path_ + ": " + std::strerror(errno));
  published_ = true;
  return ok();
}

std::chrono::nanoseconds TimelineLog::mark_end() {
  std::lock_guard lock(mu_);
  end_ = clock_->now();
  return *end_;
}

Result<void> TimelineLog::append(const std::string& rows) {
  pending_ += rows;
  auto failed = [&](int e) {
    // Back to the last complete row (torn_ until that succeeds); the rows stay pending.
    torn_ = ::ftruncate(fd_, committed_) != 0;
    return fail(ErrorCode::kIo, "cannot write " + path_ + ": " + std::strerror(e));
  };
  if (torn_) {
    if (::ftruncate(fd_, committed_) != 0) return failed(errno);
    torn_ = false;
  }
  std::size_t done = 0;
  while (done < pending_.size()) {
    const ssize_t n = ::write(fd_, pending_.data() + done, pending_.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return failed(n < 0 ? errno : EIO);
    done += static_cast<std::size_t>(n);
  }
  committed_ += static_cast<off_t>(pending_.size());
  pending_.clear();
  return ok();
}

Result<void> TimelineLog::write_rows(std::chrono::nanoseconds upto, bool final_rows) {
  const auto& pm = *monitor_;
  std::vector<Row> rows;
  for (std::size_t i = 0; i < series_.size(); ++i) {
    auto& s = series_[i];
    if (!s.gpu) {
      // A package without DRAM has no DRAM series (and says so with NotFound).
      auto p = pm.cpu_power(s.index, s.cpu_domain);
      if (!p && p.error().code == ErrorCode::kNotFound) continue;
    }
    auto power_at = [&](std::chrono::nanoseconds t) {
      return s.gpu ? pm.gpu_power_at(s.index, s.gpu_domain, t) : pm.cpu_power_at(s.index, s.cpu_domain, t);
    };
    if (!s.started) {
      if (auto w = power_at(t0_)) rows.push_back({t0_, i, w->value()});
      s.started = true;
      s.last = t0_;
    }
    auto points = s.gpu ? pm.gpu_timeline(s.index, s.gpu_domain, s.last + 1ns, upto)
                        : pm.cpu_timeline(s.index, s.cpu_domain, s.last + 1ns, upto);
    if (points) {
      // While sampling goes on, the latest sample's power may still change (an energy series
      // derives it from the next reading): it waits for the next round.
      if (!final_rows && !points->empty()) points->pop_back();
      for (const auto& p : *points) {
        rows.push_back({p.time, i, p.watts});
        s.last = p.time;
      }
    }
    if (final_rows)
      if (auto w = power_at(upto + 1ns)) rows.push_back({upto + 1ns, i, w->value()});
  }
  std::stable_sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.time < b.time; });
  std::string text;
  char buf[160];
  for (const auto& r : rows) {
    const auto& s = series_[r.series];
    std::snprintf(buf, sizeof buf, "%.6f,%s,%s,%.3f\n", std::chrono::duration<double>(r.time - t0_).count(),
                  s.device.c_str(), s.domain.c_str(), r.watts);
    text += buf;
  }
  if (text.empty() && pending_.empty()) return ok();
  return append(text);
}

Result<void> TimelineLog::in_place() const {
  if (!published_) return ok();
  // Appends go to the open file: one moved or removed under erg would take them with it unseen.
  struct stat at_path {};
  struct stat ours {};
  if (::stat(path_.c_str(), &at_path) != 0 || ::fstat(fd_, &ours) != 0 || at_path.st_dev != ours.st_dev ||
      at_path.st_ino != ours.st_ino)
    return fail(ErrorCode::kIo, "cannot write " + path_ + ": it was moved or removed while erg ran");
  return ok();
}

Result<void> TimelineLog::flush(std::chrono::nanoseconds now) {
  std::lock_guard lock(mu_);
  // Nothing past the end of the run (rows after it would follow its closing rows).
  if (end_) now = std::min(now, *end_ - 1ns);
  if (auto r = write_rows(now, false); !r) return r;
  return in_place();
}

Result<void> TimelineLog::finish(std::chrono::nanoseconds t1) {
  std::lock_guard lock(mu_);
  if (auto r = write_rows(t1 - 1ns, true); !r) return r;
  if (::fsync(fd_) != 0) return fail(ErrorCode::kIo, "cannot write " + path_ + ": " + std::strerror(errno));
  if (!published_) {
    if (::rename(tmp_path_.c_str(), path_.c_str()) != 0)
      return fail(ErrorCode::kIo, "cannot write " + path_ + ": " + std::strerror(errno));
    published_ = true;
  }
  return in_place();
}

// --- ProgressWindows --------------------------------------------------------------------------

void accumulate(measure::Measurement& total, const measure::Measurement& part) {
  if (total.gpus.empty() && total.cpus.empty() && total.time.count() == 0.0) {
    total = part;
    return;
  }
  total.time += part.time;
  for (const auto& g : part.gpus) {
    auto it = std::find_if(total.gpus.begin(), total.gpus.end(), [&](const auto& t) { return t.index == g.index; });
    if (it == total.gpus.end()) {
      total.gpus.push_back(g);
      continue;
    }
    // Once a part is unknown, so is the sum (never a total that silently lacks a part).
    it->energy = it->energy && g.energy ? std::optional<Joules>(*it->energy + *g.energy) : std::nullopt;
    it->counter_restarts += g.counter_restarts;
    it->counter_backwards += g.counter_backwards;
    it->bridged = it->bridged + g.bridged;
    it->error_bound = it->error_bound + g.error_bound;
    it->read_errors += g.read_errors;
    it->source = g.source;
    it->short_window = it->short_window && g.short_window;
    it->extrapolated = g.extrapolated;
    it->unread = it->unread + g.unread;
    it->plain_difference = it->plain_difference || g.plain_difference;
    it->affected = it->affected || g.affected;
    if (g.error) it->error = g.error;
  }
  for (const auto& c : part.cpus) {
    auto it = std::find_if(total.cpus.begin(), total.cpus.end(), [&](const auto& t) { return t.index == c.index; });
    if (it == total.cpus.end()) {
      total.cpus.push_back(c);
      continue;
    }
    it->package = it->package + c.package;
    if (c.dram) it->dram = it->dram ? *it->dram + *c.dram : *c.dram;
    it->affected = it->affected || c.affected;
    it->error = c.error;
  }
}

ProgressWindows::ProgressWindows(measure::EnergyMonitor& monitor, std::string name_prefix)
    : monitor_(monitor), prefix_(std::move(name_prefix)) {}

ProgressWindows::~ProgressWindows() { stop(); }

Result<void> ProgressWindows::start() {
  if (auto r = monitor_.begin_window(prefix_ + "0", false); !r) return r;
  current_ = 0;
  open_ = true;
  return ok();
}

Result<measure::Measurement> ProgressWindows::step() {
  if (!open_) return fail(ErrorCode::kInvalidArgument, "the progress windows are not started");
  const unsigned next = 1 - current_;
  // The next window begins before the current one ends: ending may wait for the counters'
  // next update (settle), and that time belongs to the next window.
  if (auto r = monitor_.begin_window(prefix_ + std::to_string(next), false); !r) return fail(r.error());
  auto m = monitor_.end_window(prefix_ + std::to_string(current_), false);
  current_ = next;
  if (!m) return fail(m.error());
  accumulate(total_, *m);
  return total_;
}

void ProgressWindows::stop() {
  if (open_) (void)monitor_.cancel_window(prefix_ + std::to_string(current_));
  open_ = false;
}

// --- PeriodicWriter ---------------------------------------------------------------------------

PeriodicWriter::PeriodicWriter(std::chrono::milliseconds period, std::function<std::vector<std::string>()> tick) {
  thread_ = std::thread([this, period, tick = std::move(tick)] {
    std::set<std::string> warned;
    auto next = std::chrono::steady_clock::now() + period;
    std::unique_lock lock(mu_);
    while (!cv_.wait_until(lock, next, [this] { return stop_; })) {
      lock.unlock();
      for (auto& problem : tick())
        if (warned.insert(problem).second) std::cerr << "erg: warning: " << problem << "\n";
      lock.lock();
      next += period;
      const auto now = std::chrono::steady_clock::now();
      if (next < now) next = now;
    }
  });
}

PeriodicWriter::~PeriodicWriter() { stop(); }

void PeriodicWriter::stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

}  // namespace erg::cli
