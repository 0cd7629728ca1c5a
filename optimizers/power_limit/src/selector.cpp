#include "erg/optimizers/power_limit/selector.hpp"

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <utility>

#include "erg/core/file.hpp"

namespace erg::power_limit {
namespace {

Result<void> check_nonempty(const std::vector<PowerLimitMeasurement>& m) {
  if (m.empty()) return fail(ErrorCode::kInvalidArgument, "no power limit was measured");
  return ok();
}

/// The limit whose key is least; the first such one on a tie (measurements are in descending
/// limit order, so the higher limit wins, as Zeus's min() over its list does).
template <class Key>
Watts argmin(const std::vector<PowerLimitMeasurement>& m, Key key) {
  std::size_t best = 0;
  for (std::size_t i = 1; i < m.size(); ++i)
    if (key(m[i]) < key(m[best])) best = i;
  return m[best].power_limit;
}

Watts highest_limit(const std::vector<PowerLimitMeasurement>& m) {
  Watts w = m.front().power_limit;
  for (const auto& x : m) w = std::max(w, x.power_limit);
  return w;
}

class EnergySelector final : public OptimumSelector {
 public:
  Result<Watts> select(const std::vector<PowerLimitMeasurement>& m) const override {
    if (auto r = check_nonempty(m); !r) return fail(r.error());
    return argmin(m, [](const PowerLimitMeasurement& x) { return x.energy.value(); });
  }
  std::string describe() const override { return "energy"; }
};

class TimeSelector final : public OptimumSelector {
 public:
  Result<Watts> select(const std::vector<PowerLimitMeasurement>& m) const override {
    if (auto r = check_nonempty(m); !r) return fail(r.error());
    return argmin(m, [](const PowerLimitMeasurement& x) { return x.time.count(); });
  }
  std::string describe() const override { return "time"; }
};

class ZeusCostSelector final : public OptimumSelector {
 public:
  ZeusCostSelector(double eta, unsigned world_size) : eta_(eta), world_size_(world_size) {}
  Result<Watts> select(const std::vector<PowerLimitMeasurement>& m) const override {
    if (auto r = check_nonempty(m); !r) return fail(r.error());
    const Watts max_power = highest_limit(m) * static_cast<double>(world_size_);
    return argmin(m, [&](const PowerLimitMeasurement& x) { return zeus_cost(x.energy, x.time, eta_, max_power); });
  }
  std::string describe() const override {
    std::ostringstream s;
    s << "zeus-cost(eta=" << eta_ << ", world_size=" << world_size_ << ")";
    return s.str();
  }

 private:
  double eta_;
  unsigned world_size_;
};

class MaxSlowdownSelector final : public OptimumSelector {
 public:
  explicit MaxSlowdownSelector(double factor) : factor_(factor) {}
  Result<Watts> select(const std::vector<PowerLimitMeasurement>& m) const override {
    if (auto r = check_nonempty(m); !r) return fail(r.error());
    const Watts top = highest_limit(m);
    Seconds reference{0.0};
    for (const auto& x : m)
      if (x.power_limit == top) {
        reference = x.time;
        break;
      }
    // The highest limit always qualifies (its time is the reference), so there is a pick.
    std::optional<Watts> best;
    for (const auto& x : m)
      if (x.time.count() <= factor_ * reference.count() && (!best || x.power_limit < *best)) best = x.power_limit;
    return *best;
  }
  std::string describe() const override {
    std::ostringstream s;
    s << "max-slowdown(factor=" << factor_ << ")";
    return s.str();
  }

 private:
  double factor_;
};

class FunctionSelector final : public OptimumSelector {
 public:
  FunctionSelector(std::function<Result<Watts>(const std::vector<PowerLimitMeasurement>&)> f, std::string name)
      : f_(std::move(f)), name_(std::move(name)) {}
  Result<Watts> select(const std::vector<PowerLimitMeasurement>& m) const override { return f_(m); }
  std::string describe() const override { return name_; }

