#pragma once
/// The batch-size optimizer's random numbers: a small seeded generator whose whole state is a
/// short string, so an optimizer saved and restored (e.g. by a server after a restart) draws
/// the same sequence it would have drawn without the restart.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "erg/core/result.hpp"

namespace erg::batch_size {

/// xoshiro256** (Blackman and Vigna) seeded through splitmix64. Every draw is defined here, not
/// by the standard library's distributions, so sequences are the same on every platform.
/// Not thread-safe; copyable (a copy continues the same sequence independently).
class Rng {
 public:
  /// A generator for `seed`; equal seeds give equal sequences.
  explicit Rng(std::uint64_t seed);
  /// A generator seeded from the clock and the process (for a job without `mab_seed`).
  static Rng from_entropy();

  /// The next 64 random bits.
  std::uint64_t next_u64();
  /// Uniform in [0, 1), 53 bits.
  double uniform();
  /// Uniform integer in [0, n); n must be > 0 (unbiased: rejection on the high bits).
  std::uint64_t below(std::uint64_t n);
  /// Normal with `mean` and `stddev` (Box–Muller, one pair of uniforms per draw); stddev 0
  /// returns `mean` exactly.
  double normal(double mean, double stddev);
  /// A uniformly random permutation of 0..n-1 (Fisher–Yates).
  std::vector<std::size_t> permutation(std::size_t n);

  /// The whole state, e.g. "xoshiro256ss:0123456789abcdef,...": restore() continues from here.
  [[nodiscard]] std::string state() const;
  /// A generator in the state state() returned; kInvalidArgument for any other text.
  static Result<Rng> restore(std::string_view state);

  friend bool operator==(const Rng&, const Rng&) = default;

 private:
  Rng() = default;
  std::uint64_t s_[4] = {};
};

}  // namespace erg::batch_size
