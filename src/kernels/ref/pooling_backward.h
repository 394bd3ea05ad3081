#pragma once
// One (n, c) plane of PoolingBackward, shared by the reference and CPU kernels: every output's window is visited
// as the forward does (kernels/ref/pooling.cpp) and dy is scattered to the taps it came from. Max pooling sends dy
// to the window's first maximum (the tap the forward picks).
#include <cmath>
#include <cstdint>
#include <limits>

#include "ops/pooling/pooling.h"

namespace kiln::ref {

/// dx (zeroed here) of one plane; x and dy point at the plane's first element.
inline void pooling_backward_plane(const PoolingAttrs& a, const PoolingGeometry& g, const float* x, const float* dy,
                                   float* dx) {
  constexpr int kMax = PoolingGeometry::kMaxSpatial;
  const int r = g.spatial;
  int64_t in_plane = 1, out_plane = 1;
  for (int d = 0; d < r; ++d) {
    in_plane *= g.in[d];
    out_plane *= g.out[d];
  }
  for (int64_t i = 0; i < in_plane; ++i) dx[i] = 0.f;
  if (out_plane == 0) return;
  const auto next = [r](int64_t* idx, const int64_t* dims) {
    for (int d = r - 1; d >= 0; --d) {
      if (++idx[d] < dims[d]) return true;
      idx[d] = 0;
    }
    return false;
  };
  // The flat input index of tap k of output o, -1 outside the input; `padded` says whether it is in the pads.
  const auto tap = [&](const int64_t* o, const int64_t* k, bool& padded) {
    bool inside = true;
    padded = true;
    int64_t at = 0;
    for (int d = 0; d < r; ++d) {
      const int64_t pos = o[d] * g.stride[d] - g.pad_begin[d] + k[d] * g.dilation[d];
      inside = inside && pos >= 0 && pos < g.in[d];
      padded = padded && pos >= -g.pad_begin[d] && pos < g.in[d] + g.pad_end[d];
      at = at * g.in[d] + pos;
    }
    return inside ? at : int64_t{-1};
  };
  const float p = static_cast<float>(a.p);
  int64_t o[kMax] = {};
  int64_t flat_out = 0;
  do {
    const float g_out = dy[flat_out++];
    // First pass: the max tap, the divisor, or the Lp norm.
    float best = -std::numeric_limits<float>::infinity(), sum = 0.f;
    int64_t best_at = -1, valid = 0, padded_window = 0;
    int64_t k[kMax] = {};
    do {
      bool padded;
      const int64_t at = tap(o, k, padded);
      if (padded) ++padded_window;
      if (at < 0) continue;
      ++valid;
      const float v = x[at];
      if (a.mode == PoolingMode::kMax && (best_at < 0 || v > best)) {
        best = v;
        best_at = at;
      } else if (a.mode == PoolingMode::kLp) {
        sum += std::pow(std::fabs(v), p);
      }
    } while (next(k, g.kernel));
    if (a.mode == PoolingMode::kMax) {
      if (best_at >= 0) dx[best_at] += g_out;
      continue;
    }
    float scale = 0.f;
    if (a.mode == PoolingMode::kAverage) {
      const int64_t divisor = a.count_include_pad ? padded_window : valid;
      scale = divisor ? g_out / static_cast<float>(divisor) : 0.f;
    } else {
      // y = (sum |x|^p)^(1/p): dy/dx = sign(x) |x|^(p-1) / y^(p-1).
      const float norm = std::pow(sum, 1.f / p);
      scale = norm > 0.f ? g_out / std::pow(norm, p - 1.f) : 0.f;
    }
    for (int d = 0; d < r; ++d) k[d] = 0;
    do {
      bool padded;
      const int64_t at = tap(o, k, padded);
      if (at < 0) continue;
      if (a.mode == PoolingMode::kAverage) {
        dx[at] += scale;
      } else {
        const float v = x[at];
        dx[at] += scale * std::copysign(std::pow(std::fabs(v), p - 1.f), v);
      }
    } while (next(k, g.kernel));
  } while (next(o, g.out));
}

}  // namespace kiln::ref
