#pragma once
/// What the power-limit optimizer measures per limit, and how it picks one (Zeus's
/// OptimumSelector family, reference/zeus.md §4): Energy, Time, ZeusCost(η, world size),
/// MaxSlowdownConstraint(factor), or any user-defined selector. Also the profile file
/// `{"measurements":[{"power_limit":W,"energy":J,"time":s}]}` that Zeus writes and reads.

#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "erg/core/result.hpp"
#include "erg/core/units.hpp"

namespace erg::power_limit {

/// Time and energy of one power limit's profiling window, over every GPU of the job (summed
/// energy, longest time across ranks when a reduction is given).
struct PowerLimitMeasurement {
  Watts power_limit;
  Joules energy;
  Seconds time{0.0};
  friend bool operator==(const PowerLimitMeasurement&, const PowerLimitMeasurement&) = default;
};

/// Picks the power limit to train at from the profile. Implementations must be thread-compatible
/// (the optimizer calls select() from the thread that drives it).
class OptimumSelector {
 public:
  virtual ~OptimumSelector() = default;
  /// One of the measured limits. InvalidArgument for an empty profile.
  [[nodiscard]] virtual Result<Watts> select(const std::vector<PowerLimitMeasurement>& measurements) const = 0;
  /// "energy", "time", "zeus-cost(eta=0.5, world_size=1)", ... for logs and the CLI.
  [[nodiscard]] virtual std::string describe() const = 0;
};

/// The limit with the least energy (the first measured, i.e. the highest limit, on a tie).
std::shared_ptr<OptimumSelector> energy_selector();
/// The limit with the least time (the highest limit on a tie).
std::shared_ptr<OptimumSelector> time_selector();
/// The limit minimizing Zeus's cost η·E + (1 − η)·(maxPL × world_size)·T, maxPL the highest
/// measured limit (highest limit on a tie). InvalidArgument unless 0 ≤ η ≤ 1 and world_size ≥ 1.
Result<std::shared_ptr<OptimumSelector>> zeus_cost_selector(double eta, unsigned world_size);
/// The lowest limit whose time is at most `factor` × the time at the highest measured limit
/// (Zeus compares with the highest limit, not the fastest one). InvalidArgument unless factor ≥ 1.
Result<std::shared_ptr<OptimumSelector>> max_slowdown_selector(double factor);
/// A user-defined selector from a function; `name` is what describe() returns. The function's
/// pick must be one of the measured limits (else InvalidArgument from the optimizer).
std::shared_ptr<OptimumSelector> function_selector(
    std::function<Result<Watts>(const std::vector<PowerLimitMeasurement>&)> select, std::string name);

/// Zeus's time–energy cost: η·energy + (1 − η)·max_power·time, in joules.
[[nodiscard]] double zeus_cost(Joules energy, Seconds time, double eta, Watts max_power);

/// Reads a profile file. Errors: NotFound (no such file), Io, InvalidArgument (not JSON, no
/// "measurements" list, or an entry whose power_limit is not a positive integer number of watts
/// or whose energy or time is not a positive number — Zeus's PositiveInt/PositiveFloat); fields
/// other than these three are ignored, as Zeus's parser does.
Result<std::vector<PowerLimitMeasurement>> load_profile(const std::filesystem::path& path);
/// Writes a profile file (indented by 4, as Zeus writes it) atomically. Errors: Io.
Result<void> save_profile(const std::filesystem::path& path, const std::vector<PowerLimitMeasurement>& measurements);
/// The profile as the JSON text save_profile writes.
std::string profile_json(const std::vector<PowerLimitMeasurement>& measurements, int indent = 4);

}  // namespace erg::power_limit
