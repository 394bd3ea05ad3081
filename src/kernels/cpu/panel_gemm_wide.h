#pragma once
// The AVX-512 register kernel of the packed float32 product (packed_gemm.cpp): up to eight rows of A times two
// panels of 16 columns of B (32 columns), the sums in 16 of the 32 zmm registers. B's panels are those of
// panel_gemm.h (k rows of 16 floats each), so one packed copy serves both kernels. A is read in place (row i's
// element p at a[i * lda + p]). Callers carry target("avx512f") themselves.
#include <immintrin.h>

#include <cstdint>

namespace kiln::cpu {

constexpr int kWideRows = 8;    // rows of A per call
constexpr int kWidePanels = 2;  // panels of B per call

/// sums[i][h] = row i of A (i < Rows) times panel h (b0, then b1 when Panels is 2), over k.
template <int Rows, int Panels>
__attribute__((target("avx512f"), always_inline)) inline void wide_panel_product(const float* a, int64_t lda,
                                                                                 const float* b0, const float* b1,
                                                                                 int64_t k,
                                                                                 __m512 (&sums)[kWideRows][2]) {
  static_assert(Rows >= 1 && Rows <= kWideRows && (Panels == 1 || Panels == 2));
  __m512 acc[Rows][Panels];
#pragma GCC unroll 8
  for (int r = 0; r < Rows; ++r)
#pragma GCC unroll 2
    for (int h = 0; h < Panels; ++h) acc[r][h] = _mm512_setzero_ps();
  for (int64_t i = 0; i < k; ++i) {
    __m512 b[Panels];
    b[0] = _mm512_loadu_ps(b0 + i * 16);
    if constexpr (Panels == 2) b[1] = _mm512_loadu_ps(b1 + i * 16);
#pragma GCC unroll 8
    for (int r = 0; r < Rows; ++r) {
      const __m512 x = _mm512_set1_ps(a[r * lda + i]);
#pragma GCC unroll 2
      for (int h = 0; h < Panels; ++h) acc[r][h] = _mm512_fmadd_ps(x, b[h], acc[r][h]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < Rows; ++r)
#pragma GCC unroll 2
    for (int h = 0; h < Panels; ++h) sums[r][h] = acc[r][h];
}

}  // namespace kiln::cpu
