// cpu.winograd_nhwc: 3x3 stride-1 convolutions on channels_last (NHWC) float32 by Winograd's minimal filtering, two
// tactics:
// - "f2", F(2x2, 3x3) (the default): each 2x2 block of outputs from a 4x4 block of inputs with 16 multiplications per
//   (input, output) channel pair where a direct convolution needs 36;
// - "f4", F(4x4, 3x3): each 4x4 block from a 6x6 block with 36 where a direct convolution needs 144 (points 0, 1,
//   -1, 2, -2 and infinity), at the price of larger transforms, tiles that overhang the output more (14x14 outputs
//   take 16x16), a U 2.25 times the size and transforms with factors up to 8, whose rounding stays within the
//   harness' float32 tolerance. On ResNet-50 b1 (2 Zen 5 cores) it took the 56x56 layers at 0.31 ms against "f2"'s
//   0.50 and the 28x28 ones at 0.38 against 0.45; "f2" kept the 14x14 ones (0.48 against 0.53).
// The input tiles and the weights go to the transformed domain (V = B^T d B, U = G g G^T), there one matrix product
// M[xi] = V[xi] U[xi] over the channels per point, then back (Y = A^T M A) with the optimizer's epilogue (bias,
// residual, ReLU or Clip). oneDNN 2.6 has Winograd kernels for AVX-512 only; on AVX2 its direct 3x3 kernels ran
// ResNet-50's layers at 100-140 GFLOP/s on 2 cores. Competes with them in tactic timing: on ResNet-50 batch 8 (2 AVX2
// cores) "f2" took all 13 stride-1 3x3 layers at 8-12 ms each against oneDNN's 12-21 ms, and the model went from
// 530-590 to 460-485 ms in alternating runs. U is made once, when the kernel is created from an engine constant (on
// every run from weights given at run time), in double and rounded once.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/parallel.h"
#include "kernels/cpu/conv_nhwc_checks.h"
#include "kernels/cpu/conv_winograd.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/onednn.h"
#include "kernels/cpu/panel_gemm.h"
#include "kernels/cpu/panel_gemm_wide.h"
#include "kernels/cpu/threads.h"
#include "kernels/registry.h"
#include "ops/convolution/convolution.h"

