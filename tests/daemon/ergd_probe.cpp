// Run by the cross-process tests (often as user nobody): discovers devices the way a user
// program does (erg::devices::open_devices, which uses ergd when ERG_DAEMON_SOCK is set), reads CPU
// energy and sets GPU 0's power limit to argv[1] mW. Prints one JSON line.
// `ergd_probe attribution`: reads ergd's /attribution (ERG_DAEMON_SOCK) with the client library
// and prints what it parsed as one JSON line.

#include <cstdlib>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "erg/client/attribution.hpp"
#include "erg/devices/devices.hpp"

namespace {

int attribution() {
  const char* sock = std::getenv("ERG_DAEMON_SOCK");
  erg::client::Connection c(erg::client::Endpoint{sock ? sock : ""});
  auto a = erg::client::get_attribution(c);
  nlohmann::json out;
  if (!a) {
    out["error"] = a.error().message;
    std::cout << out.dump() << std::endl;
    return 1;
  }
  out["sees_all_processes"] = a->sees_all_processes;
  out["uid"] = a->uid ? nlohmann::json(*a->uid) : nlohmann::json(nullptr);
  for (const auto& g : a->gpus) {
    nlohmann::json j{{"attributable", g.attributable},
                     {"error", g.error},
                     {"measured_j", g.measured_j},
                     {"sum_j", g.sum_j()},
                     {"other_pids", g.other_users.processes},
                     {"other_j", g.other_users.energy_j}};
    j["pids"] = nlohmann::json::array();
    for (const auto& p : g.processes)
      j["pids"].push_back({{"pid", p.pid},
                           {"uid", p.uid ? *p.uid : 4294967295u},
                           {"energy_j", p.energy_j},
                           {"bound_j", p.bound_j},
                           {"comm", p.comm}});
    out["gpus"][std::to_string(g.gpu)] = std::move(j);
  }
  for (const auto& [id, e] : a->errors) out["errors"][std::to_string(id)] = e.message;
  std::cout << out.dump() << std::endl;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "attribution") return attribution();
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
