// CUDA quantization: Quantize, Dequantize and DynamicQuantize as elementwise kernels that read their scales and
// zero points on the device, and the integer products of explicit Q/DQ networks (MatrixMultiplyInteger,
// QuantizedMatrixMultiply, ConvolutionInteger, QuantizedConvolution) as direct int32 kernels, one thread per output
// element, requantized in float32 as the reference does (round half to even, saturate). Scales are float32.
#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/indexing.cuh"
#include "kernels/cuda/types.cuh"
#include "ops/matmul/matmul.h"
#include "ops/quantization/quantization.h"

namespace kiln {
namespace {

using cuda::blocks_for;
using cuda::kThreads;
using cuda::thread_count;
using cuda::thread_index;

// saturate(round_half_even(x / scale) + zero_point) (quant::quantize_value on the device).
__device__ int32_t quantize_value(float x, float scale, int32_t zero_point, float lo, float hi) {
  const float q = nearbyintf(x / scale);
  if (isnan(q)) return 0;
  const float v = q + static_cast<float>(zero_point);
  return static_cast<int32_t>(v < lo ? lo : v > hi ? hi : v);
}

// requantize() of quantization.h on the device.
__device__ int32_t requantize_value(int32_t acc, float multiplier, int32_t zero_point, float lo, float hi) {
  const float v = nearbyintf(static_cast<float>(acc) * multiplier) + static_cast<float>(zero_point);
  return static_cast<int32_t>(v < lo ? lo : v > hi ? hi : v);
}

float lowest(DataType q) { return q == DataType::kInt8 ? -128.f : 0.f; }
float highest(DataType q) { return q == DataType::kInt8 ? 127.f : 255.f; }

__device__ int64_t param_index(bool per_axis, int64_t i, int64_t inner, int64_t size) {
  return per_axis ? (i / inner) % size : 0;
}

// ---------------------------------------------------------------------------------------------
// Quantize, Dequantize, DynamicQuantize

template <class Q>
__global__ void quantize_kernel(const float* x, int64_t n, const float* scale, const Q* zp, bool per_axis,
                                int64_t inner, int64_t size, float lo, float hi, Q* y) {
  for (int64_t i = thread_index(); i < n; i += thread_count()) {
    const int64_t p = param_index(per_axis, i, inner, size);
    y[i] = static_cast<Q>(quantize_value(x[i], scale[p], zp ? static_cast<int32_t>(zp[p]) : 0, lo, hi));
  }
}

template <class X>
__global__ void dequantize_kernel(const X* x, int64_t n, const float* scale, const X* zp, bool per_axis, int64_t inner,
                                  int64_t size, float* y) {
  for (int64_t i = thread_index(); i < n; i += thread_count()) {
    const int64_t p = param_index(per_axis, i, inner, size);
    const int64_t z = zp ? static_cast<int64_t>(zp[p]) : 0;
    y[i] = static_cast<float>(static_cast<int64_t>(x[i]) - z) * scale[p];
  }
}

Status scale_is_float32(const OpCall& call, int i, const char* op) {
  if (call.has_input(i) && call.inputs[i].dtype != DataType::kFloat32)
    return unsupported("the CUDA ", op, " kernel takes float32 scales, got ", dtype_name(call.inputs[i].dtype));
  return Status::ok();
}

Status run_quantize(KernelContext& ctx) {
  const auto& a = ctx.attrs<QuantizeAttrs>();
  const Tensor& x = ctx.src[0];
  Tensor& y = ctx.dst[0];
  KILN_ASSIGN_OR_RETURN(QuantParamLayout l,
                        quant_param_layout("Quantize", "scale", ctx.src[1].dims(), x.dims(), a.axis));
  const bool zp = ctx.src.size() > 2 && ctx.src[2].defined();  // of scale's shape: the op's inference checks it
  const int64_t n = x.numel();
  if (n == 0) return Status::ok();
  const cudaStream_t stream = cuda::native(ctx.stream);
  const float lo = lowest(y.dtype()), hi = highest(y.dtype());
  if (y.dtype() == DataType::kInt8)
    quantize_kernel<int8_t><<<blocks_for(n), kThreads, 0, stream>>>(
        x.data<float>(), n, ctx.src[1].data<float>(), zp ? ctx.src[2].data<int8_t>() : nullptr, l.per_axis, l.inner,
        l.size, lo, hi, y.data<int8_t>());
  else if (y.dtype() == DataType::kUInt8)
    quantize_kernel<uint8_t><<<blocks_for(n), kThreads, 0, stream>>>(
        x.data<float>(), n, ctx.src[1].data<float>(), zp ? ctx.src[2].data<uint8_t>() : nullptr, l.per_axis, l.inner,
        l.size, lo, hi, y.data<uint8_t>());
  else
    return unsupported("Quantize to ", dtype_name(y.dtype()));
  return cuda::check(cudaGetLastError(), "Quantize kernel launch");
}

template <class X>
void launch_dequantize(KernelContext& ctx, const QuantParamLayout& l, bool zp, cudaStream_t stream) {
  const Tensor& x = ctx.src[0];
  const int64_t n = x.numel();
  dequantize_kernel<X><<<blocks_for(n), kThreads, 0, stream>>>(x.data<X>(), n, ctx.src[1].data<float>(),
                                                               zp ? ctx.src[2].data<X>() : nullptr, l.per_axis, l.inner,
                                                               l.size, ctx.dst[0].data<float>());
}

Status run_dequantize(KernelContext& ctx) {
  const auto& a = ctx.attrs<QuantizeAttrs>();
  const Tensor& x = ctx.src[0];
  KILN_ASSIGN_OR_RETURN(QuantParamLayout l,
                        quant_param_layout("Dequantize", "scale", ctx.src[1].dims(), x.dims(), a.axis));
  const bool zp = ctx.src.size() > 2 && ctx.src[2].defined();  // of scale's shape: the op's inference checks it
  if (x.numel() == 0) return Status::ok();
  const cudaStream_t stream = cuda::native(ctx.stream);
  switch (x.dtype()) {
    case DataType::kInt8: launch_dequantize<int8_t>(ctx, l, zp, stream); break;
    case DataType::kUInt8: launch_dequantize<uint8_t>(ctx, l, zp, stream); break;
    case DataType::kInt32: launch_dequantize<int32_t>(ctx, l, zp, stream); break;
    default: return unsupported("Dequantize of ", dtype_name(x.dtype()));
  }
  return cuda::check(cudaGetLastError(), "Dequantize kernel launch");
}

constexpr unsigned kRangeThreads = 1024;

// One block: the range [min(0, min x), max(0, max x)] (NaNs skipped, as std::min/max keep the first operand),
// then scale = range / 255 and zero_point = round(clamp(-lo / scale, 0, 255)) as the reference computes them.
__global__ void dynamic_range_kernel(const float* x, int64_t n, float* scale, uint8_t* zero_point) {
  __shared__ float lo_s[kRangeThreads], hi_s[kRangeThreads];
  float lo = 0.f, hi = 0.f;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const float v = x[i];
    if (v < lo) lo = v;
    if (v > hi) hi = v;
  }
  lo_s[threadIdx.x] = lo;
  hi_s[threadIdx.x] = hi;
  __syncthreads();
  for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) {
      lo_s[threadIdx.x] = fminf(lo_s[threadIdx.x], lo_s[threadIdx.x + half]);
      hi_s[threadIdx.x] = fmaxf(hi_s[threadIdx.x], hi_s[threadIdx.x + half]);
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    const float s = (hi_s[0] - lo_s[0]) / 255.f;
    const float z = s == 0.f ? 0.f : nearbyintf(fminf(fmaxf(0.f - lo_s[0] / s, 0.f), 255.f));
    *scale = s;
    *zero_point = static_cast<uint8_t>(z);
  }
}

