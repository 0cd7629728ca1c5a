#include "erg/optimizers/batch_size/rng.hpp"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <numbers>

namespace erg::batch_size {
namespace {

constexpr std::string_view kPrefix = "xoshiro256ss:";

std::uint64_t splitmix64(std::uint64_t& x) {
  std::uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

constexpr std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

}  // namespace

Rng::Rng(std::uint64_t seed) {
  for (auto& word : s_) word = splitmix64(seed);
}

Rng Rng::from_entropy() {
  const auto now = static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  const auto wall = static_cast<std::uint64_t>(std::chrono::system_clock::now().time_since_epoch().count());
  return Rng(now ^ (wall << 1) ^ (static_cast<std::uint64_t>(::getpid()) << 32));
}

std::uint64_t Rng::next_u64() {
  const std::uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const std::uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

double Rng::uniform() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

std::uint64_t Rng::below(std::uint64_t n) {
  // Reject the top partial block so every residue is equally likely.
  const std::uint64_t limit = ~std::uint64_t{0} - (~std::uint64_t{0} % n);
  for (;;) {
    const std::uint64_t x = next_u64();
    if (x < limit) return x % n;
  }
}

double Rng::normal(double mean, double stddev) {
  const double u1 = 1.0 - uniform();  // (0, 1]: log() stays finite
  const double u2 = uniform();
  if (stddev == 0.0) return mean;
  return mean + stddev * std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

std::vector<std::size_t> Rng::permutation(std::size_t n) {
  std::vector<std::size_t> p(n);
  for (std::size_t i = 0; i < n; ++i) p[i] = i;
  for (std::size_t i = n; i > 1; --i) std::swap(p[i - 1], p[below(i)]);
  return p;
}

std::string Rng::state() const {
  std::string out(kPrefix);
  char word[17];
  for (int i = 0; i < 4; ++i) {
    std::snprintf(word, sizeof word, "%016llx", static_cast<unsigned long long>(s_[i]));
    if (i > 0) out += ',';
    out += word;
  }
  return out;
}

Result<Rng> Rng::restore(std::string_view state) {
  const auto bad = [&] {
    return fail(ErrorCode::kInvalidArgument, "not an RNG state: '" + std::string(state.substr(0, 80)) + "'");
  };
  if (!state.starts_with(kPrefix)) return bad();
  state.remove_prefix(kPrefix.size());
  Rng rng;
  for (int i = 0; i < 4; ++i) {
    if (state.size() < 16) return bad();
    std::uint64_t v = 0;
    for (char c : state.substr(0, 16)) {
      int d = 0;
      if (c >= '0' && c <= '9') {
        d = c - '0';
      } else if (c >= 'a' && c <= 'f') {
        d = c - 'a' + 10;
      } else {
        return bad();
      }
      v = (v << 4) | static_cast<std::uint64_t>(d);
    }
    rng.s_[i] = v;
    state.remove_prefix(16);
    if (i < 3) {
      if (state.empty() || state.front() != ',') return bad();
      state.remove_prefix(1);
    }
  }
  if (!state.empty()) return bad();
  if ((rng.s_[0] | rng.s_[1] | rng.s_[2] | rng.s_[3]) == 0) return bad();  // xoshiro's one dead state
  return rng;
}

}  // namespace erg::batch_size
