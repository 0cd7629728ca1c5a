#include "summary.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "app.hpp"
#include "erg/core/file.hpp"

namespace erg::cli {

using nlohmann::json;

namespace {
double round6(double v) { return static_cast<double>(static_cast<long long>(v * 1e6 + (v >= 0 ? 0.5 : -0.5))) / 1e6; }
}  // namespace

json measurement_json(const measure::Measurement& m, const Inventory& inventory) {
  json j;
  j["time_s"] = round6(m.time.count());
  j["simulated"] = inventory.simulated;
  j["gpus"] = json::array();
  for (const auto& g : m.gpus) {
    json e;
    e["index"] = g.index;
    e["name"] = g.index < inventory.gpus.size() ? inventory.gpus[g.index]->name() : "";
    // Unknown energy (the GPU could not be read at an edge, or was lost) is null, never 0.
    e["energy_j"] = g.energy ? json(round6(g.energy->value())) : json(nullptr);
    e["avg_power_w"] =
        g.energy ? json(m.time.count() > 0 ? round6(g.energy->value() / m.time.count()) : 0.0) : json(nullptr);
    e["source"] = std::string(measure::to_string(g.source));
    e["short_window"] = g.short_window;
    e["extrapolated_s"] = round6(g.extrapolated.count());
    e["unread_s"] = round6(g.unread.count());
    e["plain_difference"] = g.plain_difference;
    e["affected"] = g.affected;
    e["counter_restarts"] = g.counter_restarts;
    e["counter_backwards"] = g.counter_backwards;
    e["bridged_s"] = round6(g.bridged.count());
    e["error_bound_j"] = round6(g.error_bound.value());
    e["read_errors"] = g.read_errors;
    if (g.error) {
      e["error"] = g.error->message;
      e["error_code"] = std::string(to_string(g.error->code));
    }
    j["gpus"].push_back(e);
  }
  j["cpus"] = json::array();
  for (const auto& c : m.cpus) {
    json e;
    e["index"] = c.index;
    e["energy_j"] = round6(c.package.value());
    e["dram_energy_j"] = c.dram ? json(round6(c.dram->value())) : json(nullptr);
    e["affected"] = c.affected;
    if (c.error) e["error"] = c.error->message;
    j["cpus"].push_back(e);
  }
  // SoC modules (Jetson): each rail's energy, integrated from power samples by the backend.
  j["socs"] = json::array();
  for (const auto& soc : m.socs) {
    json e;
    e["index"] = soc.index;
    for (const auto& s : inventory.socs)
      if (s->index() == soc.index) e["name"] = s->name();
    e["rails"] = json::array();
    for (const auto& r : soc.rails)
      e["rails"].push_back({{"name", r.name},
                            {"kind", std::string(to_string(r.kind))},
                            {"energy_j", round6(r.energy.value())},
                            {"avg_power_w", m.time.count() > 0 ? round6(r.energy.value() / m.time.count()) : 0.0}});
    // Unknown (a rail could not be read at an edge) is null, never 0.
    e["energy_j"] = soc.error ? json(nullptr) : json(round6(soc.total.value()));
    e["cpu_energy_j"] = soc.cpu && !soc.error ? json(round6(soc.cpu->value())) : json(nullptr);
    e["gpu_energy_j"] = soc.gpu && !soc.error ? json(round6(soc.gpu->value())) : json(nullptr);
    if (soc.error) {
      e["error"] = soc.error->message;
      e["error_code"] = std::string(to_string(soc.error->code));
    }
    j["socs"].push_back(e);
  }
  j["total_energy_j"] = round6(m.total_energy().value());
  // The totals leave out devices whose energy is unknown: say which.
  j["total_missing"] = m.missing_devices();
  return j;
}

std::string measurement_table(const measure::Measurement& m, const Inventory& inventory) {
  std::string out;
  char line[512];
  std::snprintf(line, sizeof line, "\nerg: %.3f s%s\n", m.time.count(),
                inventory.simulated ? "  (SIMULATED machine: model figures, not hardware)" : "");
  out += line;
  std::snprintf(line, sizeof line, "  %-8s %-28s %14s %12s  %s\n", "DEVICE", "NAME", "ENERGY J", "AVG W", "SOURCE");
  out += line;
  auto avg = [&](double j) { return m.time.count() > 0 ? j / m.time.count() : 0.0; };
  for (const auto& g : m.gpus) {
    std::string name = g.index < inventory.gpus.size() ? inventory.gpus[g.index]->name() : "";
    std::string source(measure::to_string(g.source));
    if (g.short_window) source += " (short window)";
    if (g.counter_restarts + g.counter_backwards > 0) {
      char note[96];
      std::snprintf(note, sizeof note, " (counter %s, ±%.1f J)",
                    g.counter_restarts > 0 ? "restarted" : "went backwards", g.error_bound.value());
      source += note;
    }
    if (g.read_errors > 0 && g.energy) source += " (" + std::to_string(g.read_errors) + " failed reads retried)";
    if (g.error) source += (g.energy ? " (last error: " : " error: ") + g.error->message + (g.energy ? ")" : "");
    if (g.energy) {
      std::snprintf(line, sizeof line, "  gpu%-5u %-28.28s %14.3f %12.2f  %s\n", g.index, name.c_str(),
                    g.energy->value(), avg(g.energy->value()), source.c_str());
    } else {
      std::snprintf(line, sizeof line, "  gpu%-5u %-28.28s %14s %12s  %s\n", g.index, name.c_str(), "unknown", "-",
                    source.c_str());
    }
    out += line;
  }
  for (const auto& c : m.cpus) {
    std::snprintf(line, sizeof line, "  cpu%-5u %-28s %14.3f %12.2f  %s\n", c.index, "package", c.package.value(),
                  avg(c.package.value()), c.error ? c.error->message.c_str() : "counter");
    out += line;
    if (c.dram) {
      std::snprintf(line, sizeof line, "  dram%-4u %-28s %14.3f %12.2f  %s\n", c.index, "DRAM", c.dram->value(),
                    avg(c.dram->value()), "counter");
      out += line;
    }
  }
  for (const auto& soc : m.socs) {
    if (soc.error) {
      std::snprintf(line, sizeof line, "  soc%-5u %-28s %14s %12s  error: %s\n", soc.index, "module", "unknown", "-",
                    soc.error->message.c_str());
      out += line;
      continue;
    }
    for (const auto& r : soc.rails) {
      const std::string kind = "integrated (" + std::string(to_string(r.kind)) + " rail)";
      std::snprintf(line, sizeof line, "  soc%-5u %-28.28s %14.3f %12.2f  %s\n", soc.index, r.name.c_str(),
                    r.energy.value(), avg(r.energy.value()), kind.c_str());
      out += line;
    }
    std::snprintf(line, sizeof line, "  soc%-5u %-28s %14.3f %12.2f  %s\n", soc.index, "module total",
                  soc.total.value(), avg(soc.total.value()),
                  std::any_of(soc.rails.begin(), soc.rails.end(),
                              [](const measure::RailEnergy& r) { return r.kind == RailKind::kTotal; })
                      ? "the input rail"
                      : "the sum of the rails");
    out += line;
  }
  const auto missing = m.missing_devices();
  std::string without;
  for (const auto& d : missing) without += (without.empty() ? "  without " : ", ") + d;
  std::snprintf(line, sizeof line, "  %-37s %14.3f %12.2f%s\n", "TOTAL", m.total_energy().value(),
                avg(m.total_energy().value()), without.c_str());
  out += line;
  return out;
}

Result<void> check_writable(const std::string& path) {
  namespace fs = std::filesystem;
  fs::path p(path);
  fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
  std::error_code ec;
  if (fs::is_directory(p, ec)) return fail(ErrorCode::kInvalidArgument, "cannot write " + path + ": is a directory");
  if (!fs::is_directory(dir, ec)) return fail(ErrorCode::kNotFound, "cannot write " + path + ": no such directory");
  if (::access(dir.c_str(), W_OK) != 0)
    return fail(ErrorCode::kNoPermission, "cannot write " + path + ": " + std::strerror(errno));
  if (fs::exists(p, ec) && ::access(p.c_str(), W_OK) != 0)
    return fail(ErrorCode::kNoPermission, "cannot write " + path + ": " + std::strerror(errno));
  return ok();
}

Result<void> write_file_atomically(const std::string& path, const std::string& content) {
  return write_file_atomic(path, content, 0644, /*sync=*/true);
}

std::unique_ptr<measure::EnergyMonitor> make_energy_monitor(const Inventory& inventory,
                                                            const std::vector<unsigned>& gpus,
                                                            const std::vector<unsigned>& cpus, bool settle) {
  measure::EnergyMonitorOptions options;
  options.settle = settle;
  if (!gpus.empty()) options.gpu_indices = gpus;
  if (!cpus.empty()) options.cpu_indices = cpus;
  options.socs = inventory.socs;
  auto monitor = measure::EnergyMonitor::create(inventory.gpus, inventory.cpus, options);
  if (!monitor) throw CliError{kExitUsage, monitor.error().message};
  return std::move(*monitor);
}

}  // namespace erg::cli
