#include "erg/measure/measurement.hpp"

namespace erg::measure {

std::string_view to_string(EnergySource source) {
  switch (source) {
    case EnergySource::kCounter: return "counter";
    case EnergySource::kIntegrated: return "integrated";
    case EnergySource::kInstantApprox: return "instant_approx";
  }
  return "unknown";
}

Joules Measurement::gpu_energy() const {
  Joules sum;
  for (const auto& g : gpus)
    if (g.energy) sum += *g.energy;
  return sum;
}

Joules Measurement::cpu_energy() const {
  Joules sum;
  for (const auto& c : cpus) sum += c.package;
  return sum;
}

Joules Measurement::dram_energy() const {
  Joules sum;
  for (const auto& c : cpus)
    if (c.dram) sum += *c.dram;
  return sum;
}

Joules Measurement::soc_energy() const {
  Joules sum{0.0};
  for (const auto& s : socs)
    if (!s.error) sum = sum + s.total;
  return sum;
}

Joules Measurement::total_energy() const { return gpu_energy() + cpu_energy() + dram_energy() + soc_energy(); }

std::vector<std::string> Measurement::missing_devices() const {
  std::vector<std::string> out;
  for (const auto& g : gpus)
    if (!g.energy) out.push_back("gpu" + std::to_string(g.index));
  for (const auto& s : socs)
    if (s.error) out.push_back("soc" + std::to_string(s.index));
  return out;
}

bool Measurement::affected() const {
  for (const auto& g : gpus)
    if (g.affected || g.error) return true;
  for (const auto& c : cpus)
    if (c.affected || c.error) return true;
  for (const auto& s : socs)
    if (s.error) return true;
  return false;
}

}  // namespace erg::measure
