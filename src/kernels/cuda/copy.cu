// The CUDA strided copy and fill (see copy.cuh).
#include <algorithm>
#include <cstring>

#include "kernels/cuda/copy.cuh"
#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/types.cuh"

namespace kiln::cuda {
namespace {

constexpr int kTile = 32;
constexpr int kTileRows = 8;

template <class W>
__global__ void strided_copy_kernel(CopyPlan plan, const W* __restrict__ src, W* __restrict__ dst, int64_t n) {
  for (int64_t i = thread_index(); i < n; i += thread_count()) {
    int64_t off[2];
    plan.at(i, off);
    dst[off[1]] = src[off[0]];
  }
}

// dst[outer][a][b] (dst strides dst_a along a, 1 along b) from src (strides 1 along a, src_b along b), through
// 32x32 tiles in shared memory so that both the reads and the writes are coalesced.
template <class W>
__global__ void transpose_kernel(CopyPlan outer, int64_t outer_n, int64_t na, int64_t nb, int64_t src_b, int64_t dst_a,
                                 const W* __restrict__ src, W* __restrict__ dst) {
  __shared__ W tile[kTile][kTile + 1];
  const int64_t tiles_a = (na + kTile - 1) / kTile, tiles_b = (nb + kTile - 1) / kTile;
  const int64_t total = outer_n * tiles_a * tiles_b;
  for (int64_t t = blockIdx.x; t < total; t += gridDim.x) {
    const int64_t tb = t % tiles_b, rest = t / tiles_b;
    const int64_t ta = rest % tiles_a, o = rest / tiles_a;
    int64_t off[2];
    outer.at(o, off);
    const int64_t a0 = ta * kTile, b0 = tb * kTile;
    for (int y = threadIdx.y; y < kTile; y += kTileRows) {
      const int64_t a = a0 + threadIdx.x, b = b0 + y;
      if (a < na && b < nb) tile[y][threadIdx.x] = src[off[0] + a + b * src_b];
    }
    __syncthreads();
    for (int y = threadIdx.y; y < kTile; y += kTileRows) {
      const int64_t a = a0 + y, b = b0 + threadIdx.x;
      if (a < na && b < nb) dst[off[1] + a * dst_a + b] = tile[threadIdx.x][y];
    }
    __syncthreads();
  }
}

// The same copy when one side of the transpose is thin (na or nb <= kThin, e.g. NCHW <-> NHWC with 3 channels,
// where a 32x32 tile would hold 3 useful rows): a thread per element of the long side walks the short side, so
// the long side's reads or writes stay coalesced and every thread does useful work.
constexpr int64_t kThin = 8;

template <class W>
__global__ void thin_transpose_kernel(CopyPlan outer, int64_t outer_n, int64_t na, int64_t nb, int64_t src_b,
                                      int64_t dst_a, const W* __restrict__ src, W* __restrict__ dst) {
  const bool thin_b = nb <= na;  // walk b per thread (a is the long side), else walk a
  const int64_t along = thin_b ? na : nb, across = thin_b ? nb : na;
  const int64_t total = outer_n * along;
  for (int64_t i = thread_index(); i < total; i += thread_count()) {
    const int64_t l = i % along, o = i / along;
    int64_t off[2];
    outer.at(o, off);
    if (thin_b) {
      for (int64_t b = 0; b < across; ++b) dst[off[1] + l * dst_a + b] = src[off[0] + l + b * src_b];
    } else {
      for (int64_t a = 0; a < across; ++a) dst[off[1] + a * dst_a + l] = src[off[0] + a + l * src_b];
    }
  }
}

template <class W>
__global__ void fill_kernel(W* __restrict__ dst, int64_t n, W value) {
  for (int64_t i = thread_index(); i < n; i += thread_count()) dst[i] = value;
}

bool aligned(const void* p, size_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

// Moves elements in the widest unit (up to 16 bytes) that the contiguous innermost dim and the alignment allow;
// returns the unit in bytes and rescales the plan to it.
size_t widen(CopyPlan& plan, size_t esize, const void* dst, const void* src) {
  const int in = plan.rank - 1;
  if (in < 0 || plan.strides[0][in] != 1 || plan.strides[1][in] != 1) return esize;
  size_t unit = esize;
  while (unit < 16) {
    const auto g = static_cast<int64_t>(unit * 2 / esize);
    bool ok = plan.dims[in] % g == 0 && aligned(src, unit * 2) && aligned(dst, unit * 2);
    for (int d = 0; ok && d < in; ++d) ok = plan.strides[0][d] % g == 0 && plan.strides[1][d] % g == 0;
    if (!ok) break;
    unit *= 2;
  }
  const auto g = static_cast<int64_t>(unit / esize);
  plan.dims[in] /= g;
  for (int d = 0; d < in; ++d) {
    plan.strides[0][d] /= g;
    plan.strides[1][d] /= g;
  }
  return unit;
}

// The tiled transpose when the destination's innermost dim is not the source's contiguous one.
Status transpose(const CopyPlan& plan, int j, void* dst, const void* src, size_t esize, cudaStream_t stream) {
  const int in = plan.rank - 1;
  CopyPlan outer;
  for (int d = 0; d < in; ++d)
    if (d != j) outer.add(plan.dims[d], {plan.strides[0][d], plan.strides[1][d]});
  outer.simplify();
  const int64_t outer_n = outer.numel();
  const int64_t na = plan.dims[j], nb = plan.dims[in];
  if (std::min(na, nb) <= kThin) {
    const int64_t n = outer_n * std::max(na, nb);
    dispatch_word(esize, [&](auto w) {
      using W = type_of<decltype(w)>;
      thin_transpose_kernel<W><<<blocks_for(n), kThreads, 0, stream>>>(outer, outer_n, na, nb, plan.strides[0][in],
                                                                       plan.strides[1][j], static_cast<const W*>(src),
                                                                       static_cast<W*>(dst));
    });
    return check(cudaGetLastError(), "transpose kernel launch");
  }
  const int64_t tiles = outer_n * ((na + kTile - 1) / kTile) * ((nb + kTile - 1) / kTile);
  const auto blocks = static_cast<unsigned>(std::min<int64_t>(tiles, int64_t{1} << 20));
  const dim3 threads(kTile, kTileRows);
  dispatch_word(esize, [&](auto w) {
    using W = type_of<decltype(w)>;
    transpose_kernel<W><<<blocks, threads, 0, stream>>>(outer, outer_n, na, nb, plan.strides[0][in], plan.strides[1][j],
                                                        static_cast<const W*>(src), static_cast<W*>(dst));
  });
  return check(cudaGetLastError(), "transpose kernel launch");
}

}  // namespace

Status strided_copy(CopyPlan plan, void* dst, const void* src, size_t esize, cudaStream_t stream) {
  if (esize != 1 && esize != 2 && esize != 4 && esize != 8)
    return unsupported("strided copy of ", esize, "-byte elements");
  for (int d = 0; d < plan.rank; ++d)
    if (plan.dims[d] == 0) return Status::ok();
  plan.simplify();
  if (plan.rank == 0 || (plan.rank == 1 && plan.strides[0][0] == 1 && plan.strides[1][0] == 1)) {
    const int64_t n = plan.rank == 0 ? 1 : plan.dims[0];
    return check(cudaMemcpyAsync(dst, src, static_cast<size_t>(n) * esize, cudaMemcpyDeviceToDevice, stream),
                 "cudaMemcpyAsync (copy)");
  }
  const int in = plan.rank - 1;
  if (plan.strides[1][in] == 1 && plan.strides[0][in] != 1 && plan.strides[0][in] != 0) {
    int j = -1;
    for (int d = 0; d < in; ++d)
      if (plan.strides[0][d] == 1) j = d;
    if (j >= 0) return transpose(plan, j, dst, src, esize, stream);
  }
  const size_t unit = widen(plan, esize, dst, src);
  const int64_t n = plan.numel();
  dispatch_word(unit, [&](auto w) {
    using W = type_of<decltype(w)>;
    strided_copy_kernel<W>
        <<<blocks_for(n), kThreads, 0, stream>>>(plan, static_cast<const W*>(src), static_cast<W*>(dst), n);
  });
  return check(cudaGetLastError(), "strided copy kernel launch");
}

Status fill(void* dst, int64_t n, size_t esize, uint64_t value, cudaStream_t stream) {
  if (n <= 0) return Status::ok();
  if (esize != 1 && esize != 2 && esize != 4 && esize != 8) return unsupported("fill of ", esize, "-byte elements");
  const uint64_t mask = esize == 8 ? ~uint64_t{0} : (uint64_t{1} << (8 * esize)) - 1;
  value &= mask;
  const size_t bytes = static_cast<size_t>(n) * esize;
  if (value == 0 || esize == 1)
    return check(cudaMemsetAsync(dst, static_cast<int>(value & 0xff), bytes, stream), "cudaMemsetAsync");
  // The 16-byte pattern of the value repeated, for the aligned bulk.
  uint64_t pattern[2];
  for (size_t b = 0; b < 16; b += esize) std::memcpy(reinterpret_cast<char*>(pattern) + b, &value, esize);
  int64_t done = 0;
  if (aligned(dst, 16) && bytes >= 16) {
    uint4 word;
    std::memcpy(&word, pattern, 16);
    const auto words = static_cast<int64_t>(bytes / 16);
    fill_kernel<uint4><<<blocks_for(words), kThreads, 0, stream>>>(static_cast<uint4*>(dst), words, word);
    KILN_RETURN_IF_ERROR(check(cudaGetLastError(), "fill kernel launch"));
    done = words * 16 / static_cast<int64_t>(esize);
  }
  if (done == n) return Status::ok();
  void* rest = static_cast<char*>(dst) + done * static_cast<int64_t>(esize);
  dispatch_word(esize, [&](auto w) {
    using W = type_of<decltype(w)>;
    W v;
    std::memcpy(&v, &value, sizeof(W));
    fill_kernel<W><<<blocks_for(n - done), kThreads, 0, stream>>>(static_cast<W*>(rest), n - done, v);
  });
  return check(cudaGetLastError(), "fill kernel launch");
}

Result<std::vector<int64_t>> index_values(KernelContext& ctx, int i) {
  if (i >= static_cast<int>(ctx.src.size()) || !ctx.src[i].defined()) return std::vector<int64_t>{};
  if (const Tensor* c = ctx.call.constant(i)) return tensor_to_int64s(*c);
  const Tensor& t = ctx.src[i];
  if (t.device().is_cpu()) return tensor_to_int64s(t);
  KILN_ASSIGN_OR_RETURN(Tensor host, Tensor::empty(t.dtype(), t.dims()));
  cudaStream_t stream = native(ctx.stream);
  KILN_RETURN_IF_ERROR(
      check(cudaMemcpyAsync(host.raw(), t.raw(), t.nbytes(), cudaMemcpyDeviceToHost, stream), "cudaMemcpyAsync"));
  KILN_RETURN_IF_ERROR(check(cudaStreamSynchronize(stream), "cudaStreamSynchronize"));
  return tensor_to_int64s(host);
}

}  // namespace kiln::cuda
