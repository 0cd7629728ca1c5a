#include "erg/backends/rapl/rapl_cpu.hpp"

#include <mutex>
#include <utility>

namespace erg::rapl {

struct RaplCpu::State {
  struct Domain {
    RaplDomain where;
    std::filesystem::path energy_file;
    std::unique_ptr<SysfsFile> file;  // kept open between reads; reopened after an error
    WrapAccumulator counter;
    std::chrono::nanoseconds last_read{0};

    Domain(RaplDomain domain, Watts max_power)
        : where(std::move(domain)),
          energy_file(where.dir / "energy_uj"),
          counter(where.max_energy_range_uj, max_power) {}
  };

  std::shared_ptr<const SysfsReader> reader;
  std::shared_ptr<const Clock> clock;
  mutable std::mutex mutex;
  Domain package;
  std::optional<Domain> dram;

  State(std::shared_ptr<const SysfsReader> r, std::shared_ptr<const Clock> c, RaplDomain pkg,
        std::optional<RaplDomain> dram_domain, Watts max_power)
      : reader(std::move(r)), clock(std::move(c)), package(std::move(pkg), max_power) {
    if (dram_domain) dram.emplace(std::move(*dram_domain), max_power);
  }

  // Reads one domain and feeds its accumulator; the caller holds `mutex`. The time since the
  // previous read of this domain lets the accumulator infer wraps the raw values cannot show.
  Result<std::uint64_t> read(Domain& domain) {
    if (!domain.file) {
      auto opened = reader->open(domain.energy_file);
      if (!opened) return fail(opened.error());
      domain.file = std::move(*opened);
    }
    auto raw = domain.file->read_energy();
    if (!raw) {
      // The zone may have gone (a removed sysfs attribute reads as ENODEV): open it anew next time.
      domain.file.reset();
      return fail(raw.error());
    }
    const auto now = clock->now();
    const auto elapsed = domain.counter.has_baseline() ? now - domain.last_read : std::chrono::nanoseconds(0);
    domain.last_read = now;
    const std::uint64_t last = domain.counter.last_raw_uj();
    const std::uint64_t implausible = domain.counter.implausible_updates();
    const std::uint64_t total = domain.counter.update(*raw, elapsed);
    if (domain.counter.implausible_updates() != implausible)
      return fail(ErrorCode::kIo,
                  domain.energy_file.string() + " moved from " + std::to_string(last) + " to " + std::to_string(*raw) +
                      " µJ, more than the energy possible since the last read " +
                      "(wraps included): a counter reset or a corrupt reading; counting on from the new value");
    return total;
  }

  Result<void> refresh() {
    std::lock_guard<std::mutex> lock(mutex);
    auto pkg = read(package);
    Result<std::uint64_t> mem = std::uint64_t{0};
    if (dram) mem = read(*dram);  // Independent of the package read's outcome.
    if (!pkg) return fail(pkg.error());
    if (!mem) return fail(mem.error());
    return ok();
  }
};

namespace {

std::shared_ptr<const Clock> steady_clock() {
  // The process-wide SteadyClock is never destroyed before main returns; no deleter needed.
  static const std::shared_ptr<const Clock> clock(&SteadyClock::instance(), [](const Clock*) {});
  return clock;
}

}  // namespace

RaplCpu::RaplCpu(unsigned index, std::string name, std::shared_ptr<State> state)
    : index_(index), name_(std::move(name)), state_(std::move(state)) {
  capabilities_.dram = state_->dram.has_value();
  if (state_->package.where.max_energy_range_uj > 0)
    capabilities_.max_energy_range = MicroJoules(static_cast<double>(state_->package.where.max_energy_range_uj));
  capabilities_.update_period = kRaplUpdatePeriod;
}

Result<std::shared_ptr<RaplCpu>> RaplCpu::create(unsigned index, std::string name, RaplDomain package,
                                                 std::optional<RaplDomain> dram, RaplCpuOptions options) {
  if (!options.reader) options.reader = default_reader();
  if (!options.clock) options.clock = steady_clock();
  auto state = std::make_shared<State>(std::move(options.reader), std::move(options.clock), std::move(package),
                                       std::move(dram), options.max_power);
  // The baseline: both domains are read once here.
  if (auto r = state->refresh(); !r) return fail(r.error());
  return std::shared_ptr<RaplCpu>(new RaplCpu(index, std::move(name), std::move(state)));
}

Result<MicroJoules> RaplCpu::package_energy() {
  std::lock_guard<std::mutex> lock(state_->mutex);
  auto total = state_->read(state_->package);
  if (!total) return fail(total.error());
  return MicroJoules(static_cast<double>(*total));
}

Result<MicroJoules> RaplCpu::dram_energy() {
  std::lock_guard<std::mutex> lock(state_->mutex);
  if (!state_->dram)
    return fail(ErrorCode::kNotSupported, "CPU " + std::to_string(index_) + " (" + name_ + ") has no DRAM RAPL domain");
  auto total = state_->read(*state_->dram);
  if (!total) return fail(total.error());
  return MicroJoules(static_cast<double>(*total));
}

Result<void> RaplCpu::refresh() { return state_->refresh(); }

Keepalive::Task RaplCpu::keepalive_task() const {
  return [state = state_] { (void)state->refresh(); };
}

const RaplDomain& RaplCpu::package_domain() const { return state_->package.where; }

std::optional<RaplDomain> RaplCpu::dram_domain() const {
  if (!state_->dram) return std::nullopt;  // Immutable after create(); no lock needed.
  return state_->dram->where;
}

RaplCounterStats RaplCpu::package_stats() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  const auto& c = state_->package.counter;
  return {c.wraps(), c.ambiguous_updates(), c.implausible_updates()};
}

std::optional<RaplCounterStats> RaplCpu::dram_stats() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  if (!state_->dram) return std::nullopt;
  const auto& c = state_->dram->counter;
  return RaplCounterStats{c.wraps(), c.ambiguous_updates(), c.implausible_updates()};
}

}  // namespace erg::rapl
