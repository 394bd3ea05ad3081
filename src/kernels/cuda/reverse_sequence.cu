// CUDA ReverseSequence: one thread per word of the output; each (batch, time) row of `inner` elements comes
// from the row the reference's copy_row picks, moved in the widest word (up to 16 bytes) the row size and both
// pointers allow. sequence_lens is read on the device: a length outside [0, time] (which the reference reports
// as an error) cannot fail the kernel, so that batch entry is copied unchanged.
#include <cstdint>

#include "kernels/common/shuffle_common.h"
#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/indexing.cuh"
#include "kernels/cuda/types.cuh"
#include "ops/reverse_sequence/reverse_sequence.h"

namespace kiln {
namespace {

template <class W, class L>
__global__ void reverse_sequence_kernel(const W* __restrict__ x, const L* __restrict__ lens, W* __restrict__ y,
                                        int64_t d1, int64_t time, int64_t inner, bool batch_first, int64_t n) {
  for (int64_t i = cuda::thread_index(); i < n; i += cuda::thread_count()) {
    const int64_t r = i / inner, e = i - r * inner;
    const int64_t i0 = r / d1, i1 = r - i0 * d1;
    const int64_t b = batch_first ? i0 : i1;
    const int64_t t = batch_first ? i1 : i0;
    const int64_t len = static_cast<int64_t>(lens[b]);
    const int64_t st = len >= 0 && len <= time && t < len ? len - 1 - t : t;
    const int64_t src_row = batch_first ? i0 * d1 + st : st * d1 + i1;
    y[i] = x[src_row * inner + e];
  }
}

Status run_reverse_sequence(KernelContext& ctx) {
  const auto& a = ctx.attrs<ReverseSequenceAttrs>();
  const Tensor& x = ctx.src[0];
  const Tensor& lens = ctx.src[1];
  Tensor& y = ctx.dst[0];
  if (y.numel() == 0) return Status::ok();
  if (x.rank() < 2 || y.dims() != x.dims())
    return invalid_argument("ReverseSequence: input ", x.dims().to_string(), " and output ", y.dims().to_string(),
                            " must have one shape of rank >= 2");
  const bool batch_first = a.batch_axis == 0;
  const int64_t d1 = x.dims()[1];
  const int64_t time = x.dims()[batch_first ? 1 : 0];
  const int64_t batch = x.dims()[batch_first ? 0 : 1];
  if (lens.numel() != batch)
    return invalid_argument("ReverseSequence: sequence_lens has ", lens.numel(), " values for a batch of ", batch);
  const int64_t row_bytes = x.numel() / (x.dims()[0] * d1) * static_cast<int64_t>(dtype_size(x.dtype()));
  int64_t word = 16;
  while (word > 1 && (row_bytes % word != 0 || reinterpret_cast<uintptr_t>(x.raw()) % word != 0 ||
                      reinterpret_cast<uintptr_t>(y.raw()) % word != 0))
    word /= 2;
  const int64_t inner = row_bytes / word;
  const int64_t n = x.dims()[0] * d1 * inner;
  cudaStream_t stream = cuda::native(ctx.stream);
  bool known = false;
  cuda::dispatch_word(static_cast<size_t>(word), [&](auto w) {
    using W = cuda::type_of<decltype(w)>;
    auto launch = [&](auto tl) {
      using L = cuda::type_of<decltype(tl)>;
      reverse_sequence_kernel<W, L><<<cuda::blocks_for(n), cuda::kThreads, 0, stream>>>(
          x.data<W>(), lens.data<L>(), y.data<W>(), d1, time, inner, batch_first, n);
      known = true;
    };
    if (lens.dtype() == DataType::kInt64) launch(cuda::Type<int64_t>{});
    if (lens.dtype() == DataType::kInt32) launch(cuda::Type<int32_t>{});
  });
  if (!known) return unsupported("ReverseSequence with ", dtype_name(lens.dtype()), " sequence_lens");
  return cuda::check(cudaGetLastError(), "reverse_sequence kernel launch");
}

const int kLensInput[] = {1};

KILN_REGISTER_KERNEL(KernelImpl{
    .name = "cuda.reverse_sequence",
    .op = "ReverseSequence",
    .backend = Backend::kCuda,
    .priority = 10,
    .supports = [](const OpCall& call) { return shuffle::supports_movement(call, kLensInput); },
    .create = stateless(run_reverse_sequence),
});

}  // namespace
}  // namespace kiln
