#pragma once
// The convolution epilogue steps cuDNN does not compute for a problem: y = act(y + bias[channel] + residual) in one
// elementwise pass over the convolution's output, in float32, rounded once.
#include <cuda_runtime.h>

#include "kernels/registry.h"
#include "ops/activation/activation.h"

namespace kiln::cuda {

/// y[n, c, s] = act(y[n, c, s] + bias[c] + residual[n, c, s]) in place over a packed [N, C, S] output (`inner` = S,
/// the product of the spatial sizes; a channels-last [N, S, C] output passes inner = 1, the channel being i % C).
/// `bias` and `residual` are optional (null), `act` may be off; a no-op when there is nothing to add or apply.
/// `residual` must not be `y`'s memory.
Status conv_epilogue(DataType dtype, void* y, int64_t count, int64_t channels, int64_t inner, const void* bias,
                     const void* residual, const FusedActivation& act, cudaStream_t stream);

}  // namespace kiln::cuda
