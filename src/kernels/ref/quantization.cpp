// Reference quantization kernels: plain loops, int32 accumulation.
#include "kernels/ref/quantization.h"

#include "kernels/common/indexing.h"

namespace kiln {
namespace quant {

std::vector<double> values_of(const Tensor& t) {
  std::vector<double> v(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = t.at(static_cast<int64_t>(i));
  return v;
}

std::vector<int32_t> widen_minus(const Tensor& x, const Tensor& zp, const Dims& zp_dims) {
  const int64_t n = x.numel();
  std::vector<int32_t> out(static_cast<size_t>(n));
  auto fill = [&](auto* src) {
    if (!zp.defined()) {
      // int8 sign-extends on purpose: these are signed quantized values, not characters
      for (int64_t i = 0; i < n; ++i) out[i] = static_cast<int32_t>(src[i]);  // NOLINT(bugprone-signed-char-misuse)
      return;
    }
    const BroadcastIndexer at(zp_dims, x.dims());
    const std::vector<double> z = values_of(zp);
    if (z.size() == 1) {
      const int32_t z0 = static_cast<int32_t>(z[0]);
      for (int64_t i = 0; i < n; ++i) out[i] = src[i] - z0;
    } else {
      for (int64_t i = 0; i < n; ++i) out[i] = src[i] - static_cast<int32_t>(z[at(i)]);
    }
  };
  if (x.dtype() == DataType::kInt8)
    fill(x.data<int8_t>());
  else if (x.dtype() == DataType::kUInt8)
    fill(x.data<uint8_t>());
  else
    fill(x.data<int32_t>());
  return out;
}

Result<IntMatmul> prepare_int_matmul(std::string_view op, const KernelContext& ctx, int a, int b, int a_zp, int b_zp) {
  IntMatmul p;
  const Tensor& ta = ctx.src[a];
  const Tensor& tb = ctx.src[b];
  KILN_ASSIGN_OR_RETURN(p.shape, matmul_shape(ta.dims(), tb.dims(), MatrixMultiplyAttrs{}));
  Dims a_zp_dims, b_zp_dims;
  const Tensor none;
  const Tensor& za = a_zp < static_cast<int>(ctx.src.size()) ? ctx.src[a_zp] : none;
  const Tensor& zb = b_zp < static_cast<int>(ctx.src.size()) ? ctx.src[b_zp] : none;
  if (za.defined()) {
    KILN_ASSIGN_OR_RETURN(a_zp_dims, row_zero_point_dims(op, "a_zero_point", za.dims(), ta.dims(), true));
  }
  if (zb.defined()) {
    KILN_ASSIGN_OR_RETURN(b_zp_dims, row_zero_point_dims(op, "b_zero_point", zb.dims(), tb.dims(), false));
  }
  p.a = widen_minus(ta, za, a_zp_dims);
  p.b = widen_minus(tb, zb, b_zp_dims);
  p.batches = p.shape.batch.numel();
  const BroadcastIndexer a_at(p.shape.a_batch, p.shape.batch), b_at(p.shape.b_batch, p.shape.batch);
  for (int64_t i = 0; i < p.batches; ++i) {
    p.a_off.push_back(a_at(i) * p.shape.m * p.shape.k);
    p.b_off.push_back(b_at(i) * p.shape.k * p.shape.n);
  }
  return p;
}

Result<IntConv> prepare_int_conv(std::string_view op, const KernelContext& ctx, int x, int w, int x_zp, int w_zp) {
  IntConv p;
  const auto& a = ctx.attrs<ConvolutionAttrs>();
  p.x_dims = ctx.src[x].dims();
  p.w_dims = ctx.src[w].dims();
  p.y_dims = ctx.dst[0].dims();
  p.group = a.group;
  auto win = convolution_window(a, p.x_dims, p.w_dims);
  if (!win) return Status(win.status()).with_prefix(std::string(op) + ": ");
  p.win = *win;
  const Tensor none;
  const Tensor& zx = x_zp < static_cast<int>(ctx.src.size()) ? ctx.src[x_zp] : none;
  const Tensor& zw = w_zp < static_cast<int>(ctx.src.size()) ? ctx.src[w_zp] : none;
  p.x = widen_minus(ctx.src[x], zx, Dims{});
  Dims zw_dims;
  if (zw.defined() && zw.numel() > 1) zw_dims = Dims::of_rank(p.w_dims.rank(), 1), zw_dims[0] = p.w_dims[0];
  p.w = widen_minus(ctx.src[w], zw, zw_dims);
  return p;
}

void int_conv_plane(const IntConv& p, int64_t nb, int64_t m, int32_t* acc) {
  const ConvWindow& w = p.win;
  const int r = w.rank();
  const int64_t c = p.x_dims[1], mch = p.w_dims[0];
  const int64_t cg = c / p.group, g = m / (mch / p.group);
  int64_t out_size = 1, k_size = 1, in_size = 1;
  for (int i = 0; i < r; ++i) out_size *= w.output[i], k_size *= w.kernel[i], in_size *= p.x_dims[2 + i];
  for (int64_t o = 0; o < out_size; ++o) {
    int64_t oc[3] = {0, 0, 0}, t = o;
    for (int i = r - 1; i >= 0; --i) oc[i] = t % w.output[i], t /= w.output[i];
    int32_t s = 0;
    for (int64_t kk = 0; kk < k_size; ++kk) {
      int64_t kidx[3] = {0, 0, 0}, kc = kk, in_off = 0;
      for (int i = r - 1; i >= 0; --i) kidx[i] = kc % w.kernel[i], kc /= w.kernel[i];
      bool inside = true;
      for (int i = 0; i < r && inside; ++i) {
        const int64_t pos = oc[i] * w.strides[i] - w.pads_begin[i] + kidx[i] * w.dilations[i];
        inside = pos >= 0 && pos < p.x_dims[2 + i];
        in_off = in_off * p.x_dims[2 + i] + pos;
      }
      if (!inside) continue;
      const int32_t* xs = p.x.data() + (nb * c + g * cg) * in_size + in_off;
      const int32_t* ws = p.w.data() + m * cg * k_size + kk;
      for (int64_t ci = 0; ci < cg; ++ci) s += xs[ci * in_size] * ws[ci * k_size];
    }
    acc[o] = s;
  }
}

Status requantize_matmul(KernelContext& ctx, const int32_t* acc) {
  constexpr std::string_view kOp = "QuantizedMatrixMultiply";
  Tensor& y = ctx.dst[0];
  const Dims& out = y.dims();
  auto indexer = [&](int i, int operand, bool per_row, const char* name) -> Result<BroadcastIndexer> {
    KILN_ASSIGN_OR_RETURN(Dims d, row_zero_point_dims(kOp, name, ctx.src[i].dims(), ctx.src[operand].dims(), per_row));
    return BroadcastIndexer(d, out);
  };
  KILN_ASSIGN_OR_RETURN(BroadcastIndexer as, indexer(1, 0, true, "a_scale"));
  KILN_ASSIGN_OR_RETURN(BroadcastIndexer bs, indexer(4, 3, false, "b_scale"));
  KILN_ASSIGN_OR_RETURN(BroadcastIndexer ys, indexer(6, 0, true, "y_scale"));
  KILN_ASSIGN_OR_RETURN(BroadcastIndexer yz, indexer(7, 0, true, "y_zero_point"));
  const auto va = values_of(ctx.src[1]), vb = values_of(ctx.src[4]), vy = values_of(ctx.src[6]),
             vz = values_of(ctx.src[7]);
  const DataType dt = y.dtype();
  auto write = [&](auto* dst) {
    for (int64_t i = 0; i < y.numel(); ++i) {
      const float mult = static_cast<float>(va[as(i)]) * static_cast<float>(vb[bs(i)]) / static_cast<float>(vy[ys(i)]);
      dst[i] = static_cast<std::remove_pointer_t<decltype(dst)>>(
          requantize(acc[i], mult, static_cast<int32_t>(vz[yz(i)]), dt));
    }
  };
  if (dt == DataType::kInt8)
    write(y.data<int8_t>());
  else
    write(y.data<uint8_t>());
  return Status::ok();
}

void requantize_conv(KernelContext& ctx, const IntConv& p, const int32_t* acc) {
  Tensor& y = ctx.dst[0];
  const int64_t mch = p.w_dims[0], plane = y.numel() / std::max<int64_t>(1, y.dims()[0] * mch);
  const auto ws = values_of(ctx.src[4]);
  const float xs = static_cast<float>(ctx.src[1].at(0)), ys = static_cast<float>(ctx.src[6].at(0));
  const int32_t yz = static_cast<int32_t>(ctx.src[7].at(0));
  const int32_t* bias = ctx.src.size() > 8 && ctx.src[8].defined() ? ctx.src[8].data<int32_t>() : nullptr;
  const DataType dt = y.dtype();
  auto write = [&](auto* dst) {
    for (int64_t i = 0; i < y.numel(); ++i) {
      const int64_t m = (i / plane) % mch;
      const float mult = xs * static_cast<float>(ws[ws.size() == 1 ? 0 : m]) / ys;
      dst[i] =
          static_cast<std::remove_pointer_t<decltype(dst)>>(requantize(acc[i] + (bias ? bias[m] : 0), mult, yz, dt));
    }
  };
  if (dt == DataType::kInt8)
    write(y.data<int8_t>());
  else
    write(y.data<uint8_t>());
}

}  // namespace quant

namespace {

using quant::IntConv;
using quant::IntMatmul;

// acc[batch, i, j] = sum_k a[batch, i, k] * b[batch, k, j].
std::vector<int32_t> ref_matmul(const IntMatmul& p) {
  const int64_t m = p.shape.m, n = p.shape.n, k = p.shape.k;
  std::vector<int32_t> acc(static_cast<size_t>(p.batches * m * n));
  for (int64_t bt = 0; bt < p.batches; ++bt)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        int32_t s = 0;
        for (int64_t kk = 0; kk < k; ++kk) s += p.a[p.a_off[bt] + i * k + kk] * p.b[p.b_off[bt] + kk * n + j];
        acc[(bt * m + i) * n + j] = s;
      }
  return acc;
}

std::vector<int32_t> ref_conv(const IntConv& p) {
  const int64_t batch = p.x_dims[0], mch = p.w_dims[0], plane = p.y_dims.numel() / std::max<int64_t>(1, batch * mch);
  std::vector<int32_t> acc(static_cast<size_t>(p.y_dims.numel()));
  for (int64_t nb = 0; nb < batch; ++nb)
    for (int64_t m = 0; m < mch; ++m) quant::int_conv_plane(p, nb, m, acc.data() + (nb * mch + m) * plane);
  return acc;
}

Status run_quantize(KernelContext& ctx) {
  const auto& a = ctx.attrs<QuantizeAttrs>();
  const Tensor& x = ctx.src[0];
  Tensor& y = ctx.dst[0];
  KILN_ASSIGN_OR_RETURN(QuantParamLayout l,
                        quant_param_layout("Quantize", "scale", ctx.src[1].dims(), x.dims(), a.axis));
  const std::vector<double> scale = quant::values_of(ctx.src[1]);
  const std::vector<double> zp =
      ctx.src[2].defined() ? quant::values_of(ctx.src[2]) : std::vector<double>(scale.size());
  for (int64_t i = 0; i < x.numel(); ++i) {
    const int64_t p = quant::param_index(l, i);
    y.set(i, quant::quantize_value(static_cast<float>(x.at(i)), static_cast<float>(scale[p]),
                                   static_cast<int32_t>(zp[p]), y.dtype()));
  }
  return Status::ok();
}

Status run_dequantize(KernelContext& ctx) {
  const auto& a = ctx.attrs<QuantizeAttrs>();
  const Tensor& x = ctx.src[0];
  Tensor& y = ctx.dst[0];
  KILN_ASSIGN_OR_RETURN(QuantParamLayout l,
                        quant_param_layout("Dequantize", "scale", ctx.src[1].dims(), x.dims(), a.axis));
  const std::vector<double> scale = quant::values_of(ctx.src[1]);
  const std::vector<double> zp =
      ctx.src[2].defined() ? quant::values_of(ctx.src[2]) : std::vector<double>(scale.size());
  for (int64_t i = 0; i < x.numel(); ++i) {
    const int64_t p = quant::param_index(l, i);
    y.set(i, static_cast<float>(x.at(i) - zp[p]) * static_cast<float>(scale[p]));
  }
  return Status::ok();
}

Status run_dynamic_quantize(KernelContext& ctx) {
  const Tensor& x = ctx.src[0];
  const float* src = x.data<float>();
  float lo = 0.f, hi = 0.f;
  for (int64_t i = 0; i < x.numel(); ++i) lo = std::min(lo, src[i]), hi = std::max(hi, src[i]);
  const float scale = (hi - lo) / 255.f;
  const float zp = scale == 0.f ? 0.f : std::nearbyint(std::clamp(0.f - lo / scale, 0.f, 255.f));
  uint8_t* y = ctx.dst[0].data<uint8_t>();
  for (int64_t i = 0; i < x.numel(); ++i)
    y[i] = scale == 0.f
               ? static_cast<uint8_t>(zp)
               : static_cast<uint8_t>(quant::quantize_value(src[i], scale, static_cast<int32_t>(zp), DataType::kUInt8));
  ctx.dst[1].data<float>()[0] = scale;
  ctx.dst[2].data<uint8_t>()[0] = static_cast<uint8_t>(zp);
  return Status::ok();
}

Status run_matmul_integer(KernelContext& ctx) {
  KILN_ASSIGN_OR_RETURN(IntMatmul p, quant::prepare_int_matmul("MatrixMultiplyInteger", ctx, 0, 1, 2, 3));
  const std::vector<int32_t> acc = ref_matmul(p);
  std::copy(acc.begin(), acc.end(), ctx.dst[0].data<int32_t>());
  return Status::ok();
}

Status run_quantized_matmul(KernelContext& ctx) {
  KILN_ASSIGN_OR_RETURN(IntMatmul p, quant::prepare_int_matmul("QuantizedMatrixMultiply", ctx, 0, 3, 2, 5));
  return quant::requantize_matmul(ctx, ref_matmul(p).data());
}

Status run_conv_integer(KernelContext& ctx) {
  KILN_ASSIGN_OR_RETURN(IntConv p, quant::prepare_int_conv("ConvolutionInteger", ctx, 0, 1, 2, 3));
  const std::vector<int32_t> acc = ref_conv(p);
  std::copy(acc.begin(), acc.end(), ctx.dst[0].data<int32_t>());
  return Status::ok();
}

Status run_quantized_conv(KernelContext& ctx) {
  KILN_ASSIGN_OR_RETURN(IntConv p, quant::prepare_int_conv("QuantizedConvolution", ctx, 0, 3, 2, 5));
  quant::requantize_conv(ctx, p, ref_conv(p).data());
  return Status::ok();
}

KernelImpl ref_impl(const char* name, const char* op, RunFn run) {
  return KernelImpl{.name = name,
                    .op = op,
                    .backend = Backend::kRef,
                    .priority = 0,
                    .supports = [](const OpCall&) { return Status::ok(); },
                    .create = stateless(std::move(run))};
}

KILN_REGISTER_KERNEL(with_float32_compute(ref_impl("ref.quantize", "Quantize", run_quantize)));
KILN_REGISTER_KERNEL(with_float32_compute(ref_impl("ref.dequantize", "Dequantize", run_dequantize)));
KILN_REGISTER_KERNEL(with_float32_compute(ref_impl("ref.dynamic_quantize", "DynamicQuantize", run_dynamic_quantize)));
KILN_REGISTER_KERNEL(ref_impl("ref.matrix_multiply_integer", "MatrixMultiplyInteger", run_matmul_integer));
KILN_REGISTER_KERNEL(with_float32_compute(ref_impl("ref.quantized_matrix_multiply", "QuantizedMatrixMultiply",
                                                   run_quantized_matmul)));
KILN_REGISTER_KERNEL(ref_impl("ref.convolution_integer", "ConvolutionInteger", run_conv_integer));
KILN_REGISTER_KERNEL(with_float32_compute(ref_impl("ref.quantized_convolution", "QuantizedConvolution",
                                                   run_quantized_conv)));

}  // namespace
}  // namespace kiln