__global__ void dynamic_quantize_kernel(const float* x, int64_t n, const float* scale, const uint8_t* zero_point,
                                        uint8_t* y) {
  const float s = *scale;
  const uint8_t z = *zero_point;
  for (int64_t i = thread_index(); i < n; i += thread_count())
    y[i] = s == 0.f ? z : static_cast<uint8_t>(quantize_value(x[i], s, z, 0.f, 255.f));
}

Status run_dynamic_quantize(KernelContext& ctx) {
  const Tensor& x = ctx.src[0];
  const int64_t n = x.numel();
  const cudaStream_t stream = cuda::native(ctx.stream);
  float* scale = ctx.dst[1].data<float>();
  uint8_t* zp = ctx.dst[2].data<uint8_t>();
  dynamic_range_kernel<<<1, kRangeThreads, 0, stream>>>(x.data<float>(), n, scale, zp);
  if (n > 0)
    dynamic_quantize_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x.data<float>(), n, scale, zp,
                                                                    ctx.dst[0].data<uint8_t>());
  return cuda::check(cudaGetLastError(), "DynamicQuantize kernel launch");
}

// ---------------------------------------------------------------------------------------------
// Integer matrix products: y[batch, i, j] = sum_k (a[batch, i, k] - a_zp) * (b[batch, k, j] - b_zp)

