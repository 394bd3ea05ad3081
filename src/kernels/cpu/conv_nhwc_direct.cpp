// Direct CPU 2-D convolutions on channels_last (NHWC) float32 for the shapes oneDNN 2.6 serves poorly, with the
// optimizer's epilogue (bias, residual, ReLU or Clip) applied as each output pixel is made; both compete in tactic
// timing. Vectorised over the channels, contiguous in NHWC (AVX2 and FMA where the CPU has them):
// - cpu.depthwise_nhwc: one filter per channel (group = C = M). oneDNN's depthwise kernels took about twice
//   XNNPACK's time on MobileNetV2's layers on 2 AVX2 cores (96 channels, 112x112, stride 2, batch 8: 5.8 ms against
//   2.8 ms). Two tactics:
//   - "tiles" (the default; AVX2): four output pixels by 16 channels summed in registers over the whole window,
//     then the epilogue and one store. 1.4-3x faster than "pixels" on every MobileNetV2 layer at batch 1 and on
//     the batch-8 layers that fit the cache (28x28x192: 0.8 against 1.4 ms).
//   - "pixels": each tap one multiply-add over all of a pixel's channels in memory. Slower in the cache, but on
//     the batch-8 layers whose tensors do not fit it (56x56x144, 112x112x96 stride 2) it measured 0.7-0.8 of the
//     tiles' time, so both compete in tactic timing.
// - cpu.conv_nhwc_few_channels: at most 4 input channels (a network's stem), which oneDNN runs only in NCHW
//   (kernels/cpu/convolution.cpp). Because this kernel takes it, layout-nhwc moves the stem to NHWC. Two tactics:
//   - "pixels" (windows up to 3x3): each pixel's output channels in compiler-vectorised chunks. On Zen 3 (AVX2)
//     MobileNetV2 b8's stem took 6.3-6.7 ms plus a 0.6 ms transpose of the 3-channel input, against oneDNN's
//     6.5-7.1 ms NCHW stem plus a 3.6 ms transpose of its 32-channel output.
//   - "tiles" (AVX-512, windows up to 7x7: conv_few_channels_wide.cpp): register tiles of up to 12 pixels by 64
//     channels. On Zen 5: MobileNetV2 b8's stem 1.4 ms in the model's run against "pixels"' 4.0 and
//     cpu.conv_gemm_nhwc's 2.9; ResNet-50 b1's 7x7 stem 0.81 ms, its max pool NHWC after it 0.12, against oneDNN's
//     NCHW stem 0.99 ms, NCHW max pool 0.23 and a transpose 0.08.
#include <immintrin.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/parallel.h"
#include "kernels/cpu/conv_nhwc_checks.h"
#include "kernels/cpu/conv_nhwc_direct.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/registry.h"
#include "ops/convolution/convolution.h"

