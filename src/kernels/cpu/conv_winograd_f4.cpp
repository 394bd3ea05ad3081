// F(4x4, 3x3)'s input and output transforms for cpu.winograd_nhwc (conv_winograd.cpp), eight channels at a time on
// AVX2: B^T d B over 6x6 input tiles, A^T M A back to 4x4 outputs with the epilogue.
#include <immintrin.h>

#include "kernels/cpu/conv_winograd.h"

namespace kiln::cpu::winograd {
namespace {

// F(4x4, 3x3): B^T over six values (one column or row of a 6x6 input tile).
__attribute__((target("avx2,fma"), always_inline)) inline void bt6(const __m256 (&d)[6], __m256 (&r)[6]) {
  const __m256 four = _mm256_set1_ps(4.f), five = _mm256_set1_ps(5.f), two = _mm256_set1_ps(2.f);
  const __m256 d4_d2x4 = _mm256_fnmadd_ps(four, d[2], d[4]), d3_d1x4 = _mm256_fnmadd_ps(four, d[1], d[3]);
  const __m256 d4_d2 = _mm256_sub_ps(d[4], d[2]), d1_d3x2 = _mm256_mul_ps(two, _mm256_sub_ps(d[1], d[3]));
  r[0] = _mm256_add_ps(_mm256_fnmadd_ps(five, d[2], _mm256_mul_ps(four, d[0])), d[4]);  // 4 d0 - 5 d2 + d4
  r[1] = _mm256_add_ps(d4_d2x4, d3_d1x4);                                               // -4 d1 - 4 d2 + d3 + d4
  r[2] = _mm256_sub_ps(d4_d2x4, d3_d1x4);                                               // 4 d1 - 4 d2 - d3 + d4
  r[3] = _mm256_sub_ps(d4_d2, d1_d3x2);                                                 // -2 d1 - d2 + 2 d3 + d4
  r[4] = _mm256_add_ps(d4_d2, d1_d3x2);                                                 // 2 d1 - d2 - 2 d3 + d4
  r[5] = _mm256_add_ps(_mm256_fnmadd_ps(five, d[3], _mm256_mul_ps(four, d[1])), d[5]);  // 4 d1 - 5 d3 + d5
}

// F(4x4, 3x3): A^T over six values: m0 + m1 + m2 + m3 + m4, m1 - m2 + 2 (m3 - m4), m1 + m2 + 4 (m3 + m4),
// m1 - m2 + 8 (m3 - m4) + m5.
__attribute__((target("avx2,fma"), always_inline)) inline void at6(const __m256 (&m)[6], __m256 (&o)[4]) {
  const __m256 p12 = _mm256_add_ps(m[1], m[2]), m12 = _mm256_sub_ps(m[1], m[2]);
  const __m256 p34 = _mm256_add_ps(m[3], m[4]), m34 = _mm256_sub_ps(m[3], m[4]);
  o[0] = _mm256_add_ps(_mm256_add_ps(m[0], p12), p34);
  o[1] = _mm256_fmadd_ps(_mm256_set1_ps(2.f), m34, m12);
  o[2] = _mm256_fmadd_ps(_mm256_set1_ps(4.f), p34, p12);
  o[3] = _mm256_add_ps(_mm256_fmadd_ps(_mm256_set1_ps(8.f), m34, m12), m[5]);
}

}  // namespace

__attribute__((target("avx2,fma"))) void input_tile_f4(const Problem& p, const float* x, float* v, int64_t rows,
                                                       int64_t t, int64_t row) {
  const float* at[6][6];
  tile_inputs<6>(p, x, t, at);
  const int64_t plane = rows * p.c;
  float* out = v + row * p.c;
  for (int64_t ci = 0; ci < p.c; ci += 8) {
    __m256 r[6][6];  // B^T d, by columns
    for (int j = 0; j < 6; ++j) {
      __m256 d[6], col[6];
      for (int i = 0; i < 6; ++i) d[i] = at[i][j] ? _mm256_loadu_ps(at[i][j] + ci) : _mm256_setzero_ps();
      bt6(d, col);
      for (int i = 0; i < 6; ++i) r[i][j] = col[i];
    }
    for (int i = 0; i < 6; ++i) {  // (B^T d) B, by rows
      __m256 row_out[6];
      bt6(r[i], row_out);
      for (int j = 0; j < 6; ++j) _mm256_storeu_ps(out + (i * 6 + j) * plane + ci, row_out[j]);
    }
  }
}

__attribute__((target("avx2,fma"))) void output_tile_f4(const Problem& p, const float* mo, int64_t rows, int64_t t,
                                                        int64_t row, const float* bias, const float* residual,
                                                        const FusedActivation& fused, float* y) {
  const TileAt tile = tile_at(p, t);
  const int64_t plane = rows * p.m;
  const OutputEpilogue e = output_epilogue(residual, fused, y);
  for (int64_t o = 0; o < p.m; o += 8) {
    const float* in = mo + row * p.m + o;
    __m256 s[4][6];  // A^T M, by columns
    for (int j = 0; j < 6; ++j) {
      __m256 col[6], res[4];
      for (int i = 0; i < 6; ++i) col[i] = _mm256_loadu_ps(in + (i * 6 + j) * plane);
      at6(col, res);
      for (int i = 0; i < 4; ++i) s[i][j] = res[i];
    }
    const __m256 bv = bias ? _mm256_loadu_ps(bias + o) : _mm256_setzero_ps();
    for (int i = 0; i < 4; ++i) {
      const int64_t oy = tile.y0 + i;
      if (oy >= p.oh) break;
      __m256 out[4];
      at6(s[i], out);
      for (int j = 0; j < 4 && tile.x0 + j < p.ow; ++j)
        store_output(e, out[j], bv, ((tile.b * p.oh + oy) * p.ow + tile.x0 + j) * p.m + o);
    }
  }
}

}  // namespace kiln::cpu::winograd