// Operands of a product, by their offsets over the output's iteration space [batch..., M, N].
enum MatmulOperand { kA, kB, kAZero, kBZero, kAScale, kBScale, kYScale, kYZero, kMatmulOperands };

struct IntMatmulArgs {
  cuda::Offsets<kMatmulOperands> at;  // kA: row start of a; kB: column start of b; the others: their element
  int64_t n = 0, k = 0, count = 0;    // count: output elements
  bool has[kMatmulOperands] = {};
};

// Strides of a broadcasting, contiguous operand of dims `d` over `out` (right-aligned; 0 where it broadcasts).
void broadcast_strides(const Dims& d, const Dims& out, int64_t* s) {
  const int shift = out.rank() - d.rank();
  int64_t acc = 1;
  for (int i = out.rank() - 1; i >= 0; --i) {
    const int j = i - shift;
    const int64_t size = j >= 0 ? d[j] : 1;
    s[i] = size == 1 ? 0 : acc;
    acc *= std::max<int64_t>(size, 1);
  }
}

// The offsets of a (row starts), b (column starts) and the per-row / per-column parameters (`params[i]`: the dims
// row_zero_point_dims gives, or null when absent) over [batch..., M, N].
Result<IntMatmulArgs> int_matmul_args(const MatmulShape& s, const Dims* const (&params)[kMatmulOperands]) {
  IntMatmulArgs args;
  Dims out = s.batch;
  out.push_back(s.m);
  out.push_back(s.n);
  if (out.rank() > kMaxRank)
    return unsupported("integer matrix products on CUDA take at most ", kMaxRank - 2, " batch dims");
  int64_t strides[kMatmulOperands][kMaxRank] = {};
  Dims a_dims = s.a_batch, b_dims = s.b_batch;
  a_dims.push_back(s.m);
  a_dims.push_back(1);
  b_dims.push_back(1);
  b_dims.push_back(s.n);
  // a's rows are K apart and b's columns 1 apart; their batch matrices M * K and K * N.
  broadcast_strides(a_dims, out, strides[kA]);
  broadcast_strides(b_dims, out, strides[kB]);
  for (int i = 0; i < out.rank(); ++i) {
    strides[kA][i] *= s.k;
    if (i < out.rank() - 1) strides[kB][i] *= s.k;
  }
  for (int p = kAZero; p < kMatmulOperands; ++p) {
    args.has[p] = params[p] != nullptr;
    if (params[p]) broadcast_strides(*params[p], out, strides[p]);
  }
  for (int i = 0; i < out.rank(); ++i) {
    int64_t col[kMatmulOperands];
    for (int p = 0; p < kMatmulOperands; ++p) col[p] = strides[p][i];
    args.at.add(out[i], col);
  }
  args.at.simplify();
  args.n = s.n;
  args.k = s.k;
  args.count = out.numel();
  return args;
}

struct Requant {
  const float *a_scale = nullptr, *b_scale = nullptr, *y_scale = nullptr;
  const void* y_zero = nullptr;
  float lo = 0, hi = 0;
};