namespace kiln {
namespace {

using cpu::DirectConv;
using cpu::TileRow;

// The epilogue's activation over one output pixel's `m` channels.
[[gnu::always_inline]] inline void activate(float* out, int64_t m, const FusedActivation& fused) {
  if (!fused.on) return;
  if (fused.kind == ActivationKind::kRelu) {
    for (int64_t ch = 0; ch < m; ++ch) out[ch] = std::max(out[ch], 0.f);
  } else {
    const float lo = fused.alpha, hi = fused.beta;
    for (int64_t ch = 0; ch < m; ++ch) out[ch] = std::min(std::max(out[ch], lo), hi);
  }
}

// Output pixel (row, ox) starts from bias + residual (read before it is written: the residual may be y itself).
[[gnu::always_inline]] inline float* start_pixel(const DirectConv& p, int64_t row, int64_t ox) {
  const int64_t m = p.m, at = (row * p.ow + ox) * m;
  float* out = p.y + at;
  const float* bias = p.bias;
  const float* r = p.residual ? p.residual + at : nullptr;
  for (int64_t ch = 0; ch < m; ++ch) out[ch] = (bias ? bias[ch] : 0.f) + (r ? r[ch] : 0.f);
  return out;
}

// Calls visit(in, t) for each tap of output pixel (oy, ox) of image b that lies inside x: `in` points at that input
// pixel's channels, t is the window position (ky * kw + kx).
template <class Visit>
[[gnu::always_inline]] inline void for_each_tap(const DirectConv& p, int64_t b, int64_t oy, int64_t ox, Visit&& visit) {
  for (int64_t ky = 0; ky < p.kh; ++ky) {
    const int64_t iy = oy * p.sh - p.ph + ky * p.dh;
    if (iy < 0 || iy >= p.h) continue;
    for (int64_t kx = 0; kx < p.kw; ++kx) {
      const int64_t ix = ox * p.sw - p.pw + kx * p.dw;
      if (ix < 0 || ix >= p.w) continue;
      visit(p.x + ((b * p.h + iy) * p.w + ix) * p.c, ky * p.kw + kx);
    }
  }
}

// One pixel of a depthwise convolution: each tap is one multiply-add over all the channels (streaming through
// them measured faster than holding 32-channel chunks in registers across the taps).
// (The sizes are copied into locals: `out` is not __restrict, and stores through it would otherwise make the
// compiler reload them from `p` on every iteration instead of vectorising.)
[[gnu::always_inline]] inline void depthwise_pixel(const DirectConv& p, int64_t b, int64_t oy, int64_t ox, float* out) {
  const int64_t c = p.c;
  const float* taps = p.taps;
  for_each_tap(
      p, b, oy, ox, [=](const float* __restrict in, int64_t t) __attribute__((always_inline)) {
        const float* __restrict tap = taps + t * c;
        for (int64_t ch = 0; ch < c; ++ch) out[ch] += in[ch] * tap[ch];
      });
}

// Output channels [o, o + W) of one pixel with few input channels: W is a compile-time width, so the sums stay in
// vector registers across the taps instead of being stored after each.
template <int W>
[[gnu::always_inline]] inline void few_channels_chunk(const DirectConv& p, int64_t b, int64_t oy, int64_t ox,
                                                      float* out, int64_t o) {
  float acc[W];
  for (int j = 0; j < W; ++j) acc[j] = out[o + j];
  for_each_tap(
      p, b, oy, ox, [&](const float* in, int64_t t) __attribute__((always_inline)) {
        for (int64_t ci = 0; ci < p.c; ++ci) {
          const float v = in[ci];
          const float* tap = p.taps + (t * p.c + ci) * p.taps_stride + o;
          for (int j = 0; j < W; ++j) acc[j] += v * tap[j];
        }
      });
  for (int j = 0; j < W; ++j) out[o + j] = acc[j];
}

// Output row `row` (image row / oh, output row % oh): each pixel starts from bias + residual, gathers its taps (few
// channels: its output channels in chunks of 32, 8, then 1), then the activation. Always inlined into the AVX2 and
// the baseline versions below, so each is compiled for its instruction set.
[[gnu::always_inline]] inline void depthwise_row(const DirectConv& p, int64_t row) {
  const int64_t b = row / p.oh, oy = row % p.oh;
  for (int64_t ox = 0; ox < p.ow; ++ox) {
    float* out = start_pixel(p, row, ox);
    depthwise_pixel(p, b, oy, ox, out);
    activate(out, p.m, p.fused);
  }
}

[[gnu::always_inline]] inline void few_channels_row(const DirectConv& p, int64_t row) {
  const int64_t b = row / p.oh, oy = row % p.oh;
  for (int64_t ox = 0; ox < p.ow; ++ox) {
    float* out = start_pixel(p, row, ox);
    int64_t o = 0;
    for (; o + 32 <= p.m; o += 32) few_channels_chunk<32>(p, b, oy, ox, out, o);
    for (; o + 8 <= p.m; o += 8) few_channels_chunk<8>(p, b, oy, ox, out, o);
    for (; o < p.m; ++o) few_channels_chunk<1>(p, b, oy, ox, out, o);
    activate(out, p.m, p.fused);
  }
}

__attribute__((target("avx2,fma"))) void depthwise_row_avx2(const DirectConv& p, int64_t row) { depthwise_row(p, row); }

// ---- Depthwise by register tiles ----

// PX output pixels from (row, ox), V vectors of channels from ch (kMasked: one vector, the lanes in `mask`); kEdge:
// each tap is checked against x's width (pixels near the left and right borders).
template <int PX, int V, bool kMasked, bool kEdge>
__attribute__((target("avx2,fma"), always_inline)) inline void depthwise_tile(const DirectConv& p, const TileRow& r,
                                                                              int64_t ox, int64_t ch, __m256i mask) {
  auto load = [mask](const float* at) __attribute__((target("avx2,fma"), always_inline)) {
    return kMasked ? _mm256_maskload_ps(at, mask) : _mm256_loadu_ps(at);
  };
  constexpr int64_t kLane = 8;  // floats per vector
  const int64_t c = p.c;
  __m256 acc[PX][V];
  for (int v = 0; v < V; ++v) {
    const __m256 start = p.bias ? load(p.bias + ch + kLane * v) : _mm256_setzero_ps();
    for (int i = 0; i < PX; ++i) acc[i][v] = start;
  }
  if (p.residual)  // read before anything is stored: the residual may be y itself
    for (int i = 0; i < PX; ++i)
      for (int v = 0; v < V; ++v)
        acc[i][v] = _mm256_add_ps(acc[i][v], load(p.residual + (r.row * p.ow + ox + i) * c + ch + kLane * v));
  for (int64_t ky = r.ky0; ky < r.ky1; ++ky) {
    const float* x_row = r.x_image + (r.oy * p.sh - p.ph + ky * p.dh) * p.w * c + ch;
    for (int64_t kx = 0; kx < p.kw; ++kx) {
      __m256 tap[V];
      for (int v = 0; v < V; ++v) tap[v] = load(p.taps + (ky * p.kw + kx) * c + ch + kLane * v);
      for (int i = 0; i < PX; ++i) {
        const int64_t ix = (ox + i) * p.sw - p.pw + kx * p.dw;
        if (kEdge && (ix < 0 || ix >= p.w)) continue;
        for (int v = 0; v < V; ++v) acc[i][v] = _mm256_fmadd_ps(load(x_row + ix * c + kLane * v), tap[v], acc[i][v]);
      }
    }
  }
  const bool relu = p.fused.on && p.fused.kind == ActivationKind::kRelu, clip = p.fused.on && !relu;
  const __m256 lo = relu ? _mm256_setzero_ps() : _mm256_set1_ps(p.fused.alpha), hi = _mm256_set1_ps(p.fused.beta);
  for (int i = 0; i < PX; ++i)
    for (int v = 0; v < V; ++v) {
      __m256 out = acc[i][v];
      if (relu || clip) out = _mm256_max_ps(out, lo);
      if (clip) out = _mm256_min_ps(out, hi);
      float* at = p.y + (r.row * p.ow + ox + i) * c + ch + kLane * v;
      kMasked ? _mm256_maskstore_ps(at, mask, out) : _mm256_storeu_ps(at, out);
    }
}

// All channels of PX pixels from ox: 16 at a time, then 8, then the rest under a mask.
template <int PX, bool kEdge>
__attribute__((target("avx2,fma"), always_inline)) inline void depthwise_tiles(const DirectConv& p, const TileRow& r,
                                                                               int64_t ox) {
  const __m256i all = _mm256_set1_epi32(-1);
  int64_t ch = 0;
  for (; ch + 16 <= p.c; ch += 16) depthwise_tile<PX, 2, false, kEdge>(p, r, ox, ch, all);
  if (ch + 8 <= p.c) depthwise_tile<PX, 1, false, kEdge>(p, r, ox, ch, all), ch += 8;
  if (ch < p.c) {
    const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(p.c - ch)), lanes);
    depthwise_tile<PX, 1, true, kEdge>(p, r, ox, ch, mask);
  }
}

