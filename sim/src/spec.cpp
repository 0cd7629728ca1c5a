#include "erg/sim/spec.hpp"

#include <cctype>
#include <charconv>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "state.hpp"

namespace erg::sim {
namespace {

using detail::kMaxCpus;
using detail::kMaxGpus;

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

bool parse_uint(std::string_view s, unsigned& out) {
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size();
}

tl::unexpected<Error> bad(std::string_view token, std::string_view why) {
  return fail(ErrorCode::kInvalidArgument,
              "invalid simulated machine spec: '" + std::string(token) + "': " + std::string(why) +
                  " (known GPUs: " + std::string(known_sku_list()) +
                  "; form: 4xA100, 2xH100,1xV100,cpus=2, psys, jetson=orin, ideal, seed=N, "
                  "timestamps=read|update, rapl=random|zero|near-wrap, amdsmi=24|25|26, 1xMI300X:frozen|backwards, "
                  "or a .json file)");
}

std::string lowered(std::string_view s) {
  std::string out;
  for (char c : s) out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool parse_u64(std::string_view s, std::uint64_t& out) {
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size();
}

std::optional<TimestampMeaning> parse_timestamps(std::string_view v) {
  const std::string l = lowered(v);
  if (l == "read" || l == "read-time" || l == "read_time") return TimestampMeaning::kReadTime;
  if (l == "update" || l == "update-time" || l == "update_time") return TimestampMeaning::kUpdateTime;
  return std::nullopt;
}

std::optional<RaplStart> parse_rapl_start(std::string_view v) {
  const std::string l = lowered(v);
  if (l == "random") return RaplStart::kRandom;
  if (l == "zero") return RaplStart::kZero;
  if (l == "near-wrap" || l == "near_wrap" || l == "nearwrap") return RaplStart::kNearWrap;
  return std::nullopt;
}

std::optional<ModelKind> parse_model_kind(std::string_view v) {
  const std::string l = lowered(v);
  if (l == "faithful") return ModelKind::kFaithful;
  if (l == "ideal") return ModelKind::kIdeal;
  return std::nullopt;
}

/// A model option token (`ideal`, `seed=7`, ...): true if it was one (errors go to `err`).
bool model_token(std::string_view token, const std::string& lower, ModelSpec& model, std::optional<Error>& err) {
  if (auto k = parse_model_kind(lower)) {
    model.kind = *k;
    return true;
  }
  auto value_of = [&](std::string_view key) -> std::optional<std::string_view> {
    if (lower.size() > key.size() && lower.compare(0, key.size(), key) == 0 && lower[key.size()] == '=')
      return trim(token.substr(key.size() + 1));
    return std::nullopt;
  };
  if (auto v = value_of("seed")) {
    if (!parse_u64(*v, model.seed)) err = bad(token, "seed= needs a non-negative integer").value();
    return true;
  }
  if (auto v = value_of("timestamps")) {
    if (auto t = parse_timestamps(*v))
      model.timestamps = *t;
    else
      err = bad(token, "timestamps= is read or update").value();
    return true;
  }
  if (auto v = value_of("amdsmi")) {
    unsigned abi = 0;
    if (!parse_uint(*v, abi) || abi < 24 || abi > 26)
      err = bad(token, "amdsmi= is the AMD SMI ABI: 24, 25 or 26").value();
    else
      model.amdsmi_abi = abi;
    return true;
  }
  if (auto v = value_of("rapl")) {
    if (auto r = parse_rapl_start(*v))
      model.rapl_start = *r;
    else
      err = bad(token, "rapl= is random, zero or near-wrap").value();
    return true;
  }
  return false;
}

std::optional<CounterMode> parse_counter_mode(std::string_view v) {
  const std::string l = lowered(v);
  if (l == "ok" || l == "normal") return CounterMode::kNormal;
  if (l == "frozen") return CounterMode::kFrozen;
  if (l == "backwards") return CounterMode::kBackwards;
  return std::nullopt;
}

/// Lowercase with '-' as '_' (so "random-walk" and "random_walk" are the same name).
std::string name_of(std::string_view v) {
  std::string l = lowered(trim(v));
  for (char& c : l)
    if (c == '-') c = '_';
  return l;
}

std::optional<Schedule> parse_schedule(std::string_view v) {
  const std::string l = name_of(v);
  if (l == "grid") return Schedule::kGrid;
  if (l == "random_walk") return Schedule::kRandomWalk;
  if (l == "phase_jumps") return Schedule::kPhaseJumps;
  if (l == "skips") return Schedule::kSkips;
  if (l == "period_change") return Schedule::kPeriodChange;
  return std::nullopt;
}

std::optional<StampMode> parse_stamp_mode(std::string_view v) {
  const std::string l = name_of(v);
  if (l == "update") return StampMode::kUpdate;
  if (l == "read") return StampMode::kRead;
  if (l == "interval_start") return StampMode::kIntervalStart;
  if (l == "floored") return StampMode::kFloored;
  if (l == "unrelated") return StampMode::kUnrelated;
  return std::nullopt;
}

std::optional<Increment> parse_increment(std::string_view v) {
  const std::string l = name_of(v);
  if (l == "whole") return Increment::kWhole;
  if (l == "partial") return Increment::kPartial;
  if (l == "partial_nominal") return Increment::kPartialNominal;
  return std::nullopt;
}

std::optional<AverageMode> parse_average(std::string_view v) {
  const std::string l = name_of(v);
  if (l == "boxcar") return AverageMode::kBoxcar;
  if (l == "exponential") return AverageMode::kExponential;
  return std::nullopt;
}

/// One sensor-zoo field of a JSON GPU object: true if `key` was one (errors go to `err`).
bool zoo_field(const std::string& key, const nlohmann::json& v, GpuSpec& gs, std::optional<Error>& err) {
  auto text = [&] { return key + "=" + v.dump(); };
  auto named = [&](auto parse, auto& out, std::string_view allowed) {
    auto value = v.is_string() ? parse(v.template get<std::string>()) : std::nullopt;
    if (value)
      out = *value;
    else
      err = bad(text(), key + " is " + std::string(allowed)).value();
  };
  auto number = [&](std::optional<double>& out, double lo, double hi, std::string_view unit) {
    const double x = v.is_number() ? v.get<double>() : std::nan("");
    if (x >= lo && x <= hi) {
      out = x;
      return;
    }
    std::ostringstream os;
    os << key << " is a number of " << unit << " within " << lo << ".." << hi;
    err = bad(text(), os.str()).value();
  };
  if (key == "schedule") {
    named(parse_schedule, gs.schedule, "\"grid\", \"random_walk\", \"phase_jumps\", \"skips\" or \"period_change\"");
  } else if (key == "stamps") {
    named(parse_stamp_mode, gs.stamps, "\"update\", \"read\", \"interval_start\", \"floored\" or \"unrelated\"");
  } else if (key == "increment") {
    named(parse_increment, gs.increment, "\"whole\", \"partial\" or \"partial_nominal\"");
  } else if (key == "average") {
    named(parse_average, gs.average, "\"boxcar\" or \"exponential\"");
  } else if (key == "phase_jump_s") {
    number(gs.phase_jump_s, 0.01, 3600.0, "seconds");
  } else if (key == "skip_share") {
    number(gs.skip_share, 0.0, 0.5, "updates (a share)");
  } else if (key == "change_at_s") {
    number(gs.change_at_s, 0.0, 3600.0, "seconds");
  } else if (key == "period_after_ms") {
    number(gs.period_after_ms, 1.0, 10000.0, "ms");
  } else if (key == "publish_delay_ms") {
    number(gs.publish_delay_ms, 0.0, 5000.0, "ms");
  } else if (key == "stamp_unit_ms") {
    number(gs.stamp_unit_ms, 0.001, 3600000.0, "ms");
  } else {
    return false;
  }
  return true;
}

/// The sensor-zoo fields that only apply to one mode, and partial_sampling against increment.
Result<void> check_zoo(const GpuSpec& gs) {
  auto needs = [&](const char* field, bool given, bool ok, const char* what) -> Result<void> {
    if (given && !ok) return bad(field, std::string(field) + " needs " + what);
    return erg::ok();
  };
  const Schedule sch = gs.schedule.value_or(Schedule::kGrid);
  if (auto r = needs("phase_jump_s", gs.phase_jump_s.has_value(), sch == Schedule::kPhaseJumps,
                     "\"schedule\": \"phase_jumps\"");
      !r)
    return r;
  if (auto r = needs("skip_share", gs.skip_share.has_value(), sch == Schedule::kSkips, "\"schedule\": \"skips\""); !r)
    return r;
  if (auto r = needs("change_at_s", gs.change_at_s.has_value(), sch == Schedule::kPeriodChange,
                     "\"schedule\": \"period_change\"");
      !r)
    return r;
  if (auto r = needs("period_after_ms", gs.period_after_ms.has_value(), sch == Schedule::kPeriodChange,
                     "\"schedule\": \"period_change\"");
      !r)
    return r;
  if (auto r = needs("stamp_unit_ms", gs.stamp_unit_ms.has_value(), gs.stamps == StampMode::kFloored,
                     "\"stamps\": \"floored\"");
      !r)
    return r;
  if (gs.partial_sampling && gs.increment && *gs.partial_sampling != (*gs.increment != Increment::kWhole))
    return bad("partial_sampling", "partial_sampling " + std::string(*gs.partial_sampling ? "true" : "false") +
                                       " contradicts increment \"" + std::string(to_string(*gs.increment)) +
                                       "\" (partial_sampling false is \"whole\", true \"partial\" or "
                                       "\"partial_nominal\")");
  return erg::ok();
}

/// Appends the GPUs of one card: one, or one per die of a dual-die card.
void push_card(std::vector<GpuSpec>& gpus, const Sku& sku, GpuSpec spec) {
  spec.sku = std::string(sku.key);
  gpus.push_back(spec);
  if (!sku.second_die.empty()) {
    spec.sku = std::string(sku.second_die);
    spec.uuid.reset();
    gpus.push_back(std::move(spec));
  }
}

Result<void> check_counts(const MachineSpec& spec, std::string_view token) {
  if (spec.gpus.size() > kMaxGpus) return bad(token, "at most " + std::to_string(kMaxGpus) + " GPUs");
  if (spec.cpus.size() > kMaxCpus) return bad(token, "at most " + std::to_string(kMaxCpus) + " CPU packages");
  return ok();
}

Result<MachineSpec> parse_tokens(std::string_view text) {
  MachineSpec spec;
  spec.text = std::string(text);
  bool cpus_given = false;
  bool any = false;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    std::size_t comma = text.find(',', pos);
    if (comma == std::string_view::npos) comma = text.size();
    std::string_view token = trim(text.substr(pos, comma - pos));
    pos = comma + 1;
    if (token.empty()) return bad(text, "empty item");
    any = true;
    const std::string lower = lowered(token);
    std::optional<Error> err;
    if (model_token(token, lower, spec.model, err)) {
      if (err) return fail(*err);
      continue;
    }
    if (lower == "psys") {
      spec.psys = true;
      continue;
    }
    if (lower.rfind("jetson=", 0) == 0) {
      auto layout = parse_jetson_layout(trim(token.substr(7)));
      if (!layout) return bad(token, "jetson= is orin, orin-nano or xavier");
      spec.jetson = *layout;
      continue;
    }
    if (lower.rfind("cpus=", 0) == 0) {
      unsigned n = 0;
      if (!parse_uint(trim(token.substr(5)), n)) return bad(token, "cpus= needs a number");
      if (n > kMaxCpus) return bad(token, "at most " + std::to_string(kMaxCpus) + " CPU packages");
      spec.cpus.assign(n, CpuSpec{});
      cpus_given = true;
      continue;
    }
    unsigned count = 1;
    std::string_view name = token;
    // "NxSKU": a count, then 'x' (the SKU itself never starts with a digit).
    std::size_t digits = 0;
    while (digits < token.size() && std::isdigit(static_cast<unsigned char>(token[digits]))) ++digits;
    if (digits > 0) {
      if (digits >= token.size() || (token[digits] != 'x' && token[digits] != 'X'))
        return bad(token, "expected NxSKU, e.g. 4xA100");
      if (!parse_uint(token.substr(0, digits), count) || count == 0) return bad(token, "GPU count must be ≥ 1");
      name = trim(token.substr(digits + 1));
    }
    GpuSpec gs;
    if (const std::size_t colon = name.find(':'); colon != std::string_view::npos) {
      auto mode = parse_counter_mode(trim(name.substr(colon + 1)));
      if (!mode) return bad(token, "the counter mode after ':' is frozen or backwards");
      gs.counter = *mode;
      name = trim(name.substr(0, colon));
    }
    const Sku* sku = lookup_sku(name);
    if (sku == nullptr) return bad(token, "unknown GPU");
    if (gs.counter != CounterMode::kNormal && sku->vendor != Vendor::kAmd)
      return bad(token, "counter modes are for AMD GPUs");
    const unsigned per_card = sku->second_die.empty() ? 1 : 2;
    if (spec.gpus.size() + count * per_card > kMaxGpus)
      return bad(token, "at most " + std::to_string(kMaxGpus) + " GPUs (a dual-die card counts two)");
    for (unsigned i = 0; i < count; ++i) push_card(spec.gpus, *sku, gs);
  }
  if (!any) return bad(text, "empty spec");
  if (!cpus_given && !spec.jetson) spec.cpus.assign(1, CpuSpec{});
  return spec;
}

bool valid_uuid(const std::string& u) { return u.size() >= 5 && u.size() < 80 && u.rfind("GPU-", 0) == 0; }

Result<MachineSpec> parse_json(std::string_view text, const std::string& source) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return bad(source, "not a JSON object");
  MachineSpec spec;
  spec.text = std::string(source);
  bool cpus_given = false;
  for (const auto& [key, value] : j.items()) {
    if (key == "gpus") {
      if (!value.is_array()) return bad(source, "\"gpus\" must be a list");
      for (const auto& g : value) {
        if (!g.is_object() || !g.contains("sku") || !g["sku"].is_string())
          return bad(source, "each GPU needs a \"sku\" string");
        GpuSpec gs;
        const Sku* card = nullptr;
        for (const auto& [gk, gv] : g.items()) {
          if (gk == "sku") {
            const Sku* sku = lookup_sku(gv.get<std::string>());
            if (sku == nullptr) return bad(gv.get<std::string>(), "unknown GPU");
            gs.sku = std::string(sku->key);
            card = sku;
          } else if (gk == "counter") {
            auto mode = gv.is_string() ? parse_counter_mode(gv.get<std::string>()) : std::nullopt;
            if (!mode) return bad(gk + "=" + gv.dump(), "counter is \"ok\", \"frozen\" or \"backwards\"");
            gs.counter = *mode;
          } else if (gk == "partial_sampling") {
            if (!gv.is_boolean()) return bad(gk + "=" + gv.dump(), "partial_sampling must be true or false");
            gs.partial_sampling = gv.get<bool>();
          } else if (gk == "energy_period_ms" || gk == "jitter_ms") {
            const double v = gv.is_number() ? gv.get<double>() : -1.0;
            const bool ok = gk == "energy_period_ms" ? (v >= 1.0 && v <= 10000.0) : (v >= 0.0 && v <= 1000.0);
            if (!ok) return bad(gk + "=" + gv.dump(), "energy_period_ms is 1..10000, jitter_ms 0..1000");
            (gk == "energy_period_ms" ? gs.energy_period_ms : gs.jitter_ms) = v;
          } else if (std::optional<Error> err; zoo_field(gk, gv, gs, err)) {
            if (err) return fail(*err);
          } else if (gk == "uuid") {
            if (!gv.is_string() || !valid_uuid(gv.get<std::string>()))
              return bad(gv.dump(), "uuid must be a string like GPU-xxxxxxxx-...");
            gs.uuid = gv.get<std::string>();
          } else {
            return bad(gk,
                       "unknown GPU field (sku, uuid, counter, partial_sampling, energy_period_ms, jitter_ms, "
                       "schedule, phase_jump_s, skip_share, change_at_s, period_after_ms, publish_delay_ms, stamps, "
                       "stamp_unit_ms, increment, average)");
          }
        }
        if (auto r = check_zoo(gs); !r) return fail(r.error());
        if (gs.counter != CounterMode::kNormal && card->vendor != Vendor::kAmd)
          return bad(gs.sku, "counter modes are for AMD GPUs");
        push_card(spec.gpus, *card, std::move(gs));
      }
    } else if (key == "cpus") {
      cpus_given = true;
      if (value.is_number_unsigned()) {
        spec.cpus.assign(value.get<unsigned>(), CpuSpec{});
      } else if (value.is_array()) {
        for (const auto& c : value) {
          if (!c.is_object()) return bad(c.dump(), "each CPU must be an object");
          CpuSpec cs;
          for (const auto& [ck, cv] : c.items()) {
            if (ck == "dram" && cv.is_boolean()) {
              cs.dram = cv.get<bool>();
            } else if (ck == "core" && cv.is_boolean()) {
              cs.core = cv.get<bool>();
            } else if (ck == "idle_package_w" && cv.is_number() && cv.get<double>() >= 0) {
              cs.idle_package_w = cv.get<double>();
            } else if (ck == "idle_dram_w" && cv.is_number() && cv.get<double>() >= 0) {
              cs.idle_dram_w = cv.get<double>();
            } else if (ck == "max_energy_range_uj" && cv.is_number_unsigned() && cv.get<std::uint64_t>() > 0) {
              cs.max_energy_range_uj = cv.get<std::uint64_t>();
            } else {
              return bad(ck + "=" + cv.dump(),
                         "unknown or invalid CPU field (dram, core, idle_package_w, idle_dram_w, max_energy_range_uj)");
            }
          }
          spec.cpus.push_back(cs);
        }
      } else {
        return bad(source, "\"cpus\" must be a count or a list");
      }
    } else if (key == "jetson") {
      auto layout = value.is_string() ? parse_jetson_layout(value.get<std::string>()) : std::nullopt;
      if (!layout) return bad("jetson=" + value.dump(), "\"jetson\" is \"orin\", \"orin-nano\" or \"xavier\"");
      spec.jetson = *layout;
    } else if (key == "psys") {
      if (!value.is_boolean()) return bad(source, "\"psys\" must be true or false");
      spec.psys = value.get<bool>();
    } else if (key == "model") {
      auto k = value.is_string() ? parse_model_kind(value.get<std::string>()) : std::nullopt;
      if (!k) return bad("model=" + value.dump(), "\"model\" is \"faithful\" or \"ideal\"");
      spec.model.kind = *k;
    } else if (key == "seed") {
      if (!value.is_number_unsigned()) return bad("seed=" + value.dump(), "\"seed\" must be a non-negative integer");
      spec.model.seed = value.get<std::uint64_t>();
    } else if (key == "timestamps") {
      auto t = value.is_string() ? parse_timestamps(value.get<std::string>()) : std::nullopt;
      if (!t) return bad("timestamps=" + value.dump(), "\"timestamps\" is \"read\" or \"update\"");
      spec.model.timestamps = *t;
    } else if (key == "amdsmi") {
      if (!value.is_number_unsigned() || value.get<unsigned>() < 24 || value.get<unsigned>() > 26)
        return bad("amdsmi=" + value.dump(), "\"amdsmi\" is the AMD SMI ABI: 24, 25 or 26");
      spec.model.amdsmi_abi = value.get<unsigned>();
    } else if (key == "rapl") {
      auto r = value.is_string() ? parse_rapl_start(value.get<std::string>()) : std::nullopt;
      if (!r) return bad("rapl=" + value.dump(), "\"rapl\" is \"random\", \"zero\" or \"near-wrap\"");
      spec.model.rapl_start = *r;
    } else {
      return bad(key, "unknown field (gpus, cpus, psys, jetson, model, seed, timestamps, rapl, amdsmi)");
    }
  }
  if (!cpus_given && !spec.jetson) spec.cpus.assign(1, CpuSpec{});
  if (auto r = check_counts(spec, source); !r) return fail(r.error());
  for (std::size_t a = 0; a < spec.gpus.size(); ++a)
    for (std::size_t b = a + 1; b < spec.gpus.size(); ++b)
      if (spec.gpus[a].uuid && spec.gpus[a].uuid == spec.gpus[b].uuid) return bad(*spec.gpus[a].uuid, "duplicate uuid");
  return spec;
}

}  // namespace

