// CUDA Dropout and DropoutBackward: the mask is the reference's counter-based hash of (seed, step, element index)
// (kernels/ref/dropout.h, shared with the device), so every backend draws the same mask. The step is read in the
// kernel when it lives on the device (no synchronization), on the host otherwise.
#include <cstdint>

#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/dispatch.cuh"
#include "kernels/cuda/types.cuh"
#include "kernels/ref/dropout.h"
#include "ops/dropout/dropout.h"

namespace kiln {
namespace {

// Where the step comes from: a device scalar of 4 or 8 bytes, or `host` (also when there is no step input).
struct Step {
  const void* device = nullptr;
  int bytes = 0;
  int64_t host = 0;
  __device__ int64_t value() const {
    if (!device) return host;
    return bytes == 4 ? int64_t{*static_cast<const int32_t*>(device)} : *static_cast<const int64_t*>(device);
  }
};

template <class T>
__global__ void dropout_kernel(const T* x, T* y, uint8_t* mask, int64_t n, int64_t seed, Step step, uint32_t threshold,
                               float scale) {
  const uint64_t key = ref::dropout_key(seed, step.value());
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{blockDim.x} * gridDim.x) {
    const bool keep = threshold == 0 || ref::dropout_keep(key, i, threshold);
    mask[i] = keep ? 1 : 0;
    y[i] = cuda::from_float<T>(keep ? cuda::to_float(x[i]) * scale : 0.f);
  }
}

template <class T>
__global__ void dropout_backward_kernel(const T* dy, const uint8_t* mask, T* dx, int64_t n, float scale) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{blockDim.x} * gridDim.x)
    dx[i] = cuda::from_float<T>(mask[i] != 0 ? cuda::to_float(dy[i]) * scale : 0.f);
}

Result<Step> step_of(const KernelContext& ctx) {
  Step s;
  if (ctx.src.size() < 2 || !ctx.src[1].defined()) return s;
  const Tensor& t = ctx.src[1];
  if (t.numel() != 1) return invalid_argument("Dropout step must be one integer, got ", t.dims().to_string());
  const Tensor* c = ctx.call.constant(1);
  const Tensor& src = c ? *c : t;
  if (src.device().is_cpu()) {
    s.host = src.dtype() == DataType::kInt32 ? int64_t{*src.data<int32_t>()} : *src.data<int64_t>();
    return s;
  }
  s.device = src.raw();
  s.bytes = src.dtype() == DataType::kInt32 ? 4 : 8;
  return s;
}

Status run_dropout(KernelContext& ctx) {
  const auto& a = ctx.attrs<DropoutAttrs>();
  const Tensor& x = ctx.src[0];
  const int64_t n = x.numel();
  if (n == 0) return Status::ok();
  KILN_ASSIGN_OR_RETURN(Step step, step_of(ctx));
  const uint32_t threshold = a.training ? ref::dropout_threshold(a.ratio) : 0;
  const float scale = a.training ? 1.f / (1.f - a.ratio) : 1.f;
  uint8_t* mask = static_cast<uint8_t*>(ctx.dst[1].raw());
  return cuda::dispatch_float_status(x.dtype(), "Dropout", [&](auto tag) {
    using T = cuda::type_of<decltype(tag)>;
    dropout_kernel<T><<<cuda::grid_for(n), 256, 0, cuda::native(ctx.stream)>>>(x.data<T>(), ctx.dst[0].data<T>(), mask,
                                                                               n, a.seed, step, threshold, scale);
    return cuda::check(cudaGetLastError(), "dropout kernel launch");
  });
}

Status run_dropout_backward(KernelContext& ctx) {
  const auto& a = ctx.attrs<DropoutAttrs>();
  const Tensor& dy = ctx.src[0];
  const int64_t n = dy.numel();
  if (n == 0) return Status::ok();
  if (ctx.src[1].numel() != n)
    return invalid_argument("DropoutBackward mask ", ctx.src[1].dims().to_string(), " does not have dy's shape ",
                            dy.dims().to_string());
  const float scale = a.training ? 1.f / (1.f - a.ratio) : 1.f;
  const uint8_t* mask = static_cast<const uint8_t*>(ctx.src[1].raw());
  return cuda::dispatch_float_status(dy.dtype(), "DropoutBackward", [&](auto tag) {
    using T = cuda::type_of<decltype(tag)>;
    dropout_backward_kernel<T>
        <<<cuda::grid_for(n), 256, 0, cuda::native(ctx.stream)>>>(dy.data<T>(), mask, ctx.dst[0].data<T>(), n, scale);
    return cuda::check(cudaGetLastError(), "dropout backward kernel launch");
  });
}

Status supports(const OpCall& call) {
  KILN_RETURN_IF_ERROR(require_float_dtypes(call, {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16}));
  if (call.outputs[0].dtype != call.inputs[0].dtype)
    return unsupported("the CUDA dropout kernels write their first input's type");
  return Status::ok();
}

KILN_REGISTER_KERNEL(KernelImpl{
    .name = "cuda.dropout",
    .op = "Dropout",
    .backend = Backend::kCuda,
    .priority = 10,
    .supports = supports,
    .create = stateless(run_dropout),
});

KILN_REGISTER_KERNEL(KernelImpl{
    .name = "cuda.dropout_backward",
    .op = "DropoutBackward",
    .backend = Backend::kCuda,
    .priority = 10,
    .supports = supports,
    .create = stateless(run_dropout_backward),
});

}  // namespace
}  // namespace kiln
