// Reference SoftmaxBackward and LogSoftmaxBackward: one row at a time along the forward's axis.
#include "kernels/ref/softmax_backward.h"

#include "kernels/ref/softmax.h"
#include "kernels/registry.h"

namespace kiln {
namespace {

template <bool kLog>
Status run_softmax_backward(KernelContext& ctx) {
  const AxisSplit s = ref::softmax_split(ctx.attrs<SoftmaxAttrs>(), ctx.src[1].dims());
  const float* dy = ctx.src[0].data<float>();
  const float* y = ctx.src[1].data<float>();
  float* dx = ctx.dst[0].data<float>();
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t in = 0; in < s.inner; ++in)
      ref::softmax_backward_row<kLog>(dy, y, dx, o * s.size * s.inner + in, s.size, s.inner);
  return Status::ok();
}

KILN_REGISTER_KERNEL(with_float32_compute({
    .name = "ref.softmax_backward",
    .op = "SoftmaxBackward",
    .backend = Backend::kRef,
    .priority = 0,
    .supports = [](const OpCall& call) { return require_dtypes(call, {DataType::kFloat32}); },
    .create = stateless(run_softmax_backward<false>),
}));

KILN_REGISTER_KERNEL(with_float32_compute({
    .name = "ref.log_softmax_backward",
    .op = "LogSoftmaxBackward",
    .backend = Backend::kRef,
    .priority = 0,
    .supports = [](const OpCall& call) { return require_dtypes(call, {DataType::kFloat32}); },
    .create = stateless(run_softmax_backward<true>),
}));

}  // namespace
}  // namespace kiln
