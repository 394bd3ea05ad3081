#include "kernels/cuda/conv_epilogue.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

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

template <class T>
__global__ void epilogue_kernel(T* y, int64_t count, int64_t channels, int64_t inner, const T* bias, const T* residual,
                                FusedActivation act) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count; i += int64_t{blockDim.x} * gridDim.x) {
    float v = load(y[i]);
    if (bias) v += load(bias[(i / inner) % channels]);
    if (residual) v += load(residual[i]);
    if (act.on) v = ref::activation(act.kind, act.alpha, act.beta, v);
    store(y + i, v);
  }
}

template <class T>
Status epilogue_typed(void* y, int64_t count, int64_t channels, int64_t inner, const void* bias, const void* residual,
                      const FusedActivation& act, cudaStream_t stream) {
  epilogue_kernel<T><<<grid_for(count), 256, 0, stream>>>(
      static_cast<T*>(y), count, channels, inner, static_cast<const T*>(bias), static_cast<const T*>(residual), act);
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