// One thread per output element; Y int32 (MatrixMultiplyInteger) or int8/uint8 (requantized).
template <class A, class B, class Y>
__global__ void int_matmul_kernel(IntMatmulArgs p, const A* a, const B* b, const A* a_zero, const B* b_zero, Requant rq,
                                  Y* y) {
  for (int64_t o = thread_index(); o < p.count; o += thread_count()) {
    int64_t off[kMatmulOperands];
    p.at.at(o, off);
    const int32_t za = a_zero ? static_cast<int32_t>(a_zero[off[kAZero]]) : 0;
    const int32_t zb = b_zero ? static_cast<int32_t>(b_zero[off[kBZero]]) : 0;
    const A* ar = a + off[kA];
    const B* bc = b + off[kB];
    int32_t acc = 0;
    for (int64_t kk = 0; kk < p.k; ++kk)
      acc += (static_cast<int32_t>(ar[kk]) - za) * (static_cast<int32_t>(bc[kk * p.n]) - zb);
    if constexpr (std::is_same_v<Y, int32_t>) {
      y[o] = acc;
    } else {
      const float mult = rq.a_scale[off[kAScale]] * rq.b_scale[off[kBScale]] / rq.y_scale[off[kYScale]];
      const int32_t yz = static_cast<int32_t>(static_cast<const Y*>(rq.y_zero)[off[kYZero]]);
      y[o] = static_cast<Y>(requantize_value(acc, mult, yz, rq.lo, rq.hi));
    }
  }
}

template <class A, class B, class Y>
void launch_int_matmul(const IntMatmulArgs& p, const Tensor& a, const Tensor& b, const Tensor* za, const Tensor* zb,
                       const Requant& rq, Tensor& y, cudaStream_t stream) {
  int_matmul_kernel<A, B, Y><<<blocks_for(p.count), kThreads, 0, stream>>>(
      p, a.data<A>(), b.data<B>(), za ? za->data<A>() : nullptr, zb ? zb->data<B>() : nullptr, rq, y.data<Y>());
}

template <class Y>
Status dispatch_int_matmul(const IntMatmulArgs& p, const Tensor& a, const Tensor& b, const Tensor* za, const Tensor* zb,
                           const Requant& rq, Tensor& y, cudaStream_t stream) {
  const bool a8 = a.dtype() == DataType::kInt8, b8 = b.dtype() == DataType::kInt8;
  if (a8 && b8)
    launch_int_matmul<int8_t, int8_t, Y>(p, a, b, za, zb, rq, y, stream);
  else if (a8)
    launch_int_matmul<int8_t, uint8_t, Y>(p, a, b, za, zb, rq, y, stream);
  else if (b8)
    launch_int_matmul<uint8_t, int8_t, Y>(p, a, b, za, zb, rq, y, stream);
  else
    launch_int_matmul<uint8_t, uint8_t, Y>(p, a, b, za, zb, rq, y, stream);
  return cuda::check(cudaGetLastError(), "integer matrix product kernel launch");
}

const Tensor* optional_input(const KernelContext& ctx, int i) {
  return i < static_cast<int>(ctx.src.size()) && ctx.src[i].defined() ? &ctx.src[i] : nullptr;
}

// The dims a per-row (operand a) or per-column (operand b) parameter broadcasts with, or null when absent.
Result<const Dims*> param_dims(std::string_view op, const char* what, const Tensor* t, const Tensor& operand,
                               bool per_row, Dims& keep) {
  if (!t) return static_cast<const Dims*>(nullptr);
  KILN_ASSIGN_OR_RETURN(keep, row_zero_point_dims(op, what, t->dims(), operand.dims(), per_row));
  return static_cast<const Dims*>(&keep);
}

Status run_matmul_integer(KernelContext& ctx) {
  constexpr std::string_view kOp = "MatrixMultiplyInteger";
  const Tensor& a = ctx.src[0];
  const Tensor& b = ctx.src[1];
  KILN_ASSIGN_OR_RETURN(MatmulShape s, matmul_shape(a.dims(), b.dims(), MatrixMultiplyAttrs{}));
  const Tensor* za = optional_input(ctx, 2);
  const Tensor* zb = optional_input(ctx, 3);
  Dims keep[kMatmulOperands];
  const Dims* params[kMatmulOperands] = {};
  KILN_ASSIGN_OR_RETURN(params[kAZero], param_dims(kOp, "a_zero_point", za, a, true, keep[kAZero]));
  KILN_ASSIGN_OR_RETURN(params[kBZero], param_dims(kOp, "b_zero_point", zb, b, false, keep[kBZero]));
  KILN_ASSIGN_OR_RETURN(IntMatmulArgs p, int_matmul_args(s, params));
  if (p.count == 0) return Status::ok();
  return dispatch_int_matmul<int32_t>(p, a, b, za, zb, Requant{}, ctx.dst[0], cuda::native(ctx.stream));
}

