#include "erg/optimizers/pipeline_frequency/profile.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>
#include <system_error>

namespace erg::pipeline_frequency {

std::string_view to_string(Instruction instruction) {
  return instruction == Instruction::kForward ? "forward" : "backward";
}

std::optional<Instruction> parse_instruction(std::string_view name) {
  if (name == "forward") return Instruction::kForward;
  if (name == "backward") return Instruction::kBackward;
  return std::nullopt;
}

int Profile::num_stages() const {
  int n = 0;
  for (const auto& r : rows) n = std::max(n, r.stage + 1);
  return n;
}

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  if (s.size() >= 2 && s.front() == '"' && s.back() == '"') s = s.substr(1, s.size() - 2);
  return s;
}

std::vector<std::string_view> split(std::string_view line) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  for (;;) {
    const auto comma = line.find(',', start);
    out.push_back(trim(line.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start)));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

std::optional<double> number(std::string_view s) {
  double v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || end != s.data() + s.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

}  // namespace

Result<Profile> parse_profile_csv(std::string_view csv) {
  static constexpr std::array<std::string_view, 5> kColumns = {"stage", "instruction", "frequency", "time", "energy"};
  std::array<std::size_t, 5> at{};
  Profile profile;
  std::map<std::tuple<int, Instruction, int>, int> seen;  // -> line
  bool have_header = false;
  std::size_t header_width = 0;
  int line_no = 0;
  std::size_t pos = 0;
  while (pos <= csv.size()) {
    const auto nl = csv.find('\n', pos);
    const auto raw = csv.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    pos = nl == std::string_view::npos ? csv.size() + 1 : nl + 1;
    ++line_no;
    if (trim(raw).empty()) continue;
    const auto cells = split(raw);
    const std::string where = "profile line " + std::to_string(line_no);
    if (!have_header) {
      for (std::size_t c = 0; c < kColumns.size(); ++c) {
        const auto it = std::find(cells.begin(), cells.end(), kColumns[c]);
        if (it == cells.end())
          return fail(ErrorCode::kInvalidArgument, where + ": the header has no '" + std::string(kColumns[c]) +
                                                       "' column (need stage, instruction, frequency, time, energy)");
        at[c] = static_cast<std::size_t>(it - cells.begin());
      }
      have_header = true;
      header_width = cells.size();
      continue;
    }
    if (cells.size() != header_width)
      return fail(ErrorCode::kInvalidArgument, where + ": " + std::to_string(cells.size()) +
                                                   " fields, the header has " + std::to_string(header_width));
    ProfileRow row;
    std::array<double, 5> v{};
    for (std::size_t c = 0; c < kColumns.size(); ++c) {
      if (c == 1) continue;
      const auto x = number(cells[at[c]]);
      if (!x)
        return fail(ErrorCode::kInvalidArgument, where + ", column " + std::string(kColumns[c]) + ": '" +
                                                     std::string(cells[at[c]]) + "' is not a number");
      if (*x < 0 || ((c == 2 || c == 3) && *x == 0) || ((c == 0 || c == 2) && *x != std::floor(*x)))
        return fail(ErrorCode::kInvalidArgument, where + ", column " + std::string(kColumns[c]) + ": " +
                                                     std::string(cells[at[c]]) + " is not " +
                                                     (c == 0   ? "a stage number (0, 1, ...)"
                                                      : c == 2 ? "a frequency in MHz"
                                                      : c == 3 ? "a positive time in seconds"
                                                               : "an energy in joules (>= 0)"));
      v[c] = *x;
    }
    const auto instruction = parse_instruction(cells[at[1]]);
    if (!instruction)
      return fail(ErrorCode::kInvalidArgument,
                  where + ", column instruction: '" + std::string(cells[at[1]]) + "' is neither forward nor backward");
    if (v[0] > 1e6 || v[2] > 1e7) return fail(ErrorCode::kInvalidArgument, where + ": stage or frequency out of range");
    row.stage = static_cast<int>(v[0]);
    row.instruction = *instruction;
    row.frequency_mhz = static_cast<int>(v[2]);
    row.time_s = v[3];
    row.energy_j = v[4];
    const auto [it, fresh] = seen.emplace(std::tuple{row.stage, row.instruction, row.frequency_mhz}, line_no);
    if (!fresh)
      return fail(ErrorCode::kInvalidArgument, where + ": stage " + std::to_string(row.stage) + " " +
                                                   std::string(to_string(row.instruction)) + " at " +
                                                   std::to_string(row.frequency_mhz) + " MHz is already on line " +
                                                   std::to_string(it->second));
    profile.rows.push_back(row);
  }
  if (!have_header) return fail(ErrorCode::kInvalidArgument, "profile: empty (no header)");
  if (profile.rows.empty()) return fail(ErrorCode::kInvalidArgument, "profile: no rows after the header");
  return profile;
}

Result<Profile> read_profile_csv(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return fail(ErrorCode::kNotFound, path.string() + ": no such file");
  std::ifstream in(path, std::ios::binary);
  if (!in) return fail(ErrorCode::kIo, path.string() + ": cannot open");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return fail(ErrorCode::kIo, path.string() + ": read failed");
  auto parsed = parse_profile_csv(text.str());
  if (!parsed) return fail(parsed.error().code, path.string() + ": " + parsed.error().message);
  return parsed;
}

const ExecutionOption& CandidateOptions::option_for(int units) const {
  // Slowest first, so the first option that fits is the slowest that does.
  for (const auto& o : options)
    if (o.units <= units) return o;
  return options.back();
}

Result<CandidateOptions> candidate_options(std::span<const ProfileRow> rows, double p2p_power_w, double unit_s) {
  if (rows.empty()) return fail(ErrorCode::kInvalidArgument, "no profiled options");
  if (!(unit_s > 0) || !std::isfinite(unit_s)) return fail(ErrorCode::kInvalidArgument, "time unit must be positive");
  CandidateOptions out;
  out.stage = rows.front().stage;
  out.instruction = rows.front().instruction;
  std::vector<ExecutionOption> all;
  for (const auto& r : rows) {
    ExecutionOption o;
    o.frequency_mhz = r.frequency_mhz;
    o.time_s = r.time_s;
    o.energy_j = r.energy_j;
    o.cost_j = r.energy_j - p2p_power_w * r.time_s;
    // Round up, less a hair so a time that is an exact multiple of the unit stays on it.
    o.units = std::max(1, static_cast<int>(std::ceil(r.time_s / unit_s - 1e-9)));
    all.push_back(o);
  }
  // Pareto: sort by time then cost; walking from fastest to slowest an option survives only if it
  // is strictly cheaper than every faster one (ties in time keep the cheapest).
  std::sort(all.begin(), all.end(), [](const auto& x, const auto& y) {
    return x.time_s != y.time_s ? x.time_s < y.time_s : x.cost_j < y.cost_j;
  });
  std::vector<ExecutionOption> pareto;
  for (const auto& o : all)
    if (pareto.empty() || o.cost_j < pareto.back().cost_j) {
      if (!pareto.empty() && pareto.back().time_s == o.time_s) continue;
      pareto.push_back(o);
    }
  // Same quantized time: keep the slowest (cheapest); every one of them fits that duration.
  for (auto it = pareto.rbegin(); it != pareto.rend(); ++it)
    if (out.options.empty() || it->units < out.options.back().units) out.options.push_back(*it);
  return out;
}

}  // namespace erg::pipeline_frequency
