#pragma once
// Shared by `erg run` and `erg energy`: a measurement as JSON and as a human summary.

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "erg/core/discovery.hpp"
#include "erg/measure/energy_monitor.hpp"
#include "erg/measure/measurement.hpp"

namespace erg::cli {

/// {"time_s", "simulated", "gpus": [...], "cpus": [...], "socs": [...], "total_energy_j"} (see README).
nlohmann::json measurement_json(const measure::Measurement& m, const Inventory& inventory);

/// A table for people: time, energy and average power per device, source, totals.
std::string measurement_table(const measure::Measurement& m, const Inventory& inventory);

/// Writes `content` to `path` atomically (temporary file + rename), so a failed run leaves no
/// partial file. Errors name the path.
Result<void> write_file_atomically(const std::string& path, const std::string& content);
/// An EnergyMonitor over the chosen GPUs and CPU packages (empty = all) and every SoC; a bad index throws
/// CliError (usage).
std::unique_ptr<measure::EnergyMonitor> make_energy_monitor(const Inventory& inventory,
                                                            const std::vector<unsigned>& gpus,
                                                            const std::vector<unsigned>& cpus, bool settle);
/// Fails now, before any work, if `path` could not be written later.
Result<void> check_writable(const std::string& path);

}  // namespace erg::cli