Status run_quantized_matmul(KernelContext& ctx) {
  constexpr std::string_view kOp = "QuantizedMatrixMultiply";
  const Tensor& a = ctx.src[0];
  const Tensor& b = ctx.src[3];
  KILN_ASSIGN_OR_RETURN(MatmulShape s, matmul_shape(a.dims(), b.dims(), MatrixMultiplyAttrs{}));
  const Tensor* za = optional_input(ctx, 2);
  const Tensor* zb = optional_input(ctx, 5);
  Dims keep[kMatmulOperands];
  const Dims* params[kMatmulOperands] = {};
  KILN_ASSIGN_OR_RETURN(params[kAZero], param_dims(kOp, "a_zero_point", za, a, true, keep[kAZero]));
  KILN_ASSIGN_OR_RETURN(params[kBZero], param_dims(kOp, "b_zero_point", zb, b, false, keep[kBZero]));
  KILN_ASSIGN_OR_RETURN(params[kAScale], param_dims(kOp, "a_scale", &ctx.src[1], a, true, keep[kAScale]));
  KILN_ASSIGN_OR_RETURN(params[kBScale], param_dims(kOp, "b_scale", &ctx.src[4], b, false, keep[kBScale]));
  KILN_ASSIGN_OR_RETURN(params[kYScale], param_dims(kOp, "y_scale", &ctx.src[6], a, true, keep[kYScale]));
  KILN_ASSIGN_OR_RETURN(params[kYZero], param_dims(kOp, "y_zero_point", &ctx.src[7], a, true, keep[kYZero]));
  KILN_ASSIGN_OR_RETURN(IntMatmulArgs p, int_matmul_args(s, params));
  if (p.count == 0) return Status::ok();
  Tensor& y = ctx.dst[0];
  Requant rq{ctx.src[1].data<float>(), ctx.src[4].data<float>(), ctx.src[6].data<float>(),
             ctx.src[7].raw(),         lowest(y.dtype()),        highest(y.dtype())};
  const cudaStream_t stream = cuda::native(ctx.stream);
  if (y.dtype() == DataType::kInt8) return dispatch_int_matmul<int8_t>(p, a, b, za, zb, rq, y, stream);
  if (y.dtype() == DataType::kUInt8) return dispatch_int_matmul<uint8_t>(p, a, b, za, zb, rq, y, stream);
  return unsupported(kOp, " to ", dtype_name(y.dtype()));
}

// ---------------------------------------------------------------------------------------------
// Integer convolutions (1-D to 3-D, NCHW): y[nb, m, o...] = sum over the group's channels and the window of
// (x - x_zp) * (w[m] - w_zp[m]); window positions in the padding add nothing (x there counts as x_zp).

struct IntConvArgs {
  int rank = 0;
  int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1}, kernel[3] = {1, 1, 1};
  int64_t strides[3] = {1, 1, 1}, pads[3] = {0, 0, 0}, dilations[3] = {1, 1, 1};
  int64_t channels = 0, maps = 0, group = 1, count = 0;
  int64_t in_size = 1, out_size = 1, k_size = 1;
  bool per_channel_w_zero = false;
};

struct ConvRequant {
  const float *x_scale = nullptr, *w_scale = nullptr, *y_scale = nullptr;
  const void* y_zero = nullptr;
  const int32_t* bias = nullptr;
  bool per_channel_w_scale = false;
  float lo = 0, hi = 0;
};

