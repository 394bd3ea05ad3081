// cpu.conv_gemm_nhwc: ungrouped 2-D convolutions on channels_last (NHWC) float32 as one matrix product, y as
// [N OH OW, M] = im2col(x) [N OH OW, kH kW C] times the weights as [kH kW C, M] (packed once, at build time for
// engine constants), with bias, residual and the fused activation applied as each tile is stored (packed_gemm.h).
// im2col is never stored: each task gathers six output pixels' window rows for one K block at a time (a tap's C
// channels lie next to each other in x, so a row is a few copies). 1x1 stride-1 unpadded convolutions read x in
// place, as it already is that matrix. Competes with oneDNN and the direct kernels in tactic timing; it was made for
// the layers they run slowly: MobileNetV2's 3-channel stem (oneDNN's and the direct kernel's 21 GFLOP/s at batch 1
// on 2 Zen 3 cores) and ResNet's.
#include <algorithm>
#include <memory>

#include "core/parallel.h"
#include "kernels/cpu/conv_nhwc_checks.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/onednn.h"
#include "kernels/cpu/packed_gemm.h"
#include "kernels/registry.h"
#include "ops/convolution/convolution.h"

namespace kiln {
namespace {

// The weights [M, kH, kW, C] as the product's B: element ((ky kW + kx) C + c, m) at w[m * kH kW C + that].
cpu::MatrixView weights_view(const float* w, const Dims& dims) {
  const int64_t k = dims[1] * dims[2] * dims[3];
  return {w, k, dims[0], 1, k};
}

// The geometry the gather needs.
struct Window {
  int64_t h, w, c, oh, ow, kh, kw, sh, sw, dh, dw, ph, pw;
  bool in_place;  // 1x1, stride 1, no pads: x is already A
};

// Rows [row, row + count) of im2col(x), columns [col, col + depth), into out (rows depth apart; zeros for taps in the
// padding). A whole row whose window lies inside x is copied a window row at a time (with dilation 1 its kW taps are
// kW C floats next to each other: a stem's row is three copies of 9); otherwise each run of channels is placed by its
// tap. The pixel is stepped from row to row, not divided out (three 64-bit divisions cost more than a stem's row).
void gather_rows(const Window& g, const float* x, int64_t row, int64_t count, int64_t col, int64_t depth, float* out) {
  const bool whole = col == 0 && depth == g.kh * g.kw * g.c;
  const int64_t span = g.kw * g.c;  // floats of one window row when dw is 1
  int64_t b = row / (g.oh * g.ow), oy = row / g.ow % g.oh, ox = row % g.ow;
  for (int64_t i = 0; i < count; ++i) {
    const int64_t iy0 = oy * g.sh - g.ph, ix0 = ox * g.sw - g.pw;
    float* dst = out + i * depth;
    if (whole && iy0 >= 0 && ix0 >= 0 && iy0 + (g.kh - 1) * g.dh < g.h && ix0 + (g.kw - 1) * g.dw < g.w) {
      const float* corner = x + ((b * g.h + iy0) * g.w + ix0) * g.c;
      for (int64_t ky = 0; ky < g.kh; ++ky) {
        const float* src = corner + ky * g.dh * g.w * g.c;
        if (g.dw == 1) {
          std::copy_n(src, span, dst);
          dst += span;
        } else {
          for (int64_t kx = 0; kx < g.kw; ++kx, dst += g.c) std::copy_n(src + kx * g.dw * g.c, g.c, dst);
        }
      }
    } else {
      for (int64_t p = col; p < col + depth;) {
        const int64_t tap = p / g.c, ci = p % g.c, run = std::min(g.c - ci, col + depth - p);
        const int64_t iy = iy0 + tap / g.kw * g.dh, ix = ix0 + tap % g.kw * g.dw;
        if (iy >= 0 && iy < g.h && ix >= 0 && ix < g.w)
          std::copy_n(x + ((b * g.h + iy) * g.w + ix) * g.c + ci, run, dst + (p - col));
        else
          std::fill_n(dst + (p - col), run, 0.f);
        p += run;
      }
    }
    if (++ox == g.ow) {
      ox = 0;
      if (++oy == g.oh) oy = 0, ++b;
    }
  }
}

class ConvGemm final : public Kernel {
 public:
  explicit ConvGemm(const OpCall& call) {
    const Tensor* w = call.constant(1);
    packed_.init(call.prepared, weights_view(w ? w->data<float>() : nullptr, call.inputs[1].dims));
  }

