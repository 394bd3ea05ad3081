// CUDA Gather and GatherElements on raw elements; Gather moves each gathered row in the widest word (up to 16
// bytes) its size and alignment allow. Negative indices count from the end; an index outside the axis (which the
// reference reports as an error) gives zeros here, since a kernel cannot fail: the builder never sees it.
#include "kernels/common/indexing.h"
#include "kernels/common/shuffle_common.h"
#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/indexing.cuh"
#include "kernels/cuda/types.cuh"
#include "ops/indexing/indexing.h"

namespace kiln {
namespace {

template <class I>
__device__ inline bool wrap(int64_t& idx, I raw, int64_t size) {
  idx = static_cast<int64_t>(raw);
  if (idx < 0) idx += size;
  return idx >= 0 && idx < size;
}

// out[o][j][r] = data[o][indices[j]][r], r counting words of a row.
template <class W, class I>
__global__ void gather_kernel(const W* __restrict__ data, const I* __restrict__ indices, W* __restrict__ out,
                              int64_t count, int64_t axis_size, int64_t inner, int64_t n) {
  for (int64_t i = cuda::thread_index(); i < n; i += cuda::thread_count()) {
    const int64_t row = i / inner, r = i - row * inner;
    const int64_t o = row / count, j = row - o * count;
    int64_t idx;
    out[i] = wrap(idx, indices[j], axis_size) ? data[(o * axis_size + idx) * inner + r] : W{};
  }
}

template <class F>
bool dispatch_index(DataType d, F&& f) {
  if (d == DataType::kInt32) {
    f(cuda::Type<int32_t>{});
    return true;
  }
  if (d == DataType::kInt64) {
    f(cuda::Type<int64_t>{});
    return true;
  }
  return false;
}

Status run_gather(KernelContext& ctx) {
  const Tensor& data = ctx.src[0];
  const Tensor& indices = ctx.src[1];
  Tensor& out = ctx.dst[0];
  if (out.numel() == 0) return Status::ok();
  KILN_ASSIGN_OR_RETURN(int axis, normalize_axis(ctx.attrs<GatherAttrs>().axis, data.rank()));
  const AxisSplit split(data.dims(), axis);
  const int64_t count = indices.numel();
  // The widest word that divides a row and suits both pointers.
  const int64_t row_bytes = split.inner * static_cast<int64_t>(dtype_size(data.dtype()));
  int64_t word = 16;
  while (word > 1 && (row_bytes % word != 0 || reinterpret_cast<uintptr_t>(data.raw()) % word != 0 ||
                      reinterpret_cast<uintptr_t>(out.raw()) % word != 0))
    word /= 2;
  const int64_t inner = row_bytes / word;
  const int64_t n = split.outer * count * inner;
  cudaStream_t stream = cuda::native(ctx.stream);
  bool known = false;
  cuda::dispatch_word(static_cast<size_t>(word), [&](auto w) {
    using W = cuda::type_of<decltype(w)>;
    known = dispatch_index(indices.dtype(), [&](auto ti) {
      using I = cuda::type_of<decltype(ti)>;
      gather_kernel<W, I><<<cuda::blocks_for(n), cuda::kThreads, 0, stream>>>(
          data.data<W>(), indices.data<I>(), out.data<W>(), count, split.size, inner, n);
    });
  });
  if (!known) return unsupported("Gather with ", dtype_name(indices.dtype()), " indices");
  return cuda::check(cudaGetLastError(), "gather kernel launch");
}

// ---- GatherElements -----------------------------------------------------------------------------

struct ElementsPlan {
  int rank = 0;
  int axis = 0;
  int64_t axis_size = 0;
  int64_t index_dims[kMaxRank] = {};
  int64_t data_strides[kMaxRank] = {};
};

template <class W, class I>
__global__ void gather_elements_kernel(ElementsPlan p, const W* __restrict__ data, const I* __restrict__ indices,
                                       W* __restrict__ out, int64_t n) {
  for (int64_t i = cuda::thread_index(); i < n; i += cuda::thread_count()) {
    int64_t flat = i, off = 0;
    for (int d = p.rank - 1; d >= 0; --d) {
      const int64_t q = flat / p.index_dims[d];
      const int64_t c = flat - q * p.index_dims[d];
      flat = q;
      if (d != p.axis) off += c * p.data_strides[d];
    }
    int64_t idx;
    out[i] = wrap(idx, indices[i], p.axis_size) ? data[off + idx * p.data_strides[p.axis]] : W{};
  }
}

Status run_gather_elements(KernelContext& ctx) {
  const Tensor& data = ctx.src[0];
  const Tensor& indices = ctx.src[1];
  Tensor& out = ctx.dst[0];
  const int64_t n = indices.numel();
  if (n == 0) return Status::ok();
  KILN_ASSIGN_OR_RETURN(int axis, normalize_axis(ctx.attrs<GatherElementsAttrs>().axis, data.rank()));
  if (indices.rank() != data.rank())
    return invalid_argument("GatherElements: indices ", indices.dims().to_string(), " and data ",
                            data.dims().to_string(), " differ in rank");
  ElementsPlan p;
  p.rank = data.rank();
  p.axis = axis;
  p.axis_size = data.dims()[axis];
  cuda::row_major_strides(data.dims(), p.data_strides);
  for (int d = 0; d < p.rank; ++d) p.index_dims[d] = indices.dims()[d];
  cudaStream_t stream = cuda::native(ctx.stream);
  bool known = false;
  cuda::dispatch_word(dtype_size(data.dtype()), [&](auto w) {
    using W = cuda::type_of<decltype(w)>;
    known = dispatch_index(indices.dtype(), [&](auto ti) {
      using I = cuda::type_of<decltype(ti)>;
      gather_elements_kernel<W, I>
          <<<cuda::blocks_for(n), cuda::kThreads, 0, stream>>>(p, data.data<W>(), indices.data<I>(), out.data<W>(), n);
    });
  });
  if (!known)
    return unsupported("GatherElements of ", dtype_name(data.dtype()), " with ", dtype_name(indices.dtype()),
                       " indices");
  return cuda::check(cudaGetLastError(), "gather_elements kernel launch");
}

const int kIndexInput[] = {1};

KILN_REGISTER_KERNEL(KernelImpl{
    .name = "cuda.gather",
    .op = "Gather",
    .backend = Backend::kCuda,
    .priority = 10,
    .supports = [](const OpCall& call) { return shuffle::supports_movement(call, kIndexInput); },
    .create = stateless(run_gather),
});

KILN_REGISTER_KERNEL(KernelImpl{
    .name = "cuda.gather_elements",
    .op = "GatherElements",
    .backend = Backend::kCuda,
    .priority = 10,
    .supports = [](const OpCall& call) { return shuffle::supports_movement(call, kIndexInput); },
    .create = stateless(run_gather_elements),
});

}  // namespace
}  // namespace kiln
