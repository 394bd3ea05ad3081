#pragma once
// What cpu.winograd_nhwc (conv_winograd.cpp) shares with its F(4x4, 3x3) transforms (conv_winograd_f4.cpp): the
// problem's geometry, and the transforms of one tile.
#include <immintrin.h>

#include <cstdint>

#include "ops/activation/activation.h"

namespace kiln::cpu::winograd {

/// One call's geometry: x [N, H, W, C], y [N, OH, OW, M], the pads before, and the tiles.
struct Problem {
  int64_t n = 0, h = 0, w = 0, c = 0, m = 0, oh = 0, ow = 0, ph = 0, pw = 0;
  int64_t tile = 2, points = 16;  // outputs per tile side (F(2x2) or F(4x4)); transformed points (tile + 2)^2
  int64_t tiles_h = 0, tiles_w = 0, tiles = 0;
};

/// Tile t's image and its first output row and column.
struct TileAt {
  int64_t b, y0, x0;
};

inline TileAt tile_at(const Problem& p, int64_t t) {
  const int64_t b = t / (p.tiles_h * p.tiles_w), rest = t % (p.tiles_h * p.tiles_w);
  return {b, p.tile * (rest / p.tiles_w), p.tile * (rest % p.tiles_w)};
}

/// The input pixels tile t's transform reads (alpha x alpha from (y0 - ph, x0 - pw)): each pixel's channels in x,
/// or null where the pixel lies outside x (a zero).
template <int kAlpha>
void tile_inputs(const Problem& p, const float* x, int64_t t, const float* (&at)[kAlpha][kAlpha]) {
  const TileAt tile = tile_at(p, t);
  for (int i = 0; i < kAlpha; ++i)
    for (int j = 0; j < kAlpha; ++j) {
      const int64_t iy = tile.y0 - p.ph + i, ix = tile.x0 - p.pw + j;
      at[i][j] = iy >= 0 && iy < p.h && ix >= 0 && ix < p.w ? x + ((tile.b * p.h + iy) * p.w + ix) * p.c : nullptr;
    }
}

/// What the output transforms apply to each vector of eight output channels: bias, the residual (read before y is
/// written: it may be y's own memory), then ReLU or Clip.
struct OutputEpilogue {
  const float* residual;
  float* y;
  bool relu, clip;
  __m256 lo, hi;
};

__attribute__((target("avx2,fma"))) inline OutputEpilogue output_epilogue(const float* residual,
                                                                          const FusedActivation& fused, float* y) {
  const bool clip = fused.on && fused.kind == ActivationKind::kClip;
  return {residual, y, fused.on && !clip, clip, _mm256_set1_ps(clip ? fused.alpha : 0.f), _mm256_set1_ps(fused.beta)};
}

/// y[at, at + 8) = the epilogue of v + bias.
__attribute__((target("avx2,fma"), always_inline)) inline void store_output(const OutputEpilogue& e, __m256 v,
                                                                            __m256 bias, int64_t at) {
  __m256 val = _mm256_add_ps(v, bias);
  if (e.residual) val = _mm256_add_ps(val, _mm256_loadu_ps(e.residual + at));
  if (e.relu) val = _mm256_max_ps(val, e.lo);
  if (e.clip) val = _mm256_min_ps(_mm256_max_ps(val, e.lo), e.hi);
  _mm256_storeu_ps(e.y + at, val);
}

/// Row `row` of V[xi] (`rows` rows per point) for tile t of F(4x4, 3x3): B^T d B over the 6x6 inputs at
/// (4 ty - ph, 4 tx - pw), zero outside x.
void input_tile_f4(const Problem& p, const float* x, float* v, int64_t rows, int64_t t, int64_t row);

/// The 4x4 outputs of tile t of F(4x4, 3x3) from row `row` of M: A^T M A, then bias, residual and the activation
/// (the residual read before y is written: it may be y's own memory).
void output_tile_f4(const Problem& p, const float* mo, int64_t rows, int64_t t, int64_t row, const float* bias,
                    const float* residual, const FusedActivation& fused, float* y);

}  // namespace kiln::cpu::winograd
