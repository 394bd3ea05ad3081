#pragma once
// Dropout's mask: a counter-based hash (SplitMix64's finalizer) of (seed, step, element index), the same on every
// backend and in every run given the same seed and step.
#include <cstdint>

#include "kernels/common/host_device.h"

namespace kiln::ref {

KILN_HD inline uint64_t mix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// The stream key of one (seed, step).
KILN_HD inline uint64_t dropout_key(int64_t seed, int64_t step) {
  return mix64(static_cast<uint64_t>(seed) ^ mix64(static_cast<uint64_t>(step)));
}

/// Drops with probability `ratio`: 24 random bits against ratio * 2^24.
KILN_HD inline uint32_t dropout_threshold(float ratio) { return static_cast<uint32_t>(ratio * 16777216.0f); }
KILN_HD inline bool dropout_keep(uint64_t key, int64_t index, uint32_t threshold) {
  return static_cast<uint32_t>(mix64(key + static_cast<uint64_t>(index)) >> 40) >= threshold;
}

}  // namespace kiln::ref
