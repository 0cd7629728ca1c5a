#include "erg/sim/spec.hpp"

#include <cctype>
#include <charconv>
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
  return fail(ErrorCode::kInvalidArgument, "invalid simulated machine spec: '" + std::string(token) + "': " +
                                               std::string(why) + " (known GPUs: " + std::string(known_sku_list()) +
                                               "; form: 4xA100, 2xH100,1xV100,cpus=2, psys, or a .json file)");
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
    std::string lower;
    for (char c : token) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (lower == "psys") {
      spec.psys = true;
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
    const Sku* sku = lookup_sku(name);
    if (sku == nullptr) return bad(token, "unknown GPU");
    if (spec.gpus.size() + count > kMaxGpus) return bad(token, "at most " + std::to_string(kMaxGpus) + " GPUs");
    for (unsigned i = 0; i < count; ++i) spec.gpus.push_back(GpuSpec{std::string(sku->key), std::nullopt});
  }
  if (!any) return bad(text, "empty spec");
  if (!cpus_given) spec.cpus.assign(1, CpuSpec{});
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
        for (const auto& [gk, gv] : g.items()) {
          if (gk == "sku") {
            const Sku* sku = lookup_sku(gv.get<std::string>());
            if (sku == nullptr) return bad(gv.get<std::string>(), "unknown GPU");
            gs.sku = std::string(sku->key);
          } else if (gk == "uuid") {
            if (!gv.is_string() || !valid_uuid(gv.get<std::string>()))
              return bad(gv.dump(), "uuid must be a string like GPU-xxxxxxxx-...");
            gs.uuid = gv.get<std::string>();
          } else {
            return bad(gk, "unknown GPU field (sku, uuid)");
          }
        }
        spec.gpus.push_back(std::move(gs));
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
            } else if (ck == "idle_package_w" && cv.is_number() && cv.get<double>() >= 0) {
              cs.idle_package_w = cv.get<double>();
            } else if (ck == "idle_dram_w" && cv.is_number() && cv.get<double>() >= 0) {
              cs.idle_dram_w = cv.get<double>();
            } else if (ck == "max_energy_range_uj" && cv.is_number_unsigned() && cv.get<std::uint64_t>() > 0) {
              cs.max_energy_range_uj = cv.get<std::uint64_t>();
            } else {
              return bad(ck + "=" + cv.dump(),
                         "unknown or invalid CPU field (dram, idle_package_w, idle_dram_w, max_energy_range_uj)");
            }
          }
          spec.cpus.push_back(cs);
        }
      } else {
        return bad(source, "\"cpus\" must be a count or a list");
      }
    } else if (key == "psys") {
      if (!value.is_boolean()) return bad(source, "\"psys\" must be true or false");
      spec.psys = value.get<bool>();
    } else {
      return bad(key, "unknown field (gpus, cpus, psys)");
    }
  }
  if (!cpus_given) spec.cpus.assign(1, CpuSpec{});
  if (auto r = check_counts(spec, source); !r) return fail(r.error());
  for (std::size_t a = 0; a < spec.gpus.size(); ++a)
    for (std::size_t b = a + 1; b < spec.gpus.size(); ++b)
      if (spec.gpus[a].uuid && spec.gpus[a].uuid == spec.gpus[b].uuid) return bad(*spec.gpus[a].uuid, "duplicate uuid");
  return spec;
}

}  // namespace

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
