// Reference Dropout and DropoutBackward.
#include "kernels/ref/dropout.h"

#include "kernels/registry.h"
#include "ops/dropout/dropout.h"

namespace kiln {
namespace {

int64_t step_of(const KernelContext& ctx) {
  if (ctx.src.size() < 2 || !ctx.src[1].defined()) return 0;
  const Tensor& s = ctx.src[1];
  return s.dtype() == DataType::kInt32 ? *s.data<int32_t>() : *s.data<int64_t>();
}

Status run_dropout(KernelContext& ctx) {
  const auto& a = ctx.attrs<DropoutAttrs>();
  const float* x = ctx.src[0].data<float>();
  float* y = ctx.dst[0].data<float>();
  uint8_t* mask = ctx.dst[1].data<uint8_t>();
  const int64_t n = ctx.src[0].numel();
  const uint64_t key = ref::dropout_key(a.seed, step_of(ctx));
  const uint32_t threshold = a.training ? ref::dropout_threshold(a.ratio) : 0;
  const float scale = a.training ? 1.f / (1.f - a.ratio) : 1.f;
  for (int64_t i = 0; i < n; ++i) {
    mask[i] = threshold == 0 || ref::dropout_keep(key, i, threshold) ? 1 : 0;
    y[i] = mask[i] != 0 ? x[i] * scale : 0.f;
  }
  return Status::ok();
}

Status run_dropout_backward(KernelContext& ctx) {
  const auto& a = ctx.attrs<DropoutAttrs>();
  const float* dy = ctx.src[0].data<float>();
  const uint8_t* mask = ctx.src[1].data<uint8_t>();
  float* dx = ctx.dst[0].data<float>();
  const float scale = a.training ? 1.f / (1.f - a.ratio) : 1.f;
  for (int64_t i = 0, n = ctx.src[0].numel(); i < n; ++i) dx[i] = mask[i] != 0 ? dy[i] * scale : 0.f;
  return Status::ok();
}

KILN_REGISTER_KERNEL(with_float32_compute({
    .name = "ref.dropout",
    .op = "Dropout",
    .backend = Backend::kRef,
    .priority = 0,
    .supports = [](const OpCall& call) { return require_float_dtypes(call, {DataType::kFloat32}); },
    .create = stateless(run_dropout),
}));

KILN_REGISTER_KERNEL(with_float32_compute({
    .name = "ref.dropout_backward",
    .op = "DropoutBackward",
    .backend = Backend::kRef,
    .priority = 0,
    .supports = [](const OpCall& call) { return require_float_dtypes(call, {DataType::kFloat32}); },
    .create = stateless(run_dropout_backward),
}));

}  // namespace
}  // namespace kiln
