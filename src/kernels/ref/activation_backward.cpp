// Reference ActivationBackward: dx = dy * f'(x), and for PReLU dslope = dy * min(x, 0) per element of x.
#include "kernels/common/indexing.h"
#include "kernels/ref/activation_grad.h"
#include "kernels/registry.h"

namespace kiln {
namespace {

Status run_activation_backward(KernelContext& ctx) {
  const auto& a = ctx.attrs<ActivationAttrs>();
  const float* dy = ctx.src[0].data<float>();
  const float* x = ctx.src[1].data<float>();
  float* dx = ctx.dst[0].data<float>();
  const int64_t n = ctx.src[1].numel();
  if (a.kind == ActivationKind::kPRelu) {
    const BroadcastIndexer slope_at(ctx.src[2].dims(), ctx.src[1].dims());
    const float* slope = ctx.src[2].data<float>();
    float* ds = ctx.dst[1].data<float>();
    for (int64_t i = 0; i < n; ++i) {
      dx[i] = dy[i] * ref::activation_derivative(a.kind, a.alpha, a.beta, x[i], slope[slope_at(i)]);
      ds[i] = dy[i] * ref::prelu_slope_derivative(x[i]);
    }
    return Status::ok();
  }
  for (int64_t i = 0; i < n; ++i) dx[i] = dy[i] * ref::activation_derivative(a.kind, a.alpha, a.beta, x[i]);
  return Status::ok();
}

KILN_REGISTER_KERNEL(with_float32_compute({
    .name = "ref.activation_backward",
    .op = "ActivationBackward",
    .backend = Backend::kRef,
    .priority = 0,
    .supports = [](const OpCall& call) { return require_dtypes(call, {DataType::kFloat32}); },
    .create = stateless(run_activation_backward),
}));

}  // namespace
}  // namespace kiln