template <class X, class W, class Y>
__global__ void int_conv_kernel(IntConvArgs p, const X* x, const W* w, const X* x_zero, const W* w_zero, ConvRequant rq,
                                Y* y) {
  const int64_t cg = p.channels / p.group, mg = p.maps / p.group;
  const int32_t zx = x_zero ? static_cast<int32_t>(x_zero[0]) : 0;
  for (int64_t i = thread_index(); i < p.count; i += thread_count()) {
    const int64_t o = i % p.out_size;
    const int64_t m = (i / p.out_size) % p.maps;
    const int64_t nb = i / (p.out_size * p.maps);
    const int64_t g = m / mg;
    const int32_t zw = w_zero ? static_cast<int32_t>(w_zero[p.per_channel_w_zero ? m : 0]) : 0;
    int64_t oc[3] = {0, 0, 0};
    for (int64_t d = p.rank - 1, t = o; d >= 0; --d) oc[d] = t % p.out[d], t /= p.out[d];
    int32_t acc = 0;
    for (int64_t kk = 0; kk < p.k_size; ++kk) {
      int64_t in_off = 0;
      bool inside = true;
      for (int64_t d = 0, kc = kk, div = p.k_size; d < p.rank; ++d) {
        div /= p.kernel[d];
        const int64_t kd = (kc / div) % p.kernel[d];
        const int64_t pos = oc[d] * p.strides[d] - p.pads[d] + kd * p.dilations[d];
        inside = inside && pos >= 0 && pos < p.in[d];
        in_off = in_off * p.in[d] + pos;
      }
      if (!inside) continue;
      const X* xs = x + (nb * p.channels + g * cg) * p.in_size + in_off;
      const W* ws = w + m * cg * p.k_size + kk;
      for (int64_t ci = 0; ci < cg; ++ci)
        acc += (static_cast<int32_t>(xs[ci * p.in_size]) - zx) * (static_cast<int32_t>(ws[ci * p.k_size]) - zw);
    }
    if constexpr (std::is_same_v<Y, int32_t>) {
      y[i] = acc;
    } else {
      const float mult = rq.x_scale[0] * rq.w_scale[rq.per_channel_w_scale ? m : 0] / rq.y_scale[0];
      const int32_t yz = static_cast<int32_t>(static_cast<const Y*>(rq.y_zero)[0]);
      y[i] = static_cast<Y>(requantize_value(acc + (rq.bias ? rq.bias[m] : 0), mult, yz, rq.lo, rq.hi));
    }
  }
}

Result<IntConvArgs> int_conv_args(std::string_view op, const ConvolutionAttrs& a, const Dims& x, const Dims& w,
                                  const Dims& y) {
  auto win = convolution_window(a, x, w);
  if (!win) return Status(win.status()).with_prefix(std::string(op) + ": ");
  IntConvArgs p;
  p.rank = win->rank();
  if (p.rank < 1 || p.rank > 3) return unsupported(op, " on CUDA takes 1-D to 3-D convolutions");
  for (int d = 0; d < p.rank; ++d) {
    p.in[d] = x[2 + d];
    p.out[d] = win->output[d];
    p.kernel[d] = win->kernel[d];
    p.strides[d] = win->strides[d];
    p.pads[d] = win->pads_begin[d];
    p.dilations[d] = win->dilations[d];
    p.in_size *= p.in[d];
    p.out_size *= p.out[d];
    p.k_size *= p.kernel[d];
  }
  p.channels = x[1];
  p.maps = w[0];
  p.group = a.group;
  p.count = y.numel();
  if (p.group < 1 || p.channels % p.group != 0 || p.maps % p.group != 0)
    return invalid_argument(op, ": group ", p.group, " does not divide x's ", p.channels, " channels and w's ", p.maps,
                            " maps");
  if (y.rank() != x.rank() || y[0] != x[0] || y[1] != p.maps || p.count != x[0] * p.maps * p.out_size)
    return invalid_argument(op, ": output ", y.to_string(), " does not fit x ", x.to_string(), " and w ",
                            w.to_string());
  return p;
}

