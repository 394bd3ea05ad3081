#pragma once
// Loads and stores of the first lanes of a 16-float vector (a tile's last columns) for the AVX-512 kernels. Where
// every lane is in, the plain instruction: on Zen 5 a store under a full mask stalled the few-channels stem at
// twice its time (the mask's 0xFFFF is only known at run time, so the compiler cannot drop it).
#include <immintrin.h>

namespace kiln::cpu {

constexpr __mmask16 kAllLanes = 0xFFFF;

[[gnu::always_inline, gnu::target("avx512f")]] inline __m512 load_lanes(__mmask16 lanes, const float* at) {
  return lanes == kAllLanes ? _mm512_loadu_ps(at) : _mm512_maskz_loadu_ps(lanes, at);
}

[[gnu::always_inline, gnu::target("avx512f")]] inline void store_lanes(__mmask16 lanes, float* at, __m512 v) {
  if (lanes == kAllLanes)
    _mm512_storeu_ps(at, v);
  else
    _mm512_mask_storeu_ps(at, lanes, v);
}

}  // namespace kiln::cpu
