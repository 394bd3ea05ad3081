// Explicit zero padding of convolution inputs (see conv_pad.h): one thread per element of x.
#include "kernels/cuda/conv_pad.h"
#include "kernels/cuda/cuda_common.h"

namespace kiln::cuda {
namespace {

constexpr int kMaxDims = 5;

struct PadShape {
  int rank = 0;
  int64_t x[kMaxDims] = {};       // x's dims
  int64_t padded[kMaxDims] = {};  // the padded form's dims
  int64_t begin[kMaxDims] = {};   // pad before each dim (0 for N and C)
};

template <class W>
__global__ void pad_copy_kernel(bool to_padded, const W* from, W* to, PadShape s, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{blockDim.x} * gridDim.x) {
    int64_t rest = i, at = 0, stride = 1;
    for (int d = s.rank - 1; d >= 0; --d) {
      at += (rest % s.x[d] + s.begin[d]) * stride;
      rest /= s.x[d];
      stride *= s.padded[d];
    }
    if (to_padded)
      to[at] = from[i];
    else
      to[i] = from[at];
  }
}

}  // namespace

Status conv_pad_copy(bool to_padded, const void* from, void* to, size_t elem_bytes, const Dims& x,
                     const std::vector<int64_t>& begin, const std::vector<int64_t>& end, cudaStream_t stream) {
  PadShape s;
  s.rank = x.rank();
  if (s.rank < 3 || s.rank > kMaxDims || static_cast<int>(begin.size()) != s.rank - 2 ||
      static_cast<int>(end.size()) != s.rank - 2)
    return internal_error("conv_pad_copy: x ", x.to_string(), " with ", begin.size(), " begin and ", end.size(),
                          " end pads");
  for (int d = 0; d < s.rank; ++d) {
    s.x[d] = x[d];
    s.begin[d] = d < 2 ? 0 : begin[d - 2];
    s.padded[d] = d < 2 ? x[d] : x[d] + begin[d - 2] + end[d - 2];
  }
  const int64_t n = x.numel();
  if (n == 0) return Status::ok();
  if (elem_bytes == 2)
    pad_copy_kernel<uint16_t><<<grid_for(n), 256, 0, stream>>>(to_padded, static_cast<const uint16_t*>(from),
                                                               static_cast<uint16_t*>(to), s, n);
  else if (elem_bytes == 4)
    pad_copy_kernel<uint32_t><<<grid_for(n), 256, 0, stream>>>(to_padded, static_cast<const uint32_t*>(from),
                                                               static_cast<uint32_t*>(to), s, n);
  else
    return internal_error("conv_pad_copy: elements of ", elem_bytes, " bytes");
  return check(cudaGetLastError(), "convolution padding kernel launch");
}

}  // namespace kiln::cuda
