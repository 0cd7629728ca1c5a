#pragma once
// Test fixture: a simulated machine on the virtual clock with the driver initialized over it.

#include <gtest/gtest.h>

#include <chrono>
#include <memory>

#include "erg/sim/machine.hpp"
#include "nvml_loader.hpp"

namespace erg::sim::testing {

class SimTest : public ::testing::Test {
 protected:
  void start(const char* spec_text, bool virtual_clock = true) {
    auto spec = parse_spec(spec_text);
    ASSERT_TRUE(spec) << spec.error().message;
    auto m = Machine::create_temp(*spec, virtual_clock);
    ASSERT_TRUE(m) << m.error().message;
    machine_ = std::move(*m);
    ASSERT_TRUE(machine_->export_env());
    ASSERT_TRUE(nvml_.missing.empty()) << nvml_.missing;
    ASSERT_EQ(nvml_.nvmlInit_v2(), NVML_SUCCESS);
    initialized_ = true;
  }
  void TearDown() override {
    if (initialized_) nvml_.nvmlShutdown();
    machine_.reset();
  }
  nvmlDevice_t dev(unsigned i) {
    nvmlDevice_t d = nullptr;
    EXPECT_EQ(nvml_.nvmlDeviceGetHandleByIndex_v2(i, &d), NVML_SUCCESS);
    return d;
  }
  /// Advances the virtual clock to the next multiple of `period` (sensor ticks are aligned to it).
  void align(std::chrono::nanoseconds period) {
    const auto rem = machine_->now() % period;
    if (rem.count() != 0) {
      ASSERT_TRUE(machine_->advance(period - rem));
    }
  }
  unsigned long long counter_mj(unsigned i) {
    unsigned long long e = 0;
    EXPECT_EQ(nvml_.nvmlDeviceGetTotalEnergyConsumption(dev(i), &e), NVML_SUCCESS);
    return e;
  }
  nvmlFieldValue_t field(unsigned i, unsigned id, unsigned scope = 0) {
    nvmlFieldValue_t v{};
    v.fieldId = id;
    v.scopeId = scope;
    EXPECT_EQ(nvml_.nvmlDeviceGetFieldValues(dev(i), 1, &v), NVML_SUCCESS);
    return v;
  }

  Nvml& nvml_ = Nvml::get();
  std::unique_ptr<Machine> machine_;
  bool initialized_ = false;
};

}  // namespace erg::sim::testing
