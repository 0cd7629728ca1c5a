#include "erg/carbon/offline.hpp"

#include <charconv>
#include <cmath>
#include <fstream>
#include <sstream>

namespace erg::carbon {

extern const char* const kBuiltinYearlyTable;  // generated from data/grid_intensity_yearly.csv

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> split(std::string_view line, std::size_t max_fields = 0) {
  std::vector<std::string_view> out;
  while (true) {
    const auto comma = line.find(',');
    if (comma == std::string_view::npos || (max_fields != 0 && out.size() + 1 == max_fields)) {
      out.push_back(trim(line));
      return out;
    }
    out.push_back(trim(line.substr(0, comma)));
    line.remove_prefix(comma + 1);
  }
}

bool parse_double(std::string_view s, double& out) {
  if (s.empty()) return false;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), out);
  return r.ec == std::errc() && r.ptr == s.data() + s.size() && std::isfinite(out);
}

/// Calls `fn(line_number, line)` for every line that is neither empty nor a comment.
template <class Fn>
Result<void> for_each_line(std::string_view text, Fn fn) {
  std::size_t number = 0;
  while (!text.empty()) {
    const auto nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    ++number;
    line = trim(line);
    if (line.empty() || line.front() == '#') continue;
    if (auto r = fn(number, line); !r) return r;
  }
  return ok();
}

}  // namespace

Result<std::map<std::string, YearlyIntensity>> parse_yearly_table(std::string_view text) {
  std::map<std::string, std::string> sources;
  std::map<std::string, YearlyIntensity> table;
  auto r = for_each_line(text, [&](std::size_t n, std::string_view line) -> Result<void> {
    const auto where = "intensity table line " + std::to_string(n) + ": ";
    if (line.starts_with("source,")) {
      auto f = split(line, 3);
      if (f.size() != 3 || f[1].empty() || f[2].empty())
        return fail(ErrorCode::kInvalidArgument, where + "a source line is source,ID,TEXT");
      sources[std::string(f[1])] = std::string(f[2]);
      return ok();
    }
    auto f = split(line);
    if (f.size() != 4) return fail(ErrorCode::kInvalidArgument, where + "expected zone,year,g_per_kwh,source");
    YearlyIntensity row;
    row.zone = std::string(f[0]);
    double year = 0;
    if (row.zone.empty()) return fail(ErrorCode::kInvalidArgument, where + "empty zone");
    if (!parse_double(f[1], year) || year < 1990 || year > 2100 || year != std::floor(year))
      return fail(ErrorCode::kInvalidArgument, where + "bad year '" + std::string(f[1]) + "'");
    row.year = static_cast<int>(year);
    if (!parse_double(f[2], row.g_per_kwh) || row.g_per_kwh < 0)
      return fail(ErrorCode::kInvalidArgument, where + "bad intensity '" + std::string(f[2]) + "'");
    const auto src = sources.find(std::string(f[3]));
    if (src == sources.end())
      return fail(ErrorCode::kInvalidArgument, where + "source '" + std::string(f[3]) + "' is not defined above");
    row.source = src->second;
    if (table.count(row.zone)) return fail(ErrorCode::kInvalidArgument, where + "zone " + row.zone + " given twice");
    table.emplace(row.zone, std::move(row));
    return ok();
  });
  if (!r) return fail(r.error());
  return table;
}

const std::map<std::string, YearlyIntensity>& builtin_yearly_table() {
  static const std::map<std::string, YearlyIntensity> table = [] {
    auto t = parse_yearly_table(kBuiltinYearlyTable);
    // The table is checked by a unit test; a broken one must not take a measurement down.
    return t ? std::move(*t) : std::map<std::string, YearlyIntensity>{};
  }();
  return table;
}

