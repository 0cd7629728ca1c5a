#pragma once
// Test rig: a simulated machine on the virtual clock, discovered through the production NVML and
// RAPL paths, whose EnergyMonitors follow their counters on that clock. Advancing time performs,
// in time order, every follower read that falls due and every scheduled action (a load change),
// so the follower runs exactly its production schedule — deterministically and fast.

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "erg/backends/nvml/discovery.hpp"
#include "erg/backends/rapl/discovery.hpp"
#include "erg/measure/energy_monitor.hpp"
#include "erg/sim/machine.hpp"
#include "erg/sim/spec.hpp"

namespace erg::measure::testing {

class VirtualRig {
 public:
  explicit VirtualRig(const std::string& spec) {
    auto parsed = sim::parse_spec(spec);
    EXPECT_TRUE(parsed) << parsed.error().message;
    auto m = sim::Machine::create_temp(*parsed, /*virtual_clock=*/true);
    EXPECT_TRUE(m) << m.error().message;
    machine = std::move(*m);
    clock = std::make_unique<sim::MachineClock>(*machine);
    EXPECT_TRUE(machine->export_env());
    nvml::DiscoveryOptions opts;
    opts.cuda_visible_devices = std::optional<std::string>();
    auto found = nvml::discover(opts);
    EXPECT_TRUE(found) << found.error().message;
    gpus = found->gpus;
    rapl::DiscoveryOptions ro;
    ro.root = machine->powercap_root();
    ro.keepalive = false;
    cpus = rapl::discover(ro).cpus;
  }

  /// A monitor on the machine's clock whose follower this rig drives.
  std::unique_ptr<EnergyMonitor> monitor(EnergyMonitorOptions o = {}) {
    o.clock = clock.get();
    o.follower_thread = false;
    auto m = EnergyMonitor::create(gpus, cpus, std::move(o));
    EXPECT_TRUE(m) << m.error().message;
    monitors.push_back(m->get());
    return std::move(*m);
  }
  void forget(EnergyMonitor* m) { std::erase(monitors, m); }

  [[nodiscard]] std::chrono::nanoseconds now() const { return machine->now(); }

  /// Runs `action` when the clock reaches `t`.
  void at(std::chrono::nanoseconds t, std::function<void()> action) { actions.emplace(t, std::move(action)); }

  void advance_to(std::chrono::nanoseconds t) {
    for (;;) {
      std::chrono::nanoseconds next = t;
      EnergyMonitor* who = nullptr;
      for (auto* m : monitors)
        if (auto due = m->next_follow_time(); due && *due < next) next = *due, who = m;
      const bool action = !actions.empty() && actions.begin()->first <= next;
      if (action) next = actions.begin()->first, who = nullptr;
      if (next > now()) {
        EXPECT_TRUE(machine->advance(next - now()));
      }
      if (action) {
        auto f = std::move(actions.begin()->second);
        actions.erase(actions.begin());
        f();
        continue;
      }
      if (who == nullptr) return;
      who->follow();
    }
  }
  void advance(std::chrono::nanoseconds d) { advance_to(now() + d); }

  std::unique_ptr<sim::Machine> machine;
  std::unique_ptr<sim::MachineClock> clock;
  std::vector<std::shared_ptr<Gpu>> gpus;
  std::vector<std::shared_ptr<Cpu>> cpus;
  std::vector<EnergyMonitor*> monitors;
  std::multimap<std::chrono::nanoseconds, std::function<void()>> actions;
};

/// A simulated machine on the real clock (its updaters and the monitors' followers run as
/// threads, as in production), its GPUs discovered through the production NVML path, and
/// monitors that settle their end edges on the machine's clock.
class RealClockRig {
 public:
  explicit RealClockRig(const std::string& spec) {
    auto parsed = sim::parse_spec(spec);
    EXPECT_TRUE(parsed) << parsed.error().message;
    auto m = sim::Machine::create_temp(*parsed);
    EXPECT_TRUE(m) << m.error().message;
    machine = std::move(*m);
    clock = std::make_unique<sim::MachineClock>(*machine);
    EXPECT_TRUE(machine->export_env());
    nvml::DiscoveryOptions opts;
    opts.cuda_visible_devices = std::optional<std::string>();
    auto found = nvml::discover(opts);
    EXPECT_TRUE(found) << found.error().message;
    gpus = found->gpus;
  }

  /// A monitor of the GPUs on the machine's clock; settled end edges unless `o` says otherwise.
  std::unique_ptr<EnergyMonitor> monitor(EnergyMonitorOptions o = settled()) {
    o.clock = clock.get();
    auto m = EnergyMonitor::create(gpus, {}, std::move(o));
    EXPECT_TRUE(m) << m.error().message;
    return std::move(*m);
  }
  static EnergyMonitorOptions settled() {
    EnergyMonitorOptions o;
    o.settle = true;
    return o;
  }

  std::unique_ptr<sim::Machine> machine;
  std::unique_ptr<sim::MachineClock> clock;
  std::vector<std::shared_ptr<Gpu>> gpus;
};

}  // namespace erg::measure::testing
