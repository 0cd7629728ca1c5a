// libFuzzer target: the estimators that turn raw counter reads into energy, fed arbitrary
// sequences of reads, stamps and times (issue 30).
//
//  - CounterHistory (measure/): reads in any order and at any spacing (from none to hours), with
//    values that step by anything from nothing to a terawatt-hour, stamps anywhere (the update
//    time, the read time, far in the past or future, repeating, moving), preempted reads
//    (asked_ns), instant power, any nominal period. After each read, the values at a set of
//    instants must be finite, never below the first value read, and never decrease as the
//    instant moves later: so the energy of every span is ≥ 0 and no span holds less than a span
//    inside it. A refit that recursed (issue 30) overflowed the stack here.
//  - rapl::WrapAccumulator (backends/rapl/): raw values and elapsed times anywhere; the total
//    never decreases, and a timed update never adds more than the stated maximum power allows
//    over its elapsed time plus a second.
//
// Input: byte 0 picks the nominal period and the counter range; then 16-byte records, each one
// read (see Reader below). libFuzzer's -timeout catches a hang.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "erg/backends/rapl/wrap_accumulator.hpp"
#include "erg/measure/counter_history.hpp"

namespace {

void check(bool ok, const char* what) {
  if (!ok) {
    __builtin_trap();  // libFuzzer reports the input; the message is in the source
  }
  (void)what;
}

struct Reader {
  const std::uint8_t* p;
  std::size_t left;
  template <typename T>
  T take() {
    T v{};
    const std::size_t n = left < sizeof(T) ? left : sizeof(T);
    std::memcpy(&v, p, n);
    p += n, left -= n;
    return v;
  }
};

// A time step in ns: mostly around the follower's cadence, sometimes far.
std::int64_t step_ns(std::uint16_t code) {
  switch (code >> 13) {
    case 0: return code & 0x1FFF;                                    // up to 8 µs
    case 1: return static_cast<std::int64_t>(code & 0x1FFF) * 1000;  // up to 8 ms
    case 2:
    case 3: return static_cast<std::int64_t>(code & 0x1FFF) * 25'000;                          // up to 200 ms
    case 4: return static_cast<std::int64_t>(code & 0x1FFF) * 1'000'000;                       // up to 8 s
    case 5: return -static_cast<std::int64_t>(code & 0x1FFF) * 1'000;                          // backwards (ignored)
    case 6: return static_cast<std::int64_t>(code & 0x1FFF) * 1'000'000'000'000LL;             // hours and more
    default: return 100'000'000 + (static_cast<std::int64_t>(code & 0x1FFF) - 4096) * 10'000;  // a period ± 41 ms
  }
}

// A counter step: nothing (a repeated value), a period's worth at some power, or anything.
double step_value(std::uint16_t code) {
  switch (code >> 14) {
    case 0: return 0.0;
    case 1: return static_cast<double>(code & 0x3FFF) * 0.05;  // up to ~800 mJ
    case 2: return static_cast<double>(code & 0x3FFF) * 10.0;
    default: return std::ldexp(static_cast<double>(code & 0xFF), static_cast<int>((code >> 8) & 0x3F));  // up to 2^63
  }
}

void fuzz_history(const std::uint8_t* data, std::size_t size) {
  Reader in{data, size};
  const std::uint8_t head = in.take<std::uint8_t>();
  const std::int64_t nominal = (head & 3) == 0   ? 100'000'000
                               : (head & 3) == 1 ? 20'000'000
                               : (head & 3) == 2 ? 1'000'000
                                                 : 250'000'000;
  erg::measure::CounterHistory h(std::chrono::nanoseconds(nominal), (head & 4) ? 16 : 512);
  std::int64_t t = 1'000'000'000;
  double value = static_cast<double>(head) * 1e6;
  const double first = value;
  std::vector<std::int64_t> reads;
  while (in.left > 0) {
    // 16 bytes: time step, value step, stamp mode and offset, asked lead, power, query offsets.
    const auto dt = in.take<std::uint16_t>();
    const auto dv = in.take<std::uint16_t>();
    const auto stamp_mode = in.take<std::uint8_t>();
    const auto stamp_off = in.take<std::int32_t>();
    const auto asked = in.take<std::uint16_t>();
    const auto power = in.take<std::uint16_t>();
    const auto q = in.take<std::uint16_t>();
    const auto q2 = in.take<std::uint8_t>();
    t += step_ns(dt);
    if (t > (std::int64_t{1} << 62) || t < -(std::int64_t{1} << 62)) break;  // no int64 overflow in the harness
    value += step_value(dv);
    erg::measure::CounterRead r;
    r.t_ns = t;
    r.value = value;
    if (asked & 1) r.asked_ns = t - static_cast<std::int64_t>(asked >> 1) * 1000;
    switch (stamp_mode & 7) {
      case 0: break;
      case 1: r.stamp_ns = t; break;                                                         // read time
      case 2: r.stamp_ns = t - static_cast<std::int64_t>(stamp_off & 0xFFFFF) * 100; break;  // a bit before
      case 3: r.stamp_ns = static_cast<std::int64_t>(stamp_off) * 1'000'000; break;          // anywhere
      case 4: r.stamp_ns = (t / 1'000'000'000) * 1'000'000'000; break;                       // floored to 1 s
      case 5: r.stamp_ns = t - nominal; break;                                               // a period early
      default: r.stamp_ns = t + static_cast<std::int64_t>(stamp_off); break;
    }
    if (stamp_mode & 8) r.power = static_cast<double>(power) * 10.0;
    h.add(r);
    reads.push_back(t);
    // Values at instants around the reads, in order: finite, ≥ the first value, non-decreasing.
    std::vector<std::int64_t> at;
    const std::int64_t span = nominal * (1 + (q2 & 7));
    for (int i = 0; i < 4; ++i)
      at.push_back(t - span + (span / 4) * i + static_cast<std::int64_t>((q >> (2 * i)) & 3) * (span / 16));
    at.push_back(t);
    at.push_back(t + nominal / 2);
    if (reads.size() > 3) at.push_back(reads[reads.size() / 2]);
    std::sort(at.begin(), at.end());
    double prev = -1.0;
    for (std::int64_t x : at) {
      auto v = h.value_at(x);
      if (!v) continue;
      check(std::isfinite(v->value), "value is finite");
      check(v->value >= first - 1e-6 * std::abs(first), "value never below the first read");
      check(v->value >= prev - 1e-9 * std::abs(v->value), "values never decrease over time");
      check(v->unread_ns >= 0, "unread span is not negative");
      prev = v->value;
    }
    (void)h.update_expected_after(t);
    (void)h.grid_position(t);
    (void)h.final_at(t);
  }
}

void fuzz_wrap(const std::uint8_t* data, std::size_t size) {
  Reader in{data, size};
  const std::uint8_t head = in.take<std::uint8_t>();
  const std::uint64_t range = (head & 0x30) == 0      ? 0
                              : (head & 0x30) == 0x10 ? 262143328850ULL
                              : (head & 0x30) == 0x20 ? 65712999613ULL
                                                      : 1000;
  erg::rapl::WrapAccumulator acc(range, erg::Watts(head & 0x40 ? 1000.0 : 50.0));
  std::uint64_t total = 0;
  while (in.left > 0) {
    const auto raw = in.take<std::uint64_t>();
    const auto elapsed = in.take<std::int64_t>();
    const std::uint64_t before = acc.accumulated_uj();
    const bool baseline = !acc.has_baseline();
    const std::uint64_t after = (head & 0x80) ? acc.update(raw) : acc.update(raw, std::chrono::nanoseconds(elapsed));
    check(after >= before, "the RAPL total never decreases");
    check(after == acc.accumulated_uj(), "update returns the total");
    if (!baseline && !(head & 0x80) && elapsed > 0 && elapsed < 1'000'000'000'000'000LL) {
      const double allowed = acc.max_power().value() * (static_cast<double>(elapsed) * 1e-9 + 1.0) * 1e6;  // µJ
      check(static_cast<double>(after - before) <= allowed + 1.0, "no more than the maximum power allows");
    }
    total = after;
  }
  (void)total;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  if (data[0] & 0x80)
    fuzz_wrap(data + 1, size - 1);
  else
    fuzz_history(data + 1, size - 1);
  return 0;
}