// Output row `row` by tiles: the pixels whose window lies inside x's width four at a time, the others one by one
// with each tap checked; window rows outside x are left out of the loop.
__attribute__((target("avx2,fma"))) void depthwise_tiles_row(const DirectConv& p, int64_t row) {
  const TileRow r = cpu::tile_row(p, row);
  int64_t ox = 0;
  for (; ox < r.lo; ++ox) depthwise_tiles<1, true>(p, r, ox);
  for (; ox + 4 <= r.hi; ox += 4) depthwise_tiles<4, false>(p, r, ox);
  for (; ox < r.hi; ++ox) depthwise_tiles<1, false>(p, r, ox);
  for (; ox < p.ow; ++ox) depthwise_tiles<1, true>(p, r, ox);
}

constexpr const char* kPixels = "pixels";
constexpr const char* kTiles = "tiles";

std::vector<std::string> depthwise_tactics(const OpCall&) {
  if (!cpu::has_avx2_fma()) return {kPixels};
  return {kPixels, kTiles};
}

__attribute__((target("avx2,fma"))) void few_channels_row_avx2(const DirectConv& p, int64_t row) {
  few_channels_row(p, row);
}

// What both kernels take: channels_last 2-D float32 with static weights and a ReLU or Clip epilogue.
Status direct_supports(const OpCall& call) {
  KILN_RETURN_IF_ERROR(cpu::nhwc_float32_conv(call));
  return cpu::relu_or_clip_epilogue(call);
}

