#pragma once
// exp and log to a few ulp (erf to 5e-7) without branches or library calls, so loops over them vectorise (glibc's
// vector variants need -ffast-math). GCC vectorises the clamp only with -fno-trapping-math (set per file in
// src/kernels/CMakeLists.txt); without it the loops run scalar, with the same results.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

namespace kiln::cpu {

/// exp(x), x clamped to [-87, 88] (so exp of -inf is about 1e-38, not 0).
inline float exp_approx(float x) {
  x = std::min(std::max(x, -87.f), 88.f);
  // Round x / ln 2 to the nearest integer n by adding 1.5 * 2^23: n is then the low bits of `shifted`
  // (read as an integer: no float-to-int conversion, which keeps the loop vectorisable).
  const float shifted = x * 1.44269504f + 12582912.f;
  const float n = shifted - 12582912.f;
  const float r = (x - n * 0.693145752f) - n * 1.42860677e-6f;
  float p = 1.f / 720.f;
  p = p * r + 1.f / 120.f;
  p = p * r + 1.f / 24.f;
  p = p * r + 1.f / 6.f;
  p = p * r + 0.5f;
  p = p * r + 1.f;
  p = p * r + 1.f;
  const int32_t bits = (std::bit_cast<int32_t>(shifted) - 0x4B400000 + 127) << 23;  // 0x4B400000: 1.5 * 2^23
  return p * std::bit_cast<float>(bits);
}

/// log(x) for positive normal x: x = m 2^e with m in [sqrt(1/2), sqrt(2)), log(m) = 2 atanh((m - 1) / (m + 1)).
inline float log_approx(float x) {
  const int32_t bits = std::bit_cast<int32_t>(x);
  int32_t e = ((bits >> 23) & 0xff) - 127;
  float m = std::bit_cast<float>((bits & 0x007fffff) | 0x3f800000);
  const bool high = m > 1.41421356f;
  m = high ? m * 0.5f : m;
  e += high ? 1 : 0;
  const float s = (m - 1.f) / (m + 1.f), s2 = s * s;
  float p = 1.f / 9.f;
  p = p * s2 + 1.f / 7.f;
  p = p * s2 + 1.f / 5.f;
  p = p * s2 + 1.f / 3.f;
  p = p * s2 + 1.f;
  return 2.f * s * p + static_cast<float>(e) * 0.693147181f;
}

/// erf(x) to about 5e-7 absolute (Abramowitz and Stegun 7.1.26: 1 - t P(t) exp(-x^2), t = 1 / (1 + 0.3275911 |x|),
/// odd in x), with no branch: a loop over it vectorises.
inline float erf_approx(float x) {
  const float ax = std::fabs(x);
  const float t = 1.f / (1.f + 0.3275911f * ax);
  float p = 1.061405429f;
  p = p * t - 1.453152027f;
  p = p * t + 1.421413741f;
  p = p * t - 0.284496736f;
  p = p * t + 0.254829592f;
  const float r = 1.f - p * t * exp_approx(-ax * ax);
  return x < 0.f ? -r : r;
}

/// GELU, erf form: x / 2 (1 + erf(x / sqrt 2)), in place over n floats.
inline void gelu_erf_in_place(float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = 0.5f * y[i] * (1.f + erf_approx(y[i] * 0.70710678f));
}

}  // namespace kiln::cpu
