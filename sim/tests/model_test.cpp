// The model on the virtual clock. `Ideal*`: the ideal model's exact arithmetic (constant power,
// counters on aligned ticks). `Faithful*`: each behaviour of the faithful model (noise, ripple,
// transients, the power-limit control loop, sensor schedules, partial sampling, timestamps,
// clocks), with the tolerances the model documents in sim/README.md.

#include <gtest/gtest.h>

#include "sim_fixture.hpp"

namespace erg::sim {
namespace {

using namespace std::chrono_literals;
using testing::SimTest;

class Ideal : public SimTest {};

TEST_F(Ideal, TrueEnergyIsPowerTimesTimeExactly) {
  start("1xA100,cpus=0,ideal");
  ASSERT_TRUE(machine_->set_utilization(0, 0.7));
  const double p = machine_->status(0)->power.value();
  const double e0 = machine_->true_energy(0)->value();
  ASSERT_TRUE(machine_->advance(1234567891ns));
  EXPECT_NEAR(machine_->true_energy(0)->value() - e0, p * 1.234567891, 1e-9);
  // Idle afterwards: idle power only.
  ASSERT_TRUE(machine_->set_utilization(0, 0.0));
  const double idle = machine_->status(0)->power.value();
  EXPECT_DOUBLE_EQ(idle, lookup_sku("A100")->idle_w);
  const double e1 = machine_->true_energy(0)->value();
  ASSERT_TRUE(machine_->advance(2s));
  EXPECT_NEAR(machine_->true_energy(0)->value() - e1, 2 * idle, 1e-9);
}

TEST_F(Ideal, EnergyCounterIsQuantizedTo100msTicks) {
  start("1xA100,cpus=0,ideal");
  align(100ms);
  ASSERT_TRUE(machine_->set_utilization(0, 1.0));
  const double p = machine_->status(0)->power.value();
  const auto c0 = counter_mj(0);
  // Within one period the counter does not move.
  ASSERT_TRUE(machine_->advance(99ms));
  EXPECT_EQ(counter_mj(0), c0);
  // At the tick it jumps by P·100 ms.
  ASSERT_TRUE(machine_->advance(1ms));
  const auto c1 = counter_mj(0);
  EXPECT_NEAR(static_cast<double>(c1 - c0), p * 100.0, 1.0);
  // 250 ms later it shows the energy at the 200 ms tick, not at 250 ms.
  ASSERT_TRUE(machine_->advance(250ms));
  EXPECT_NEAR(static_cast<double>(counter_mj(0) - c1), p * 200.0, 1.0);
  // The field value is the same counter.
  EXPECT_EQ(field(0, NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION).value.ullVal, counter_mj(0));
  EXPECT_EQ(field(0, NVML_FI_DEV_ENERGY).valueType, NVML_VALUE_TYPE_UNSIGNED_LONG_LONG);
}

TEST_F(Ideal, InstantPowerUpdatesOnTheSkuPeriod) {
  start("1xV100,1xA100,cpus=0,ideal");
  align(100ms);
  const unsigned idle_v100 = field(0, NVML_FI_DEV_POWER_INSTANT).value.uiVal;
  const unsigned idle_a100 = field(1, NVML_FI_DEV_POWER_INSTANT).value.uiVal;
  ASSERT_TRUE(machine_->set_utilization(0, 1.0));
  ASSERT_TRUE(machine_->set_utilization(1, 1.0));
  ASSERT_TRUE(machine_->advance(30ms));
  // V100 refreshes every 20 ms: the 20 ms tick already saw the load. A100: every 100 ms.
  const auto v = field(0, NVML_FI_DEV_POWER_INSTANT);
  EXPECT_EQ(v.valueType, NVML_VALUE_TYPE_UNSIGNED_INT);
  EXPECT_EQ(v.value.uiVal, static_cast<unsigned>(machine_->status(0)->power.value() * 1000 + 0.5));
  EXPECT_GT(v.value.uiVal, idle_v100);
  EXPECT_EQ(field(1, NVML_FI_DEV_POWER_INSTANT).value.uiVal, idle_a100);
  ASSERT_TRUE(machine_->advance(70ms));
  EXPECT_EQ(field(1, NVML_FI_DEV_POWER_INSTANT).value.uiVal,
            static_cast<unsigned>(machine_->status(1)->power.value() * 1000 + 0.5));
  // GetPowerUsage is the instant reading on GA100 and older.
  unsigned mw = 0;
  ASSERT_EQ(nvml_.nvmlDeviceGetPowerUsage(dev(1), &mw), NVML_SUCCESS);
  EXPECT_EQ(mw, field(1, NVML_FI_DEV_POWER_INSTANT).value.uiVal);
}

TEST_F(Ideal, AveragePowerIsAOneSecondAverage) {
  start("1xA40,cpus=0,ideal");
  ASSERT_TRUE(machine_->advance(2s));  // a full second of idle history
  align(100ms);
  const double idle = machine_->status(0)->power.value();
  ASSERT_TRUE(machine_->set_utilization(0, 1.0));
  const double busy = machine_->status(0)->power.value();
  ASSERT_TRUE(machine_->advance(300ms));
  const double expected_mw = (0.3 * busy + 0.7 * idle) * 1000;
  EXPECT_NEAR(field(0, NVML_FI_DEV_POWER_AVERAGE).value.uiVal, expected_mw, 1.0);
  EXPECT_NEAR(field(0, NVML_FI_DEV_POWER_INSTANT).value.uiVal, busy * 1000, 1.0);
  // GetPowerUsage is the 1 s average on Ampere except GA100.
  unsigned mw = 0;
  ASSERT_EQ(nvml_.nvmlDeviceGetPowerUsage(dev(0), &mw), NVML_SUCCESS);
  EXPECT_NEAR(mw, expected_mw, 1.0);
  ASSERT_TRUE(machine_->advance(1s));
  EXPECT_NEAR(field(0, NVML_FI_DEV_POWER_AVERAGE).value.uiVal, busy * 1000, 1.0);
}

TEST_F(Ideal, LowerLimitLowersPowerSlowsWorkAndSavesEnergy) {
  start("1xV100,cpus=0,ideal");
  machine_->set_privilege(Privilege::kEveryone);
  const double e0 = machine_->true_energy(0)->value();
  auto t_max = machine_->run_work(0, 10.0);
  ASSERT_TRUE(t_max);
  const double e_max = machine_->true_energy(0)->value() - e0;
  EXPECT_NEAR(std::chrono::duration<double>(*t_max).count(), 10.0, 1e-6);  // 1 unit = 1 s at full clock
  EXPECT_DOUBLE_EQ(machine_->status(0)->utilization, 0.0);
  const double p_max = e_max / 10.0;

  ASSERT_EQ(nvml_.nvmlDeviceSetPowerManagementLimit(dev(0), 150000), NVML_SUCCESS);
  ASSERT_EQ(machine_->status(0)->power_limit.value(), 150000.0);
  ASSERT_TRUE(machine_->set_utilization(0, 1.0));
  const auto st = machine_->status(0);
  EXPECT_LE(st->power.value(), 150.0);
  EXPECT_LT(st->effective_sm_clock.value(), lookup_sku("V100")->max_sm_mhz);
  ASSERT_TRUE(machine_->set_utilization(0, 0.0));
  unsigned clock = 0;
  ASSERT_EQ(nvml_.nvmlDeviceGetClockInfo(dev(0), NVML_CLOCK_SM, &clock), NVML_SUCCESS);

  const double e1 = machine_->true_energy(0)->value();
  auto t_low = machine_->run_work(0, 10.0);
  ASSERT_TRUE(t_low);
  const double e_low = machine_->true_energy(0)->value() - e1;
  EXPECT_GT(*t_low, *t_max);
  EXPECT_LT(e_low / std::chrono::duration<double>(*t_low).count(), p_max);
  EXPECT_LT(e_low, e_max);  // V100's sweet spot lies below the max limit
  EXPECT_GE(machine_->status(0)->work_done, 20.0);
}

TEST_F(Ideal, LockedClocksCapTheClock) {
  start("1xA100,cpus=0,ideal");
  machine_->set_privilege(Privilege::kEveryone);
  ASSERT_EQ(nvml_.nvmlDeviceSetGpuLockedClocks(dev(0), 210, 1000), NVML_SUCCESS);
  ASSERT_TRUE(machine_->set_utilization(0, 1.0));
  EXPECT_LE(machine_->status(0)->effective_sm_clock.value(), 1000.0);
  unsigned clock = 0;
  ASSERT_EQ(nvml_.nvmlDeviceGetClockInfo(dev(0), NVML_CLOCK_SM, &clock), NVML_SUCCESS);
  EXPECT_LE(clock, 1000u);
  EXPECT_GE(clock, 985u);
  ASSERT_EQ(nvml_.nvmlDeviceResetGpuLockedClocks(dev(0)), NVML_SUCCESS);
  // Back to what the 400 W limit allows a fully busy A100 (it demands more than 400 W at 1410 MHz).
  const Sku& sku = *lookup_sku("A100");
  EXPECT_EQ(machine_->status(0)->effective_sm_clock.value(), model_clock_mhz(sku, 1.0, 400.0, sku.max_sm_mhz));
  EXPECT_LT(machine_->status(0)->effective_sm_clock.value(), 1410.0);
}

TEST_F(Ideal, TemperatureFollowsPower) {
  start("1xH100,cpus=0,ideal");
  unsigned idle = 0, busy = 0;
  ASSERT_EQ(nvml_.nvmlDeviceGetTemperature(dev(0), NVML_TEMPERATURE_GPU, &idle), NVML_SUCCESS);
  ASSERT_TRUE(machine_->set_utilization(0, 1.0));
  ASSERT_TRUE(machine_->advance(200ms));
  nvmlTemperature_t t{};
  t.version = nvmlTemperature_v1;
  t.sensorType = NVML_TEMPERATURE_GPU;
  ASSERT_EQ(nvml_.nvmlDeviceGetTemperatureV(dev(0), &t), NVML_SUCCESS);
  busy = static_cast<unsigned>(t.temperature);
  EXPECT_GT(busy, idle);
  EXPECT_LT(busy, 100u);
  t.version = 1;
  EXPECT_EQ(nvml_.nvmlDeviceGetTemperatureV(dev(0), &t), NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
}

TEST_F(Ideal, RealClockRunWorkSleepsUntilDone) {
  start("1xA100,cpus=0,ideal", /*virtual_clock=*/false);
  const auto t = machine_->run_work(0, 0.05);
  ASSERT_TRUE(t) << t.error().message;
  EXPECT_GE(*t, 50ms);
  EXPECT_LT(*t, 1s);
  EXPECT_GE(machine_->status(0)->work_done, 0.05);
  EXPECT_FALSE(machine_->advance(1ms)) << "advance needs the virtual clock";
}

// A thermal drift heats the GPU while it works and, through leakage, raises the energy per unit
// of work; idle time does not shed the heat (no cooling time constant); ending it drops the heat.
TEST_F(Ideal, ThermalDriftRaisesTemperatureAndEnergyPerWork) {
  start("1xA100,cpus=0");  // faithful: the drift acts per physics step
  auto energy_of = [&](double work) {
    const double e0 = machine_->true_energy(0)->value();
    EXPECT_TRUE(machine_->run_work(0, work));
    return machine_->true_energy(0)->value() - e0;
  };
  auto temperature = [&] {
    unsigned c = 0;
    EXPECT_EQ(nvml_.nvmlDeviceGetTemperature(dev(0), NVML_TEMPERATURE_GPU, &c), NVML_SUCCESS);
    return c;
  };
  const double steady_a = energy_of(1.0), steady_b = energy_of(1.0);
  EXPECT_NEAR(steady_b / steady_a, 1.0, 0.01);
  ASSERT_TRUE(machine_->advance(1s));  // idle (the model's temperature follows the power reading)
  const unsigned cool = temperature();

  ASSERT_TRUE(machine_->set_thermal_drift(0, ThermalDrift{10.0, 0.01, 40.0, 0.0}));
  const double first = energy_of(1.0);
  const double h1 = machine_->status(0)->drift_celsius;
  const double second = energy_of(1.0);
  const double h2 = machine_->status(0)->drift_celsius;
  // The heat rises at 10 °C per second of work (a unit takes a bit over 1 s under the limit).
  EXPECT_GT(h1, 9.5);
  EXPECT_NEAR(h2, 2.0 * h1, 0.5);
  // Energy per unit of work rises by 1 % per °C of the mean heat during each run.
  EXPECT_NEAR(first / steady_a, 1.0 + 0.01 * h1 / 2.0, 0.015);
  EXPECT_NEAR(second / steady_a, 1.0 + 0.01 * (h1 + h2) / 2.0, 0.015);
  ASSERT_TRUE(machine_->advance(5s));  // idle: no cooling without a time constant
  EXPECT_NEAR(machine_->status(0)->drift_celsius, h2, 0.01);
  EXPECT_GE(temperature(), cool + static_cast<unsigned>(h2) - 1);

  ASSERT_TRUE(machine_->set_thermal_drift(0, ThermalDrift{}));  // off: the heat is gone
  EXPECT_EQ(machine_->status(0)->drift_celsius, 0.0);
  EXPECT_NEAR(energy_of(1.0) / steady_a, 1.0, 0.01);

  EXPECT_EQ(machine_->set_thermal_drift(0, ThermalDrift{-1.0}).error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(machine_->set_thermal_drift(3, ThermalDrift{1.0}).error().code, ErrorCode::kNotFound);
}

TEST_F(Ideal, ThermalDriftNeedsTheFaithfulModel) {
  start("1xA100,cpus=0,ideal");
  EXPECT_EQ(machine_->set_thermal_drift(0, ThermalDrift{1.0}).error().code, ErrorCode::kNotSupported);
}

}  // namespace
}  // namespace erg::sim
