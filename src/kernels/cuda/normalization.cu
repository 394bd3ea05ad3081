// CUDA LayerNormalization, InstanceNormalization and BatchNormalization (inference): one block per row with a
// two-pass mean / variance in float32 (the row cached in shared memory when it fits), float32/float16/bfloat16 I/O.
#include <algorithm>

#include "kernels/common/indexing.h"
#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/device_math.cuh"
#include "ops/normalization/normalization.h"

namespace kiln {
namespace {

using cuda::FloatKind;
using cuda::from_float;
using cuda::load_float;
using cuda::to_float;

constexpr int kMaxThreads = 512;
// Rows up to this many elements are kept in shared memory (44 KiB of float32) between the passes.
constexpr int64_t kMaxCachedRow = 11264;

enum class ParamMode : int { kNone, kDirect, kScalar, kIndexed, kPerChannel };

// Scale or bias of a row normalization: how element j of row `row` finds its value.
struct RowParam {
  const void* data = nullptr;
  FloatKind kind = FloatKind::kF32;
  ParamMode mode = ParamMode::kNone;
  int64_t channels = 1;  // kPerChannel: the row's channel is row % channels
  BroadcastIndexer at{Dims{}, Dims{}};

  __device__ float get(int64_t row, int64_t j, float absent) const {
    switch (mode) {
      case ParamMode::kDirect: return load_float(data, kind, j);
      case ParamMode::kScalar: return load_float(data, kind, 0);
      case ParamMode::kIndexed: return load_float(data, kind, at(j));
      case ParamMode::kPerChannel: return load_float(data, kind, row % channels);
      default: return absent;
    }
  }
};

template <class T, bool kCached>
__global__ void __launch_bounds__(kMaxThreads)
    row_norm_kernel(const T* x, T* y, int64_t rows, int64_t n, float epsilon, RowParam scale, RowParam bias,
                    float* mean_out, float* inv_out) {
  extern __shared__ float cache[];  // n floats when kCached
  __shared__ float scratch[32];
  const float count = static_cast<float>(n);
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* xr = x + row * n;
    T* yr = y + row * n;
    float sum = 0.f;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
      const float v = to_float(xr[j]);
      if constexpr (kCached) cache[j] = v;
      sum += v;
    }
    sum = cuda::block_sum(sum, scratch);
    const float mean = n > 0 ? sum / count : 0.f;
    float sq = 0.f;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
      const float d = (kCached ? cache[j] : to_float(xr[j])) - mean;
      sq += d * d;
    }
    sq = cuda::block_sum(sq, scratch);
    const float inv = 1.f / sqrtf((n > 0 ? sq / count : 0.f) + epsilon);
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
      const float v = ((kCached ? cache[j] : to_float(xr[j])) - mean) * inv;
      yr[j] = from_float<T>(v * scale.get(row, j, 1.f) + bias.get(row, j, 0.f));
    }
    if (threadIdx.x == 0 && mean_out) {
      mean_out[row] = mean;
      inv_out[row] = inv;
    }
  }
}

unsigned threads_for_row(int64_t n) {
  if (n >= 2048) return kMaxThreads;
  if (n >= 512) return 256;
  if (n >= 128) return 128;
  return 32;
}

template <class T>
Status launch_rows(KernelContext& ctx, int64_t rows, int64_t n, float epsilon, const RowParam& scale,
                   const RowParam& bias, float* mean_out, float* inv_out) {
  if (rows == 0) return Status::ok();
  const unsigned threads = threads_for_row(n);
  const auto blocks = static_cast<unsigned>(std::min<int64_t>(rows, int64_t{1} << 20));
  const T* x = ctx.src[0].data<T>();
  T* y = ctx.dst[0].data<T>();
  cudaStream_t stream = cuda::native(ctx.stream);
  if (n <= kMaxCachedRow) {
    const size_t smem = static_cast<size_t>(n) * sizeof(float);
    row_norm_kernel<T, true><<<blocks, threads, smem, stream>>>(x, y, rows, n, epsilon, scale, bias, mean_out, inv_out);
  } else {
    row_norm_kernel<T, false><<<blocks, threads, 0, stream>>>(x, y, rows, n, epsilon, scale, bias, mean_out, inv_out);
  }
  return cuda::check(cudaGetLastError(), "normalization kernel launch");
}

template <class... Args>
Status dispatch_rows(KernelContext& ctx, Args&&... args) {
  switch (ctx.src[0].dtype()) {
    case DataType::kFloat32: return launch_rows<float>(ctx, args...);
    case DataType::kFloat16: return launch_rows<__half>(ctx, args...);
    case DataType::kBFloat16: return launch_rows<__nv_bfloat16>(ctx, args...);
    default: return unsupported("normalization of ", dtype_name(ctx.src[0].dtype()));
  }
}

// The scale or bias input `i` broadcast to the normalized dims `norm` of `n` elements (absent: kNone).
RowParam layer_norm_param(const KernelContext& ctx, int i, const Dims& norm, int64_t n) {
  RowParam p;
  if (static_cast<int>(ctx.src.size()) <= i || !ctx.src[i].defined()) return p;
  const Tensor& t = ctx.src[i];
  p.data = t.raw();
  p.kind = *cuda::float_kind(t.dtype());
  const int64_t count = t.numel();
  if (count == n) {
    p.mode = ParamMode::kDirect;
  } else if (count == 1) {
    p.mode = ParamMode::kScalar;
  } else {
    p.mode = ParamMode::kIndexed;
    p.at = BroadcastIndexer(t.dims(), norm);
  }
  return p;
}

