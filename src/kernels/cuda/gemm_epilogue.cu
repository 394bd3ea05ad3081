// The GEMM epilogue steps cuBLASLt does not compute: the broadcast sum that prepares C (Gemm's c broadcast and
// scaled, plus the residual) and activations cuBLASLt has no epilogue for, in place on the GEMM's output.
#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/common/indexing.h"
#include "kernels/cuda/cublaslt_gemm.h"
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
__global__ void fill_kernel(T* y, int64_t count, const T* src1, BroadcastIndexer at1, float scale1, const T* src2,
                            BroadcastIndexer at2, float scale2) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count; i += int64_t{blockDim.x} * gridDim.x) {
    float v = 0.f;
    if (src1) v += scale1 * load(src1[at1(i)]);
    if (src2) v += scale2 * load(src2[at2(i)]);
    store(y + i, v);
  }
}

template <class T>
__global__ void activation_kernel(T* y, int64_t count, FusedActivation act) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count; i += int64_t{blockDim.x} * gridDim.x)
    store(y + i, ref::activation(act.kind, act.alpha, act.beta, load(y[i])));
}

// The same over 16-byte vectors (8 halves, 4 floats) of a 16-byte aligned y: the pass is bound by memory, and 2-byte
// loads reach a fraction of it (a BERT-base FFN's GELU, 25 M halves, took as long as a third of its GEMM).
template <class T>
__global__ void activation_vector_kernel(uint4* y, int64_t vectors, FusedActivation act) {
  constexpr int kPerVector = sizeof(uint4) / sizeof(T);
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < vectors; i += int64_t{blockDim.x} * gridDim.x) {
    uint4 raw = y[i];
    T* e = reinterpret_cast<T*>(&raw);
#pragma unroll
    for (int j = 0; j < kPerVector; ++j) store(e + j, ref::activation(act.kind, act.alpha, act.beta, load(e[j])));
    y[i] = raw;
  }
}

template <class T>
Status fill_typed(void* y, const Dims& out, const void* src1, const Dims& dims1, float scale1, const void* src2,
                  const Dims& dims2, float scale2, cudaStream_t stream) {
  const int64_t count = out.numel();
  if (count <= 0) return Status::ok();
  const BroadcastIndexer at1(src1 ? dims1 : out, out), at2(src2 ? dims2 : out, out);
  fill_kernel<T><<<grid_for(count), 256, 0, stream>>>(static_cast<T*>(y), count, static_cast<const T*>(src1), at1,
                                                      scale1, static_cast<const T*>(src2), at2, scale2);
  return check(cudaGetLastError(), "GEMM epilogue fill kernel launch");
}

template <class T>
Status activation_typed(void* y, int64_t count, const FusedActivation& act, cudaStream_t stream) {
  constexpr int64_t kPerVector = sizeof(uint4) / sizeof(T);
  int64_t vectors = 0;
  if (reinterpret_cast<uintptr_t>(y) % sizeof(uint4) == 0) {
    vectors = count / kPerVector;
    if (vectors > 0)
      activation_vector_kernel<T><<<grid_for(vectors), 256, 0, stream>>>(static_cast<uint4*>(y), vectors, act);
  }
  const int64_t rest = count - vectors * kPerVector;
  if (rest > 0)
    activation_kernel<T><<<grid_for(rest), 256, 0, stream>>>(static_cast<T*>(y) + vectors * kPerVector, rest, act);
  return check(cudaGetLastError(), "GEMM epilogue activation kernel launch");
}

}  // namespace

Status gemm_fill(DataType dtype, void* y, const Dims& out, const void* src1, const Dims& dims1, float scale1,
                 const void* src2, const Dims& dims2, float scale2, cudaStream_t stream) {
  switch (dtype) {
    case DataType::kFloat32: return fill_typed<float>(y, out, src1, dims1, scale1, src2, dims2, scale2, stream);
    case DataType::kFloat16: return fill_typed<__half>(y, out, src1, dims1, scale1, src2, dims2, scale2, stream);
    case DataType::kBFloat16:
      return fill_typed<__nv_bfloat16>(y, out, src1, dims1, scale1, src2, dims2, scale2, stream);
    default: return unsupported("the GEMM epilogue has no ", dtype_name(dtype), " path");
  }
}

Status gemm_activation(DataType dtype, void* y, int64_t count, const FusedActivation& act, cudaStream_t stream) {
  if (!act.on || count <= 0) return Status::ok();
  switch (dtype) {
    case DataType::kFloat32: return activation_typed<float>(y, count, act, stream);
    case DataType::kFloat16: return activation_typed<__half>(y, count, act, stream);
    case DataType::kBFloat16: return activation_typed<__nv_bfloat16>(y, count, act, stream);
    default: return unsupported("the GEMM epilogue has no ", dtype_name(dtype), " path");
  }
}

}  // namespace kiln::cuda