Status depthwise_supports(const OpCall& call) {
  KILN_RETURN_IF_ERROR(direct_supports(call));
  const Dims& w = call.inputs[1].dims;
  const int64_t c = call.inputs[0].dims[3];
  if (c <= 0 || call.attrs_as<ConvolutionAttrs>().group != c || w[0] != c || w[3] != 1)
    return unsupported("takes depthwise convolutions only (group = input channels = output channels)");
  return Status::ok();
}

// Windows up to 3x3 everywhere; up to 7x7 (ResNet's stem) where the AVX-512 tiles run them: 7x7 by the "pixels"
// loop lost to oneDNN's NCHW kernels.
constexpr int64_t kFewChannels = 4, kFewChannelsWindow = 3, kFewChannelsTilesWindow = 7;

Status few_channels_supports(const OpCall& call) {
  KILN_RETURN_IF_ERROR(direct_supports(call));
  const Dims& w = call.inputs[1].dims;
  if (call.attrs_as<ConvolutionAttrs>().group != 1) return unsupported("takes ungrouped convolutions only");
  if (w[3] > kFewChannels) return unsupported("takes at most ", kFewChannels, " input channels, not ", w[3]);
  const int64_t window = cpu::use_avx512() ? kFewChannelsTilesWindow : kFewChannelsWindow;
  if (w[1] > window || w[2] > window)
    return unsupported("takes windows of at most ", window, "x", window, " on this CPU (oneDNN's NCHW kernels are ",
                       "faster on larger ones)");
  return Status::ok();
}

bool pixels_window(const OpCall& call) {
  const Dims& w = call.inputs[1].dims;
  return w[1] <= kFewChannelsWindow && w[2] <= kFewChannelsWindow;
}

// "tiles" first on AVX-512 (what an untimed build takes), then "pixels" where its window allows; "pixels" alone
// elsewhere (an empty tactic, as engines made before the tiles have, is "pixels" too).
std::vector<std::string> few_channels_tactics(const OpCall& call) {
  if (!cpu::use_avx512()) return {kPixels};
  if (!pixels_window(call)) return {kTiles};
  return {kTiles, kPixels};
}