namespace kiln {
namespace {

using cpu::winograd::input_tile_f4;
using cpu::winograd::output_tile_f4;
using cpu::winograd::Problem;

constexpr int kRows = cpu::kPanelRows;     // tiles per step of the matrix products (AVX2)
constexpr int kWideRows = cpu::kWideRows;  // the same with AVX-512 (cpu::use_avx512), two panels per step
constexpr int kCols = cpu::kPanelCols;     // output channels per panel (two AVX2 vectors, one AVX-512 vector)
// The blocked path: where all of U (16 C M floats) fits in this much (it is read again for every block of tiles),
// blocks of as many tiles as keep their V and M rows within kBlockFloats floats (of a core's L2).
constexpr size_t kBlockedWeightBytes = size_t{1} << 20;
constexpr int64_t kBlockFloats = int64_t{1} << 13;

// G for F(2x2, 3x3) (4 x 3) and F(4x4, 3x3) (6 x 3, interpolation points 0, 1, -1, 2, -2 and infinity).
constexpr double kG2[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};
constexpr double kG4[6][3] = {{0.25, 0, 0},
                              {-1.0 / 6, -1.0 / 6, -1.0 / 6},
                              {-1.0 / 6, 1.0 / 6, -1.0 / 6},
                              {1.0 / 24, 1.0 / 12, 1.0 / 6},
                              {1.0 / 24, -1.0 / 12, 1.0 / 6},
                              {0, 0, 1}};

// U[xi][m / 16][c][16] (U[xi] as C x M in panels of 16 columns; xi = i * alpha + j) = G g G^T from channels_last
// weights w [M, 3, 3, C], in double and rounded once.
std::vector<float> transform_weights(const float* w, int64_t m, int64_t c, int64_t tile) {
  const int64_t alpha = tile + 2;
  const double(*g_rows)[3] = tile == 2 ? kG2 : kG4;
  std::vector<float> u(static_cast<size_t>(alpha * alpha * c * m));
  parallel_for(m, grain_for(c * alpha * alpha * 8), [&](int64_t o) {
    for (int64_t ci = 0; ci < c; ++ci) {
      double g[3][3], r[6][3];
      for (int ky = 0; ky < 3; ++ky)
        for (int kx = 0; kx < 3; ++kx) g[ky][kx] = w[((o * 3 + ky) * 3 + kx) * c + ci];
      for (int64_t i = 0; i < alpha; ++i)  // G g
        for (int j = 0; j < 3; ++j) r[i][j] = g_rows[i][0] * g[0][j] + g_rows[i][1] * g[1][j] + g_rows[i][2] * g[2][j];
      for (int64_t i = 0; i < alpha; ++i)
        for (int64_t j = 0; j < alpha; ++j) {  // (G g) G^T; panel-major: a panel's C rows of 16 lie one after another
          const double t = r[i][0] * g_rows[j][0] + r[i][1] * g_rows[j][1] + r[i][2] * g_rows[j][2];
          u[static_cast<size_t>((((i * alpha + j) * (m / kCols) + o / kCols) * c + ci) * kCols + o % kCols)] =
              static_cast<float>(t);
        }
    }
  });
  return u;
}

// Row `row` of V[xi] (a buffer of `rows` rows per xi) for tile t: B^T d B over the 4x4 inputs at (2 ty - ph,
// 2 tx - pw), zero outside x.
__attribute__((target("avx2,fma"))) void input_tile(const Problem& p, const float* x, float* v, int64_t rows, int64_t t,
                                                    int64_t row) {
  const float* at[4][4];
  cpu::winograd::tile_inputs<4>(p, x, t, at);
  const int64_t plane = rows * p.c;
  for (int64_t ci = 0; ci < p.c; ci += 8) {
    __m256 d[4][4], r[4][4];
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 4; ++j) d[i][j] = at[i][j] ? _mm256_loadu_ps(at[i][j] + ci) : _mm256_setzero_ps();
    for (int j = 0; j < 4; ++j) {  // B^T d: rows d0 - d2, d1 + d2, d2 - d1, d1 - d3
      r[0][j] = _mm256_sub_ps(d[0][j], d[2][j]);
      r[1][j] = _mm256_add_ps(d[1][j], d[2][j]);
      r[2][j] = _mm256_sub_ps(d[2][j], d[1][j]);
      r[3][j] = _mm256_sub_ps(d[1][j], d[3][j]);
    }
    float* out = v + row * p.c + ci;
    for (int i = 0; i < 4; ++i) {  // (B^T d) B: the same on the columns
      _mm256_storeu_ps(out + (i * 4 + 0) * plane, _mm256_sub_ps(r[i][0], r[i][2]));
      _mm256_storeu_ps(out + (i * 4 + 1) * plane, _mm256_add_ps(r[i][1], r[i][2]));
      _mm256_storeu_ps(out + (i * 4 + 2) * plane, _mm256_sub_ps(r[i][2], r[i][1]));
      _mm256_storeu_ps(out + (i * 4 + 3) * plane, _mm256_sub_ps(r[i][1], r[i][3]));
    }
  }
}

// M[xi][:, m0, m0 + 16) = V[xi] (rows x C) U[xi][:, m0, m0 + 16) (rows a multiple of six).
// Only the first `live` rows (a multiple of six) are multiplied: a block's rows past its last strip are not.
__attribute__((target("avx2,fma"))) void multiply_panel(int64_t c, int64_t m, int64_t rows, int64_t live,
                                                        const float* v, const float* u, float* mo, int64_t xi,
                                                        int64_t m0) {
  const float* vx = v + xi * rows * c;
  const float* ux = u + xi * c * m + m0 * c;  // the panel of columns [m0, m0 + 16): C rows of 16
  float* mx = mo + xi * rows * m + m0;
  for (int64_t r = 0; r < live; r += kRows) {
    __m256 sums[kRows][2];
    cpu::panel_product(vx + r * c, c, 1, ux, c, sums);
    float* out = mx + r * m;
    for (int i = 0; i < kRows; ++i) {
      _mm256_storeu_ps(out + i * m, sums[i][0]);
      _mm256_storeu_ps(out + i * m + 8, sums[i][1]);
    }
  }
}

// M[xi][:, m0, m0 + 16 or 32) = V[xi] U[xi] for one panel or two (`two`) on the AVX-512 kernel, the first `live`
// rows (a multiple of Strip) in strips of Strip rows.
template <int Strip>
__attribute__((target("avx512f"))) void multiply_panels_wide(int64_t c, int64_t m, int64_t rows, int64_t live,
                                                             const float* v, const float* u, float* mo, int64_t xi,
                                                             int64_t m0, bool two) {
  const float* vx = v + xi * rows * c;
  const float* ux = u + xi * c * m + m0 * c;  // panels of C rows of 16, one after another
  float* mx = mo + xi * rows * m + m0;
  for (int64_t r = 0; r < live; r += Strip) {
    __m512 sums[kWideRows][2];
    if (two)
      cpu::wide_panel_product<Strip, 2>(vx + r * c, c, ux, ux + c * kCols, c, sums);
    else
      cpu::wide_panel_product<Strip, 1>(vx + r * c, c, ux, ux, c, sums);
    float* out = mx + r * m;
    for (int i = 0; i < Strip; ++i) {
      _mm512_storeu_ps(out + i * m, sums[i][0]);
      if (two) _mm512_storeu_ps(out + i * m + kCols, sums[i][1]);
    }
  }
}

// The products' strip: six rows on AVX2; on AVX-512 eight, or seven where that pads the tiles to fewer rows
// (ResNet's 14x14 layers have 49 tiles, 7 strips of 7 against 56 rows in strips of 8, and its 56x56 and 28x28
// layers 196: the padding rows cost the register kernel as much as real ones).
int64_t strip_rows(bool wide, int64_t tiles) {
  if (!wide) return kRows;
  const auto padded = [&](int64_t strip) { return (tiles + strip - 1) / strip * strip; };
  return padded(kWideRows - 1) < padded(kWideRows) ? kWideRows - 1 : kWideRows;
}

// Panel step `step` of the products (of `steps` per xi) over the first `live` of `rows` rows, in strips of `strip`:
// one panel, or on AVX-512 a pair (the last alone when the panels are odd).
void multiply_step(bool wide, int64_t strip, int64_t c, int64_t m, int64_t rows, int64_t live, const float* v,
                   const float* u, float* mo, int64_t xi, int64_t step) {
  const int64_t panels = m / kCols;
  if (!wide) return multiply_panel(c, m, rows, live, v, u, mo, xi, step * kCols);
  const int64_t first = step * 2;
  const auto product = strip == kWideRows ? multiply_panels_wide<kWideRows> : multiply_panels_wide<kWideRows - 1>;
  product(c, m, rows, live, v, u, mo, xi, first * kCols, first + 1 < panels);
}

// The blocked path's split of the tiles: strips dealt into blocks of at most `max_strips` strips, the block count
// rounded up to a multiple of the threads and the strips spread evenly over the blocks, so that every thread gets
// about as many strips (blocks of the largest size with a short last one left one thread a block more).
struct TileBlocks {
  int64_t strips, blocks;

