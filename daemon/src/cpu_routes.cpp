// The cpu-read group: /cpu/get_cumulative_energy and /cpu/get_power.

#include "cpu_routes.hpp"

#include <chrono>
#include <map>
#include <thread>

#include "replies.hpp"

namespace erg::daemon {

using nlohmann::json;

Reply cpu_get_cumulative_energy(const DeviceSlots& devices, const protocol::Query& query) {
  auto want_cpu = query.get_bool("cpu");
  if (!want_cpu) return text_reply(400, want_cpu.error().message);
  auto want_dram = query.get_bool("dram");
  if (!want_dram) return text_reply(400, want_dram.error().message);
  std::vector<unsigned> ids;
  if (auto bad = select_ids(query, "cpu_ids", devices.cpus.size(), "CPU", ids)) return std::move(*bad);

  std::map<unsigned, Error> errors;
  json body = json::object();
  for (unsigned id : ids) {
    Cpu& cpu = *devices.cpus[id].cpu;
    json entry = {{"cpu_energy_uj", nullptr}, {"dram_energy_uj", nullptr}};
    if (want_cpu->value_or(false)) {
      auto e = read_retrying([&] { return cpu.package_energy(); });
      if (!e) {
        errors.emplace(id, std::move(e.error()));
        continue;
      }
      entry["cpu_energy_uj"] = to_u64(e->value());
    }
    if (want_dram->value_or(false) && cpu.capabilities().dram) {
      auto e = read_retrying([&] { return cpu.dram_energy(); });
      if (!e) {
        errors.emplace(id, std::move(e.error()));
        continue;
      }
      entry["dram_energy_uj"] = to_u64(e->value());
    }
    body[std::to_string(id)] = entry;
  }
  return aggregate(errors, body);
}

Reply cpu_get_power(const DeviceSlots& devices, const protocol::Query& query, double poll_hz) {
  std::vector<unsigned> ids;
  if (auto bad = select_ids(query, "cpu_ids", devices.cpus.size(), "CPU", ids)) return std::move(*bad);
  struct First {
    double pkg_uj = 0;
    std::optional<double> dram_uj;
  };
  std::map<unsigned, Error> errors;
  std::map<unsigned, First> first;
  for (unsigned id : ids) {
    Cpu& cpu = *devices.cpus[id].cpu;
    auto e = read_retrying([&] { return cpu.package_energy(); });
    if (!e) {
      errors.emplace(id, std::move(e.error()));
      continue;
    }
    First f{e->value(), std::nullopt};
    if (cpu.capabilities().dram)
      if (auto d = cpu.dram_energy()) f.dram_uj = d->value();
    first[id] = f;
  }
  auto t0 = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(1.0 / poll_hz));
  json power = json::object();
  for (const auto& [id, f] : first) {
    Cpu& cpu = *devices.cpus[id].cpu;
    auto e = read_retrying([&] { return cpu.package_energy(); });
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!e) {
      errors.emplace(id, std::move(e.error()));
      continue;
    }
    json entry = {{"cpu_mw", to_u64((e->value() - f.pkg_uj) / 1000.0 / secs)}, {"dram_mw", nullptr}};
    if (f.dram_uj)
      if (auto d = cpu.dram_energy()) entry["dram_mw"] = to_u64((d->value() - *f.dram_uj) / 1000.0 / secs);
    power[std::to_string(id)] = entry;
  }
  return aggregate(errors, json{{"timestamp_ms", unix_ms()}, {"power_mw", power}});
}

}  // namespace erg::daemon
