// The "tiles" tactic of cpu.conv_nhwc_few_channels (conv_nhwc_direct.cpp) on AVX-512: a stem's convolution (a few
// input channels, many output channels, windows up to 7x7) by register tiles of PX output pixels x V vectors of 16
// output channels. Each tile sums its whole window in registers: per tap and input channel, V vectors of weights are
// loaded once and each pixel's input value is broadcast once, PX x V multiply-adds in all; then bias, residual and
// ReLU / Clip, and one store (the last vector under a mask when M is not a multiple of 16). The pixels whose window
// crosses x's left or right border go one at a time with each tap checked.
#include <immintrin.h>

#include "kernels/cpu/conv_nhwc_direct.h"
#include "kernels/cpu/lanes_avx512.h"

namespace kiln::cpu {
namespace {

constexpr int64_t kLanes = 16;  // floats per vector
constexpr __mmask16 kAll = kAllLanes;

// PX output pixels from ox, channels [ch, ch + 16 V) (the last vector's lanes in `last`); kEdge: taps outside x's
// width are skipped.
template <int PX, int V, bool kEdge>
__attribute__((target("avx512f"), always_inline)) inline void few_tile(const DirectConv& p, const TileRow& r,
                                                                       int64_t ox, int64_t ch, __mmask16 last) {
  auto lanes = [last](int v) { return v == V - 1 ? last : kAll; };
  __m512 acc[PX][V];
  for (int v = 0; v < V; ++v) {
    const __m512 start = p.bias ? load_lanes(lanes(v), p.bias + ch + kLanes * v) : _mm512_setzero_ps();
    for (int i = 0; i < PX; ++i) acc[i][v] = start;
  }
  if (p.residual)  // read before anything is stored: the residual may be y itself
    for (int i = 0; i < PX; ++i)
      for (int v = 0; v < V; ++v)
        acc[i][v] = _mm512_add_ps(acc[i][v],
                                  load_lanes(lanes(v), p.residual + (r.row * p.ow + ox + i) * p.m + ch + kLanes * v));
  const int64_t c = p.c;
  for (int64_t ky = r.ky0; ky < r.ky1; ++ky) {
    const float* x_row = r.x_image + (r.oy * p.sh - p.ph + ky * p.dh) * p.w * c;
    for (int64_t kx = 0; kx < p.kw; ++kx) {
      const float* tap = p.taps + (ky * p.kw + kx) * c * p.taps_stride + ch;
      const int64_t ix0 = ox * p.sw - p.pw + kx * p.dw;
      for (int64_t ci = 0; ci < c; ++ci) {
        __m512 wv[V];
        for (int v = 0; v < V; ++v) wv[v] = _mm512_loadu_ps(tap + ci * p.taps_stride + kLanes * v);
        for (int i = 0; i < PX; ++i) {
          const int64_t ix = ix0 + i * p.sw;
          if (kEdge && (ix < 0 || ix >= p.w)) continue;
          const __m512 xv = _mm512_set1_ps(x_row[ix * c + ci]);
          for (int v = 0; v < V; ++v) acc[i][v] = _mm512_fmadd_ps(xv, wv[v], acc[i][v]);
        }
      }
    }
  }
  const bool relu = p.fused.on && p.fused.kind == ActivationKind::kRelu, clip = p.fused.on && !relu;
  const __m512 lo = _mm512_set1_ps(clip ? p.fused.alpha : 0.f), hi = _mm512_set1_ps(p.fused.beta);
  for (int i = 0; i < PX; ++i)
    for (int v = 0; v < V; ++v) {
      __m512 out = acc[i][v];
      // (full-mask forms: GCC 12's _mm512_max_ps passes an undefined vector that -Wmaybe-uninitialized flags)
      if (relu || clip) out = _mm512_maskz_max_ps(kAll, out, lo);
      if (clip) out = _mm512_maskz_min_ps(kAll, out, hi);
      store_lanes(lanes(v), p.y + (r.row * p.ow + ox + i) * p.m + ch + kLanes * v, out);
    }
}

// Channels [ch, ch + 16 V) of the whole row: border pixels one at a time, the interior kPixels at a time (so that
// the kPixels x V sums, V weight vectors and the broadcast fit the 32 registers).
template <int V>
__attribute__((target("avx512f"))) void few_tiles_chunk(const DirectConv& p, const TileRow& r, int64_t ch,
                                                        __mmask16 last) {
  constexpr int kPixels = V >= 4 ? 6 : V == 3 ? 8 : 12;
  int64_t ox = 0;
  for (; ox < r.lo; ++ox) few_tile<1, V, true>(p, r, ox, ch, last);
  for (; ox + kPixels <= r.hi; ox += kPixels) few_tile<kPixels, V, false>(p, r, ox, ch, last);
  for (; ox < r.hi; ++ox) few_tile<1, V, false>(p, r, ox, ch, last);
  for (; ox < p.ow; ++ox) few_tile<1, V, true>(p, r, ox, ch, last);
}

}  // namespace

__attribute__((target("avx512f"))) void few_channels_tiles_row_avx512(const DirectConv& p, int64_t row) {
  const TileRow r = tile_row(p, row);
  int64_t ch = 0;
  for (; ch + 4 * kLanes <= p.m; ch += 4 * kLanes) few_tiles_chunk<4>(p, r, ch, kAll);
  const int64_t rest = p.m - ch;
  if (rest == 0) return;
  const int64_t tail = rest % kLanes;
  const __mmask16 last = tail == 0 ? kAll : static_cast<__mmask16>((1u << tail) - 1);
  switch ((rest + kLanes - 1) / kLanes) {
    case 1: few_tiles_chunk<1>(p, r, ch, last); break;
    case 2: few_tiles_chunk<2>(p, r, ch, last); break;
    default: few_tiles_chunk<3>(p, r, ch, last); break;
  }
}

}  // namespace kiln::cpu
