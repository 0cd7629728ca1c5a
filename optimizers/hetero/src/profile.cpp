#include "erg/optimizers/hetero/profile.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

namespace erg::hetero {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> split(std::string_view line) {
  std::vector<std::string_view> out;
  for (;;) {
    auto comma = line.find(',');
    out.push_back(trim(line.substr(0, comma)));
    if (comma == std::string_view::npos) return out;
    line.remove_prefix(comma + 1);
  }
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// An infeasible marker: the configuration was tried and cannot run.
bool is_infeasible_marker(std::string_view v) {
  auto l = lower(v);
  return l.empty() || l == "nan" || l == "oom";
}

std::optional<double> to_double(std::string_view v) {
  double d = 0;
  auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), d);
  if (ec != std::errc() || ptr != v.data() + v.size() || !std::isfinite(d)) return std::nullopt;
  return d;
}

std::string fmt(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.10g", v);
  return buf;
}

constexpr std::array<std::string_view, 7> kColumns = {
    "gpu_type", "batch_size", "power_limit_w", "step_time_s", "avg_power_w", "max_power_limit_w", "idle_power_w"};

}  // namespace

bool Profile::any_feasible() const {
  return std::any_of(cells.begin(), cells.end(), [](const auto& c) { return c.has_value(); });
}

Result<std::vector<ProfileRow>> parse_profile_rows(std::string_view csv, std::string_view source) {
  std::vector<ProfileRow> rows;
  std::array<std::size_t, kColumns.size()> index{};
  bool have_header = false;
  std::size_t line_no = 0;
  while (!csv.empty()) {
    auto nl = csv.find('\n');
    auto line = trim(csv.substr(0, nl));
    csv.remove_prefix(nl == std::string_view::npos ? csv.size() : nl + 1);
    ++line_no;
    if (line.empty() || line.front() == '#') continue;
    auto cells = split(line);
    const std::string where = std::string(source) + ":" + std::to_string(line_no);
    if (!have_header) {
      for (std::size_t c = 0; c < kColumns.size(); ++c) {
        auto it = std::find(cells.begin(), cells.end(), kColumns[c]);
        if (it == cells.end())
          return fail(ErrorCode::kInvalidArgument, where + ": the header lacks column '" + std::string(kColumns[c]) +
                                                       "' (expected " + std::string(kProfileHeader) + ")");
        index[c] = static_cast<std::size_t>(it - cells.begin());
      }
      have_header = true;
      continue;
    }
    if (cells.size() < *std::max_element(index.begin(), index.end()) + 1)
      return fail(ErrorCode::kInvalidArgument,
                  where + ": " + std::to_string(cells.size()) + " fields, the header names more");
    auto field = [&](std::size_t c) { return cells[index[c]]; };
    auto bad = [&](std::size_t c, std::string_view why) {
      return fail(ErrorCode::kInvalidArgument, where + ": column " + std::string(kColumns[c]) + ": " +
                                                   std::string(why) + " (got '" + std::string(field(c)) + "')");
    };
    auto positive = [&](std::size_t c) -> Result<double> {
      auto d = to_double(field(c));
      if (!d) return bad(c, "not a number");
      if (!(*d > 0)) return bad(c, "must be greater than 0");
      return *d;
    };
    ProfileRow r;
    r.gpu_type = std::string(field(0));
    if (r.gpu_type.empty()) return bad(0, "empty GPU type");
    {
      int b = 0;
      auto v = field(1);
      auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), b);
      if (ec != std::errc() || ptr != v.data() + v.size()) return bad(1, "not an integer");
      if (b <= 0) return bad(1, "must be greater than 0");
      r.batch_size = b;
    }
    auto limit = positive(2);
    if (!limit) return fail(limit.error());
    r.power_limit = Watts(*limit);
    auto max_limit = positive(5);
    if (!max_limit) return fail(max_limit.error());
    r.max_power_limit = Watts(*max_limit);
    auto idle = to_double(field(6));
    if (!idle) return bad(6, "not a number");
    if (*idle < 0) return bad(6, "must be 0 or more");
    r.idle_power = Watts(*idle);
    if (r.power_limit > r.max_power_limit)
      return bad(2, "above the type's max_power_limit_w " + fmt(r.max_power_limit.value()));
    const bool time_missing = is_infeasible_marker(field(3)), power_missing = is_infeasible_marker(field(4));
    if (time_missing != power_missing)
      return fail(ErrorCode::kInvalidArgument,
                  where +
                      ": step_time_s and avg_power_w must both be measured or both be marked infeasible "
                      "(empty, nan or oom)");
    if (!time_missing) {
      auto t = positive(3);
      if (!t) return fail(t.error());
      auto p = positive(4);
      if (!p) return fail(p.error());
      r.measurement = Measurement{Seconds(*t), Watts(*p)};
    }
    rows.push_back(std::move(r));
  }
  if (!have_header)
    return fail(ErrorCode::kInvalidArgument,
                std::string(source) + ": empty (expected the header " + std::string(kProfileHeader) + ")");
  return rows;
}

