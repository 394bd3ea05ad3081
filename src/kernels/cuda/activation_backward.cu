// CUDA ActivationBackward: dx = dy * f'(x) in one grid-stride kernel per element type over the derivatives the
// reference shares (kernels/ref/activation_grad.h); for PReLU also the slope's gradient dy * min(x, 0) per element
// of x. float16 and bfloat16 compute in float.
#include "kernels/common/indexing.h"
#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/device_math.cuh"
#include "kernels/ref/activation_grad.h"

namespace kiln {
namespace {

template <class T>
__global__ void activation_backward_kernel(ActivationKind kind, float alpha, float beta, const T* dy, const T* x,
                                           const T* slope, BroadcastIndexer slope_at, T* dx, T* dslope, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{blockDim.x} * gridDim.x) {
    const float g = cuda::to_float(dy[i]);
    const float v = cuda::to_float(x[i]);
    const float s = slope ? cuda::to_float(slope[slope_at(i)]) : 0.f;
    dx[i] = cuda::from_float<T>(g * ref::activation_derivative(kind, alpha, beta, v, s));
    if (dslope) dslope[i] = cuda::from_float<T>(g * ref::prelu_slope_derivative(v));
  }
}

template <class T>
Status launch(KernelContext& ctx) {
  const auto& a = ctx.attrs<ActivationAttrs>();
  const Tensor& x = ctx.src[1];
  const int64_t n = x.numel();
  if (n == 0) return Status::ok();
  const bool prelu = a.kind == ActivationKind::kPRelu;
  if (ctx.src[0].numel() != n)
    return invalid_argument("ActivationBackward dy ", ctx.src[0].dims().to_string(), " does not have x's shape ",
                            x.dims().to_string());
  const BroadcastIndexer slope_at(prelu ? ctx.src[2].dims() : x.dims(), x.dims());
  const T* slope = prelu ? ctx.src[2].data<T>() : nullptr;
  T* dslope = prelu ? ctx.dst[1].data<T>() : nullptr;
  activation_backward_kernel<T><<<cuda::grid_for(n), 256, 0, cuda::native(ctx.stream)>>>(
      a.kind, a.alpha, a.beta, ctx.src[0].data<T>(), x.data<T>(), slope, slope_at, ctx.dst[0].data<T>(), dslope, n);
  return cuda::check(cudaGetLastError(), "activation backward kernel launch");
}

Status run_activation_backward(KernelContext& ctx) {
  switch (ctx.src[1].dtype()) {
    case DataType::kFloat32: return launch<float>(ctx);
    case DataType::kFloat16: return launch<__half>(ctx);
    case DataType::kBFloat16: return launch<__nv_bfloat16>(ctx);
    default: return unsupported("ActivationBackward on ", dtype_name(ctx.src[1].dtype()));
  }
}

KILN_REGISTER_KERNEL(KernelImpl{
    .name = "cuda.activation_backward",
    .op = "ActivationBackward",
    .backend = Backend::kCuda,
    .priority = 10,
    .supports = [](const OpCall& call) -> Status {
      KILN_RETURN_IF_ERROR(require_dtypes(call, {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16}));
      const DataType dt = call.inputs[1].dtype;
      for (const TensorDesc& d : call.inputs)
        if (d.present && d.dtype != dt)
          return unsupported("cuda.activation_backward takes dy, x and the slope in one type (x is ", dtype_name(dt),
                             ")");
      for (const TensorDesc& d : call.outputs)
        if (d.dtype != dt) return unsupported("cuda.activation_backward writes x's type (", dtype_name(dt), ")");
      return Status::ok();
    },
    .create = stateless(run_activation_backward),
});

}  // namespace
}  // namespace kiln