// The geometry, operands and epilogue of a call (the taps are the caller's).
Result<DirectConv> direct_conv(KernelContext& ctx) {
  const auto& a = ctx.attrs<ConvolutionAttrs>();
  const Dims& x = ctx.src[0].dims();
  KILN_ASSIGN_OR_RETURN(ConvWindow win, convolution_window(a, x, ctx.src[1].dims()));
  DirectConv p;
  p.h = x[1];
  p.w = x[2];
  p.c = x[3];
  p.m = ctx.dst[0].dims()[3];
  p.oh = win.output[0];
  p.ow = win.output[1];
  p.kh = win.kernel[0];
  p.kw = win.kernel[1];
  p.sh = win.strides[0];
  p.sw = win.strides[1];
  p.dh = win.dilations[0];
  p.dw = win.dilations[1];
  p.ph = win.pads_begin[0];
  p.pw = win.pads_begin[1];
  p.fused = a.fused;
  p.x = ctx.src[0].data<float>();
  p.bias = ctx.src.size() > 2 && ctx.src[2].defined() ? ctx.src[2].data<float>() : nullptr;
  p.residual = ctx.src.size() > 3 && ctx.src[3].defined() ? ctx.src[3].data<float>() : nullptr;
  p.y = ctx.dst[0].data<float>();
  return p;
}

enum class DirectLoop { kFewChannelsPixels, kFewChannelsTiles, kDepthwisePixels, kDepthwiseTiles };

// The weights as the loops read them, with the floats between one tap's M weights and the next's. w is [M, window]
// (NHWC weights [M, kH, kW, C/group]: window = kH * kW * C/group); as [window, M] what one tap multiplies lies next to
// each other: depthwise, that tap of every channel (as the channels lie in x); else the M weights one input value
// scales (the tiles read whole vectors of 16: each tap's M padded with zeros to a multiple of 16).
struct Taps {
  std::vector<float> data;
  int64_t stride = 0;
};

template <DirectLoop kLoop>
Taps make_taps(const float* w, const Dims& dims) {
  constexpr bool kDepthwise = kLoop == DirectLoop::kDepthwisePixels || kLoop == DirectLoop::kDepthwiseTiles;
  const int64_t filters = dims[0], window = dims[1] * dims[2] * (kDepthwise ? 1 : dims[3]);
  Taps t;
  t.stride = kLoop == DirectLoop::kFewChannelsTiles ? (filters + 15) / 16 * 16 : filters;
  t.data.assign(static_cast<size_t>(window * t.stride), 0.f);
  for (int64_t o = 0; o < filters; ++o)
    for (int64_t k = 0; k < window; ++k) t.data[static_cast<size_t>(k * t.stride + o)] = w[o * window + k];
  return t;
}

// The taps are made once when the kernel is created with constant weights (every model's case), else on every run.
template <DirectLoop kLoop>
class DirectKernel final : public Kernel {
 public:
  explicit DirectKernel(const OpCall& call) {
    if (const Tensor* w = call.constant(1); w && w->defined()) taps_ = make_taps<kLoop>(w->data<float>(), w->dims());
  }

