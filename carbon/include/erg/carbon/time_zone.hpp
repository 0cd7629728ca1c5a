#pragma once
/// A time zone read from the system's tz database (TZif files under /usr/share/zoneinfo, or
/// $TZDIR): the UTC offset at any instant, so an electricity rate's weekday/hour schedule is read
/// in the utility's local time. Times after a zone's last recorded transition keep its last offset
/// (Debian's files record transitions up to 2037).

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "erg/core/result.hpp"

namespace erg::carbon {

class TimeZone {
 public:
  /// UTC.
  TimeZone() = default;
  /// `name`: an IANA name ("America/Los_Angeles"), "UTC", or "" for the machine's zone ($TZ if it
  /// names a zone, else /etc/localtime). NotFound if there is no such zone; InvalidArgument for
  /// a file that is not TZif or a name with "..".
  static Result<TimeZone> load(const std::string& name);
  /// Parses TZif bytes (tests).
  static Result<TimeZone> parse(const std::string& bytes, std::string name);

  /// The zone's offset from UTC at `t`.
  [[nodiscard]] std::chrono::seconds offset_at(std::chrono::sys_seconds t) const;
  /// `t` in local time, as a sys_seconds whose calendar fields are the local ones.
  [[nodiscard]] std::chrono::sys_seconds to_local(std::chrono::sys_seconds t) const { return t + offset_at(t); }
  [[nodiscard]] const std::string& name() const { return name_; }

 private:
  std::string name_ = "UTC";
  std::vector<std::int64_t> transitions_;  ///< UTC seconds, ascending.
  std::vector<std::int32_t> offsets_;      ///< Offset from each transition on.
  std::int32_t initial_offset_ = 0;        ///< Before the first transition.
};

}  // namespace erg::carbon
