// rapl_probe ROOT: discovers the RAPL packages under ROOT (no keepalive) and prints one JSON
// object: {"cpus":[{"index","name","dram","package_energy_uj"}],"unavailable":[{"source","code","reason"}]}.
// Used by permission_test to run discovery as another user; handy by hand too.

#include <iostream>
#include <nlohmann/json.hpp>

#include "erg/backends/rapl/discovery.hpp"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: rapl_probe POWERCAP_ROOT\n";
    return 2;
  }
  const auto found = erg::rapl::discover(erg::rapl::DiscoveryOptions{std::filesystem::path(argv[1]), false});
  nlohmann::json out;
  out["cpus"] = nlohmann::json::array();
  out["unavailable"] = nlohmann::json::array();
  for (const auto& cpu : found.cpus) {
    auto energy = cpu->package_energy();
    out["cpus"].push_back({{"index", cpu->index()},
                           {"name", cpu->name()},
                           {"dram", cpu->capabilities().dram},
                           {"package_energy_uj", energy ? nlohmann::json(energy->value()) : nlohmann::json()}});
  }
  for (const auto& u : found.unavailable) {
    out["unavailable"].push_back({{"source", u.source}, {"code", erg::to_string(u.code)}, {"reason", u.reason}});
  }
  std::cout << out.dump() << "\n";
  return 0;
}