  Status run(KernelContext& ctx) override {
    constexpr bool kDepthwise = kLoop == DirectLoop::kDepthwisePixels || kLoop == DirectLoop::kDepthwiseTiles;
    if (ctx.dst[0].numel() == 0) return Status::ok();
    KILN_ASSIGN_OR_RETURN(DirectConv p, direct_conv(ctx));
    Taps given;
    if (taps_.data.empty()) given = make_taps<kLoop>(ctx.src[1].data<float>(), ctx.src[1].dims());
    const Taps& taps = taps_.data.empty() ? given : taps_;
    p.taps = taps.data.data();
    p.taps_stride = taps.stride;
    const int64_t window = p.kh * p.kw * (kDepthwise ? 1 : p.c);
    const int64_t rows = ctx.src[0].dims()[0] * p.oh, grain = grain_for(p.ow * p.m * window);
    if constexpr (kLoop == DirectLoop::kFewChannelsTiles)
      parallel_for(rows, grain, [&](int64_t r) { cpu::few_channels_tiles_row_avx512(p, r); });
    else if (!cpu::has_avx2_fma())
      parallel_for(rows, grain, [&](int64_t r) { kDepthwise ? depthwise_row(p, r) : few_channels_row(p, r); });
    else if constexpr (kLoop == DirectLoop::kDepthwiseTiles)
      parallel_for(rows, grain, [&](int64_t r) { depthwise_tiles_row(p, r); });
    else
      parallel_for(rows, grain,
                   [&](int64_t r) { kDepthwise ? depthwise_row_avx2(p, r) : few_channels_row_avx2(p, r); });
    return Status::ok();
  }

 private:
  Taps taps_;
};

template <DirectLoop kLoop>
Result<std::unique_ptr<Kernel>> direct_kernel(const OpCall& call) {
  return std::unique_ptr<Kernel>(std::make_unique<DirectKernel<kLoop>>(call));
}

Result<std::unique_ptr<Kernel>> create_depthwise(const OpCall& call) {
  if (call.tactic == kPixels) return direct_kernel<DirectLoop::kDepthwisePixels>(call);
  if (call.tactic.empty() || call.tactic == kTiles) return direct_kernel<DirectLoop::kDepthwiseTiles>(call);
  return invalid_argument("cpu.depthwise_nhwc has no tactic '", call.tactic, "' (it has '", kPixels, "' and '", kTiles,
                          "')");
}

// An empty tactic (engines made before the tiles) is "pixels" where its window allows, else "tiles".
Result<std::unique_ptr<Kernel>> create_few_channels(const OpCall& call) {
  const std::string tactic = !call.tactic.empty() ? call.tactic : pixels_window(call) ? kPixels : kTiles;
  if (tactic == kPixels) {
    if (!pixels_window(call))
      return unsupported("cpu.conv_nhwc_few_channels: the \"", kPixels, "\" loop takes windows of at most ",
                         kFewChannelsWindow, "x", kFewChannelsWindow, " (\"", kTiles, "\" takes larger ones)");
    return direct_kernel<DirectLoop::kFewChannelsPixels>(call);
  }
  if (tactic != kTiles)
    return invalid_argument("cpu.conv_nhwc_few_channels has no tactic '", tactic, "' (it has '", kPixels, "' and '",
                            kTiles, "')");
  if (!cpu::use_avx512())
    return unsupported("cpu.conv_nhwc_few_channels: the \"", kTiles, "\" tactic needs AVX-512, which this CPU (or ",
                       "ONEDNN_MAX_CPU_ISA) does not allow; rebuild the engine here");
  return direct_kernel<DirectLoop::kFewChannelsTiles>(call);
}

KILN_REGISTER_KERNEL(KernelImpl{
    .name = "cpu.depthwise_nhwc",
    .op = "Convolution",
    .backend = Backend::kCpu,
    .priority = 8,
    .supports = depthwise_supports,
    .create = create_depthwise,
    .tactics = depthwise_tactics,
    .in_place_input = in_place(3),  // each pixel starts from its residual
});

KILN_REGISTER_KERNEL(KernelImpl{
    .name = "cpu.conv_nhwc_few_channels",
    .op = "Convolution",
    .backend = Backend::kCpu,
    .priority = 8,
    .supports = few_channels_supports,
    .create = create_few_channels,
    .tactics = few_channels_tactics,
    .in_place_input = in_place(3),  // each pixel starts from its residual
});

}  // namespace
}  // namespace kiln
