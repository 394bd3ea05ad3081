#pragma once
// What the direct channels_last (NHWC) float32 convolutions share (conv_nhwc_direct.cpp, and the AVX-512 tiles of
// conv_few_channels_wide.cpp): one call's geometry and operands, and an output row's place in x.
#include <algorithm>
#include <cstdint>

#include "ops/activation/activation.h"

namespace kiln::cpu {

struct DirectConv {
  const float* x = nullptr;
  const float* taps = nullptr;      // depthwise [kH, kW, C]; few channels [kH, kW, C, taps_stride]
  const float* bias = nullptr;      // [M] or null
  const float* residual = nullptr;  // [N, Ho, Wo, M] or null (may be y's own memory)
  float* y = nullptr;
  int64_t h = 0, w = 0, c = 0, m = 0, oh = 0, ow = 0, kh = 0, kw = 0;
  int64_t sh = 1, sw = 1, dh = 1, dw = 1, ph = 0, pw = 0;
  int64_t taps_stride = 0;  // few channels: the floats between one tap's M weights and the next's (M or more)
  FusedActivation fused;
};

/// One output row's place: its image and row, the window rows [ky0, ky1) that lie inside x, and the output pixels
/// [lo, hi) whose whole window lies inside x's width (the others need each tap checked).
struct TileRow {
  int64_t row = 0, oy = 0, ky0 = 0, ky1 = 0, lo = 0, hi = 0;
  const float* x_image = nullptr;  // image b of x
};

inline TileRow tile_row(const DirectConv& p, int64_t row) {
  TileRow r;
  r.row = row;
  r.oy = row % p.oh;
  r.x_image = p.x + (row / p.oh) * p.h * p.w * p.c;
  const int64_t iy0 = r.oy * p.sh - p.ph;
  r.ky0 = iy0 >= 0 ? 0 : std::min(p.kh, (-iy0 + p.dh - 1) / p.dh);
  r.ky1 = r.ky0;
  while (r.ky1 < p.kh && iy0 + r.ky1 * p.dh < p.h) ++r.ky1;
  // Interior pixels: ox * sw - pw >= 0 and ox * sw - pw + (kw - 1) * dw < w.
  r.lo = std::min(p.ow, (p.pw + p.sw - 1) / p.sw);
  const int64_t last_x = p.w - 1 - (p.kw - 1) * p.dw + p.pw;
  r.hi = last_x < 0 ? r.lo : std::clamp(last_x / p.sw + 1, r.lo, p.ow);
  return r;
}

/// Output row `row` of a few-channels convolution by AVX-512 register tiles (conv_few_channels_wide.cpp); the taps
/// are [kH, kW, C, taps_stride] with taps_stride a multiple of 16 and the padding zero.
void few_channels_tiles_row_avx512(const DirectConv& p, int64_t row);

}  // namespace kiln::cpu
