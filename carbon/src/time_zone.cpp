#include "erg/carbon/time_zone.hpp"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace erg::carbon {

namespace {

std::int64_t be(const std::string& b, std::size_t pos, int bytes) {
  std::uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v = (v << 8) | static_cast<unsigned char>(b[pos + static_cast<std::size_t>(i)]);
  if (bytes == 4) return static_cast<std::int32_t>(static_cast<std::uint32_t>(v));
  return static_cast<std::int64_t>(v);
}

Result<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return fail(ErrorCode::kNotFound, "no time zone file " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

Result<TimeZone> TimeZone::parse(const std::string& b, std::string name) {
  auto bad = [&] { return fail(ErrorCode::kInvalidArgument, "time zone " + name + ": not a TZif file"); };
  if (b.size() < 44 || b.compare(0, 4, "TZif") != 0) return bad();
  const char version = b[4];
  // Header counts: isutcnt, isstdcnt, leapcnt, timecnt, typecnt, charcnt.
  auto counts = [&](std::size_t at, std::int64_t c[6]) {
    for (int i = 0; i < 6; ++i) c[i] = be(b, at + 20 + static_cast<std::size_t>(i) * 4, 4);
  };
  std::int64_t c[6];
  counts(0, c);
  std::size_t at = 0;
  int time_bytes = 4;
  if (version >= '2') {
    // Skip the 32-bit block; use the 64-bit one that follows.
    const std::size_t v1 = static_cast<std::size_t>(c[3] * 5 + c[4] * 6 + c[5] + c[2] * 8 + c[1] + c[0]);
    at = 44 + v1;
    if (b.size() < at + 44 || b.compare(at, 4, "TZif") != 0) return bad();
    counts(at, c);
    time_bytes = 8;
  }
  const auto isut = static_cast<std::size_t>(c[0]), isstd = static_cast<std::size_t>(c[1]),
             leap = static_cast<std::size_t>(c[2]), timecnt = static_cast<std::size_t>(c[3]),
             typecnt = static_cast<std::size_t>(c[4]), charcnt = static_cast<std::size_t>(c[5]);
  std::size_t p = at + 44;
  const std::size_t need = timecnt * static_cast<std::size_t>(time_bytes) + timecnt + typecnt * 6 + charcnt +
                           leap * static_cast<std::size_t>(time_bytes + 4) + isstd + isut;
  if (typecnt == 0 || b.size() < p + need) return bad();
  TimeZone tz;
  tz.name_ = std::move(name);
  std::vector<std::int64_t> times(timecnt);
  for (std::size_t i = 0; i < timecnt; ++i) times[i] = be(b, p + i * static_cast<std::size_t>(time_bytes), time_bytes);
  p += timecnt * static_cast<std::size_t>(time_bytes);
  std::vector<std::size_t> idx(timecnt);
  for (std::size_t i = 0; i < timecnt; ++i) idx[i] = static_cast<unsigned char>(b[p + i]);
  p += timecnt;
  std::vector<std::int32_t> type_offset(typecnt);
  std::vector<bool> type_dst(typecnt);
  for (std::size_t i = 0; i < typecnt; ++i) {
    type_offset[i] = static_cast<std::int32_t>(be(b, p + i * 6, 4));
    type_dst[i] = b[p + i * 6 + 4] != 0;
  }
  for (std::size_t i = 0; i < timecnt; ++i) {
    if (idx[i] >= typecnt) return bad();
    tz.transitions_.push_back(times[i]);
    tz.offsets_.push_back(type_offset[idx[i]]);
  }
  // Before the first transition: the first standard-time type (RFC 8536 §3.2), else type 0.
  tz.initial_offset_ = type_offset[0];
  for (std::size_t i = 0; i < typecnt; ++i)
    if (!type_dst[i]) {
      tz.initial_offset_ = type_offset[i];
      break;
    }
  return tz;
}

Result<TimeZone> TimeZone::load(const std::string& name) {
  if (name == "UTC" || name == "Etc/UTC" || name == "Z") return TimeZone();
  std::string zone = name;
  std::string path;
  if (zone.empty()) {
    const char* tz = std::getenv("TZ");
    if (tz != nullptr && *tz != '\0') zone = *tz == ':' ? tz + 1 : tz;
  }
  if (zone.empty()) {
    path = "/etc/localtime";
    zone = "localtime";
  } else {
    if (zone.find("..") != std::string::npos)
      return fail(ErrorCode::kInvalidArgument, "bad time zone name '" + zone + "'");
    if (zone == "UTC" || zone == "Etc/UTC") return TimeZone();
    const char* dir = std::getenv("TZDIR");
    path = zone.front() == '/' ? zone : std::string(dir != nullptr && *dir ? dir : "/usr/share/zoneinfo") + "/" + zone;
  }
  auto bytes = read_file(path);
  if (!bytes)
    return fail(ErrorCode::kNotFound, "unknown time zone '" + zone + "' (no " + path +
                                          "; give an IANA name such as America/Los_Angeles; the tzdata package "
                                          "provides them)");
  return parse(*bytes, zone);
}

std::chrono::seconds TimeZone::offset_at(std::chrono::sys_seconds t) const {
  const std::int64_t s = t.time_since_epoch().count();
  auto it = std::upper_bound(transitions_.begin(), transitions_.end(), s);
  if (it == transitions_.begin()) return std::chrono::seconds(initial_offset_);
  return std::chrono::seconds(offsets_[static_cast<std::size_t>(it - transitions_.begin() - 1)]);
}

}  // namespace erg::carbon