std::string_view to_string(ModelKind kind) { return kind == ModelKind::kIdeal ? "ideal" : "faithful"; }
std::string_view to_string(TimestampMeaning meaning) {
  return meaning == TimestampMeaning::kUpdateTime ? "update" : "read";
}
std::string_view to_string(RaplStart start) {
  switch (start) {
    case RaplStart::kZero: return "zero";
    case RaplStart::kNearWrap: return "near-wrap";
    case RaplStart::kRandom:
    default: return "random";
  }
}

std::string_view to_string(Schedule schedule) {
  switch (schedule) {
    case Schedule::kRandomWalk: return "random_walk";
    case Schedule::kPhaseJumps: return "phase_jumps";
    case Schedule::kSkips: return "skips";
    case Schedule::kPeriodChange: return "period_change";
    case Schedule::kGrid:
    default: return "grid";
  }
}
std::string_view to_string(StampMode stamps) {
  switch (stamps) {
    case StampMode::kRead: return "read";
    case StampMode::kIntervalStart: return "interval_start";
    case StampMode::kFloored: return "floored";
    case StampMode::kUnrelated: return "unrelated";
    case StampMode::kUpdate:
    default: return "update";
  }
}
std::string_view to_string(Increment increment) {
  switch (increment) {
    case Increment::kPartial: return "partial";
    case Increment::kPartialNominal: return "partial_nominal";
    case Increment::kWhole:
    default: return "whole";
  }
}
std::string_view to_string(AverageMode average) {
  return average == AverageMode::kExponential ? "exponential" : "boxcar";
}

Result<MachineSpec> parse_spec(std::string_view text) {
  try {
    std::string_view t = trim(text);
    if (!t.empty() && t.front() == '{') return parse_json(t, std::string(t));
    if (t.size() > 5 && t.substr(t.size() - 5) == ".json") {
      std::ifstream f{std::string(t)};
      if (!f) return fail(ErrorCode::kNotFound, "cannot read simulated machine spec file " + std::string(t));
      std::stringstream ss;
      ss << f.rdbuf();
      return parse_json(ss.str(), std::string(t));
    }
    return parse_tokens(t);
  } catch (const std::exception& e) {
    return fail(ErrorCode::kInvalidArgument, "invalid simulated machine spec: " + std::string(e.what()));
  }
}

}  // namespace erg::sim
