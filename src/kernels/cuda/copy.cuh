#pragma once
// The CUDA data-movement engine: a strided copy of elements of 1, 2, 4 or 8 bytes, as one cudaMemcpyAsync when
// contiguous, a tiled transpose when source and destination are contiguous along different dims, otherwise one
// grid-stride kernel moving the widest word (up to 16 bytes) the innermost dim allows.
#include <cuda_runtime.h>

#include <vector>

#include "kernels/cuda/indexing.cuh"
#include "kernels/registry.h"

namespace kiln::cuda {

/// Runs `plan` (strides in elements; operand 0 the source, 1 the destination) on buffers of `esize`-byte elements.
Status strided_copy(CopyPlan plan, void* dst, const void* src, size_t esize, cudaStream_t stream);

/// Fills `n` elements of `esize` bytes at `dst` with the value whose bytes are `value` (little-endian).
Status fill(void* dst, int64_t n, size_t esize, uint64_t value, cudaStream_t stream);

/// The values of int32/int64 input `i` on the host (empty when absent): the engine's constant when it has one,
/// else a copy from the device that waits for the stream (for small shape-like inputs only).
Result<std::vector<int64_t>> index_values(KernelContext& ctx, int i);

}  // namespace kiln::cuda
