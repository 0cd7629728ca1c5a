// `erg devices`: what erg can measure and control on this machine.

#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "app.hpp"

namespace erg::cli {
namespace {

using nlohmann::json;

json gpu_json(Gpu& gpu) {
  const auto& caps = gpu.capabilities();
  json j;
  j["index"] = gpu.index();
  j["physical_index"] = gpu.physical_index();
  j["vendor"] = std::string(to_string(gpu.vendor()));
  j["name"] = gpu.name();
  j["uuid"] = gpu.uuid();
  j["pci_address"] = gpu.pci_address().empty() ? json(nullptr) : json(gpu.pci_address());
  j["architecture"] = gpu.architecture();
  j["energy_counter"] = caps.energy_counter;
  auto limit = gpu.power_limit();
  j["power_limit_mw"] = limit ? json(static_cast<long long>(limit->value())) : json(nullptr);
  auto range = gpu.power_limit_constraints();
  j["power_limit_range_mw"] =
      range ? json::array({static_cast<long long>(range->min.value()), static_cast<long long>(range->max.value())})
            : json(nullptr);
  json domains = json::array();
  for (auto d : caps.power_domains) domains.push_back(std::string(to_string(d)));
  j["power_domains"] = domains;
  auto period = caps.energy_counter ? caps.energy_update_period : caps.power_update_period;
  j["update_period_ms"] = period ? json(static_cast<double>(period->count()) / 1000.0) : json(nullptr);
  return j;
}

json cpu_json(Cpu& cpu) {
  const auto& caps = cpu.capabilities();
  json j;
  j["index"] = cpu.index();
  j["name"] = cpu.name();
  j["dram"] = caps.dram;
  j["max_energy_range_uj"] =
      caps.max_energy_range ? json(static_cast<unsigned long long>(caps.max_energy_range->value())) : json(nullptr);
  return j;
}

json soc_json(Soc& soc) {
  const auto& caps = soc.capabilities();
  json j;
  j["index"] = soc.index();
  j["name"] = soc.name();
  j["rails"] = json::array();
  for (const auto& r : caps.rails) j["rails"].push_back({{"name", r.name}, {"kind", std::string(to_string(r.kind))}});
  j["has_total_rail"] = caps.has_total_rail;
  j["update_period_ms"] =
      caps.update_period ? json(static_cast<double>(caps.update_period->count()) / 1000.0) : json(nullptr);
  j["sample_period_ms"] =
      caps.sample_period ? json(static_cast<double>(caps.sample_period->count()) / 1000.0) : json(nullptr);
  return j;
}

json inventory_json(const Inventory& inv) {
  json j;
  j["simulated"] = inv.simulated;
  j["gpus"] = json::array();
  for (const auto& g : inv.gpus) j["gpus"].push_back(gpu_json(*g));
  j["cpus"] = json::array();
  for (const auto& c : inv.cpus) j["cpus"].push_back(cpu_json(*c));
  j["socs"] = json::array();
  for (const auto& s : inv.socs) j["socs"].push_back(soc_json(*s));
  j["unavailable"] = json::array();
  for (const auto& u : inv.unavailable)
    j["unavailable"].push_back({{"source", u.source}, {"code", std::string(to_string(u.code))}, {"reason", u.reason}});
  return j;
}

std::string watts(const json& mw) {
  if (mw.is_null()) return "-";
  std::ostringstream s;
  s << mw.get<long long>() / 1000;
  return s.str();
}

void print_table(const json& j) {
  std::printf("%s\n", j["simulated"].get<bool>()
                          ? "Devices (SIMULATED machine: figures come from erg's device model, not hardware)"
                          : "Devices");
  if (!j["gpus"].empty()) {
    std::printf("\n%-4s %-5s %-26s %-10s %-8s %-8s %-10s %s\n", "GPU", "PHYS", "NAME", "ARCH", "ENERGY", "LIMIT W",
                "RANGE W", "POWER DOMAINS");
    for (const auto& g : j["gpus"]) {
      std::string domains;
      for (const auto& d : g["power_domains"]) domains += (domains.empty() ? "" : ",") + d.get<std::string>();
      std::string range = g["power_limit_range_mw"].is_null()
                              ? "-"
                              : watts(g["power_limit_range_mw"][0]) + "-" + watts(g["power_limit_range_mw"][1]);
      std::printf("%-4d %-5d %-26s %-10s %-8s %-8s %-10s %s\n", g["index"].get<int>(), g["physical_index"].get<int>(),
                  g["name"].get<std::string>().c_str(), g["architecture"].get<std::string>().c_str(),
                  g["energy_counter"].get<bool>() ? "counter" : "no", watts(g["power_limit_mw"]).c_str(), range.c_str(),
                  domains.empty() ? "-" : domains.c_str());
    }
  }
  if (!j["cpus"].empty()) {
    std::printf("\n%-4s %-16s %-5s %s\n", "CPU", "NAME", "DRAM", "COUNTER RANGE");
    for (const auto& c : j["cpus"]) {
      std::string range = c["max_energy_range_uj"].is_null()
                              ? "-"
                              : std::to_string(c["max_energy_range_uj"].get<unsigned long long>() / 1000000) + " J";
      std::printf("%-4d %-16s %-5s %s\n", c["index"].get<int>(), c["name"].get<std::string>().c_str(),
                  c["dram"].get<bool>() ? "yes" : "no", range.c_str());
    }
  }
  if (!j["socs"].empty()) {
    std::printf("\n%-4s %-8s %s\n", "SOC", "NAME", "RAILS (kind)");
    for (const auto& s : j["socs"]) {
      std::string rails;
      for (const auto& r : s["rails"])
        rails += (rails.empty() ? "" : ", ") + r["name"].get<std::string>() + " (" + r["kind"].get<std::string>() + ")";
      std::printf("%-4d %-8s %s\n", s["index"].get<int>(), s["name"].get<std::string>().c_str(), rails.c_str());
    }
  }
  if (j["gpus"].empty() && j["cpus"].empty() && j["socs"].empty())
    std::printf("\nNo usable GPU, CPU or SoC energy source found.\n");
  if (!j["unavailable"].empty()) {
    std::printf("\nUnavailable:\n");
    for (const auto& u : j["unavailable"])
      std::printf("  %s: %s\n", u["source"].get<std::string>().c_str(), u["reason"].get<std::string>().c_str());
  }
}

}  // namespace

void add_devices_command(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand("devices",
                                 "List the GPUs, CPU packages and SoC rails erg can measure, and what is unavailable");
  auto as_json = std::make_shared<bool>(false);
  cmd->add_flag("--json", *as_json, "Print one JSON object instead of a table");
  cmd->callback([&ctx, as_json] {
    auto inventory = ctx.discover();
    if (!inventory) throw CliError{kExitUsage, inventory.error().message};
    json j = inventory_json(*inventory);
    if (*as_json) {
      std::cout << j.dump() << "\n";
    } else {
      print_table(j);
    }
    std::cout.flush();
    ctx.exit_code = kExitOk;
  });
}

}  // namespace erg::cli
