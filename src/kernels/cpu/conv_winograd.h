#pragma once
// What cpu.winograd_nhwc (conv_winograd.cpp) shares with its F(4x4, 3x3) transforms (conv_winograd_f4.cpp): the
// problem's geometry, and the transforms of one tile.
#include <cstdint>

#include "ops/activation/activation.h"

namespace kiln::cpu::winograd {

/// One call's geometry: x [N, H, W, C], y [N, OH, OW, M], the pads before, and the tiles.
struct Problem {
  int64_t n = 0, h = 0, w = 0, c = 0, m = 0, oh = 0, ow = 0, ph = 0, pw = 0;
  int64_t tile = 2, points = 16;  // outputs per tile side (F(2x2) or F(4x4)); transformed points (tile + 2)^2
  int64_t tiles_h = 0, tiles_w = 0, tiles = 0;
};

/// Row `row` of V[xi] (`rows` rows per point) for tile t of F(4x4, 3x3): B^T d B over the 6x6 inputs at
/// (4 ty - ph, 4 tx - pw), zero outside x.
void input_tile_f4(const Problem& p, const float* x, float* v, int64_t rows, int64_t t, int64_t row);

/// The 4x4 outputs of tile t of F(4x4, 3x3) from row `row` of M: A^T M A, then bias, residual and the activation
/// (the residual read before y is written: it may be y's own memory).
void output_tile_f4(const Problem& p, const float* mo, int64_t rows, int64_t t, int64_t row, const float* bias,
                    const float* residual, const FusedActivation& fused, float* y);

}  // namespace kiln::cpu::winograd
