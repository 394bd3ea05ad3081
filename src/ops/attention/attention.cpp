#include "ops/attention/attention.h"

#include <algorithm>

#include "ops/fold_cost.h"
#include "ops/registry.h"

namespace kiln {

Dims AttentionShape::scores() const {
  Dims d = batch;
  d.push_back(s);
  d.push_back(sk);
  return d;
}

Dims AttentionShape::operand_batch() const {
  if (heads == 0) return batch;
  Dims d;
  for (int i = 0; i + 1 < batch.rank(); ++i) d.push_back(batch[i]);
  return d;
}

Dims AttentionShape::out() const {
  Dims d = operand_batch();
  d.push_back(s);
  d.push_back(head_count() * dv);
  return d;
}

namespace {

Dims batch_of(const Dims& d) {
  Dims b;
  for (int i = 0; i + 2 < d.rank(); ++i) b.push_back(d[i]);
  return b;
}

bool differ(int64_t a, int64_t b) { return a >= 0 && b >= 0 && a != b; }

}  // namespace

Result<AttentionShape> attention_shape(const Dims& q, const Dims& k, const Dims& v, const Dims* mask, int64_t heads) {
  const std::pair<const char*, const Dims*> operands[] = {{"q", &q}, {"k", &k}, {"v", &v}};
  for (const auto& [name, dims] : operands)
    if (dims->rank() < 2)
      return invalid_argument("Attention input '", name, "' must have rank >= 2 ([..., rows, features]) but has shape ",
                              dims->to_string());
  if (heads < 0) return invalid_argument("Attention attribute 'heads' must be 0 (plain) or a head count, not ", heads);
  AttentionShape s;
  s.heads = heads;
  const int64_t h = s.head_count();
  // The per-head feature size of an operand's last dim (with heads: split into h equal parts).
  auto per_head = [&](const char* name, const Dims& d, int64_t* out) -> Status {
    const int64_t f = d[d.rank() - 1];
    if (f >= 0 && f % h != 0)
      return invalid_argument("Attention input '", name, "' of shape ", d.to_string(), " must have a feature dim that ",
                              h, " heads divide");
    *out = f < 0 ? f : f / h;
    return Status::ok();
  };
  int64_t dk = 0;
  KILN_RETURN_IF_ERROR(per_head("q", q, &s.d));
  KILN_RETURN_IF_ERROR(per_head("k", k, &dk));
  KILN_RETURN_IF_ERROR(per_head("v", v, &s.dv));
  s.s = q[q.rank() - 2];
  s.sk = k[k.rank() - 2];
  if (differ(dk, s.d))
    return invalid_argument("Attention input 'k' of shape ", k.to_string(), " must have the feature size D = ", s.d,
                            heads ? " per head" : "", " of 'q' ", q.to_string(), " in its last dim");
  if (differ(v[v.rank() - 2], s.sk))
    return invalid_argument("Attention input 'v' of shape ", v.to_string(), " must have the key count Sk = ", s.sk,
                            " of 'k' ", k.to_string(), " in its second-to-last dim");
  if (s.sk < 0) s.sk = v[v.rank() - 2];
  if (s.d < 0) s.d = dk;
  auto qk = broadcast_dims(batch_of(q), batch_of(k));
  if (!qk)
    return invalid_argument("Attention batch dims of 'q' ", q.to_string(), " and 'k' ", k.to_string(),
                            " cannot be broadcast together");
  auto all = broadcast_dims(*qk, batch_of(v));
  if (!all)
    return invalid_argument("Attention batch dims of 'v' ", v.to_string(), " cannot be broadcast with those of 'q' ",
                            q.to_string(), " and 'k' ", k.to_string());
  s.batch = *all;
  if (heads) s.batch.push_back(heads);
  if (mask) {
    const Dims scores = s.scores();
    auto both = broadcast_dims(scores, *mask);
    if (!both || *both != scores)
      return invalid_argument("Attention input 'mask' of shape ", mask->to_string(),
                              " must broadcast to the scores' shape ", scores.to_string());
  }
  return s;
}

namespace {

OpSchema attention_schema() {
  OpSchema s = make_schema<AttentionAttrs>("Attention", "attention",
                                           "softmax(scale * q @ k^T + mask) @ v over the last axis (fused attention)");
  s.input_names = {"q", "k", "v", "mask"};
  s.min_inputs = 3;
  s.max_inputs = 4;
  s.infer = [](const InferContext& ctx) -> Result<std::vector<TensorDesc>> {
    const TensorDesc& q = ctx.input(0);
    if (!is_floating(q.dtype))
      return invalid_argument("Attention needs a floating-point input 'q', got ", dtype_name(q.dtype));
    for (int i = 1; i < ctx.num_inputs(); ++i)
      if (ctx.has_input(i) && ctx.input(i).dtype != q.dtype)
        return invalid_argument("Attention input '",
                                i == 1   ? "k"
                                : i == 2 ? "v"
                                         : "mask",
                                "' has type ", dtype_name(ctx.input(i).dtype), " but 'q' has ", dtype_name(q.dtype),
                                "; all must have the same type");
    const Dims* mask = ctx.has_input(3) ? &ctx.input(3).dims : nullptr;
    KILN_ASSIGN_OR_RETURN(AttentionShape shape, attention_shape(q.dims, ctx.input(1).dims, ctx.input(2).dims, mask,
                                                                ctx.attrs_as<AttentionAttrs>().heads));
    return one_output(q.dtype, shape.out());
  };
  return s;
}

KILN_REGISTER_OP(attention_schema());

// Two matrix products per batch entry: S * Sk * (D + Dv), plus the softmax.
KILN_REGISTER_FOLD_COST("Attention", [](const Attrs&, const std::vector<const Tensor*>& in,
                                        const std::vector<TensorDesc>& out) {
  if (in.size() < 3 || !in[0] || !in[1] || !in[2] || out.empty()) return output_elements(out);
  const Dims& k = in[1]->dims();
  const Dims& q = in[0]->dims();
  const double sk = static_cast<double>(k[k.rank() - 2]), d = static_cast<double>(q[q.rank() - 1]);
  const Dims& o = out[0].dims;
  return output_elements(out) / std::max<double>(1, static_cast<double>(o[o.rank() - 1])) * sk *
         (d + static_cast<double>(o[o.rank() - 1]) + 4);
});

}  // namespace
}  // namespace kiln
