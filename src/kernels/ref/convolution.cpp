// Reference Convolution and Deconvolution: direct loops over every output (convolution) or
// every input (deconvolution, scattering into the output), in float32. Convolution adds its residual and
// applies its fused activation last.
#include <vector>

#include "kernels/ref/activation.h"
#include "kernels/ref/layout.h"
#include "kernels/registry.h"
#include "ops/convolution/convolution.h"

namespace kiln {
namespace {

int64_t product(const std::vector<int64_t>& v) {
  int64_t p = 1;
  for (int64_t x : v) p *= x;
  return p;
}

// Per-axis coordinates of every flat index of a row-major box of `sizes`.
std::vector<std::vector<int64_t>> coordinates(const std::vector<int64_t>& sizes) {
  const int64_t n = product(sizes);
  std::vector<std::vector<int64_t>> out(n, std::vector<int64_t>(sizes.size()));
  for (int64_t i = 0; i < n; ++i) {
    int64_t rest = i;
    for (int a = static_cast<int>(sizes.size()) - 1; a >= 0; --a) {
      out[i][a] = rest % sizes[a];
      rest /= sizes[a];
    }
  }
  return out;
}

// Flat row-major index of `coord` in `sizes`, or -1 when outside.
int64_t flat_index(const std::vector<int64_t>& coord, const std::vector<int64_t>& sizes) {
  int64_t idx = 0;
  for (size_t a = 0; a < sizes.size(); ++a) {
    if (coord[a] < 0 || coord[a] >= sizes[a]) return -1;
    idx = idx * sizes[a] + coord[a];
  }
  return idx;
}

std::vector<int64_t> spatial_of(const Dims& d) { return std::vector<int64_t>(d.begin() + 2, d.end()); }

const float* bias_of(const KernelContext& ctx) {
  return ctx.src.size() > 2 && ctx.src[2].defined() ? ctx.src[2].data<float>() : nullptr;
}

// y [N, M, out...] = act(conv(x, w) + bias + residual) over NCHW tensors; `bias` and `residual` may be null.
Status convolve(const ConvolutionAttrs& a, const Dims& x_dims, const float* src, const Dims& w_dims, const float* wei,
                const float* bias, const float* residual, float* dst, int64_t total) {
  KILN_ASSIGN_OR_RETURN(ConvWindow win, convolution_window(a, x_dims, w_dims));
  const int rank = win.rank();
  const std::vector<int64_t> in_sizes = spatial_of(x_dims);
  const int64_t n_batch = x_dims[0], c_all = x_dims[1], m_all = w_dims[0];
  const int64_t c_per_group = c_all / a.group, m_per_group = m_all / a.group;
  const int64_t in_size = product(in_sizes), out_size = product(win.output), k_size = product(win.kernel);
  const auto out_coords = coordinates(win.output);
  const auto k_coords = coordinates(win.kernel);
  std::vector<int64_t> at(rank);
  for (int64_t n = 0; n < n_batch; ++n) {
    for (int64_t m = 0; m < m_all; ++m) {
      const int64_t g = m / m_per_group;
      for (int64_t o = 0; o < out_size; ++o) {
        float acc = bias ? bias[m] : 0.f;
        for (int64_t c = 0; c < c_per_group; ++c) {
          const float* x_plane = src + (n * c_all + g * c_per_group + c) * in_size;
          const float* w_plane = wei + (m * c_per_group + c) * k_size;
          for (int64_t k = 0; k < k_size; ++k) {
            for (int i = 0; i < rank; ++i)
              at[i] = out_coords[o][i] * win.strides[i] - win.pads_begin[i] + k_coords[k][i] * win.dilations[i];
            const int64_t idx = flat_index(at, in_sizes);
            if (idx >= 0) acc += x_plane[idx] * w_plane[k];
          }
        }
        dst[(n * m_all + m) * out_size + o] = acc;
      }
    }
  }
  // The epilogue: + residual, then the fused activation.
  if (residual)
    for (int64_t i = 0; i < total; ++i) dst[i] += residual[i];
  ref::apply_fused(a.fused, dst, total);
  return Status::ok();
}

// channel_block B: the same computation on NCHW copies. A block layout [N, C/B, S, B] is [N * C/B, S, B] channels-last
// with B "channels", so the channels-last copies convert it.
Status run_blocked(KernelContext& ctx, const float* residual) {
  const auto& a = ctx.attrs<ConvolutionAttrs>();
  const Tensor& x = ctx.src[0];
  const Tensor& w = ctx.src[1];
  Tensor& y = ctx.dst[0];
  const Dims& xd = x.dims();
  const Dims& yd = y.dims();
  if ((!a.plain_input && xd.rank() != 5) || yd.rank() != 5 || w.dims().rank() != 4)
    return invalid_argument(
        "ref.convolution: channel_block needs x [N, C/B, H, W, B] and y [N, M/B, Ho, Wo, B], got x ", xd.to_string(),
        " and y ", yd.to_string());
  const int64_t b = a.channel_block, ys = yd[2] * yd[3];
  ConvolutionAttrs nchw = a;
  nchw.channel_block = 0;
  nchw.plain_input = false;
  std::vector<float> xc;
  if (!a.plain_input) xc = ref::to_channels_first(x.data<float>(), xd[0] * xd[1], xd[2] * xd[3], b);
  std::vector<float> rc;
  if (residual) rc = ref::to_channels_first(residual, yd[0] * yd[1], ys, b);
  std::vector<float> out(static_cast<size_t>(y.numel()));
  KILN_RETURN_IF_ERROR(convolve(nchw, a.plain_input ? xd : blocked_to_nchw(xd),
                                a.plain_input ? x.data<float>() : xc.data(), w.dims(), w.data<float>(), bias_of(ctx),
                                residual ? rc.data() : nullptr, out.data(), y.numel()));
  ref::to_channels_last(out.data(), y.data<float>(), yd[0] * yd[1], b, ys);
  return Status::ok();
}

Status run_convolution(KernelContext& ctx) {
  const auto& a = ctx.attrs<ConvolutionAttrs>();
  const Tensor& x = ctx.src[0];
  const Tensor& w = ctx.src[1];
  Tensor& y = ctx.dst[0];
  const float* residual = ctx.src.size() > 3 && ctx.src[3].defined() ? ctx.src[3].data<float>() : nullptr;
  if (a.channel_block > 0) return run_blocked(ctx, residual);
  if (!a.channels_last)
    return convolve(a, x.dims(), x.data<float>(), w.dims(), w.data<float>(), bias_of(ctx), residual, y.data<float>(),
                    y.numel());
  // channels_last: the same computation on NCHW copies (x [N, H, W, C], w [M, kH, kW, C/G], y [N, Ho, Wo, M]).
  if (x.dims().rank() != 4 || w.dims().rank() != 4 || y.dims().rank() != 4)
    return invalid_argument("ref.convolution: channels_last needs rank-4 tensors, got x ", x.dims().to_string());
  ConvolutionAttrs nchw = a;
  nchw.channels_last = false;
  const Dims& xd = x.dims();
  const Dims& wd = w.dims();
  const Dims& yd = y.dims();
  const std::vector<float> xc = ref::to_channels_first(x.data<float>(), xd[0], xd[1] * xd[2], xd[3]);
  const std::vector<float> wc = ref::to_channels_first(w.data<float>(), wd[0], wd[1] * wd[2], wd[3]);
  std::vector<float> rc;
  if (residual) rc = ref::to_channels_first(residual, yd[0], yd[1] * yd[2], yd[3]);
  std::vector<float> out(static_cast<size_t>(y.numel()));
  KILN_RETURN_IF_ERROR(convolve(nchw, nhwc_to_nchw(xd), xc.data(), nhwc_to_nchw(wd), wc.data(), bias_of(ctx),
                                residual ? rc.data() : nullptr, out.data(), y.numel()));
  ref::to_channels_last(out.data(), y.data<float>(), yd[0], yd[3], yd[1] * yd[2]);
  return Status::ok();
}

Status run_deconvolution(KernelContext& ctx) {
  const auto& a = ctx.attrs<DeconvolutionAttrs>();
  const Tensor& x = ctx.src[0];
  const Tensor& w = ctx.src[1];
  KILN_ASSIGN_OR_RETURN(ConvWindow win, deconvolution_window(a, x.dims(), w.dims()));
  const int rank = win.rank();
  const std::vector<int64_t> in_sizes = spatial_of(x.dims());
  const int64_t n_batch = x.dims()[0], c_all = x.dims()[1], m_per_group = w.dims()[1];
  const int64_t c_per_group = c_all / a.group, m_all = m_per_group * a.group;
  const int64_t in_size = product(in_sizes), out_size = product(win.output), k_size = product(win.kernel);
  const auto in_coords = coordinates(in_sizes);
  const auto k_coords = coordinates(win.kernel);
  const float* src = x.data<float>();
  const float* wei = w.data<float>();
  const float* bias = bias_of(ctx);
  float* dst = ctx.dst[0].data<float>();
  for (int64_t n = 0; n < n_batch; ++n)
    for (int64_t m = 0; m < m_all; ++m)
      for (int64_t o = 0; o < out_size; ++o) dst[(n * m_all + m) * out_size + o] = bias ? bias[m] : 0.f;
  std::vector<int64_t> at(rank);
  for (int64_t n = 0; n < n_batch; ++n) {
    for (int64_t c = 0; c < c_all; ++c) {
      const int64_t g = c / c_per_group;
      for (int64_t i = 0; i < in_size; ++i) {
        const float v = src[(n * c_all + c) * in_size + i];
        for (int64_t k = 0; k < k_size; ++k) {
          for (int r = 0; r < rank; ++r)
            at[r] = in_coords[i][r] * win.strides[r] - win.pads_begin[r] + k_coords[k][r] * win.dilations[r];
          const int64_t o = flat_index(at, win.output);
          if (o < 0) continue;
          for (int64_t ml = 0; ml < m_per_group; ++ml) {
            const int64_t m = g * m_per_group + ml;
            dst[(n * m_all + m) * out_size + o] += v * wei[(c * m_per_group + ml) * k_size + k];
          }
        }
      }
    }
  }
  return Status::ok();
}

KILN_REGISTER_KERNEL(with_float32_compute({
    .name = "ref.convolution",
    .op = "Convolution",
    .backend = Backend::kRef,
    .priority = 0,
    .supports = [](const OpCall& call) { return require_dtypes(call, {DataType::kFloat32}); },
    .create = stateless(run_convolution),
}));

KILN_REGISTER_KERNEL(with_float32_compute({
    .name = "ref.deconvolution",
    .op = "Deconvolution",
    .backend = Backend::kRef,
    .priority = 0,
    .supports = [](const OpCall& call) { return require_dtypes(call, {DataType::kFloat32}); },
    .create = stateless(run_deconvolution),
}));

}  // namespace
}  // namespace kiln
