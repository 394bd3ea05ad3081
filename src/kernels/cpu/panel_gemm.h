#pragma once
// The register kernel of the CPU's own float32 matrix products (AVX2 + FMA): six rows of A times a panel of 16
// columns of B, the twelve sums in named registers (an array of them was kept on the stack). B is stored
// panel-major: the panel's K rows of 16 floats one after another, so its loads run sequentially. A is read in place
// (row i's element p at a[i * lda + p], cpu.winograd_nhwc) or packed (at a[p * 6 + i], packed_gemm.cpp); callers
// carry target("avx2,fma") themselves.
#include <immintrin.h>

#include <cstdint>

namespace kiln::cpu {

constexpr int kPanelRows = 6;   // rows of A per call
constexpr int kPanelCols = 16;  // columns of B per panel (two AVX2 vectors)

/// sums[i][h] = row i of A (its element p at a[i * lda + p * step]) times columns [8 h, 8 h + 8) of the panel b
/// (k rows of 16).
__attribute__((target("avx2,fma"), always_inline)) inline void panel_product(const float* a, int64_t lda, int64_t step,
                                                                             const float* b, int64_t k,
                                                                             __m256 (&sums)[kPanelRows][2]) {
  __m256 a00 = _mm256_setzero_ps(), a01 = a00, a10 = a00, a11 = a00, a20 = a00, a21 = a00;
  __m256 a30 = a00, a31 = a00, a40 = a00, a41 = a00, a50 = a00, a51 = a00;
  for (int64_t i = 0; i < k; ++i, a += step) {
    const __m256 b0 = _mm256_loadu_ps(b + i * kPanelCols), b1 = _mm256_loadu_ps(b + i * kPanelCols + 8);
    __m256 x = _mm256_broadcast_ss(a);
    a00 = _mm256_fmadd_ps(x, b0, a00), a01 = _mm256_fmadd_ps(x, b1, a01);
    x = _mm256_broadcast_ss(a + lda);
    a10 = _mm256_fmadd_ps(x, b0, a10), a11 = _mm256_fmadd_ps(x, b1, a11);
    x = _mm256_broadcast_ss(a + 2 * lda);
    a20 = _mm256_fmadd_ps(x, b0, a20), a21 = _mm256_fmadd_ps(x, b1, a21);
    x = _mm256_broadcast_ss(a + 3 * lda);
    a30 = _mm256_fmadd_ps(x, b0, a30), a31 = _mm256_fmadd_ps(x, b1, a31);
    x = _mm256_broadcast_ss(a + 4 * lda);
    a40 = _mm256_fmadd_ps(x, b0, a40), a41 = _mm256_fmadd_ps(x, b1, a41);
    x = _mm256_broadcast_ss(a + 5 * lda);
    a50 = _mm256_fmadd_ps(x, b0, a50), a51 = _mm256_fmadd_ps(x, b1, a51);
  }
  sums[0][0] = a00, sums[0][1] = a01, sums[1][0] = a10, sums[1][1] = a11, sums[2][0] = a20, sums[2][1] = a21;
  sums[3][0] = a30, sums[3][1] = a31, sums[4][0] = a40, sums[4][1] = a41, sums[5][0] = a50, sums[5][1] = a51;
}

/// panel_product for the first `Rows` (< kPanelRows) rows only: the last rows of a product whose row count is not a
/// multiple of six, read in place instead of copied out with zero rows added. sums[i] for i >= Rows are left as
/// they were.
template <int Rows>
__attribute__((target("avx2,fma"), always_inline)) inline void panel_product_first(const float* a, int64_t lda,
                                                                                   int64_t step, const float* b,
                                                                                   int64_t k,
                                                                                   __m256 (&sums)[kPanelRows][2]) {
  static_assert(Rows >= 1 && Rows < kPanelRows);
  __m256 acc[Rows][2];
#pragma GCC unroll 6
  for (int r = 0; r < Rows; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
  for (int64_t i = 0; i < k; ++i, a += step) {
    const __m256 b0 = _mm256_loadu_ps(b + i * kPanelCols), b1 = _mm256_loadu_ps(b + i * kPanelCols + 8);
#pragma GCC unroll 6
    for (int r = 0; r < Rows; ++r) {
      const __m256 x = _mm256_broadcast_ss(a + r * lda);
      acc[r][0] = _mm256_fmadd_ps(x, b0, acc[r][0]), acc[r][1] = _mm256_fmadd_ps(x, b1, acc[r][1]);
    }
  }
#pragma GCC unroll 6
  for (int r = 0; r < Rows; ++r) sums[r][0] = acc[r][0], sums[r][1] = acc[r][1];
}

/// panel_product for the first `rows` (1 to kPanelRows) rows of A.
__attribute__((target("avx2,fma"))) inline void panel_product_rows(int64_t rows, const float* a, int64_t lda,
                                                                   int64_t step, const float* b, int64_t k,
                                                                   __m256 (&sums)[kPanelRows][2]) {
  switch (rows) {
    case 1: return panel_product_first<1>(a, lda, step, b, k, sums);
    case 2: return panel_product_first<2>(a, lda, step, b, k, sums);
    case 3: return panel_product_first<3>(a, lda, step, b, k, sums);
    case 4: return panel_product_first<4>(a, lda, step, b, k, sums);
    case 5: return panel_product_first<5>(a, lda, step, b, k, sums);
    default: return panel_product(a, lda, step, b, k, sums);
  }
}

}  // namespace kiln::cpu
