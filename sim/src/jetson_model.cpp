#include "jetson_model.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace erg::sim::detail {

namespace {

constexpr std::int64_t kConversionNs = 1'100'000;  // INA3221 default conversion time
constexpr double kShuntLsbV = 40e-6;               // shunt voltage register LSB
constexpr double kBusLsbV = 8e-3;                  // bus voltage register LSB
constexpr double kNoise = 0.05;                    // σ of a rail's power per 1 ms step (relative)
constexpr double kRipple = 0.002;                  // σ of the bus voltage per conversion (relative)
constexpr double kAdcNoiseLsb = 0.8;               // σ of a conversion, shunt LSBs

std::uint64_t rail_key(const State& s, unsigned r, std::uint64_t salt, std::int64_t k) {
  return mix64(s.seed ^ mix64(0x4a45545300ULL + r * 0x9e37ULL + salt) ^ static_cast<std::uint64_t>(k));
}

std::int64_t sub_cycle(const JetsonState& j, const RailState& r) {
  return static_cast<std::int64_t>(r.chip_channels) * 2 * j.conversion_ns;
}

/// Start of the rail's shunt slot number m.
std::int64_t slot_start(const JetsonState& j, const RailState& r, std::int64_t m) {
  return j.origin_ns + m * sub_cycle(j, r) + static_cast<std::int64_t>(r.position) * 2 * j.conversion_ns;
}

/// The slot index whose start is at or before t.
std::int64_t slot_at(const JetsonState& j, const RailState& r, std::int64_t t) {
  const std::int64_t rel = t - slot_start(j, r, 0);
  const std::int64_t c = sub_cycle(j, r);
  return rel >= 0 ? rel / c : -((-rel + c - 1) / c);
}

void new_step(State& s) {
  JetsonState& j = s.jetson;
  double others = 0.0;
  for (unsigned i = 0; i < j.rail_count; ++i) {
    RailState& r = j.rails[i];
    const double noise = s.faithful ? kNoise * gauss(rail_key(s, i, 1, j.step_index)) : 0.0;
    r.step_w = std::max(0.0, r.power_w * (1.0 + noise));
    if (r.input == 0) others += r.step_w;
  }
  for (unsigned i = 0; i < j.rail_count; ++i)
    if (j.rails[i].input != 0) j.rails[i].step_w += others;
}

void publish(State& s, unsigned i, std::int64_t m) {
  JetsonState& j = s.jetson;
  RailState& r = j.rails[i];
  const double p = r.avg_w / std::max(1u, r.avg_count);
  r.avg_w = 0.0;
  r.avg_count = 0;
  const double v = r.bus_v * (1.0 + (s.faithful ? kRipple * gauss(rail_key(s, i, 2, m)) : 0.0));
  const double amps = p / v;
  const double shunt_ohm = r.shunt_uohm * 1e-6 * (1.0 + r.shunt_gain);
  double shunt_code = amps * shunt_ohm / kShuntLsbV;
  if (s.faithful) shunt_code += kAdcNoiseLsb * gauss(rail_key(s, i, 3, m));
  const auto shunt_lsb = static_cast<std::int64_t>(std::max(0.0, std::round(shunt_code)));
  const auto bus_lsb = static_cast<std::int64_t>(std::round(v / kBusLsbV));
  // The driver: shunt µV × 1000 / nominal µΩ = mA (rounded to nearest); bus LSBs × 8 mV.
  const std::int64_t shunt_uv = shunt_lsb * 40;
  r.curr_ma = static_cast<std::int32_t>((shunt_uv * 1000 + r.shunt_uohm / 2) / r.shunt_uohm);
  r.in_mv = static_cast<std::int32_t>(bus_lsb * 8);
  ++r.updates;
}

}  // namespace

