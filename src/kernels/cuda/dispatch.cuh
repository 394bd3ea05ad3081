#pragma once
// Runs a kernel body for a tensor's float element type, or says which types the kernel takes.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/cuda/types.cuh"
#include "kernels/registry.h"

namespace kiln::cuda {

/// f(Type<float>{}), f(Type<__half>{}) or f(Type<__nv_bfloat16>{}) for float32, float16 or bfloat16; for other
/// types an unsupported status naming `op` and the type.
template <class F>
Status dispatch_float_status(DataType dt, const char* op, F&& f) {
  switch (dt) {
    case DataType::kFloat32: return f(Type<float>{});
    case DataType::kFloat16: return f(Type<__half>{});
    case DataType::kBFloat16: return f(Type<__nv_bfloat16>{});
    default: return unsupported(op, " on ", dtype_name(dt));
  }
}

}  // namespace kiln::cuda
