#pragma once
// A simulated machine on the virtual clock whose GPUs are opened through the production NVML
// path (the simulated libnvidia-ml.so.1), for the optimizer's tests.

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "erg/backends/nvml/discovery.hpp"
#include "erg/sim/machine.hpp"
#include "erg/sim/spec.hpp"

namespace erg::power_limit::testing {

struct SimRig {
  std::unique_ptr<sim::Machine> machine;
  std::vector<std::shared_ptr<Gpu>> gpus;

  explicit SimRig(const std::string& spec) {
    auto parsed = sim::parse_spec(spec);
    EXPECT_TRUE(parsed) << parsed.error().message;
    auto m = sim::Machine::create_temp(*parsed, /*virtual_clock=*/true);
    EXPECT_TRUE(m) << m.error().message;
    machine = std::move(*m);
    machine->set_privilege(sim::Privilege::kEveryone);  // the tests need not run as root
    EXPECT_TRUE(machine->export_env());
    nvml::DiscoveryOptions o;
    o.cuda_visible_devices = std::optional<std::string>();
    auto found = nvml::discover(o);
    EXPECT_TRUE(found) << found.error().message;
    gpus = found->gpus;
  }

  /// The limits the driver set (successful calls), in order, as (GPU, W).
  [[nodiscard]] std::vector<std::pair<unsigned, double>> limits_set() const {
    std::vector<std::pair<unsigned, double>> out;
    for (const auto& c : machine->power_limit_log())
      if (c.ok()) out.emplace_back(c.gpu, c.limit.value() / 1000.0);
    return out;
  }
};

}  // namespace erg::power_limit::testing
