#include "kernels/cuda/conv_epilogue.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <limits>

#include "kernels/cuda/cuda_common.h"
#include "kernels/ref/activation.h"

namespace kiln::cuda {
namespace {

__device__ inline float load(float x) { return x; }
__device__ inline float load(__half x) { return __half2float(x); }
__device__ inline float load(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ inline void store(float* p, float v) { *p = v; }
__device__ inline void store(__half* p, float v) { *p = __float2half_rn(v); }
__device__ inline void store(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }

// Index is uint32_t where the count fits (cheaper division), else int64_t; with inner == 1 (NHWC) the channel is
// i % channels.
template <class T, class Index>
__global__ void epilogue_kernel(T* y, Index count, Index channels, Index inner, const T* bias, const T* residual,
                                FusedActivation act) {
  const Index step = static_cast<Index>(blockDim.x) * gridDim.x;
  for (Index i = static_cast<Index>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += step) {
    float v = load(y[i]);
    if (bias) v += load(bias[(inner == 1 ? i : i / inner) % channels]);
    if (residual) v += load(residual[i]);
    if (act.on) v = ref::activation(act.kind, act.alpha, act.beta, v);
    store(y + i, v);
  }
}

template <class T>
Status epilogue_typed(void* y, int64_t count, int64_t channels, int64_t inner, const void* bias, const void* residual,
                      const FusedActivation& act, cudaStream_t stream) {
  T* dst = static_cast<T*>(y);
  const T* b = static_cast<const T*>(bias);
  const T* r = static_cast<const T*>(residual);
  // uint32_t only where i + step cannot wrap: count plus one grid's worth of threads stays below 2^32.
  const int64_t threads = int64_t{grid_for(count)} * 256;
  if (count + threads <= int64_t{std::numeric_limits<uint32_t>::max()})
    epilogue_kernel<T, uint32_t><<<grid_for(count), 256, 0, stream>>>(
        dst, static_cast<uint32_t>(count), static_cast<uint32_t>(channels), static_cast<uint32_t>(inner), b, r, act);
  else
    epilogue_kernel<T, int64_t><<<grid_for(count), 256, 0, stream>>>(dst, count, channels, inner, b, r, act);
  return check(cudaGetLastError(), "convolution epilogue kernel launch");
}

}  // namespace

Status conv_epilogue(DataType dtype, void* y, int64_t count, int64_t channels, int64_t inner, const void* bias,
                     const void* residual, const FusedActivation& act, cudaStream_t stream) {
  if (count <= 0 || (!bias && !residual && !act.on)) return Status::ok();
  if (bias && (channels <= 0 || inner <= 0))
    return internal_error("convolution epilogue: bias over ", channels, " channels of ", inner, " elements");
  switch (dtype) {
    case DataType::kFloat32: return epilogue_typed<float>(y, count, channels, inner, bias, residual, act, stream);
    case DataType::kFloat16: return epilogue_typed<__half>(y, count, channels, inner, bias, residual, act, stream);
    case DataType::kBFloat16:
      return epilogue_typed<__nv_bfloat16>(y, count, channels, inner, bias, residual, act, stream);
    default: return unsupported("the convolution epilogue has no ", dtype_name(dtype), " path");
  }
}

}  // namespace kiln::cuda
