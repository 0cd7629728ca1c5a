// Run by the cross-process tests (often as user nobody): discovers devices the way a user
// program does (erg::devices::open_devices, which uses ergd when ERG_DAEMON_SOCK is set), reads CPU
// energy and sets GPU 0's power limit to argv[1] mW. Prints one JSON line.

#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "erg/devices/devices.hpp"

int main(int argc, char** argv) {
  double limit_mw = argc > 1 ? std::stod(argv[1]) : 200000.0;
  nlohmann::json out;
  auto devices = erg::devices::open_devices();
  if (!devices) {
    out["error"] = devices.error().message;
    std::cout << out.dump() << std::endl;
    return 1;
  }
  const erg::Inventory* inv = &devices->inventory;
  out["gpus"] = inv->gpus.size();
  out["cpus"] = inv->cpus.size();
  for (const auto& u : inv->unavailable)
    out["unavailable"].push_back({{"source", u.source}, {"code", erg::to_string(u.code)}, {"reason", u.reason}});
  if (!inv->cpus.empty()) {
    auto e = inv->cpus[0]->package_energy();
    if (e)
      out["cpu_energy_uj"] = e->value();
    else
      out["cpu_error"] = {{"code", erg::to_string(e.error().code)}, {"message", e.error().message}};
  }
  if (!inv->gpus.empty()) {
    auto r = inv->gpus[0]->set_power_limit(erg::MilliWatts(limit_mw));
    if (r)
      out["set_limit"] = "ok";
    else
      out["set_limit_error"] = {{"code", erg::to_string(r.error().code)}, {"message", r.error().message}};
    if (auto l = inv->gpus[0]->power_limit()) out["limit_mw"] = l->value();
  }
  std::cout << out.dump() << std::endl;
  return 0;
}
