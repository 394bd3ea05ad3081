// Reference Attention: per batch entry and query row, the scores in double, softmax (max-subtracted), then the
// weighted sum of the values.
#include "kernels/ref/attention.h"

#include <cmath>
#include <limits>
#include <vector>

namespace kiln {
namespace {

Status run_attention(KernelContext& ctx) {
  KILN_ASSIGN_OR_RETURN(AttentionShape s, ref::attention_shape_of(ctx));
  const bool masked = ctx.src.size() > 3 && ctx.src[3].defined();
  const Dims mask_dims = masked ? ctx.src[3].dims() : Dims{};
  const ref::AttentionLayout at(s, ctx.src[0].dims(), ctx.src[1].dims(), ctx.src[2].dims(),
                                masked ? &mask_dims : nullptr);
  const float scale = ctx.attrs<AttentionAttrs>().scale;
  const float *q = ctx.src[0].data<float>(), *k = ctx.src[1].data<float>(), *v = ctx.src[2].data<float>();
  const float* mask = masked ? ctx.src[3].data<float>() : nullptr;
  float* y = ctx.dst[0].data<float>();
  std::vector<double> p(static_cast<size_t>(s.sk));
  for (int64_t b = 0; b < at.batch_count(); ++b) {
    const float *qb = at.q(q, b), *kb = at.k(k, b), *vb = at.v(v, b);
    for (int64_t i = 0; i < s.s; ++i) {
      const float* m = mask ? at.mask_row(mask, b, i) : nullptr;
      double max = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j < s.sk; ++j) {
        double dot = 0;
        for (int64_t d = 0; d < s.d; ++d) dot += double(qb[i * at.q_row() + d]) * kb[j * at.k_row() + d];
        p[j] = double(scale) * dot + (m ? m[j * at.mask_col_step()] : 0.f);
        max = std::max(max, p[j]);
      }
      double sum = 0;
      for (int64_t j = 0; j < s.sk; ++j) sum += p[j] = std::exp(p[j] - max);
      for (int64_t e = 0; e < s.dv; ++e) {
        double acc = 0;
        for (int64_t j = 0; j < s.sk; ++j) acc += p[j] * vb[j * at.v_row() + e];
        at.out(y, b)[i * at.out_row() + e] = s.sk ? static_cast<float>(acc / sum) : 0.f;
      }
    }
  }
  return Status::ok();
}

KILN_REGISTER_KERNEL(with_float32_compute({
    .name = "ref.attention",
    .op = "Attention",
    .backend = Backend::kRef,
    .priority = 0,
    .supports = [](const OpCall& call) { return require_dtypes(call, {DataType::kFloat32}); },
    .create = stateless(run_attention),
}));

}  // namespace
}  // namespace kiln