template <class Y, class F>
Status dispatch_int_conv(const Tensor& x, const Tensor& w, F&& launch) {
  const bool x8 = x.dtype() == DataType::kInt8, w8 = w.dtype() == DataType::kInt8;
  if (x8 && w8)
    launch(cuda::Type<int8_t>{}, cuda::Type<int8_t>{});
  else if (x8)
    launch(cuda::Type<int8_t>{}, cuda::Type<uint8_t>{});
  else if (w8)
    launch(cuda::Type<uint8_t>{}, cuda::Type<int8_t>{});
  else
    launch(cuda::Type<uint8_t>{}, cuda::Type<uint8_t>{});
  return cuda::check(cudaGetLastError(), "integer convolution kernel launch");
}

// The w zero point or scale: one value, or one per output map.
Result<bool> per_map(std::string_view op, const char* what, const Tensor* t, int64_t maps) {
  if (!t || t->numel() == 1) return false;
  if (t->numel() != maps)
    return invalid_argument(op, " input ", what, " of shape ", t->dims().to_string(),
                            " must hold one value or one per ", "output channel (", maps, ")");
  return true;
}

Status one_value(std::string_view op, const char* what, const Tensor* t) {
  if (t && t->numel() != 1)
    return invalid_argument(op, " input ", what, " of shape ", t->dims().to_string(), " must hold one value");
  return Status::ok();
}

template <class Y>
Status launch_int_conv(KernelContext& ctx, const IntConvArgs& p, int x_i, int w_i, int zx_i, int zw_i,
                       const ConvRequant& rq) {
  const Tensor& x = ctx.src[x_i];
  const Tensor& w = ctx.src[w_i];
  const Tensor* zx = optional_input(ctx, zx_i);
  const Tensor* zw = optional_input(ctx, zw_i);
  const cudaStream_t stream = cuda::native(ctx.stream);
  return dispatch_int_conv<Y>(x, w, [&](auto xt, auto wt) {
    using X = cuda::type_of<decltype(xt)>;
    using W = cuda::type_of<decltype(wt)>;
    int_conv_kernel<X, W, Y>
        <<<blocks_for(p.count), kThreads, 0, stream>>>(p, x.data<X>(), w.data<W>(), zx ? zx->data<X>() : nullptr,
                                                       zw ? zw->data<W>() : nullptr, rq, ctx.dst[0].data<Y>());
  });
}

Status run_conv_integer(KernelContext& ctx) {
  constexpr std::string_view kOp = "ConvolutionInteger";
  KILN_ASSIGN_OR_RETURN(IntConvArgs p, int_conv_args(kOp, ctx.attrs<ConvolutionAttrs>(), ctx.src[0].dims(),
                                                     ctx.src[1].dims(), ctx.dst[0].dims()));
  KILN_RETURN_IF_ERROR(one_value(kOp, "x_zero_point", optional_input(ctx, 2)));
  KILN_ASSIGN_OR_RETURN(p.per_channel_w_zero, per_map(kOp, "w_zero_point", optional_input(ctx, 3), p.maps));
  if (p.count == 0) return Status::ok();
  return launch_int_conv<int32_t>(ctx, p, 0, 1, 2, 3, ConvRequant{});
}

Status run_quantized_conv(KernelContext& ctx) {
  constexpr std::string_view kOp = "QuantizedConvolution";
  KILN_ASSIGN_OR_RETURN(IntConvArgs p, int_conv_args(kOp, ctx.attrs<ConvolutionAttrs>(), ctx.src[0].dims(),
                                                     ctx.src[3].dims(), ctx.dst[0].dims()));
  KILN_RETURN_IF_ERROR(one_value(kOp, "x_zero_point", optional_input(ctx, 2)));
  KILN_ASSIGN_OR_RETURN(p.per_channel_w_zero, per_map(kOp, "w_zero_point", optional_input(ctx, 5), p.maps));
  for (auto [i, what] : {std::pair{1, "x_scale"}, std::pair{6, "y_scale"}, std::pair{7, "y_zero_point"}})
    KILN_RETURN_IF_ERROR(one_value(kOp, what, &ctx.src[i]));
  Tensor& y = ctx.dst[0];
  ConvRequant rq;
  rq.x_scale = ctx.src[1].data<float>();
  rq.w_scale = ctx.src[4].data<float>();
  rq.y_scale = ctx.src[6].data<float>();
  rq.y_zero = ctx.src[7].raw();
  KILN_ASSIGN_OR_RETURN(rq.per_channel_w_scale, per_map(kOp, "w_scale", &ctx.src[4], p.maps));
  if (const Tensor* bias = optional_input(ctx, 8)) {
    if (bias->dtype() != DataType::kInt32 || bias->numel() != p.maps)
      return invalid_argument(kOp, " input bias must be int32 with one value per output channel (", p.maps, "), got ",
                              dtype_name(bias->dtype()), " ", bias->dims().to_string());
    rq.bias = bias->data<int32_t>();
  }
  rq.lo = lowest(y.dtype());
  rq.hi = highest(y.dtype());
  if (p.count == 0) return Status::ok();
  if (y.dtype() == DataType::kInt8) return launch_int_conv<int8_t>(ctx, p, 0, 3, 2, 5, rq);
  if (y.dtype() == DataType::kUInt8) return launch_int_conv<uint8_t>(ctx, p, 0, 3, 2, 5, rq);
  return unsupported(kOp, " to ", dtype_name(y.dtype()));
}

