// CUDA LRN (across channels): one thread per element sums the squares of its channel window in double and
// divides by (bias + alpha / size * sum)^beta in double, as the reference does; float32/float16/bfloat16.
#include <cstdint>

#include "kernels/common/indexing.h"
#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/indexing.cuh"
#include "kernels/cuda/types.cuh"
#include "ops/normalization/normalization.h"

namespace kiln {
namespace {

template <class T>
__global__ void lrn_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t channels, int64_t inner, int64_t before,
                           int64_t after, double alpha_over_size, double beta, double bias, int64_t n) {
  for (int64_t i = cuda::thread_index(); i < n; i += cuda::thread_count()) {
    const int64_t row = i / inner, in = i - row * inner;
    const int64_t b = row / channels, c = row - b * channels;
    const int64_t lo = c - before > 0 ? c - before : 0;
    const int64_t hi = c + after < channels - 1 ? c + after : channels - 1;
    double sq = 0;
    for (int64_t k = lo; k <= hi; ++k) {
      const double v = static_cast<double>(cuda::load(x[(b * channels + k) * inner + in]));
      sq += v * v;
    }
    const double xv = static_cast<double>(cuda::load(x[i]));
    y[i] = cuda::store<T>(static_cast<float>(xv / pow(bias + alpha_over_size * sq, beta)));
  }
}

Status run_lrn(KernelContext& ctx) {
  const auto& a = ctx.attrs<LrnAttrs>();
  const Tensor& x = ctx.src[0];
  Tensor& y = ctx.dst[0];
  const int64_t n = y.numel();
  if (n == 0) return Status::ok();
  if (x.rank() < 2) return invalid_argument("LRN: input 'x' must have rank >= 2, got ", x.dims().to_string());
  if (a.size < 1) return invalid_argument("LRN: size must be >= 1, got ", a.size);
  const AxisSplit s(x.dims(), 1);
  const int64_t before = (a.size - 1) / 2, after = a.size - 1 - before;
  // The reference's alpha / size in double.
  const double alpha_over_size = static_cast<double>(a.alpha) / static_cast<double>(a.size);
  cudaStream_t stream = cuda::native(ctx.stream);
  const bool known = cuda::dispatch_float(x.dtype(), [&](auto tag) {
    using T = cuda::type_of<decltype(tag)>;
    lrn_kernel<T><<<cuda::blocks_for(n), cuda::kThreads, 0, stream>>>(x.data<T>(), y.data<T>(), s.size, s.inner, before,
                                                                      after, alpha_over_size, a.beta, a.bias, n);
  });
  if (!known) return unsupported("LRN of ", dtype_name(x.dtype()));
  return cuda::check(cudaGetLastError(), "lrn kernel launch");
}

KILN_REGISTER_KERNEL(KernelImpl{
    .name = "cuda.lrn",
    .op = "LRN",
    .backend = Backend::kCuda,
    .priority = 10,
    .supports =
        [](const OpCall& call) {
          return require_dtypes(call, {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16});
        },
    .create = stateless(run_lrn),
});

}  // namespace
}  // namespace kiln
