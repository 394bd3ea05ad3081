// CUDA Window (Hann, Hamming, Blackman): one thread per sample computes window_value's formula in double and
// rounds it to the float output type. Integer outputs (which saturate in the reference) are rejected.
#include <cstdint>

#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/indexing.cuh"
#include "kernels/cuda/types.cuh"
#include "ops/window/window.h"

namespace kiln {
namespace {

template <class T>
__global__ void window_kernel(T* __restrict__ y, WindowKind kind, int64_t period, int64_t n) {
  constexpr double kTwoPi = 6.283185307179586476925286766559;
  for (int64_t k = cuda::thread_index(); k < n; k += cuda::thread_count()) {
    double v = 1.0;
    if (period > 0) {
      const double x = kTwoPi * static_cast<double>(k) / static_cast<double>(period);
      switch (kind) {
        case WindowKind::kHann: v = 0.5 - 0.5 * cos(x); break;
        case WindowKind::kHamming: v = 25.0 / 46.0 - 21.0 / 46.0 * cos(x); break;
        case WindowKind::kBlackman: v = 0.42 - 0.5 * cos(x) + 0.08 * cos(2.0 * x); break;
      }
    }
    y[k] = cuda::store<T>(static_cast<float>(v));
  }
}

Status run_window(KernelContext& ctx) {
  const auto& a = ctx.attrs<WindowAttrs>();
  Tensor& y = ctx.dst[0];
  const int64_t n = y.numel();
  if (n == 0) return Status::ok();
  const int64_t period = a.periodic ? n : n - 1;
  cudaStream_t stream = cuda::native(ctx.stream);
  const bool known = cuda::dispatch_float(y.dtype(), [&](auto tag) {
    using T = cuda::type_of<decltype(tag)>;
    window_kernel<T><<<cuda::blocks_for(n), cuda::kThreads, 0, stream>>>(y.data<T>(), a.kind, period, n);
  });
  if (!known) return unsupported("Window producing ", dtype_name(y.dtype()));
  return cuda::check(cudaGetLastError(), "window kernel launch");
}

KILN_REGISTER_KERNEL(KernelImpl{
    .name = "cuda.window",
    .op = "Window",
    .backend = Backend::kCuda,
    .priority = 10,
    .supports =
        [](const OpCall& call) {
          const DataType t = call.outputs[0].dtype;
          if (t != DataType::kFloat32 && t != DataType::kFloat16 && t != DataType::kBFloat16)
            return unsupported("output is ", dtype_name(t), "; CUDA Window produces float32, float16 or bfloat16");
          return Status::ok();
        },
    .create = stateless(run_window),
});

}  // namespace
}  // namespace kiln
