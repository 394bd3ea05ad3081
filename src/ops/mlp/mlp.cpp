#include "ops/mlp/mlp.h"

#include "ops/fold_cost.h"
#include "ops/registry.h"

namespace kiln {
namespace {

Status check_activations(const MlpAttrs& a) {
  const size_t n = a.activation_kinds.size();
  if (n == 0) return invalid_argument("MLP needs at least one layer (activation_kinds is empty)");
  if (a.activation_alphas.size() != n || a.activation_betas.size() != n)
    return invalid_argument("MLP has ", n, " activation_kinds but ", a.activation_alphas.size(),
                            " activation_alphas and ", a.activation_betas.size(),
                            " activation_betas; give one of each per layer");
  for (size_t l = 0; l < n; ++l) {
    const int64_t k = a.activation_kinds[l];
    if (k == MlpAttrs::kNoActivation) continue;
    if (k < 0 || k > static_cast<int64_t>(ActivationKind::kCelu))
      return invalid_argument("MLP layer ", l, " has activation kind ", k, ", which is no activation (use ",
                              MlpAttrs::kNoActivation, " for none)");
    if (static_cast<ActivationKind>(k) == ActivationKind::kPRelu)
      return invalid_argument("MLP layer ", l, " cannot apply PRelu (its slope is an input)");
  }
  return Status::ok();
}

OpSchema mlp_schema() {
  OpSchema s = make_schema<MlpAttrs>(
      "MLP", "mlp",
      "chain of fully connected layers with bias and activation over x's last axis (the optimizer's N-layer MLP)");
  s.input_names = {"x", "weights", "bias"};
  s.min_inputs = 3;
  s.max_inputs = -1;
  s.infer = [](const InferContext& ctx) -> Result<std::vector<TensorDesc>> {
    const auto& a = ctx.attrs_as<MlpAttrs>();
    KILN_RETURN_IF_ERROR(check_activations(a));
    const int layers = a.layers();
    if (ctx.num_inputs() != 1 + 2 * layers)
      return invalid_argument("MLP with ", layers, " layers takes ", 1 + 2 * layers,
                              " inputs (x, then weights and bias per layer) but has ", ctx.num_inputs());
    const TensorDesc& x = ctx.input(0);
    if (!is_floating(x.dtype))
      return invalid_argument("MLP needs a floating-point input 'x', got ", dtype_name(x.dtype));
    if (x.dims.rank() < 1) return invalid_argument("MLP input 'x' must have rank >= 1 but is a scalar");
    int64_t width = x.dims[x.dims.rank() - 1];
    for (int l = 0; l < layers; ++l) {
      if (!ctx.has_input(1 + 2 * l) || !ctx.has_input(2 + 2 * l))
        return invalid_argument("MLP layer ", l, " needs both its weights and its bias");
      const TensorDesc& w = ctx.input(1 + 2 * l);
      const TensorDesc& b = ctx.input(2 + 2 * l);
      if (w.dtype != x.dtype || b.dtype != x.dtype)
        return invalid_argument("MLP layer ", l, " has weights of type ", dtype_name(w.dtype), " and bias of type ",
                                dtype_name(b.dtype), " but 'x' has ", dtype_name(x.dtype), "; all must match");
      if (w.dims.rank() != 2 || (width >= 0 && w.dims[1] >= 0 && w.dims[1] != width))
        return invalid_argument("MLP layer ", l, " weights must have shape [out, ", width, "] but have shape ",
                                w.dims.to_string());
      if (b.dims.rank() != 1 || (b.dims[0] >= 0 && w.dims[0] >= 0 && b.dims[0] != w.dims[0]))
        return invalid_argument("MLP layer ", l, " bias must have shape [", w.dims[0], "] but has shape ",
                                b.dims.to_string());
      width = w.dims[0];
    }
    Dims out = x.dims;
    out[out.rank() - 1] = width;
    return one_output(x.dtype, out);
  };
  return s;
}

KILN_REGISTER_OP(mlp_schema());

KILN_REGISTER_FOLD_COST("MLP", [](const Attrs&, const std::vector<const Tensor*>& in, const std::vector<TensorDesc>&) {
  const double rows = in[0] && in[0]->rank()
                          ? static_cast<double>(in[0]->numel()) /
                                static_cast<double>(std::max<int64_t>(in[0]->dims()[in[0]->rank() - 1], 1))
                          : 1.0;
  double work = 0;
  for (size_t i = 1; i < in.size(); i += 2)
    if (in[i]) work += rows * static_cast<double>(in[i]->numel());
  return work;
});

}  // namespace
}  // namespace kiln
