// CUDA MaxUnpool: the output is zeroed, then one thread per input element writes it at its index. Indices
// address the shape MaxUnpool infers from the attributes; a larger output_shape keeps each value's coordinates
// (kernels/ref/max_unpool.h). An index outside that shape (an error in the reference) cannot fail the kernel:
// its value is dropped. Duplicate indices (which max pooling does not produce) leave one of their values.
#include <cstdint>

#include "kernels/common/shuffle_common.h"
#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/indexing.cuh"
#include "kernels/cuda/types.cuh"
#include "ops/max_unpool/max_unpool.h"

namespace kiln {
namespace {

struct UnpoolMap {
  int rank = 0;
  bool same = true;
  int64_t total = 0;
  int64_t inferred[kMaxRank] = {};
  int64_t out[kMaxRank] = {};
};

template <class W, class I>
__global__ void max_unpool_kernel(UnpoolMap m, const W* __restrict__ x, const I* __restrict__ indices,
                                  W* __restrict__ y, int64_t n) {
  for (int64_t i = cuda::thread_index(); i < n; i += cuda::thread_count()) {
    const int64_t at = static_cast<int64_t>(indices[i]);
    if (at < 0 || at >= m.total) continue;
    int64_t flat = at;
    if (!m.same) {
      int64_t rest = at, stride = 1;
      bool inside = true;
      flat = 0;
      for (int d = m.rank - 1; d >= 0; --d) {
        const int64_t q = rest / m.inferred[d];
        const int64_t c = rest - q * m.inferred[d];
        rest = q;
        inside &= c < m.out[d];
        flat += c * stride;
        stride *= m.out[d];
      }
      if (!inside) continue;
    }
    y[flat] = x[i];
  }
}

Status run_max_unpool(KernelContext& ctx) {
  const Tensor& x = ctx.src[0];
  const Tensor& indices = ctx.src[1];
  Tensor& y = ctx.dst[0];
  cudaStream_t stream = cuda::native(ctx.stream);
  if (y.numel() == 0) return Status::ok();
  KILN_RETURN_IF_ERROR(cuda::check(cudaMemsetAsync(y.raw(), 0, y.nbytes(), stream), "cudaMemsetAsync"));
  const int64_t n = x.numel();
  if (n == 0) return Status::ok();
  if (indices.numel() != n)
    return invalid_argument("MaxUnpool: indices ", indices.dims().to_string(), " and x ", x.dims().to_string(),
                            " differ in size");
  KILN_ASSIGN_OR_RETURN(const Dims inferred, max_unpool_default_dims(ctx.attrs<MaxUnpoolAttrs>(), x.dims()));
  if (inferred.rank() != y.rank())
    return invalid_argument("MaxUnpool: output ", y.dims().to_string(), " and inferred shape ", inferred.to_string(),
                            " differ in rank");
  UnpoolMap m;
  m.rank = y.rank();
  m.same = inferred == y.dims();
  m.total = inferred.numel();
  for (int d = 0; d < m.rank; ++d) {
    m.inferred[d] = inferred[d];
    m.out[d] = y.dims()[d];
  }
  bool known = false;
  cuda::dispatch_word(dtype_size(x.dtype()), [&](auto w) {
    using W = cuda::type_of<decltype(w)>;
    auto launch = [&](auto ti) {
      using I = cuda::type_of<decltype(ti)>;
      max_unpool_kernel<W, I>
          <<<cuda::blocks_for(n), cuda::kThreads, 0, stream>>>(m, x.data<W>(), indices.data<I>(), y.data<W>(), n);
      known = true;
    };
    if (indices.dtype() == DataType::kInt64) launch(cuda::Type<int64_t>{});
    if (indices.dtype() == DataType::kInt32) launch(cuda::Type<int32_t>{});
  });
  if (!known)
    return unsupported("MaxUnpool of ", dtype_name(x.dtype()), " with ", dtype_name(indices.dtype()), " indices");
  return cuda::check(cudaGetLastError(), "max_unpool kernel launch");
}

const int kIndexInputs[] = {1, 2};

KILN_REGISTER_KERNEL(KernelImpl{
    .name = "cuda.max_unpool",
    .op = "MaxUnpool",
    .backend = Backend::kCuda,
    .priority = 10,
    .supports = [](const OpCall& call) { return shuffle::supports_movement(call, kIndexInputs); },
    .create = stateless(run_max_unpool),
});

}  // namespace
}  // namespace kiln
