#pragma once
/// Strong unit types. A quantity carries its dimension and scale in its type, so a
/// milliwatt value can never be passed where watts are expected. Conversions between
/// scales of one dimension are implicit (the representation is double, so they are
/// lossless) and cannot fail at run time.

#include <chrono>
#include <compare>
#include <cstdint>
#include <ratio>

namespace erg {

struct EnergyDim {};
struct PowerDim {};
struct FrequencyDim {};

template <class Dim, class Scale>
class Quantity {
 public:
  using dimension = Dim;
  using scale = Scale;

  constexpr Quantity() = default;
  constexpr explicit Quantity(double value) : value_(value) {}

  /// Implicit conversion from another scale of the same dimension.
  template <class OtherScale>
  constexpr Quantity(Quantity<Dim, OtherScale> other)  // NOLINT(google-explicit-constructor)
      : value_(other.value() * (static_cast<double>(OtherScale::num) * Scale::den) /
               (static_cast<double>(OtherScale::den) * Scale::num)) {}

  /// The numeric value in this type's unit.
  [[nodiscard]] constexpr double value() const { return value_; }

  constexpr Quantity& operator+=(Quantity o) {
    value_ += o.value_;
    return *this;
  }
  constexpr Quantity& operator-=(Quantity o) {
    value_ -= o.value_;
    return *this;
  }
  friend constexpr Quantity operator+(Quantity a, Quantity b) { return Quantity(a.value_ + b.value_); }
  friend constexpr Quantity operator-(Quantity a, Quantity b) { return Quantity(a.value_ - b.value_); }
  friend constexpr Quantity operator-(Quantity a) { return Quantity(-a.value_); }
  friend constexpr Quantity operator*(Quantity a, double k) { return Quantity(a.value_ * k); }
  friend constexpr Quantity operator*(double k, Quantity a) { return Quantity(a.value_ * k); }
  friend constexpr Quantity operator/(Quantity a, double k) { return Quantity(a.value_ / k); }
  friend constexpr double operator/(Quantity a, Quantity b) { return a.value_ / b.value_; }
  friend constexpr auto operator<=>(Quantity a, Quantity b) = default;

 private:
  double value_ = 0.0;
};

using Joules = Quantity<EnergyDim, std::ratio<1>>;
using MilliJoules = Quantity<EnergyDim, std::milli>;
using MicroJoules = Quantity<EnergyDim, std::micro>;
using Watts = Quantity<PowerDim, std::ratio<1>>;
using MilliWatts = Quantity<PowerDim, std::milli>;
using Megahertz = Quantity<FrequencyDim, std::mega>;

/// Energy = power × time.
template <class PScale, class Rep, class Period>
constexpr Joules operator*(Quantity<PowerDim, PScale> p, std::chrono::duration<Rep, Period> d) {
  return Joules(Watts(p).value() * std::chrono::duration<double>(d).count());
}
template <class PScale, class Rep, class Period>
constexpr Joules operator*(std::chrono::duration<Rep, Period> d, Quantity<PowerDim, PScale> p) {
  return p * d;
}
/// Power = energy / time.
template <class EScale, class Rep, class Period>
constexpr Watts operator/(Quantity<EnergyDim, EScale> e, std::chrono::duration<Rep, Period> d) {
  return Watts(Joules(e).value() / std::chrono::duration<double>(d).count());
}

/// Seconds as a double, the unit of every `time_s` field.
using Seconds = std::chrono::duration<double>;

}  // namespace erg