void init_jetson(State& s, JetsonLayout layout, std::int64_t now) {
  JetsonState& j = s.jetson;
  const auto rails = jetson_rails(layout);
  j.layout = static_cast<std::int32_t>(layout);
  j.rail_count = static_cast<std::uint32_t>(std::min<std::size_t>(rails.size(), kMaxRails));
  j.samples = 1;
  j.conversion_ns = kConversionNs;
  j.last_ns = now;
  j.step_index = (now - s.created_ns) / kStepNs;
  // Chips in address order are hwmon1, hwmon2, ... (hwmon0 is a thermal sensor).
  unsigned hwmon = 0, last_address = 0;
  for (unsigned i = 0; i < j.rail_count; ++i) {
    RailState& r = j.rails[i];
    const RailSpec& spec = rails[i];
    std::strncpy(r.label, spec.label.c_str(), sizeof r.label - 1);
    r.address = spec.address;
    r.channel = spec.channel;
    r.shunt_uohm = spec.shunt_uohm;
    r.input = spec.label == "VDD_IN" ? 1 : 0;
    r.bus_v = spec.bus_v;
    r.power_w = spec.idle_w;
    if (i == 0 || spec.address != last_address) ++hwmon;
    last_address = spec.address;
    r.hwmon = hwmon;
    r.position = 0;
    r.chip_channels = 0;
    for (unsigned k = 0; k < j.rail_count; ++k)
      if (rails[k].address == spec.address) {
        if (k < i) ++r.position;
        ++r.chip_channels;
      }
    r.shunt_gain = s.faithful ? 0.01 * (2.0 * uniform01(rail_key(s, i, 4, 0)) - 1.0) : 0.0;
  }
  // The first slot starts after `now` (a whole one); the chip has been converting all along, so
  // the files start with a reading of the idle power.
  j.origin_ns =
      now + (s.faithful ? static_cast<std::int64_t>(uniform01(mix64(s.seed ^ 0x494e41ULL)) * 6.0 * kConversionNs) : 0);
  new_step(s);
  for (unsigned i = 0; i < j.rail_count; ++i) {
    j.rails[i].avg_w = j.rails[i].step_w;
    j.rails[i].avg_count = 1;
    publish(s, i, -1);
  }
}

unsigned jetson_update_interval_ms(const State& s, unsigned rail) {
  const JetsonState& j = s.jetson;
  const double ms = static_cast<double>(sub_cycle(j, j.rails[rail])) * j.samples * 1e-6;
  return static_cast<unsigned>(std::lround(ms));
}

void advance_jetson(State& s, std::int64_t now) {
  JetsonState& j = s.jetson;
  if (j.layout < 0 || j.rail_count == 0) return;
  while (j.last_ns < now) {
    const std::int64_t t = j.last_ns;
    const std::int64_t step_end = s.created_ns + (j.step_index + 1) * kStepNs;
    std::int64_t next = std::min(now, step_end);
    for (unsigned i = 0; i < j.rail_count; ++i) {
      const RailState& r = j.rails[i];
      const std::int64_t m = slot_at(j, r, t);
      const std::int64_t start = slot_start(j, r, m);
      const std::int64_t boundary = t < start + j.conversion_ns ? start + j.conversion_ns : slot_start(j, r, m + 1);
      next = std::min(next, boundary);
    }
    const double dt = static_cast<double>(next - t) * 1e-9;
    for (unsigned i = 0; i < j.rail_count; ++i) {
      RailState& r = j.rails[i];
      r.energy_j += r.step_w * dt;
      const std::int64_t m = slot_at(j, r, t);
      const std::int64_t start = slot_start(j, r, m);
      if (t >= start && t < start + j.conversion_ns) {
        r.slot_j += r.step_w * dt;
        if (next == start + j.conversion_ns) {  // the slot's conversion is done
          r.avg_w += r.slot_j / (static_cast<double>(j.conversion_ns) * 1e-9);
          r.slot_j = 0.0;
          if (++r.avg_count >= j.samples) publish(s, i, m);
        }
      }
    }
    j.last_ns = next;
    if (next == step_end) {
      ++j.step_index;
      new_step(s);
    }
  }
}

}  // namespace erg::sim::detail
