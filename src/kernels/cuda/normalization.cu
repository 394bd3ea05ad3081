// CUDA LayerNormalization, InstanceNormalization and BatchNormalization (inference): one block per row with a
// two-pass mean / variance in float32 (the row cached in shared memory when it fits), float32/float16/bfloat16 I/O;
// rows of up to 8 16-byte vectors per lane take a warp per row with the row in registers.
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

// ---- rows of up to 8 16-byte vectors per lane: a warp per row, the row in registers ----
// For LayerNormalization over rows of up to 1024 (float32) or 2048 (16-bit) elements whose length is a multiple of a
// 16-byte vector, with 16-byte aligned rows, and scale / bias absent or of one value per element. Each lane holds
// kVecs vectors of the row (vector v at element (32 v + lane) * E): one read, one write, no shared memory.

constexpr int kWarpRowWarps = 4;  // rows per block
constexpr int kMaxWarpRowVecs = 8;

// E consecutive values of a per-element parameter from element `col` (16-byte loads when it is float32).
template <int E>
__device__ __forceinline__ void load_param(const RowParam& p, int64_t col, float* out, float absent) {
  if (p.mode == ParamMode::kNone) {
#pragma unroll
    for (int e = 0; e < E; ++e) out[e] = absent;
  } else if (p.kind == FloatKind::kF32) {
    const auto* f = static_cast<const float4*>(p.data) + col / 4;
#pragma unroll
    for (int e = 0; e < E; e += 4) {
      const float4 v = f[e / 4];
      out[e] = v.x;
      out[e + 1] = v.y;
      out[e + 2] = v.z;
      out[e + 3] = v.w;
    }
  } else {
#pragma unroll
    for (int e = 0; e < E; ++e) out[e] = load_float(p.data, p.kind, col + e);
  }
}

template <class T, int kVecs>
__global__ void __launch_bounds__(kWarpRowWarps * 32)
    warp_row_norm_kernel(const T* x, T* y, int64_t rows, int n, float epsilon, RowParam scale, RowParam bias,
                         float* mean_out, float* inv_out) {
  constexpr int E = 16 / sizeof(T);  // elements per vector
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpRowWarps + (threadIdx.x >> 5);
  if (row >= rows) return;
  const auto* xr = reinterpret_cast<const uint4*>(x + row * n);
  auto* yr = reinterpret_cast<uint4*>(y + row * n);
  const int vecs = n / E;
  float v[kVecs][E];
  float sum = 0.f;
#pragma unroll
  for (int i = 0; i < kVecs; ++i) {
    const int at = 32 * i + lane;
    if (at >= vecs) continue;
    const uint4 raw = xr[at];
    const T* el = reinterpret_cast<const T*>(&raw);
#pragma unroll
    for (int e = 0; e < E; ++e) {
      v[i][e] = to_float(el[e]);
      sum += v[i][e];
    }
  }
  const float count = static_cast<float>(n);
  const float mean = cuda::warp_sum(sum) / count;
  float sq = 0.f;
#pragma unroll
  for (int i = 0; i < kVecs; ++i) {
    if (32 * i + lane >= vecs) continue;
#pragma unroll
    for (int e = 0; e < E; ++e) {
      const float d = v[i][e] - mean;
      sq += d * d;
    }
  }
  const float inv = 1.f / sqrtf(cuda::warp_sum(sq) / count + epsilon);
#pragma unroll
  for (int i = 0; i < kVecs; ++i) {
    const int at = 32 * i + lane;
    if (at >= vecs) continue;
    float sc[E], bi[E];
    load_param<E>(scale, static_cast<int64_t>(at) * E, sc, 1.f);
    load_param<E>(bias, static_cast<int64_t>(at) * E, bi, 0.f);
    uint4 out;
    T* el = reinterpret_cast<T*>(&out);
#pragma unroll
    for (int e = 0; e < E; ++e) el[e] = from_float<T>((v[i][e] - mean) * inv * sc[e] + bi[e]);
    yr[at] = out;
  }
  if (lane == 0 && mean_out) {
    mean_out[row] = mean;
    inv_out[row] = inv;
  }
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// Whether a parameter suits the warp-per-row kernel: absent, or one value per element at a 16-byte aligned address.
bool warp_row_param(const RowParam& p) {
  return p.mode == ParamMode::kNone || (p.mode == ParamMode::kDirect && aligned16(p.data));
}

// Vectors per lane for rows of `n` elements (E per vector): 0 when the warp-per-row kernel does not take them.
template <class T>
int warp_row_vecs(int64_t n, const void* x, const void* y, const RowParam& scale, const RowParam& bias) {
  constexpr int64_t E = 16 / sizeof(T);
  if (n <= 0 || n % E || n > 32 * E * kMaxWarpRowVecs || !aligned16(x) || !aligned16(y) || !warp_row_param(scale) ||
      !warp_row_param(bias))
    return 0;
  const auto need = static_cast<int>((n / E + 31) / 32);
  for (int v : {1, 2, 3, 4, 6, 8})
    if (v >= need) return v;
  return 0;
}

template <class T, int kVecs>
void launch_warp_rows(const T* x, T* y, int64_t rows, int64_t n, float epsilon, const RowParam& scale,
                      const RowParam& bias, float* mean_out, float* inv_out, cudaStream_t stream) {
  const auto blocks = static_cast<unsigned>((rows + kWarpRowWarps - 1) / kWarpRowWarps);
  warp_row_norm_kernel<T, kVecs><<<blocks, kWarpRowWarps * 32, 0, stream>>>(x, y, rows, static_cast<int>(n), epsilon,
                                                                            scale, bias, mean_out, inv_out);
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
  const int64_t warp_blocks = (rows + kWarpRowWarps - 1) / kWarpRowWarps;
  if (warp_blocks < (int64_t{1} << 31)) {
    const int vecs = warp_row_vecs<T>(n, x, y, scale, bias);
    switch (vecs) {
      case 1: launch_warp_rows<T, 1>(x, y, rows, n, epsilon, scale, bias, mean_out, inv_out, stream); break;
      case 2: launch_warp_rows<T, 2>(x, y, rows, n, epsilon, scale, bias, mean_out, inv_out, stream); break;
      case 3: launch_warp_rows<T, 3>(x, y, rows, n, epsilon, scale, bias, mean_out, inv_out, stream); break;
      case 4: launch_warp_rows<T, 4>(x, y, rows, n, epsilon, scale, bias, mean_out, inv_out, stream); break;
      case 6: launch_warp_rows<T, 6>(x, y, rows, n, epsilon, scale, bias, mean_out, inv_out, stream); break;
      case 8: launch_warp_rows<T, 8>(x, y, rows, n, epsilon, scale, bias, mean_out, inv_out, stream); break;
      default: break;
    }
    if (vecs > 0) return cuda::check(cudaGetLastError(), "normalization (warp per row) kernel launch");
  }
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