Result<std::vector<Profile>> build_profiles(const std::vector<ProfileRow>& rows, std::string_view source) {
  std::vector<std::string> order;
  std::map<std::string, std::vector<const ProfileRow*>> by_type;
  for (const auto& r : rows) {
    auto [it, inserted] = by_type.try_emplace(r.gpu_type);
    if (inserted) order.push_back(r.gpu_type);
    it->second.push_back(&r);
  }
  std::vector<Profile> out;
  for (const auto& type : order) {
    const auto& rs = by_type[type];
    const std::string who = std::string(source) + ": GPU type " + type;
    Profile p;
    p.gpu_type = type;
    p.max_power_limit = rs.front()->max_power_limit;
    p.idle_power = rs.front()->idle_power;
    std::set<int> batches;
    std::set<double> limits;
    for (const auto* r : rs) {
      if (r->max_power_limit != p.max_power_limit)
        return fail(ErrorCode::kInvalidArgument, who + ": max_power_limit_w differs between rows (" +
                                                     fmt(p.max_power_limit.value()) + " and " +
                                                     fmt(r->max_power_limit.value()) + ")");
      if (r->idle_power != p.idle_power)
        return fail(ErrorCode::kInvalidArgument, who + ": idle_power_w differs between rows (" +
                                                     fmt(p.idle_power.value()) + " and " + fmt(r->idle_power.value()) +
                                                     ")");
      batches.insert(r->batch_size);
      limits.insert(r->power_limit.value());
    }
    p.batch_sizes.assign(batches.begin(), batches.end());
    for (double l : limits) p.power_limits.emplace_back(l);
    const std::size_t nb = p.batch_sizes.size(), np = p.power_limits.size();
    p.cells.assign(nb * np, std::nullopt);
    std::vector<bool> seen(nb * np, false);
    for (const auto* r : rs) {
      auto b = static_cast<std::size_t>(std::lower_bound(p.batch_sizes.begin(), p.batch_sizes.end(), r->batch_size) -
                                        p.batch_sizes.begin());
      auto l = static_cast<std::size_t>(std::lower_bound(p.power_limits.begin(), p.power_limits.end(), r->power_limit) -
                                        p.power_limits.begin());
      const auto k = b * np + l;
      if (seen[k])
        return fail(ErrorCode::kInvalidArgument, who + ": configuration batch " + std::to_string(r->batch_size) +
                                                     " @ " + fmt(r->power_limit.value()) + " W appears twice");
      seen[k] = true;
      p.cells[k] = r->measurement;
    }
    // A complete grid: interpolation and the planners assume every profiled batch size was tried
    // at every profiled limit, so a hole is a profiling run that stopped early, not a fact.
    std::string missing;
    std::size_t n_missing = 0;
    for (std::size_t b = 0; b < nb; ++b)
      for (std::size_t l = 0; l < np; ++l)
        if (!seen[b * np + l]) {
          if (++n_missing <= 8)
            missing += (missing.empty() ? "" : ", ") + std::to_string(p.batch_sizes[b]) + " @ " +
                       fmt(p.power_limits[l].value()) + " W";
        }
    if (n_missing > 0)
      return fail(ErrorCode::kInvalidArgument,
                  who + ": " + std::to_string(n_missing) + " missing configuration" + (n_missing > 1 ? "s" : "") +
                      " of the batch size × power limit grid (" + missing + (n_missing > 8 ? ", ..." : "") +
                      "); profile them (erg hetero profile resumes a partial file) or drop those rows");
    out.push_back(std::move(p));
  }
  return out;
}

Result<std::vector<Profile>> parse_profiles(std::string_view csv, std::string_view source) {
  auto rows = parse_profile_rows(csv, source);
  if (!rows) return fail(rows.error());
  return build_profiles(*rows, source);
}

Result<Profile> load_profile(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return fail(ErrorCode::kNotFound, path.string() + ": no such file");
  std::ifstream in(path, std::ios::binary);
  if (!in) return fail(ErrorCode::kIo, path.string() + ": cannot open");
  std::stringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return fail(ErrorCode::kIo, path.string() + ": read failed");
  auto profiles = parse_profiles(ss.str(), path.string());
  if (!profiles) return fail(profiles.error());
  if (profiles->empty()) return fail(ErrorCode::kInvalidArgument, path.string() + ": no configurations (header only)");
  if (profiles->size() > 1) {
    std::string types;
    for (const auto& p : *profiles) types += (types.empty() ? "" : ", ") + p.gpu_type;
    return fail(ErrorCode::kInvalidArgument,
                path.string() + ": holds several GPU types (" + types + "); one file per GPU type");
  }
  return std::move(profiles->front());
}

std::string to_csv_row(const ProfileRow& row) {
  std::string s = row.gpu_type + "," + std::to_string(row.batch_size) + "," + fmt(row.power_limit.value()) + ",";
  if (row.measurement)
    s += fmt(row.measurement->step_time.count()) + "," + fmt(row.measurement->avg_power.value());
  else
    s += "oom,oom";
  s += "," + fmt(row.max_power_limit.value()) + "," + fmt(row.idle_power.value());
  return s;
}

}  // namespace erg::hetero
