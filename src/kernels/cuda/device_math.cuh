#pragma once
// Device helpers shared by kiln's own CUDA kernels: float conversions of the element types, loads of tensors
// whose float type is known only at run time, and warp/block reductions.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <optional>

#include "kiln/dtype.h"

namespace kiln::cuda {

__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }

template <class T>
__device__ __forceinline__ T from_float(float x);
template <>
__device__ __forceinline__ float from_float<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ __half from_float<__half>(float x) {
  return __float2half_rn(x);
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

// Two floats rounded to T and packed into 32 bits, the first in the low half (a tensor-core operand pair).
template <class T>
__device__ __forceinline__ uint32_t pack2(float a, float b);
template <>
__device__ __forceinline__ uint32_t pack2<__half>(float a, float b) {
  const __half2 h = __floats2half2_rn(a, b);
  return *reinterpret_cast<const uint32_t*>(&h);
}
template <>
__device__ __forceinline__ uint32_t pack2<__nv_bfloat16>(float a, float b) {
  const __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
  return *reinterpret_cast<const uint32_t*>(&h);
}

/// The float element types a kernel reads through `load_float` (parameters whose type may differ from x's).
enum class FloatKind : int { kF32, kF16, kBF16 };

inline std::optional<FloatKind> float_kind(DataType d) {
  switch (d) {
    case DataType::kFloat32: return FloatKind::kF32;
    case DataType::kFloat16: return FloatKind::kF16;
    case DataType::kBFloat16: return FloatKind::kBF16;
    default: return std::nullopt;
  }
}

__device__ __forceinline__ float load_float(const void* p, FloatKind kind, int64_t i) {
  switch (kind) {
    case FloatKind::kF16: return __half2float(static_cast<const __half*>(p)[i]);
    case FloatKind::kBF16: return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
    default: return static_cast<const float*>(p)[i];
  }
}

/// Element values as kernels compute on them: float for the float types, long long for the integers.
__device__ __forceinline__ float load_value(float x) { return x; }
__device__ __forceinline__ float load_value(__half x) { return __half2float(x); }
__device__ __forceinline__ float load_value(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ long long load_value(int8_t x) { return x; }
__device__ __forceinline__ long long load_value(uint8_t x) { return x; }
__device__ __forceinline__ long long load_value(int32_t x) { return x; }
__device__ __forceinline__ long long load_value(int64_t x) { return static_cast<long long>(x); }

template <class T>
__device__ __forceinline__ T store_value(float v) {
  return from_float<T>(v);
}
template <class T>
__device__ __forceinline__ T store_value(long long v) {
  return static_cast<T>(v);
}

__device__ __forceinline__ bool is_nan(float v) { return isnan(v); }
__device__ __forceinline__ bool is_nan(long long) { return false; }

constexpr unsigned kFullMask = 0xffffffffu;

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFullMask, v, o);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(kFullMask, v, o));
  return v;
}

/// Sum over the block (blockDim.x a multiple of 32, at most 1024); every thread gets the result. `scratch`
/// holds 32 floats of shared memory; the call ends with a barrier, so it may be reused at once.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  const int lane = static_cast<int>(threadIdx.x) & 31, warp = static_cast<int>(threadIdx.x) >> 5;
  v = warp_sum(v);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  if (warp == 0) {
    const int warps = static_cast<int>(blockDim.x) >> 5;
    float w = lane < warps ? scratch[lane] : 0.f;
    w = warp_sum(w);
    if (lane == 0) scratch[32 - 1] = w;
  }
  __syncthreads();
  const float total = scratch[32 - 1];
  __syncthreads();
  return total;
}

}  // namespace kiln::cuda
