// CUDA SoftmaxBackward (dx = y * (dy - sum(dy * y))) and LogSoftmaxBackward (dx = dy - exp(y) * sum(dy)) along the
// forward's axis (kernels/ref/softmax_backward.h), sums in float32: x viewed as [outer, size, inner]. With inner 1
// one block per row (contiguous rows, a block reduction); otherwise one thread per (outer, inner) column walking
// its `size` elements, so that neighbouring threads read neighbouring memory.
#include <algorithm>

#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/device_math.cuh"
#include "kernels/ref/softmax.h"

namespace kiln {
namespace {

constexpr int kRowThreads = 256;

template <bool kLog, class T>
__global__ void __launch_bounds__(kRowThreads)
    softmax_backward_rows(const T* dy, const T* y, T* dx, int64_t rows, int64_t size) {
  __shared__ float scratch[32];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const int64_t base = row * size;
    float part = 0.f;
    for (int64_t j = threadIdx.x; j < size; j += blockDim.x) {
      const float g = cuda::to_float(dy[base + j]);
      part += kLog ? g : g * cuda::to_float(y[base + j]);
    }
    const float sum = cuda::block_sum(part, scratch);
    for (int64_t j = threadIdx.x; j < size; j += blockDim.x) {
      const float g = cuda::to_float(dy[base + j]), v = cuda::to_float(y[base + j]);
      dx[base + j] = cuda::from_float<T>(kLog ? g - expf(v) * sum : v * (g - sum));
    }
  }
}

template <bool kLog, class T>
__global__ void softmax_backward_columns(const T* dy, const T* y, T* dx, int64_t outer, int64_t size, int64_t inner) {
  const int64_t columns = outer * inner;
  for (int64_t c = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; c < columns; c += int64_t{blockDim.x} * gridDim.x) {
    const int64_t base = (c / inner) * size * inner + c % inner;
    float sum = 0.f;
    for (int64_t j = 0; j < size; ++j) {
      const float g = cuda::to_float(dy[base + j * inner]);
      sum += kLog ? g : g * cuda::to_float(y[base + j * inner]);
    }
    for (int64_t j = 0; j < size; ++j) {
      const int64_t i = base + j * inner;
      const float g = cuda::to_float(dy[i]), v = cuda::to_float(y[i]);
      dx[i] = cuda::from_float<T>(kLog ? g - expf(v) * sum : v * (g - sum));
    }
  }
}

template <bool kLog, class T>
Status launch(KernelContext& ctx) {
  const Tensor& y = ctx.src[1];
  if (y.numel() == 0) return Status::ok();
  if (ctx.src[0].numel() != y.numel())
    return invalid_argument(kLog ? "LogSoftmaxBackward" : "SoftmaxBackward", " dy ", ctx.src[0].dims().to_string(),
                            " does not have the forward output's shape ", y.dims().to_string());
  const AxisSplit s = ref::softmax_split(ctx.attrs<SoftmaxAttrs>(), y.dims());
  const cudaStream_t stream = cuda::native(ctx.stream);
  const T* dy = ctx.src[0].data<T>();
  T* dx = ctx.dst[0].data<T>();
  if (s.inner == 1) {
    const int64_t rows = s.outer;
    const unsigned grid = static_cast<unsigned>(std::min<int64_t>(rows, int64_t{1} << 20));
    softmax_backward_rows<kLog, T><<<grid, kRowThreads, 0, stream>>>(dy, y.data<T>(), dx, rows, s.size);
  } else {
    softmax_backward_columns<kLog, T>
        <<<cuda::grid_for(s.outer * s.inner), 256, 0, stream>>>(dy, y.data<T>(), dx, s.outer, s.size, s.inner);
  }
  return cuda::check(cudaGetLastError(), "softmax backward kernel launch");
}

template <bool kLog>
Status run(KernelContext& ctx) {
  switch (ctx.src[1].dtype()) {
    case DataType::kFloat32: return launch<kLog, float>(ctx);
    case DataType::kFloat16: return launch<kLog, __half>(ctx);
    case DataType::kBFloat16: return launch<kLog, __nv_bfloat16>(ctx);
    default: return unsupported("softmax backward on ", dtype_name(ctx.src[1].dtype()));
  }
}

Status supports(const OpCall& call) {
  KILN_RETURN_IF_ERROR(require_dtypes(call, {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16}));
  if (call.inputs[0].dtype != call.inputs[1].dtype || call.outputs[0].dtype != call.inputs[1].dtype)
    return unsupported("the CUDA softmax backward kernels take dy, y and dx in one type");
  return Status::ok();
}

KILN_REGISTER_KERNEL(KernelImpl{
    .name = "cuda.softmax_backward",
    .op = "SoftmaxBackward",
    .backend = Backend::kCuda,
    .priority = 10,
    .supports = supports,
    .create = stateless(run<false>),
});

KILN_REGISTER_KERNEL(KernelImpl{
    .name = "cuda.log_softmax_backward",
    .op = "LogSoftmaxBackward",
    .backend = Backend::kCuda,
    .priority = 10,
    .supports = supports,
    .create = stateless(run<true>),
});

}  // namespace
}  // namespace kiln