  TileBlocks(int64_t tiles, int64_t strip, int64_t max_strips, int threads) {
    strips = (tiles + strip - 1) / strip;
    const int64_t t = std::max(1, threads), least = (strips + max_strips - 1) / max_strips;
    blocks = std::min(strips, (least + t - 1) / t * t);
  }
  /// Block b's first strip (block b holds strips [first(b), first(b + 1))).
  int64_t first(int64_t b) const { return b * strips / blocks; }
  /// The most strips a block holds.
  int64_t most() const { return (strips + blocks - 1) / blocks; }
};

// The 2x2 outputs of tile t from row `row` of M (`rows` rows per xi): A^T M A, then bias, residual and the
// activation (residual read before y is written: it may be y's own memory).
__attribute__((target("avx2,fma"))) void output_tile(const Problem& p, const float* mo, int64_t rows, int64_t t,
                                                     int64_t row, const float* bias, const float* residual,
                                                     const FusedActivation& fused, float* y) {
  const cpu::winograd::TileAt tile = cpu::winograd::tile_at(p, t);
  const int64_t plane = rows * p.m;
  const cpu::winograd::OutputEpilogue e = cpu::winograd::output_epilogue(residual, fused, y);
  for (int64_t o = 0; o < p.m; o += 8) {
    const float* in = mo + row * p.m + o;
    __m256 s[2][4];
    for (int j = 0; j < 4; ++j) {  // A^T M: rows m0 + m1 + m2, m1 - m2 - m3
      const __m256 m0 = _mm256_loadu_ps(in + (0 * 4 + j) * plane), m1 = _mm256_loadu_ps(in + (1 * 4 + j) * plane);
      const __m256 m2 = _mm256_loadu_ps(in + (2 * 4 + j) * plane), m3 = _mm256_loadu_ps(in + (3 * 4 + j) * plane);
      s[0][j] = _mm256_add_ps(_mm256_add_ps(m0, m1), m2);
      s[1][j] = _mm256_sub_ps(_mm256_sub_ps(m1, m2), m3);
    }
    const __m256 bv = bias ? _mm256_loadu_ps(bias + o) : _mm256_setzero_ps();
    for (int i = 0; i < 2; ++i) {
      const __m256 out[2] = {_mm256_add_ps(_mm256_add_ps(s[i][0], s[i][1]), s[i][2]),
                             _mm256_sub_ps(_mm256_sub_ps(s[i][1], s[i][2]), s[i][3])};
      for (int j = 0; j < 2; ++j) {
        const int64_t oy = tile.y0 + i, ox = tile.x0 + j;
        if (oy < p.oh && ox < p.ow)
          cpu::winograd::store_output(e, out[j], bv, ((tile.b * p.oh + oy) * p.ow + ox) * p.m + o);
      }
    }
  }
}

class WinogradConv final : public Kernel {
 public:
  // `weights`: the engine constant, transformed once here; null when the weights are a run-time input.
  // `tile`: 2 for F(2x2, 3x3), 4 for F(4x4, 3x3).
  WinogradConv(const Tensor* weights, int64_t tile) : constant_(weights != nullptr), tile_(tile) {
    if (weights) set_weights(*weights);
  }

