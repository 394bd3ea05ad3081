// CUDA LRNBackward (across channels; kernels/ref/normalization_train_run.h's lrn_backward_item) in double, as the
// reference and the forward kernel compute: with d[c] = bias + alpha / size * (sum of x^2 over c's window),
// dx[c] = dy[c] d[c]^-beta - 2 alpha beta / size * x[c] * (sum over the windows holding c of dy[k] x[k]
// d[k]^(-beta-1)). One thread per element recomputes the d of the channels whose windows hold it (size^2 loads, from
// cache).
#include <cstdint>

#include "kernels/common/indexing.h"
#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/indexing.cuh"
#include "kernels/cuda/types.cuh"
#include "ops/normalization/normalization.h"

namespace kiln {
namespace {

struct Window {
  int64_t channels = 1, inner = 1, before = 0, after = 0;
  double alpha_over_size = 0, beta = 0, bias = 0;
};

// d of channel k at (b, in).
template <class T>
__device__ double lrn_denominator(const Window& w, const T* x, int64_t b, int64_t k, int64_t in) {
  const int64_t lo = k - w.before > 0 ? k - w.before : 0;
  const int64_t hi = k + w.after < w.channels - 1 ? k + w.after : w.channels - 1;
  double sq = 0;
  for (int64_t j = lo; j <= hi; ++j) {
    const double v = static_cast<double>(cuda::load(x[(b * w.channels + j) * w.inner + in]));
    sq += v * v;
  }
  return w.bias + w.alpha_over_size * sq;
}

template <class T>
__global__ void lrn_backward_kernel(const T* __restrict__ dy, const T* __restrict__ x, T* __restrict__ dx, Window w,
                                    int64_t n) {
  for (int64_t i = cuda::thread_index(); i < n; i += cuda::thread_count()) {
    const int64_t row = i / w.inner, in = i - row * w.inner;
    const int64_t b = row / w.channels, c = row - b * w.channels;
    // The windows holding c are those of channels [c - after, c + before].
    const int64_t lo = c - w.after > 0 ? c - w.after : 0;
    const int64_t hi = c + w.before < w.channels - 1 ? c + w.before : w.channels - 1;
    double acc = 0;
    for (int64_t k = lo; k <= hi; ++k) {
      const int64_t at = (b * w.channels + k) * w.inner + in;
      acc += static_cast<double>(cuda::load(dy[at])) * static_cast<double>(cuda::load(x[at])) *
             pow(lrn_denominator(w, x, b, k, in), -w.beta - 1.0);
    }
    const double d = lrn_denominator(w, x, b, c, in);
    const double g = static_cast<double>(cuda::load(dy[i])), xv = static_cast<double>(cuda::load(x[i]));
    dx[i] = cuda::store<T>(static_cast<float>(g * pow(d, -w.beta) - 2.0 * w.alpha_over_size * w.beta * xv * acc));
  }
}

Status run_lrn_backward(KernelContext& ctx) {
  const auto& a = ctx.attrs<LrnAttrs>();
  const Tensor& x = ctx.src[1];
  Tensor& dx = ctx.dst[0];
  const int64_t n = dx.numel();
  if (n == 0) return Status::ok();
  if (x.rank() < 2) return invalid_argument("LRNBackward: x must have rank >= 2, got ", x.dims().to_string());
  if (a.size < 1) return invalid_argument("LRNBackward: size must be >= 1, got ", a.size);
  if (ctx.src[0].numel() != n)
    return invalid_argument("LRNBackward dy ", ctx.src[0].dims().to_string(), " does not have x's shape ",
                            x.dims().to_string());
  const AxisSplit s(x.dims(), 1);
  Window w;
  w.channels = s.size;
  w.inner = s.inner;
  w.before = (a.size - 1) / 2;
  w.after = a.size - 1 - w.before;
  w.alpha_over_size = static_cast<double>(a.alpha) / static_cast<double>(a.size);
  w.beta = a.beta;
  w.bias = a.bias;
  cudaStream_t stream = cuda::native(ctx.stream);
  const bool known = cuda::dispatch_float(x.dtype(), [&](auto tag) {
    using T = cuda::type_of<decltype(tag)>;
    lrn_backward_kernel<T>
        <<<cuda::blocks_for(n), cuda::kThreads, 0, stream>>>(ctx.src[0].data<T>(), x.data<T>(), dx.data<T>(), w, n);
  });
  if (!known) return unsupported("LRNBackward of ", dtype_name(x.dtype()));
  return cuda::check(cudaGetLastError(), "lrn backward kernel launch");
}

KILN_REGISTER_KERNEL(KernelImpl{
    .name = "cuda.lrn_backward",
    .op = "LRNBackward",
    .backend = Backend::kCuda,
    .priority = 10,
    .supports = [](const OpCall& call) -> Status {
      KILN_RETURN_IF_ERROR(require_dtypes(call, {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16}));
      if (call.inputs[0].dtype != call.inputs[1].dtype || call.outputs[0].dtype != call.inputs[1].dtype)
        return unsupported("cuda.lrn_backward takes dy, x and dx in one type");
      return Status::ok();
    },
    .create = stateless(run_lrn_backward),
});

}  // namespace
}  // namespace kiln