Status run_layer_norm(KernelContext& ctx) {
  const auto& a = ctx.attrs<LayerNormalizationAttrs>();
  const Dims& dims = ctx.src[0].dims();
  KILN_ASSIGN_OR_RETURN(int axis, normalize_axis(a.axis, dims.rank()));
  int64_t rows = 1, n = 1;
  Dims norm;
  for (int j = 0; j < dims.rank(); ++j) {
    if (j < axis) {
      rows *= dims[j];
    } else {
      n *= dims[j];
      norm.push_back(dims[j]);
    }
  }
  const RowParam scale = layer_norm_param(ctx, 1, norm, n), bias = layer_norm_param(ctx, 2, norm, n);
  float* mean = a.return_stats ? ctx.dst[1].data<float>() : nullptr;
  float* inv = a.return_stats ? ctx.dst[2].data<float>() : nullptr;
  if (n == 0 && !mean) return Status::ok();
  return dispatch_rows(ctx, rows, n, a.epsilon, scale, bias, mean, inv);
}

RowParam per_channel(const Tensor& t, int64_t channels) {
  RowParam p;
  p.data = t.raw();
  p.kind = *cuda::float_kind(t.dtype());
  p.mode = ParamMode::kPerChannel;
  p.channels = channels;
  return p;
}

Status run_instance_norm(KernelContext& ctx) {
  const auto& a = ctx.attrs<InstanceNormalizationAttrs>();
  const AxisSplit s(ctx.src[0].dims(), 1);
  if (s.inner == 0) return Status::ok();
  return dispatch_rows(ctx, s.outer * s.size, s.inner, a.epsilon, per_channel(ctx.src[1], s.size),
                       per_channel(ctx.src[2], s.size), nullptr, nullptr);
}

// ---- BatchNormalization ----

struct ChannelParams {
  const void* p[4];  // scale, bias, mean, var
  FloatKind kind[4];
};

template <class T>
__global__ void batch_norm_kernel(const T* x, T* y, int64_t count, int64_t channels, int64_t inner, float epsilon,
                                  ChannelParams cp) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count; i += int64_t{blockDim.x} * gridDim.x) {
    const int64_t c = (i / inner) % channels;
    const float scale = load_float(cp.p[0], cp.kind[0], c), bias = load_float(cp.p[1], cp.kind[1], c);
    const float mean = load_float(cp.p[2], cp.kind[2], c), var = load_float(cp.p[3], cp.kind[3], c);
    const float inv = 1.f / sqrtf(var + epsilon);
    y[i] = from_float<T>((to_float(x[i]) - mean) * inv * scale + bias);
  }
}

template <class T>
Status launch_batch_norm(KernelContext& ctx) {
  const auto& a = ctx.attrs<BatchNormalizationAttrs>();
  const AxisSplit s(ctx.src[0].dims(), 1);
  const int64_t count = ctx.src[0].numel();
  if (count == 0) return Status::ok();
  ChannelParams cp{};
  for (int i = 0; i < 4; ++i) {
    cp.p[i] = ctx.src[i + 1].raw();
    cp.kind[i] = *cuda::float_kind(ctx.src[i + 1].dtype());
  }
  batch_norm_kernel<T><<<cuda::grid_for(count), 256, 0, cuda::native(ctx.stream)>>>(
      ctx.src[0].data<T>(), ctx.dst[0].data<T>(), count, s.size, s.inner, a.epsilon, cp);
  return cuda::check(cudaGetLastError(), "batch normalization kernel launch");
}

Status run_batch_norm(KernelContext& ctx) {
  switch (ctx.src[0].dtype()) {
    case DataType::kFloat32: return launch_batch_norm<float>(ctx);
    case DataType::kFloat16: return launch_batch_norm<__half>(ctx);
    case DataType::kBFloat16: return launch_batch_norm<__nv_bfloat16>(ctx);
    default: return unsupported("BatchNormalization of ", dtype_name(ctx.src[0].dtype()));
  }
}

Status floats(const OpCall& call) {
  return require_dtypes(call, {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16});
}

KILN_REGISTER_KERNEL(KernelImpl{
    .name = "cuda.layer_normalization",
    .op = "LayerNormalization",
    .backend = Backend::kCuda,
    .priority = 10,
    .supports = floats,
    .create = stateless(run_layer_norm),
});

KILN_REGISTER_KERNEL(KernelImpl{
    .name = "cuda.instance_normalization",
    .op = "InstanceNormalization",
    .backend = Backend::kCuda,
    .priority = 10,
    .supports = floats,
    .create = stateless(run_instance_norm),
});

KILN_REGISTER_KERNEL(KernelImpl{
    .name = "cuda.batch_normalization",
    .op = "BatchNormalization",
    .backend = Backend::kCuda,
    .priority = 10,
    .supports = floats,
    .create = stateless(run_batch_norm),
});

}  // namespace
}  // namespace kiln
