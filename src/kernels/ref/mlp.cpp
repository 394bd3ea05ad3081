// Reference MLP: each layer's dot products in double, its activation in float, row by row.
#include <vector>

#include "kernels/ref/activation.h"
#include "kernels/registry.h"
#include "ops/mlp/mlp.h"

namespace kiln {
namespace {

Status run_mlp(KernelContext& ctx) {
  const auto& a = ctx.attrs<MlpAttrs>();
  const Tensor& x = ctx.src[0];
  const int64_t in0 = x.dims()[x.rank() - 1];
  const int64_t rows = in0 > 0 ? x.numel() / in0 : ctx.dst[0].numel() / std::max<int64_t>(ctx.dst[0].dims()[0], 1);
  float* y = ctx.dst[0].data<float>();
  const int64_t out_last = ctx.dst[0].dims()[ctx.dst[0].rank() - 1];
  std::vector<float> h, next;
  for (int64_t r = 0; r < rows; ++r) {
    h.assign(x.data<float>() + r * in0, x.data<float>() + (r + 1) * in0);
    for (int l = 0; l < a.layers(); ++l) {
      const Tensor& w = ctx.src[1 + 2 * l];
      const float* bias = ctx.src[2 + 2 * l].data<float>();
      const int64_t outs = w.dims()[0], k = w.dims()[1];
      next.assign(static_cast<size_t>(outs), 0.f);
      for (int64_t o = 0; o < outs; ++o) {
        double dot = bias[o];
        for (int64_t p = 0; p < k; ++p) dot += static_cast<double>(h[p]) * w.data<float>()[o * k + p];
        next[o] = static_cast<float>(dot);
      }
      ref::apply_fused(a.activation(l), next.data(), outs);
      h.swap(next);
    }
    std::copy(h.begin(), h.end(), y + r * out_last);
  }
  return Status::ok();
}

KILN_REGISTER_KERNEL(with_float32_compute({
    .name = "ref.mlp",
    .op = "MLP",
    .backend = Backend::kRef,
    .priority = 0,
    .supports = [](const OpCall& call) { return require_dtypes(call, {DataType::kFloat32}); },
    .create = stateless(run_mlp),
}));

}  // namespace
}  // namespace kiln
