// CUDA pooling for every window cuDNN's pooling does not take: 1-D and 4-D windows, dilation, asymmetric pads,
// ceil-mode overhang, Lp pooling, max pooling's indices (ONNX MaxPool's second output) and 8-bit integers; NCHW, or
// NHWC for a 2-D channels_last layer. One thread per output visits its window in the reference's order
// (kernels/ref/pooling.cpp), so max keeps the same first maximum (NaN compares as there) and average divides by the
// same count. Tactic timing puts it against cuDNN where both take a problem.
#include <cstdint>
#include <type_traits>

#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/pooling_dims.cuh"
#include "ops/pooling/pooling.h"

namespace kiln {
namespace {

constexpr int kMaxSpatial = PoolingGeometry::kMaxSpatial;

// The problem as the kernel reads it. Input element `at` (row-major over the spatial dims) of plane (n, c) lies at
// n * C * in_plane + c * in_plane + at (NCHW) or (n * in_plane + at) * C + c (NHWC); outputs likewise.
struct Window : cuda::PoolingDims {
  int64_t channels = 1;
  bool channels_last = false;
  PoolingMode mode = PoolingMode::kMax;
  bool count_include_pad = false;
  float p = 2.f;
};

template <class T>
__device__ inline float load(T v) {
  if constexpr (std::is_same_v<T, int8_t> || std::is_same_v<T, uint8_t>)
    return static_cast<float>(v);
  else
    return cuda::to_float(v);
}

template <class T>
__device__ inline T store(float v, bool empty) {
  if constexpr (std::is_same_v<T, int8_t> || std::is_same_v<T, uint8_t>)
    return empty ? T{std::is_same_v<T, int8_t> ? -128 : 0} : static_cast<T>(v);  // the type's lowest
  else
    return cuda::from_float<T>(v);
}

template <class T>
__global__ void pooling_window_kernel(Window w, const T* x, T* y, int64_t* indices, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{blockDim.x} * gridDim.x) {
    // Output i: plane nc and in-plane position at (NCHW), or batch b, position at and channel c (NHWC).
    int64_t at, in_base, step;
    if (w.channels_last) {
      const int64_t c = i % w.channels, bo = i / w.channels;
      const int64_t b = bo / w.out_plane;
      at = bo % w.out_plane;
      in_base = b * w.in_plane * w.channels + c;
      step = w.channels;
    } else {
      at = i % w.out_plane;
      in_base = (i / w.out_plane) * w.in_plane;
      step = 1;
    }
    int64_t o[kMaxSpatial], k[kMaxSpatial];
    for (int64_t rest = at, d = w.r - 1; d >= 0; --d) {
      o[d] = rest % w.out[d];
      rest /= w.out[d];
      k[d] = 0;
    }
    float best = -INFINITY, sum = 0.f;
    int64_t best_at = -1, valid = 0, padded = 0;
    for (;;) {
      bool inside = true, in_padded = true;
      int64_t tap = 0;
      for (int d = 0; d < w.r; ++d) {
        const int64_t pos = o[d] * w.stride[d] - w.pad_begin[d] + k[d] * w.dilation[d];
        inside = inside && pos >= 0 && pos < w.in[d];
        in_padded = in_padded && pos >= -w.pad_begin[d] && pos < w.in[d] + w.pad_end[d];
        tap = tap * w.in[d] + pos;
      }
      padded += in_padded;
      if (inside) {
        ++valid;
        const float v = load(x[in_base + tap * step]);
        if (w.mode == PoolingMode::kMax) {
          if (best_at < 0 || v > best) {
            best = v;
            best_at = tap;
          }
        } else if (w.mode == PoolingMode::kAverage) {
          sum += v;
        } else {
          sum += powf(fabsf(v), w.p);
        }
      }
      int d = w.r - 1;  // the next tap, row-major
      for (; d >= 0; --d) {
        if (++k[d] < w.kernel[d]) break;
        k[d] = 0;
      }
      if (d < 0) break;
    }
    float out = best;
    if (w.mode == PoolingMode::kAverage) {
      const int64_t divisor = w.count_include_pad ? padded : valid;
      out = divisor ? sum / static_cast<float>(divisor) : 0.f;
    } else if (w.mode == PoolingMode::kLp) {
      out = powf(sum, 1.f / w.p);
    }
    y[i] = store<T>(out, best_at < 0);
    if (indices) indices[i] = best_at < 0 ? -1 : in_base + best_at;  // NCHW only (checked at creation)
  }
}

Status check_window(const PoolingAttrs& a, const PoolingGeometry& g) {
  KILN_RETURN_IF_ERROR(cuda::check_pooling_dims(g, "cuda.pooling"));
  if (a.channels_last && (g.spatial != 2 || a.return_indices))
    return unsupported("cuda.pooling takes channels_last 2-D windows without indices");
  if (a.return_indices && a.mode != PoolingMode::kMax) return unsupported("only max pooling returns indices");
  return Status::ok();
}

template <class T>
Status launch(KernelContext& ctx) {
  const auto& a = ctx.attrs<PoolingAttrs>();
  const Tensor& x = ctx.src[0];
  Tensor& y = ctx.dst[0];
  const int64_t n = y.numel();
  if (n == 0) return Status::ok();
  KILN_ASSIGN_OR_RETURN(PoolingGeometry g, pooling_geometry(a, x.dims()));
  KILN_RETURN_IF_ERROR(check_window(a, g));
  Window w;
  static_cast<cuda::PoolingDims&>(w) = cuda::pooling_dims(g);
  w.channels = g.channels;
  w.channels_last = a.channels_last;
  w.mode = a.mode;
  w.count_include_pad = a.count_include_pad;
  w.p = static_cast<float>(a.p);
  if (n != g.batch * g.channels * w.out_plane)
    return internal_error("cuda.pooling: y ", y.dims().to_string(), " does not match the window's output");
  int64_t* indices = a.return_indices ? ctx.dst[1].data<int64_t>() : nullptr;
  const cudaStream_t stream = cuda::native(ctx.stream);
  pooling_window_kernel<T><<<cuda::grid_for(n), 256, 0, stream>>>(w, x.data<T>(), y.data<T>(), indices, n);
  return cuda::check(cudaGetLastError(), "pooling kernel launch");
}

Status run_pooling(KernelContext& ctx) {
  switch (ctx.src[0].dtype()) {
    case DataType::kFloat32: return launch<float>(ctx);
    case DataType::kFloat16: return launch<__half>(ctx);
    case DataType::kBFloat16: return launch<__nv_bfloat16>(ctx);
    case DataType::kInt8: return launch<int8_t>(ctx);
    case DataType::kUInt8: return launch<uint8_t>(ctx);
    default: return unsupported("cuda.pooling has no ", dtype_name(ctx.src[0].dtype()), " path");
  }
}

KILN_REGISTER_KERNEL(KernelImpl{
    .name = "cuda.pooling",
    .op = "Pooling",
    .backend = Backend::kCuda,
    .priority = 5,
    .supports = [](const OpCall& call) -> Status {
      const auto& a = call.attrs_as<PoolingAttrs>();
      const DataType d = call.inputs[0].dtype;
      if (d == DataType::kInt8 || d == DataType::kUInt8) {
        if (a.mode != PoolingMode::kMax) return unsupported("cuda.pooling takes 8-bit integers for max pooling only");
      } else if (d != DataType::kFloat32 && d != DataType::kFloat16 && d != DataType::kBFloat16) {
        return unsupported("cuda.pooling takes float32, float16, bfloat16 or 8-bit integers, not ", dtype_name(d));
      }
      if (call.outputs[0].dtype != d) return unsupported("cuda.pooling writes y in x's type");
      if (a.return_indices && (call.outputs.size() < 2 || call.outputs[1].dtype != DataType::kInt64))
        return unsupported("cuda.pooling writes indices as int64");
      if (!call.inputs[0].dims.is_static()) return Status::ok();
      KILN_ASSIGN_OR_RETURN(PoolingGeometry g, pooling_geometry(a, call.inputs[0].dims));
      return check_window(a, g);
    },
    .create = stateless(run_pooling),
});

}  // namespace
}  // namespace kiln