// ---------------------------------------------------------------------------------------------
// Registration

Status float32_scales(const OpCall& call, std::initializer_list<int> scales, const char* op) {
  for (int i : scales) KILN_RETURN_IF_ERROR(scale_is_float32(call, i, op));
  return Status::ok();
}

KernelImpl cuda_impl(const char* name, const char* op, SupportsFn supports, RunFn run) {
  return KernelImpl{.name = name,
                    .op = op,
                    .backend = Backend::kCuda,
                    .priority = 10,
                    .supports = std::move(supports),
                    .create = stateless(std::move(run))};
}

KILN_REGISTER_KERNEL(cuda_impl(
    "cuda.quantize", "Quantize",
    [](const OpCall& call) -> Status {
      if (call.inputs[0].dtype != DataType::kFloat32) return unsupported("the CUDA kernel quantizes float32 tensors");
      return float32_scales(call, {1}, "Quantize");
    },
    run_quantize));
KILN_REGISTER_KERNEL(cuda_impl(
    "cuda.dequantize", "Dequantize",
    [](const OpCall& call) -> Status {
      if (call.outputs[0].dtype != DataType::kFloat32)
        return unsupported("the CUDA kernel dequantizes to float32 (float32 scales)");
      return float32_scales(call, {1}, "Dequantize");
    },
    run_dequantize));
KILN_REGISTER_KERNEL(cuda_impl(
    "cuda.dynamic_quantize", "DynamicQuantize",
    [](const OpCall& call) -> Status {
      if (call.inputs[0].dtype != DataType::kFloat32) return unsupported("the CUDA kernel quantizes float32 tensors");
      return Status::ok();
    },
    run_dynamic_quantize));
KILN_REGISTER_KERNEL(cuda_impl(
    "cuda.matrix_multiply_integer", "MatrixMultiplyInteger", [](const OpCall&) { return Status::ok(); },
    run_matmul_integer));
KILN_REGISTER_KERNEL(cuda_impl(
    "cuda.quantized_matrix_multiply", "QuantizedMatrixMultiply",
    [](const OpCall& call) {
      return float32_scales(call, {1, 4, 6}, "QuantizedMatrixMultiply");
    },
    run_quantized_matmul));
KILN_REGISTER_KERNEL(cuda_impl(
    "cuda.convolution_integer", "ConvolutionInteger",
    [](const OpCall& call) -> Status {
      const int r = call.inputs[0].dims.rank();
      if (r < 3 || r > 5) return unsupported("the CUDA integer convolution takes 1-D to 3-D problems");
      return Status::ok();
    },
    run_conv_integer));
KILN_REGISTER_KERNEL(cuda_impl(
    "cuda.quantized_convolution", "QuantizedConvolution",
    [](const OpCall& call) -> Status {
      const int r = call.inputs[0].dims.rank();
      if (r < 3 || r > 5) return unsupported("the CUDA quantized convolution takes 1-D to 3-D problems");
      return float32_scales(call, {1, 4, 6}, "QuantizedConvolution");
    },
    run_quantized_conv));

}  // namespace
}  // namespace kiln