Result<std::unique_ptr<OfflineIntensity>> OfflineIntensity::create(
    std::string zone, const std::map<std::string, YearlyIntensity>& table) {
  for (auto& c : zone) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  auto it = table.find(zone);
  if (it == table.end()) {
    const auto dash = zone.find('-');
    if (dash != std::string::npos) it = table.find(zone.substr(0, dash));
  }
  if (it == table.end())
    return fail(ErrorCode::kNotFound,
                "no offline carbon intensity for zone '" + zone +
                    "' (erg's table has countries by ISO code such as DE, US, FR, and some "
                    "regions such as US-CAL-CISO: carbon/data/grid_intensity_yearly.csv lists them)");
  return std::unique_ptr<OfflineIntensity>(new OfflineIntensity(it->second));
}

Result<Intensity> OfflineIntensity::intensity(UtcHour) {
  Intensity i;
  i.g_per_kwh = row_.g_per_kwh;
  i.resolution = Resolution::kYearly;
  i.provider = "offline";
  i.zone = row_.zone;
  i.source = row_.source + " (" + std::to_string(row_.year) + ")";
  return i;
}

Result<std::unique_ptr<FileIntensity>> FileIntensity::open(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return fail(ErrorCode::kIo, "cannot read carbon intensity file " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  auto r = parse(ss.str(), path);
  if (!r) return fail(r.error().code, path + ": " + r.error().message);
  return r;
}

Result<std::unique_ptr<FileIntensity>> FileIntensity::parse(std::string_view text, std::string source) {
  std::unique_ptr<FileIntensity> p(new FileIntensity());
  p->source_ = std::move(source);
  int col_time = -1, col_value = -1, col_estimated = -1, col_zone = -1;
  bool header = true;
  auto r = for_each_line(text, [&](std::size_t n, std::string_view line) -> Result<void> {
    const auto where = "line " + std::to_string(n) + ": ";
    auto f = split(line);
    if (header) {
      header = false;
      for (int i = 0; i < static_cast<int>(f.size()); ++i) {
        if (f[i] == "datetime") col_time = i;
        if (f[i] == "carbon_intensity") col_value = i;
        if (f[i] == "estimated") col_estimated = i;
        if (f[i] == "zone") col_zone = i;
      }
      if (col_time < 0 || col_value < 0)
        return fail(ErrorCode::kInvalidArgument,
                    where + "the header must name the columns datetime and carbon_intensity (gCO2eq/kWh)");
      return ok();
    }
    const int need = std::max({col_time, col_value, col_estimated, col_zone});
    if (static_cast<int>(f.size()) <= need)
      return fail(ErrorCode::kInvalidArgument, where + "expected " + std::to_string(need + 1) + " fields");
    auto t = parse_utc(f[col_time]);
    if (!t) return fail(ErrorCode::kInvalidArgument, where + t.error().message);
    Intensity i;
    if (!parse_double(f[col_value], i.g_per_kwh) || i.g_per_kwh < 0)
      return fail(ErrorCode::kInvalidArgument, where + "bad carbon_intensity '" + std::string(f[col_value]) + "'");
    if (col_estimated >= 0) {
      const auto e = f[col_estimated];
      if (e == "true" || e == "1" || e == "True")
        i.estimated = true;
      else if (!(e == "false" || e == "0" || e == "False" || e.empty()))
        return fail(ErrorCode::kInvalidArgument,
                    where + "estimated must be true or false, not '" + std::string(e) + "'");
    }
    if (col_zone >= 0) {
      i.zone = std::string(f[col_zone]);
      if (p->zone_.empty()) p->zone_ = i.zone;
    }
    i.resolution = Resolution::kHourly;
    i.provider = "file";
    i.source = p->source_;
    const auto hour = utc_hour_of(*t);
    if (!p->hours_.emplace(hour, std::move(i)).second)
      return fail(ErrorCode::kInvalidArgument, where + "hour " + format_utc(hour) + " given twice");
    return ok();
  });
  if (!r) return fail(r.error());
  if (header) return fail(ErrorCode::kInvalidArgument, "empty carbon intensity file (no header line)");
  return p;
}

Result<Intensity> FileIntensity::intensity(UtcHour hour) {
  auto it = hours_.find(hour);
  if (it == hours_.end())
    return fail(ErrorCode::kNotFound,
                "the intensity file " + source_ + " has no value for the hour " + format_utc(hour));
  return it->second;
}

}  // namespace erg::carbon