 private:
  std::function<Result<Watts>(const std::vector<PowerLimitMeasurement>&)> f_;
  std::string name_;
};

}  // namespace

std::shared_ptr<OptimumSelector> energy_selector() { return std::make_shared<EnergySelector>(); }
std::shared_ptr<OptimumSelector> time_selector() { return std::make_shared<TimeSelector>(); }

Result<std::shared_ptr<OptimumSelector>> zeus_cost_selector(double eta, unsigned world_size) {
  if (!(eta >= 0.0 && eta <= 1.0))
    return fail(ErrorCode::kInvalidArgument, "eta_knob must be between 0 and 1, inclusive both sides.");
  if (world_size < 1) return fail(ErrorCode::kInvalidArgument, "world_size must be greater than or equal to 1.");
  return std::make_shared<ZeusCostSelector>(eta, world_size);
}

Result<std::shared_ptr<OptimumSelector>> max_slowdown_selector(double factor) {
  if (!(factor >= 1.0)) {
    std::ostringstream s;
    s << "max_slowdown_factor must be greater than or equal to 1.0. Got " << factor << ".";
    return fail(ErrorCode::kInvalidArgument, s.str());
  }
  return std::make_shared<MaxSlowdownSelector>(factor);
}

std::shared_ptr<OptimumSelector> function_selector(
    std::function<Result<Watts>(const std::vector<PowerLimitMeasurement>&)> select, std::string name) {
  return std::make_shared<FunctionSelector>(std::move(select), std::move(name));
}

double zeus_cost(Joules energy, Seconds time, double eta, Watts max_power) {
  return eta * energy.value() + (1.0 - eta) * max_power.value() * time.count();
}

Result<std::vector<PowerLimitMeasurement>> load_profile(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return fail(ErrorCode::kNotFound, "no profile at " + path.string());
  std::ifstream in(path);
  if (!in) return fail(ErrorCode::kIo, "cannot read the profile " + path.string());
  const std::string where = "profile " + path.string() + ": ";
  nlohmann::json doc = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return fail(ErrorCode::kInvalidArgument, where + "not JSON");
  if (!doc.is_object() || !doc.contains("measurements") || !doc["measurements"].is_array())
    return fail(ErrorCode::kInvalidArgument, where + "no \"measurements\" list");
  std::vector<PowerLimitMeasurement> out;
  for (const auto& e : doc["measurements"]) {
    const std::string at = where + "measurement " + std::to_string(out.size()) + ": ";
    if (!e.is_object()) return fail(ErrorCode::kInvalidArgument, at + "not an object");
    for (const char* k : {"power_limit", "energy", "time"})
      if (!e.contains(k) || !e[k].is_number())
        return fail(ErrorCode::kInvalidArgument, at + "\"" + k + "\" missing or not a number");
    const double pl = e["power_limit"].get<double>();
    if (!(pl > 0) || std::floor(pl) != pl)
      return fail(ErrorCode::kInvalidArgument, at + "\"power_limit\" must be a positive integer (W)");
    const double energy = e["energy"].get<double>(), time = e["time"].get<double>();
    if (!(energy > 0)) return fail(ErrorCode::kInvalidArgument, at + "\"energy\" must be positive (J)");
    if (!(time > 0)) return fail(ErrorCode::kInvalidArgument, at + "\"time\" must be positive (s)");
    out.push_back(PowerLimitMeasurement{Watts(pl), Joules(energy), Seconds(time)});
  }
  return out;
}

std::string profile_json(const std::vector<PowerLimitMeasurement>& measurements, int indent) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& m : measurements) {
    nlohmann::json e;
    e["power_limit"] = static_cast<long long>(std::llround(m.power_limit.value()));
    e["energy"] = m.energy.value();
    e["time"] = m.time.count();
    list.push_back(std::move(e));
  }
  nlohmann::json doc;
  doc["measurements"] = std::move(list);
  return doc.dump(indent);
}

Result<void> save_profile(const std::filesystem::path& path, const std::vector<PowerLimitMeasurement>& measurements) {
  return write_file_atomic(path, profile_json(measurements) + "\n");
}

}  // namespace erg::power_limit
