#pragma once
// A small, fast, portable random generator (xoshiro256**, seeded through splitmix64) for shuffling and
// augmentation: the same seed gives the same numbers on every platform and standard library, and its
// whole state is four words that a checkpoint can store.
#include <array>
#include <cstdint>

namespace kiln::train {

/// splitmix64's finaliser: a well-mixed 64-bit hash of `x`.
uint64_t mix64(uint64_t x);
/// A seed derived from a base seed and a sequence of values (epoch, position, ...).
uint64_t derive_seed(uint64_t base, uint64_t a, uint64_t b = 0);

class Rng {
 public:
  using State = std::array<uint64_t, 4>;
  explicit Rng(uint64_t seed = 0);
  static Rng from_state(const State& state);
  const State& state() const { return s_; }

  uint64_t next();
  /// Uniform in [0, 1) with 53 random bits.
  double uniform();
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  /// Uniform integer in [0, n) without modulo bias (n > 0).
  uint64_t below(uint64_t n);
  /// Uniform integer in [lo, hi] (lo <= hi).
  int64_t uniform_int(int64_t lo, int64_t hi);
  bool bernoulli(double p) { return uniform() < p; }
  /// Standard normal (Box-Muller; one draw per call, no cached second value, so the state says it all).
  double normal();

 private:
  State s_{};
};

}  // namespace kiln::train
