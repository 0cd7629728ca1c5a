#include "erg/carbon/provider.hpp"

#include <cctype>
#include <cstdio>

namespace erg::carbon {

using namespace std::chrono;

UtcHour utc_hour_of(sys_seconds t) { return floor<hours>(t); }

std::string format_utc(sys_seconds t) {
  const auto day = floor<days>(t);
  const year_month_day ymd{day};
  const hh_mm_ss hms{t - day};
  char buf[96];  // room for any int the compiler cannot bound (-Wformat-truncation at -O3)
  std::snprintf(buf, sizeof buf, "%04d-%02u-%02uT%02ld:%02ld:%02lldZ", static_cast<int>(ymd.year()),
                static_cast<unsigned>(ymd.month()), static_cast<unsigned>(ymd.day()),
                static_cast<long>(hms.hours().count()), static_cast<long>(hms.minutes().count()),
                static_cast<long long>(hms.seconds().count()));
  return buf;
}

namespace {

bool digits(std::string_view s, std::size_t pos, std::size_t n, int& out) {
  if (pos + n > s.size()) return false;
  out = 0;
  for (std::size_t i = pos; i < pos + n; ++i) {
    if (!std::isdigit(static_cast<unsigned char>(s[i]))) return false;
    out = out * 10 + (s[i] - '0');
  }
  return true;
}

}  // namespace

Result<sys_seconds> parse_utc(std::string_view text) {
  auto bad = [&] {
    return fail(ErrorCode::kInvalidArgument,
                "not an ISO 8601 UTC time: '" + std::string(text) + "' (expected e.g. 2026-01-31T13:00:00Z)");
  };
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, s = 0;
  if (!digits(text, 0, 4, y) || text.size() < 16 || text[4] != '-' || !digits(text, 5, 2, mo) || text[7] != '-' ||
      !digits(text, 8, 2, d) || (text[10] != 'T' && text[10] != ' ') || !digits(text, 11, 2, h) || text[13] != ':' ||
      !digits(text, 14, 2, mi))
    return bad();
  std::size_t pos = 16;
  if (pos < text.size() && text[pos] == ':') {
    if (!digits(text, pos + 1, 2, s)) return bad();
    pos += 3;
    if (pos < text.size() && text[pos] == '.') {
      ++pos;
      while (pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos]))) ++pos;
    }
  }
  const std::string_view zone = text.substr(pos);
  if (zone != "Z" && zone != "+00:00" && zone != "+0000") return bad();
  const year_month_day ymd{year{y}, month{static_cast<unsigned>(mo)}, day{static_cast<unsigned>(d)}};
  if (!ymd.ok() || h > 23 || mi > 59 || s > 60) return bad();
  return sys_days{ymd} + hours{h} + minutes{mi} + seconds{s};
}

std::string_view to_string(Resolution resolution) {
  switch (resolution) {
    case Resolution::kHourly: return "hourly";
    case Resolution::kYearly: return "yearly";
    case Resolution::kFlat: return "flat";
  }
  return "unknown";
}

Result<Intensity> FixedIntensity::intensity(UtcHour) {
  Intensity i;
  i.g_per_kwh = g_per_kwh_;
  i.resolution = Resolution::kFlat;
  i.provider = "fixed";
  i.source = "user-given";
  return i;
}

Result<Price> FixedPrice::cost(UtcHour, double, double kwh) {
  Price p;
  p.cost = kwh * per_kwh_;
  p.per_kwh = per_kwh_;
  p.currency = currency_;
  p.resolution = Resolution::kFlat;
  p.provider = "fixed";
  p.source = "user-given";
  return p;
}

}  // namespace erg::carbon
