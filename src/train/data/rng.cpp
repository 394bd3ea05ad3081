#include "train/data/rng.h"

#include <cmath>
#include <numbers>

namespace kiln::train {

uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

uint64_t derive_seed(uint64_t base, uint64_t a, uint64_t b) { return mix64(mix64(mix64(base) ^ a) ^ b); }

Rng::Rng(uint64_t seed) {
  uint64_t x = seed;
  for (auto& w : s_) {
    x += 0x9E3779B97F4A7C15ull;
    w = mix64(x);
  }
}

Rng Rng::from_state(const State& state) {
  Rng rng;
  rng.s_ = state;
  if ((state[0] | state[1] | state[2] | state[3]) == 0) rng = Rng(0);  // all-zero is xoshiro's fixed point
  return rng;
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t Rng::next() {
  uint64_t result = rotl(s_[1] * 5, 7) * 9;
  uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

double Rng::uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

uint64_t Rng::below(uint64_t n) {
  if (n <= 1) return 0;
  // Rejection of the top partial range: every residue equally likely.
  uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  for (;;) {
    uint64_t v = next();
    if (v < limit) return v % n;
  }
}

int64_t Rng::uniform_int(int64_t lo, int64_t hi) {
  if (hi <= lo) return lo;
  uint64_t span = static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo) + 1;
  if (span == 0) return static_cast<int64_t>(next());  // the full 64-bit range
  return static_cast<int64_t>(static_cast<uint64_t>(lo) + below(span));
}

double Rng::normal() {
  double u1 = 1.0 - uniform();  // (0, 1]
  double u2 = uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

}  // namespace kiln::train