  Status run(KernelContext& ctx) override {
    if (ctx.dst[0].numel() == 0) return Status::ok();
    const Tensor& wt = ctx.src[1];
    if (!constant_) set_weights(wt);  // weights that are no engine constant may change between runs
    const auto& a = ctx.attrs<ConvolutionAttrs>();
    const Dims& x = ctx.src[0].dims();
    KILN_ASSIGN_OR_RETURN(ConvWindow win, convolution_window(a, x, wt.dims()));
    Problem p;
    p.n = x[0], p.h = x[1], p.w = x[2], p.c = x[3], p.m = wt.dims()[0];
    p.oh = win.output[0], p.ow = win.output[1], p.ph = win.pads_begin[0], p.pw = win.pads_begin[1];
    p.tile = tile_, p.points = (tile_ + 2) * (tile_ + 2);
    p.tiles_h = (p.oh + p.tile - 1) / p.tile, p.tiles_w = (p.ow + p.tile - 1) / p.tile;
    p.tiles = p.n * p.tiles_h * p.tiles_w;
    const auto input = p.tile == 2 ? input_tile : input_tile_f4;
    const auto output = p.tile == 2 ? output_tile : output_tile_f4;
    const float* xd = ctx.src[0].data<float>();
    const float* u = u_.data();
    const float* bias = ctx.src.size() > 2 && ctx.src[2].defined() ? ctx.src[2].data<float>() : nullptr;
    const float* residual = ctx.src.size() > 3 && ctx.src[3].defined() ? ctx.src[3].data<float>() : nullptr;
    float* y = ctx.dst[0].data<float>();
    const bool wide = cpu::use_avx512();
    const int64_t strip = strip_rows(wide, p.tiles);  // the products' rows come in multiples of this
    const int64_t panels = p.m / kCols, steps = wide ? (panels + 1) / 2 : panels;
    // Blocks of tiles, each transformed, multiplied and transformed back by one thread in its cache, where U is
    // small enough to be read again for every block; else every tile's V at once, each U[xi] panel read once.
    // (F(4x4)'s 36 points: blocks of fewer tiles, so that V and M take the bytes F(2x2)'s 16 do.)
    if (p.points * p.c * p.m * sizeof(float) <= kBlockedWeightBytes) {
      const int64_t block_floats = kBlockFloats * 16 / p.points;
      const TileBlocks split(p.tiles, strip, std::max<int64_t>(1, block_floats / (p.c + p.m) / strip), cpu_threads());
      const int64_t rows = split.most() * strip;  // rows per buffer
      const size_t v_bytes = sizeof(float) * p.points * rows * p.c, m_bytes = sizeof(float) * p.points * rows * p.m;
      workspace_ = (v_bytes + m_bytes) * static_cast<size_t>(std::max(1, cpu_threads()));
      parallel_for(split.blocks, 1, [&](int64_t block) {
        auto* v = static_cast<float*>(onednn::scratch(v_bytes, 0));  // this thread's buffers
        auto* mo = static_cast<float*>(onednn::scratch(m_bytes, 1));
        const int64_t t0 = split.first(block) * strip, live = (split.first(block + 1) - split.first(block)) * strip;
        const int64_t count = std::min(live, p.tiles - t0);
        for (int64_t i = 0; i < count; ++i) input(p, xd, v, rows, t0 + i, i);
        for (int64_t xi = 0; count < live && xi < p.points; ++xi)  // the rows past the last tile multiply as zeros
          std::memset(v + (xi * rows + count) * p.c, 0, sizeof(float) * (live - count) * p.c);
        for (int64_t xi = 0; xi < p.points; ++xi)
          for (int64_t step = 0; step < steps; ++step)
            multiply_step(wide, strip, p.c, p.m, rows, live, v, u, mo, xi, step);
        for (int64_t i = 0; i < count; ++i) output(p, mo, rows, t0 + i, i, bias, residual, a.fused, y);
      });
      return Status::ok();
    }
    const int64_t rows = (p.tiles + strip - 1) / strip * strip;
    const size_t v_bytes = sizeof(float) * p.points * rows * p.c, m_bytes = sizeof(float) * p.points * rows * p.m;
    workspace_ = v_bytes + m_bytes;
    auto* v = static_cast<float*>(onednn::scratch(v_bytes, 0));  // the calling thread's buffers, shared by its kernels
    auto* mo = static_cast<float*>(onednn::scratch(m_bytes, 1));
    for (int64_t xi = 0; xi < p.points; ++xi)  // the rows past the last tile multiply as zeros
      std::memset(v + (xi * rows + p.tiles) * p.c, 0, sizeof(float) * (rows - p.tiles) * p.c);
    parallel_for(p.tiles, grain_for(p.points * p.c * 4), [&](int64_t t) { input(p, xd, v, rows, t, t); });
    parallel_for(p.points * steps, grain_for(rows * p.c * kCols * 2 * (panels / steps)),
                 [&](int64_t i) { multiply_step(wide, strip, p.c, p.m, rows, rows, v, u, mo, i / steps, i % steps); });
    parallel_for(p.tiles, grain_for(p.points * p.m * 4),
                 [&](int64_t t) { output(p, mo, rows, t, t, bias, residual, a.fused, y); });
    return Status::ok();
  }

