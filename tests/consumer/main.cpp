// A C++ user's program against an installed erg: opens a simulated A100 (erg::devices), loads
// it, measures a settled 0.5 s window (erg::measure) and checks the energy against what the
// simulated sensor integrated over the same span. Prints one JSON line; exits 0 when within 1 %.

#include <chrono>
#include <cmath>
#include <cstdio>
#include <thread>

#include "erg/devices/devices.hpp"
#include "erg/measure/energy_monitor.hpp"
#include "erg/sim/machine.hpp"

int main() {
  erg::devices::DeviceOptions options;
  options.simulate = "1xA100,cpus=1";
  options.daemon = erg::devices::DaemonUse::kNever;
  auto devices = erg::devices::open_devices(options);
  if (!devices) {
    std::fprintf(stderr, "consumer: %s\n", devices.error().message.c_str());
    return 1;
  }
  auto& machine = *devices->machine;
  if (auto r = machine.set_utilization(0, 0.8); !r) return 1;
  erg::measure::EnergyMonitorOptions mo;
  mo.settle = true;
  auto monitor = erg::measure::EnergyMonitor::create(devices->inventory.gpus, devices->inventory.cpus, mo);
  if (!monitor) {
    std::fprintf(stderr, "consumer: %s\n", monitor.error().message.c_str());
    return 1;
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(400));  // a schedule to learn
  const auto t0 = machine.now();
  if (auto r = (*monitor)->begin_window("consumer", false); !r) return 1;
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const auto t1 = machine.now();
  auto m = (*monitor)->end_window("consumer", false);
  if (!m) {
    std::fprintf(stderr, "consumer: %s\n", m.error().message.c_str());
    return 1;
  }
  if (!m->gpus.at(0).energy) {
    std::fprintf(stderr, "consumer: %s\n", m->gpus.at(0).error ? m->gpus.at(0).error->message.c_str() : "no energy");
    return 1;
  }
  const double measured = m->gpus.at(0).energy->value();
  auto s0 = machine.sensor_energy_at(0, t0), s1 = machine.sensor_energy_at(0, t1);
  if (!s0 || !s1) return 1;
  const double truth = (*s1 - *s0).value();
  const double error = std::abs(measured - truth) / truth;
  std::printf("{\"simulated\": true, \"gpu_energy_j\": %.3f, \"sensor_energy_j\": %.3f, \"error\": %.5f}\n", measured,
              truth, error);
  return error < 0.01 ? 0 : 2;
}