  Status run(KernelContext& ctx) override {
    Tensor& y = ctx.dst[0];
    if (y.numel() == 0) return Status::ok();
    const Tensor& x = ctx.src[0];
    const Dims& wd = ctx.call.inputs[1].dims;  // its data may be absent: the engine may hold it only packed

    const auto& a = ctx.attrs<ConvolutionAttrs>();
    KILN_ASSIGN_OR_RETURN(ConvWindow win, convolution_window(a, x.dims(), wd));
    const Window g{.h = x.dims()[1],
                   .w = x.dims()[2],
                   .c = x.dims()[3],
                   .oh = win.output[0],
                   .ow = win.output[1],
                   .kh = wd[1],
                   .kw = wd[2],
                   .sh = win.strides[0],
                   .sw = win.strides[1],
                   .dh = win.dilations[0],
                   .dw = win.dilations[1],
                   .ph = win.pads_begin[0],
                   .pw = win.pads_begin[1],
                   .in_place = is_pointwise(win)};
    KILN_ASSIGN_OR_RETURN(const cpu::PackedColumns* packed,
                          packed_.for_run(weights_view(ctx.src[1].defined() ? ctx.src[1].data<float>() : nullptr, wd)));
    const cpu::PackedColumns& b = *packed;
    const int64_t rows = x.dims()[0] * g.oh * g.ow;
    if (y.numel() != rows * b.n)
      return invalid_argument("cpu.conv_gemm_nhwc: output ", y.dims().to_string(), " does not fit input ",
                              x.dims().to_string(), " and weights ", wd.to_string());
    cpu::GemmEpilogue e;
    e.bias = ctx.src.size() > 2 && ctx.src[2].defined() ? ctx.src[2].data<float>() : nullptr;
    e.residual = ctx.src.size() > 3 && ctx.src[3].defined() ? ctx.src[3].data<float>() : nullptr;
    e.fused = a.fused;
    const float* xd = x.data<float>();
    if (g.in_place) {
      cpu::packed_gemm(rows, xd, b.k, b, y.data<float>(), b.n, e);
      return Status::ok();
    }
    if (is_pointwise_window(g)) {
      // A strided or padded 1x1 window's im2col (one row of C floats per output pixel) is gathered once here, where
      // the tasks would each gather the rows again for every group of panels they take (ResNet-50's downsamples).
      const int64_t k = g.c;
      workspace_ = static_cast<size_t>(rows * k) * sizeof(float);
      auto* a = static_cast<float*>(onednn::scratch(workspace_, 0));
      parallel_for(rows, grain_for(k), [&](int64_t row) { gather_rows(g, xd, row, 1, 0, k, a + row * k); });
      cpu::packed_gemm(rows, a, k, b, y.data<float>(), b.n, e);
      return Status::ok();
    }
    const cpu::RowGather gather = [&](int64_t row, int64_t count, int64_t col, int64_t depth, float* out) {
      gather_rows(g, xd, row, count, col, depth, out);
    };
    cpu::packed_gemm(rows, gather, b, y.data<float>(), b.n, e);
    return Status::ok();
  }

  size_t workspace_bytes() const override { return workspace_; }

  std::string detail() const override {
    return cpu::use_avx512() ? "im2col rows + packed GEMM 8x32, AVX-512" : "im2col rows + packed GEMM 6x16, AVX2";
  }

 private:
  static bool is_pointwise(const ConvWindow& w) {
    for (int i = 0; i < 2; ++i)
      if (w.kernel[i] != 1 || w.strides[i] != 1 || w.pads_begin[i] != 0 || w.pads_end[i] != 0) return false;
    return true;
  }

  // A 1x1 window that does not read x in place (strides or pads): its im2col has one row of C floats per output
  // pixel, no more than the output's own size times C / M.
  static bool is_pointwise_window(const Window& g) { return g.kh == 1 && g.kw == 1; }

  cpu::PackedWeights packed_;
  size_t workspace_ = 0;  // the gathered rows of a strided or padded 1x1 window
};

Status conv_gemm_supports(const OpCall& call) {
  const auto& a = call.attrs_as<ConvolutionAttrs>();
  if (!cpu::has_avx2_fma()) return unsupported("needs AVX2 and FMA");
  KILN_RETURN_IF_ERROR(cpu::nhwc_float32_conv(call));
  const Dims& w = call.inputs[1].dims;
  if (a.group != 1 || w.numel() == 0) return unsupported("takes ungrouped, non-empty convolutions only");
  if (a.fused.on && a.fused.kind == ActivationKind::kPRelu) return unsupported("applies no PReLU");
  return cpu::no_negative_pads(call);
}

Result<Tensor> prepare(const OpCall& call) {
  const Tensor* w = call.constant(1);
  if (!w) return Tensor();
  return cpu::PackedWeights::prepare(weights_view(w->data<float>(), w->dims()));
}

KILN_REGISTER_KERNEL(KernelImpl{
    .name = "cpu.conv_gemm_nhwc",
    .op = "Convolution",
    .backend = Backend::kCpu,
    .priority = 7,
    .supports = conv_gemm_supports,
    .create = [](const OpCall& call) -> Result<std::unique_ptr<Kernel>> {
      return std::unique_ptr<Kernel>(std::make_unique<ConvGemm>(call));
    },
    .prepare = prepare,
    .prepared_replaces_input = 1,
    .in_place_input = in_place(3),  // the GEMM reads each residual just before it stores there
});

}  // namespace
}  // namespace kiln
