// Reference Scale: y = (x * scale + shift) ^ power, one element at a time.
#include <cmath>

#include "kernels/ref/activation.h"
#include "kernels/registry.h"
#include "ops/scale/scale.h"

namespace kiln {
namespace {

Status run_scale(KernelContext& ctx) {
  const auto& attrs = ctx.attrs<ScaleAttrs>();
  const Tensor& x = ctx.src[0];
  KILN_ASSIGN_OR_RETURN(ScaleLayout at, scale_layout(attrs, x.dims()));
  auto param = [&](int i) -> const float* {
    return static_cast<int>(ctx.src.size()) > i && ctx.src[i].defined() ? ctx.src[i].data<float>() : nullptr;
  };
  const float* shift = param(1);
  const float* scale = param(2);
  const float* power = param(3);
  const float* src = x.data<float>();
  float* dst = ctx.dst[0].data<float>();
  const int64_t n = x.numel();
  for (int64_t i = 0; i < n; ++i) {
    const int64_t c = at(i);
    float v = src[i];
    if (scale) v *= scale[c];
    if (shift) v += shift[c];
    if (power) v = std::pow(v, power[c]);
    dst[i] = attrs.fused.on ? ref::activation(attrs.fused.kind, attrs.fused.alpha, attrs.fused.beta, v) : v;
  }
  return Status::ok();
}

KILN_REGISTER_KERNEL(with_float32_compute({
    .name = "ref.scale",
    .op = "Scale",
    .backend = Backend::kRef,
    .priority = 0,
    .supports = [](const OpCall& call) { return require_dtypes(call, {DataType::kFloat32}); },
    .create = stateless(run_scale),
}));

}  // namespace
}  // namespace kiln