  std::string detail() const override {
    return str_cat("Winograd F(", tile_, "x", tile_, ", 3x3), ", cpu::use_avx512() ? "AVX-512 products" : "AVX2");
  }
  size_t workspace_bytes() const override { return workspace_; }

 private:
  void set_weights(const Tensor& w) { u_ = transform_weights(w.data<float>(), w.dims()[0], w.dims()[3], tile_); }

  bool constant_ = false;
  int64_t tile_ = 2;
  std::vector<float> u_;  // [(tile + 2)^2][M / 16][C][16]
  size_t workspace_ = 0;
};

Status winograd_supports(const OpCall& call) {
  const auto& a = call.attrs_as<ConvolutionAttrs>();
  if (!cpu::has_avx2_fma()) return unsupported("needs AVX2 and FMA");
  KILN_RETURN_IF_ERROR(cpu::nhwc_float32_conv(call));
  KILN_RETURN_IF_ERROR(cpu::relu_or_clip_epilogue(call));
  const Dims& w = call.inputs[1].dims;
  if (a.group != 1 || w[1] != 3 || w[2] != 3) return unsupported("takes ungrouped 3x3 windows only");
  if (w[3] % 8 != 0 || w[0] % kCols != 0)
    return unsupported("takes input channels in multiples of 8 and output channels in multiples of ", kCols);
  for (int64_t s : a.strides)
    if (s != 1) return unsupported("takes stride 1 only");
  for (int64_t d : a.dilations)
    if (d != 1) return unsupported("takes dilation 1 only");
  return cpu::no_negative_pads(call);
}

// Tactics: "f2" (F(2x2, 3x3), the default: what engines made before "f4" ran) and "f4" (F(4x4, 3x3): 36
// products per 16 outputs against 64, larger transforms; its U is 2.25 times the size).
constexpr const char* kF2 = "f2";
constexpr const char* kF4 = "f4";

// "f4" where its U stays within this: U is 36 C M floats, 2.25 times F(2x2)'s and 4 times the weights, held for the
// engine's life. ResNet-50 b8 took "f4" on all 13 layers and its run held 75 MB more (349 MB against 274); the
// 512-channel layers alone (38 MB of U each) made 63 MB of it.
constexpr size_t kF4MaxWeightBytes = size_t{16} << 20;

std::vector<std::string> winograd_tactics(const OpCall& call) {
  const Dims& w = call.inputs[1].dims;  // [M, 3, 3, C]
  const auto u_bytes = static_cast<size_t>(36 * w[0] * w[3]) * sizeof(float);
  if (u_bytes > kF4MaxWeightBytes) return {kF2};
  return {kF2, kF4};
}

Result<std::unique_ptr<Kernel>> create_winograd(const OpCall& call) {
  if (!call.tactic.empty() && call.tactic != kF2 && call.tactic != kF4)
    return invalid_argument("cpu.winograd_nhwc has no tactic '", call.tactic, "' (it has '", kF2, "' and '", kF4, "')");
  const Tensor* w = call.constants.size() > 1 ? call.constants[1] : nullptr;
  return std::unique_ptr<Kernel>(std::make_unique<WinogradConv>(w, call.tactic == kF4 ? 4 : 2));
}

KILN_REGISTER_KERNEL(KernelImpl{
    .name = "cpu.winograd_nhwc",
    .op = "Convolution",
    .backend = Backend::kCpu,
    .priority = 7,
    .supports = winograd_supports,
    .create = create_winograd,
    .tactics = winograd_tactics,
    .in_place_input = in_place(3),  // the output transform reads each residual before it stores there
});

}  // namespace
}  // namespace kiln
