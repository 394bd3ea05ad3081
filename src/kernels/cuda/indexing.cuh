#pragma once
// N-d index math of the CUDA kernels: grid-stride loops and the offsets of N operands for a flat row-major index
// (broadcasts, permutes, strided copies) over merged dims, with 64-bit offsets. Passed to kernels by value.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "kiln/dims.h"

namespace kiln::cuda {

inline constexpr unsigned kThreads = 256;

__device__ inline int64_t thread_index() { return blockIdx.x * int64_t{blockDim.x} + threadIdx.x; }
__device__ inline int64_t thread_count() { return int64_t{blockDim.x} * gridDim.x; }

/// Blocks of kThreads for a grid-stride loop over `n` items: one item per thread up to 2^14 blocks (many waves on
/// any GPU), then each thread loops.
inline unsigned blocks_for(int64_t n, unsigned threads = kThreads) {
  const int64_t blocks = (n + threads - 1) / threads;
  return static_cast<unsigned>(std::clamp<int64_t>(blocks, 1, int64_t{1} << 14));
}

/// Element offsets of N operands for the flat row-major index of an iteration space `dims`: operand k is at
/// sum(index[d] * strides[k][d]) (stride 0 where it broadcasts).
template <int N>
struct Offsets {
  int rank = 0;
  int64_t dims[kMaxRank] = {};
  int64_t strides[N][kMaxRank] = {};

  __device__ void at(int64_t flat, int64_t (&off)[N]) const {
    for (int k = 0; k < N; ++k) off[k] = 0;
    for (int d = rank - 1; d > 0; --d) {
      const int64_t q = flat / dims[d];
      const int64_t idx = flat - q * dims[d];
      flat = q;
      for (int k = 0; k < N; ++k) off[k] += idx * strides[k][d];
    }
    if (rank > 0)
      for (int k = 0; k < N; ++k) off[k] += flat * strides[k][0];
  }

  /// Appends an innermost dim (host). At most kMaxRank dims.
  void add(int64_t dim, const int64_t (&s)[N]) {
    dims[rank] = dim;
    for (int k = 0; k < N; ++k) strides[k][rank] = s[k];
    ++rank;
  }
  int64_t numel() const {
    int64_t n = 1;
    for (int d = 0; d < rank; ++d) n *= dims[d];
    return n;
  }
  /// Drops size-1 dims and merges neighbours that are contiguous for every operand (host).
  void simplify() {
    int r = 0;
    for (int d = 0; d < rank; ++d) {
      if (dims[d] == 1) continue;
      bool merge = r > 0;
      for (int k = 0; merge && k < N; ++k) merge = strides[k][r - 1] == strides[k][d] * dims[d];
      if (merge) {
        dims[r - 1] *= dims[d];
        for (int k = 0; k < N; ++k) strides[k][r - 1] = strides[k][d];
        continue;
      }
      dims[r] = dims[d];
      for (int k = 0; k < N; ++k) strides[k][r] = strides[k][d];
      ++r;
    }
    rank = r;
  }
};

/// Row-major strides of contiguous `dims` (host).
inline void row_major_strides(const Dims& dims, int64_t* strides) {
  int64_t acc = 1;
  for (int i = dims.rank() - 1; i >= 0; --i) {
    strides[i] = acc;
    acc *= std::max<int64_t>(dims[i], 1);
  }
}

/// The element count of `in` when it broadcasts to `out` by repeating whole (its dims less leading 1s are the
/// trailing dims of `out`: one element, the same shape, a bias row): element i of `out` reads in[i % period].
/// 0 when it broadcasts otherwise (host).
inline int64_t repeat_period(const Dims& in, const Dims& out) {
  int lead = 0;
  while (lead < in.rank() && in[lead] == 1) ++lead;
  const int r = in.rank() - lead;
  if (r > out.rank()) return 0;
  for (int i = 0; i < r; ++i)
    if (in[lead + i] != out[out.rank() - r + i]) return 0;
  return std::max<int64_t>(in.numel(), 1);
}

/// i % period, skipping the division where i is already below it (same-shape operands).
__device__ inline int64_t wrap_period(int64_t i, int64_t period) { return i < period ? i : i % period; }

/// Offsets of contiguous operands `in[k]` broadcasting (numpy rules) to the row-major output `out`, simplified.
template <int N>
Offsets<N> broadcast_offsets(const Dims& out, const Dims* const (&in)[N]) {
  Offsets<N> o;
  int64_t s[N][kMaxRank];
  for (int k = 0; k < N; ++k) {
    const Dims& d = *in[k];
    const int shift = out.rank() - d.rank();
    int64_t acc = 1;
    for (int i = out.rank() - 1; i >= 0; --i) {
      const int j = i - shift;
      const int64_t size = j >= 0 ? d[j] : 1;
      s[k][i] = size == 1 ? 0 : acc;
      acc *= std::max<int64_t>(size, 1);
    }
  }
  for (int i = 0; i < out.rank(); ++i) {
    int64_t col[N];
    for (int k = 0; k < N; ++k) col[k] = s[k][i];
    o.add(out[i], col);
  }
  o.simplify();
  return o;
}

/// A strided copy: element `flat` moves from src + off[0] to dst + off[1].
using CopyPlan = Offsets<2>;

}  // namespace kiln::cuda
