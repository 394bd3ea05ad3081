#pragma once
// Explicit zero padding for cuDNN convolutions whose pads differ at the two ends of an axis (cuDNN takes one pad per
// axis): the data moves between x [N, C, in...] and its padded form [N, C, in + begin + end...].
#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "kernels/registry.h"

namespace kiln::cuda {

/// With `to_padded`, writes x (`from`) into the interior of `to` (the padded form, whose pads the caller zeroed);
/// otherwise crops the padded form `from` into x (`to`). `x` gives x's dims (rank 3 to 5), `begin` and `end` the
/// pads of each spatial axis; elements of `elem_bytes` (2 or 4) bytes.
Status conv_pad_copy(bool to_padded, const void* from, void* to, size_t elem_bytes, const Dims& x,
                     const std::vector<int64_t>& begin, const std::vector<int64_t>& end, cudaStream_t stream);

}  // namespace kiln::cuda
