// CPU Scale: own parallel loops, one coefficient lookup per row (channel) or per column (elementwise).
#include <algorithm>
#include <cmath>

#include "core/parallel.h"
#include "kernels/ref/activation.h"
#include "kernels/registry.h"
#include "ops/scale/scale.h"

namespace kiln {
namespace {

// Enough items per task that each thread gets about 32k element operations.
struct Coefficients {
  const float* shift;
  const float* scale;
  const float* power;
  const FusedActivation* fused;

  float apply(float v, int64_t c) const {
    if (scale) v *= scale[c];
    if (shift) v += shift[c];
    if (power) v = std::pow(v, power[c]);
    return v;
  }
};

// y[i] = f(x[i], coefficient index(i)) over one contiguous run of `len` elements, then the fused activation
// while the run is in cache.
template <class Index>
void apply_run(const Coefficients& k, const float* src, float* dst, int64_t len, Index index) {
  if (!k.power && k.scale && k.shift) {
    for (int64_t j = 0; j < len; ++j) dst[j] = src[j] * k.scale[index(j)] + k.shift[index(j)];
  } else {
    for (int64_t j = 0; j < len; ++j) dst[j] = k.apply(src[j], index(j));
  }
  ref::apply_fused(*k.fused, dst, len);
}

Status run_scale(KernelContext& ctx) {
  const auto& attrs = ctx.attrs<ScaleAttrs>();
  const Tensor& x = ctx.src[0];
  KILN_ASSIGN_OR_RETURN(ScaleLayout layout, scale_layout(attrs, x.dims()));
  auto param = [&](size_t i) {
    return ctx.src.size() > i && ctx.src[i].defined() ? ctx.src[i].data<float>() : nullptr;
  };
  const Coefficients k{param(1), param(2), param(3), &attrs.fused};
  const float* src = x.data<float>();
  float* dst = ctx.dst[0].data<float>();
  const int64_t n = x.numel();
  if (n == 0) return Status::ok();
  constexpr int64_t kBlock = 4096;
  switch (attrs.mode) {
    case ScaleMode::kUniform:
      parallel_for((n + kBlock - 1) / kBlock, 8, [&](int64_t b) {
        const int64_t lo = b * kBlock, len = std::min(kBlock, n - lo);
        apply_run(k, src + lo, dst + lo, len, [](int64_t) { return int64_t(0); });
      });
      break;
    case ScaleMode::kChannel: {
      const int64_t inner = layout.inner, rows = n / inner;
      parallel_for(rows, grain_for(inner), [&](int64_t r) {
        const int64_t c = r % layout.count;
        apply_run(k, src + r * inner, dst + r * inner, inner, [c](int64_t) { return c; });
      });
      break;
    }
    case ScaleMode::kElementwise: {
      const int64_t len = layout.count, rows = n / len;
      parallel_for(rows, grain_for(len),
                   [&](int64_t r) { apply_run(k, src + r * len, dst + r * len, len, [](int64_t j) { return j; }); });
      break;
    }
  }
  return Status::ok();
}

KILN_REGISTER_KERNEL(KernelImpl{
    .name = "cpu.scale",
    .op = "Scale",
    .backend = Backend::kCpu,
    .priority = 5,
    .supports = [](const OpCall& call) { return require_dtypes(call, {DataType::kFloat32}); },
    .create = stateless(run_scale),
});

}  // namespace
}  // namespace kiln
