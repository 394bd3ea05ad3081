#pragma once
// Small integer inputs (axes, an axis) that a CUDA kernel needs on the host.
#include <cstdint>
#include <vector>

#include "core/cuda_runtime.h"
#include "kernels/registry.h"

namespace kiln::cuda {

/// The values of input `i` as int64: the engine's constant when there is one, the tensor itself when it lives on
/// the host, else a copy read back once the stream's earlier work is done.
inline Result<std::vector<int64_t>> host_int64s(KernelContext& ctx, int i) {
  if (const Tensor* c = ctx.call.constant(i)) return tensor_to_int64s(*c);
  const Tensor& t = ctx.src[i];
  if (t.device().is_cpu() || t.numel() == 0) return tensor_to_int64s(t);
  KILN_ASSIGN_OR_RETURN(Tensor host, Tensor::empty(t.dtype(), t.dims()));
  KILN_RETURN_IF_ERROR(ctx.stream.synchronize());
  KILN_RETURN_IF_ERROR(copy(t, host));
  return tensor_to_int64s(host);
}

}  // namespace kiln::cuda
