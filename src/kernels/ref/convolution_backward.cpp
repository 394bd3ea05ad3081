// Reference ConvolutionBackwardData and ConvolutionBackwardFilter: the forward's direct loop (ref/convolution.cpp)
// with its multiply-add turned around: dx[tap] += dy[o] * w[k] and dw[k] += dy[o] * x[tap]. Accumulates in double.
#include <vector>

#include "kernels/registry.h"
#include "ops/convolution/convolution.h"

namespace kiln {
namespace {

struct ConvGeometry {
  ConvWindow win;
  int64_t n = 0, c = 0, m = 0, cg = 0, mg = 0;  // batch, channels of x and dy, per group
  int64_t in_size = 1, out_size = 1, k_size = 1;
  std::vector<int64_t> in;
  // For every (output position, kernel tap): the flat input index, or -1 in the padding.
  std::vector<int64_t> taps;
};

Result<ConvGeometry> geometry(const ConvolutionAttrs& a, const Dims& x, const Dims& w) {
  ConvGeometry g;
  KILN_ASSIGN_OR_RETURN(g.win, convolution_window(a, x, w));
  g.n = x[0];
  g.c = x[1];
  g.m = w[0];
  g.cg = g.c / a.group;
  g.mg = g.m / a.group;
  const int rank = g.win.rank();
  g.in.assign(x.begin() + 2, x.end());
  for (int i = 0; i < rank; ++i) {
    g.in_size *= g.in[i];
    g.out_size *= g.win.output[i];
    g.k_size *= g.win.kernel[i];
  }
  g.taps.resize(static_cast<size_t>(g.out_size * g.k_size));
  std::vector<int64_t> o(rank), k(rank);
  for (int64_t oi = 0; oi < g.out_size; ++oi) {
    for (int64_t rest = oi, i = rank - 1; i >= 0; --i) {
      o[i] = rest % g.win.output[i];
      rest /= g.win.output[i];
    }
    for (int64_t ki = 0; ki < g.k_size; ++ki) {
      for (int64_t rest = ki, i = rank - 1; i >= 0; --i) {
        k[i] = rest % g.win.kernel[i];
        rest /= g.win.kernel[i];
      }
      int64_t at = 0;
      for (int i = 0; i < rank && at >= 0; ++i) {
        const int64_t pos = o[i] * g.win.strides[i] - g.win.pads_begin[i] + k[i] * g.win.dilations[i];
        at = pos < 0 || pos >= g.in[i] ? -1 : at * g.in[i] + pos;
      }
      g.taps[oi * g.k_size + ki] = at;
    }
  }
  return g;
}

Status run_backward_data(KernelContext& ctx) {
  const auto& a = ctx.attrs<ConvolutionAttrs>();
  KILN_ASSIGN_OR_RETURN(ConvGeometry g, geometry(a, ctx.src[2].dims(), ctx.src[1].dims()));
  const float* dy = ctx.src[0].data<float>();
  const float* w = ctx.src[1].data<float>();
  float* dx = ctx.dst[0].data<float>();
  std::vector<double> acc(static_cast<size_t>(g.in_size));
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t c = 0; c < g.c; ++c) {
      const int64_t group = c / g.cg, cl = c % g.cg;
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t ml = 0; ml < g.mg; ++ml) {
        const int64_t m = group * g.mg + ml;
        const float* dy_plane = dy + (n * g.m + m) * g.out_size;
        const float* w_plane = w + (m * g.cg + cl) * g.k_size;
        for (int64_t o = 0; o < g.out_size; ++o)
          for (int64_t k = 0; k < g.k_size; ++k) {
            const int64_t at = g.taps[o * g.k_size + k];
            if (at >= 0) acc[at] += static_cast<double>(dy_plane[o]) * w_plane[k];
          }
      }
      float* dx_plane = dx + (n * g.c + c) * g.in_size;
      for (int64_t i = 0; i < g.in_size; ++i) dx_plane[i] = static_cast<float>(acc[i]);
    }
  return Status::ok();
}

Status run_backward_filter(KernelContext& ctx) {
  const auto& a = ctx.attrs<ConvolutionAttrs>();
  const Tensor& dw_t = ctx.dst[0];
  KILN_ASSIGN_OR_RETURN(ConvGeometry g, geometry(a, ctx.src[0].dims(), dw_t.dims()));
  const float* x = ctx.src[0].data<float>();
  const float* dy = ctx.src[1].data<float>();
  float* dw = dw_t.data<float>();
  std::vector<double> acc(static_cast<size_t>(g.k_size));
  for (int64_t m = 0; m < g.m; ++m) {
    const int64_t group = m / g.mg;
    for (int64_t cl = 0; cl < g.cg; ++cl) {
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t n = 0; n < g.n; ++n) {
        const float* dy_plane = dy + (n * g.m + m) * g.out_size;
        const float* x_plane = x + (n * g.c + group * g.cg + cl) * g.in_size;
        for (int64_t o = 0; o < g.out_size; ++o)
          for (int64_t k = 0; k < g.k_size; ++k) {
            const int64_t at = g.taps[o * g.k_size + k];
            if (at >= 0) acc[k] += static_cast<double>(dy_plane[o]) * x_plane[at];
          }
      }
      float* dw_plane = dw + (m * g.cg + cl) * g.k_size;
      for (int64_t k = 0; k < g.k_size; ++k) dw_plane[k] = static_cast<float>(acc[k]);
    }
  }
  return Status::ok();
}

Status plain_float32(const OpCall& call) {
  KILN_RETURN_IF_ERROR(require_dtypes(call, {DataType::kFloat32}));
  const auto& a = call.attrs_as<ConvolutionAttrs>();
  if (a.fused.on || a.channels_last) return unsupported("no fused activation or channels_last in a backward op");
  return Status::ok();
}

KILN_REGISTER_KERNEL(with_float32_compute({
    .name = "ref.convolution_backward_data",
    .op = "ConvolutionBackwardData",
    .backend = Backend::kRef,
    .priority = 0,
    .supports = plain_float32,
    .create = stateless(run_backward_data),
}));

KILN_REGISTER_KERNEL(with_float32_compute({
    .name = "ref.convolution_backward_filter",
    .op = "ConvolutionBackwardFilter",
    .backend = Backend::kRef,
    .priority = 0,
    .supports = plain_float32,
    .create = stateless(run_backward_filter),
}));

}  // namespace
}  // namespace kiln
