// GEMM fusions: batch norm folded into the weights, and the epilogue (bias, residual add, activation) fused into
// MatrixMultiply / FullyConnected.
#include <cmath>
#include <unordered_set>

#include "ops/activation/activation.h"
#include "ops/elementwise/elementwise.h"
#include "ops/normalization/normalization.h"
#include "passes/gemm_pattern.h"
#include "passes/passes.h"
#include "passes/pattern.h"

namespace kiln {
namespace {

// The sum `n` reads `v` and another value: that value, or nullptr.
Value* sum_partner(const Node* n, const Value* v) {
  const auto* a = attrs_if<ElementWiseAttrs>(n, "ElementWise");
  if (!a || a->op != ElementWiseOp::kSum || n->inputs.size() != 2) return nullptr;
  if (n->inputs[0] == v) return n->inputs[1];
  if (n->inputs[1] == v) return n->inputs[0];
  return nullptr;
}

// Runs `fuse(gemm, next)` for every gemm whose output has one reader `next` of op `next_op`; `fuse` returns
// whether it replaced both (they are then skipped).
template <class F>
Status for_each_gemm_and_reader(PassContext& ctx, std::string_view next_op, F fuse) {
  Graph& g = ctx.graph();
  KILN_ASSIGN_OR_RETURN(std::vector<Node*> order, g.topological_order());
  std::unordered_set<const Node*> gone;  // fused away: compared, never read
  for (Node* n : order) {
    if (gone.count(n) || !is_gemm(n)) continue;
    Node* next = sole_consumer(g, n->outputs[0]);
    if (!next || next->op() != next_op || gone.count(next)) continue;
    KILN_ASSIGN_OR_RETURN(bool replaced, fuse(n, next));
    if (replaced) gone.insert({n, next});
  }
  return Status::ok();
}

// Replaces gemm + next by one gemm with `attrs` and `inputs`; reports it with `what`, or the refusal (then drops
// the constants the pass made for it, when `made_constants`).
Result<bool> rewrite(PassContext& ctx, Node* gemm, Node* next, std::unique_ptr<Attrs> attrs, std::vector<Value*> inputs,
                     const std::string& what, bool made_constants = false) {
  std::vector<Node*> pair = {gemm, next};
  const std::string names = quoted(pair);
  auto fused = replace_with_node(ctx, pair, gemm->op(), std::move(attrs), trimmed(std::move(inputs)));
  if (!fused) {
    if (made_constants) ctx.graph().remove_dead_nodes();
    ctx.refused(str_cat("fusing ", names, ": ", fused.status().message()));
    return false;
  }
  ctx.applied(str_cat("fused ", names, " (", what, ")"));
  return true;
}

// gemm-bias: MatrixMultiply / FullyConnected without a bias + a constant [n] or [1, ..., n] -> its bias.
Status fuse_gemm_bias(PassContext& ctx) {
  return for_each_gemm_and_reader(ctx, "ElementWise", [&](Node* gemm, Node* add) -> Result<bool> {
    Value* bias = sum_partner(add, gemm->outputs[0]);
    if (!bias || !bias->value() || !is_floating(bias->dtype)) return false;
    std::vector<Node*> pair = {gemm, add};
    auto refuse = [&](auto&&... why) {
      ctx.refused(str_cat("fusing ", quoted(pair), ": ", why...));
      return false;
    };
    if (gemm_input(*gemm, 2)) return refuse("'", gemm->name, "' has a bias already");
    if (has_epilogue(*gemm)) return refuse("'", gemm->name, "' has a fused residual or activation before the add");
    const int64_t n = gemm_columns(*gemm);
    if (add->outputs[0]->dims != gemm->outputs[0]->dims || !along_last_axis(*bias, n))
      return refuse("the constant '", bias->name, "' of shape ", bias->dims.to_string(),
                    " is not a bias over the output's last axis (", gemm->outputs[0]->dims.to_string(),
                    "; a bias is [n] or [1, ..., n])");
    Value* as_bias = bias;
    if (gemm->op() == "FullyConnected" && bias->dims.rank() != 1) {  // its bias is [out]
      KILN_ASSIGN_OR_RETURN(Tensor flat, bias->value()->reshape(Dims{n}));
      KILN_ASSIGN_OR_RETURN(as_bias,
                            ctx.graph().add_constant(free_name(ctx.graph(), bias->name + "/as_bias"), std::move(flat)));
    }
    std::unique_ptr<Attrs> attrs = gemm->attrs->clone();
    if (gemm->op() == "MatrixMultiply") static_cast<MatrixMultiplyAttrs&>(*attrs).beta = 1.f;
    std::vector<Value*> inputs = {gemm->inputs[0], gemm->inputs[1], as_bias};
    return rewrite(ctx, gemm, add, std::move(attrs), inputs,
                   str_cat("'", bias->name, "' of shape ", bias->dims.to_string(), " as the bias"), as_bias != bias);
  });
}

// gemm-elementwise-sum: + a tensor of the output's exact dims -> the gemm's residual input.
Status fuse_gemm_sum(PassContext& ctx) {
  return for_each_gemm_and_reader(ctx, "ElementWise", [&](Node* gemm, Node* add) -> Result<bool> {
    Value* residual = sum_partner(add, gemm->outputs[0]);
    if (!residual || !is_floating(residual->dtype)) return false;
    std::vector<Node*> pair = {gemm, add};
    auto refuse = [&](auto&&... why) {
      ctx.refused(str_cat("fusing ", quoted(pair), ": ", why...));
      return false;
    };
    if (gemm_input(*gemm, kGemmResidualInput)) return refuse("'", gemm->name, "' has a residual already");
    if (gemm_activation(*gemm).on)
      return refuse("'", gemm->name, "' has a fused activation, which comes after a residual");
    const Dims& out = gemm->outputs[0]->dims;
    if (residual->dims != out || add->outputs[0]->dims != out || !out.is_static())
      return refuse("'", residual->name, "' of shape ", residual->dims.to_string(), " broadcasts with the output ",
                    out.to_string(), "; a residual must have the output's exact shape");
    std::vector<Value*> inputs = gemm->inputs;
    inputs.resize(kGemmResidualInput + 1, nullptr);
    inputs[kGemmResidualInput] = residual;
    return rewrite(ctx, gemm, add, gemm->attrs->clone(), inputs, str_cat("'", residual->name, "' as the residual"));
  });
}

// gemm-activation: + an activation -> the gemm's fused activation.
Status fuse_gemm_activation(PassContext& ctx) {
  return for_each_gemm_and_reader(ctx, "Activation", [&](Node* gemm, Node* act) -> Result<bool> {
    const auto& a = static_cast<const ActivationAttrs&>(*act->attrs);
    std::vector<Node*> pair = {gemm, act};
    if (!is_floating(gemm->outputs[0]->dtype)) return false;
    if (a.kind == ActivationKind::kPRelu || act->inputs.size() != 1) {
      ctx.refused(str_cat("fusing ", quoted(pair), ": PRelu's slope is an input; only activations of one input fuse"));
      return false;
    }
    if (gemm_activation(*gemm).on) {
      ctx.refused(str_cat("fusing ", quoted(pair), ": '", gemm->name, "' has a fused ",
                          enum_name(gemm_activation(*gemm).kind), " already"));
      return false;
    }
    std::unique_ptr<Attrs> attrs = gemm->attrs->clone();
    gemm_activation(*gemm, *attrs) = FusedActivation::from(a);
    return rewrite(ctx, gemm, act, std::move(attrs), gemm->inputs, str_cat(enum_name(a.kind), " as the epilogue"));
  });
}

// The constant 2-D weights of a gemm with their layout: FullyConnected's [out, K] (`per_row`: output column o is
// row o) or MatrixMultiply's b, [K, N] or transposed [N, K].
struct GemmWeights {
  Value* value = nullptr;
  bool per_row = false;
};
std::optional<GemmWeights> constant_weights(const Node& gemm) {
  Value* w = gemm.inputs[1];
  if (!w->value() || w->dims.rank() != 2) return std::nullopt;
  if (gemm.op() == "FullyConnected") return GemmWeights{w, true};
  const auto& a = static_cast<const MatrixMultiplyAttrs&>(*gemm.attrs);
  if (gemm.inputs[0]->dims.rank() < 2) return std::nullopt;  // a vector `a` drops the row dim
  return GemmWeights{w, a.transpose_b};
}

// batchnorm-folding-gemm: a gemm with constant 2-D weights + BatchNormalization over its last (feature) axis ->
// scaled weights and a new bias.
Status fold_batchnorm(PassContext& ctx) {
  Graph& g = ctx.graph();
  return for_each_gemm_and_reader(ctx, "BatchNormalization", [&](Node* gemm, Node* bn) -> Result<bool> {
    std::vector<Node*> pair = {gemm, bn};
    const std::string names = quoted(pair);  // the nodes are gone once replaced
    auto refuse = [&](auto&&... why) {
      ctx.refused(str_cat("folding ", names, ": ", why...));
      return false;
    };
    const Dims& out = gemm->outputs[0]->dims;
    if (out.rank() != 2 || !out.is_static())
      return refuse("batch norm normalizes axis 1, which is the output's last axis only for 2-D outputs (output ",
                    out.to_string(), ")");
    if (has_epilogue(*gemm)) return refuse("'", gemm->name, "' has a fused residual or activation");
    auto w = constant_weights(*gemm);
    if (!w) return refuse("the weights of '", gemm->name, "' are not a constant 2-D matrix");
    for (int i = 1; i < 5; ++i)
      if (!bn->inputs[i] || !bn->inputs[i]->value())
        return refuse("the batch norm's ", bn->schema->input_name(i), " is not a constant");
    const int64_t n = out[1];
    Value* c = gemm_input(*gemm, 2);
    if (c && (!c->value() || !along_last_axis(*c, n)))
      return refuse("the bias '", c->name, "' of shape ", c->dims.to_string(), " is not a constant [", n, "]");
    const float eps = static_cast<const BatchNormalizationAttrs&>(*bn->attrs).epsilon;
    const std::vector<double> gamma = tensor_to_doubles(*bn->inputs[1]->value()),
                              shift = tensor_to_doubles(*bn->inputs[2]->value()),
                              mean = tensor_to_doubles(*bn->inputs[3]->value()),
                              var = tensor_to_doubles(*bn->inputs[4]->value());
    std::vector<double> scale(n);
    for (int64_t o = 0; o < n; ++o) scale[o] = gamma[o] / std::sqrt(var[o] + eps);
    // Weights: each output column o times scale[o]; bias: (bias - mean) * scale + shift.
    const Tensor& wt = *w->value->value();
    KILN_ASSIGN_OR_RETURN(Tensor folded, Tensor::empty(wt.dtype(), wt.dims()));
    const int64_t cols = wt.dims()[1];
    for (int64_t i = 0; i < wt.numel(); ++i) folded.set(i, wt.at(i) * scale[w->per_row ? i / cols : i % cols]);
    float bias_scale = 1.f;
    if (gemm->op() == "MatrixMultiply") bias_scale = static_cast<const MatrixMultiplyAttrs&>(*gemm->attrs).beta;
    const std::vector<double> old_bias = c ? tensor_to_doubles(*c->value()) : std::vector<double>(n, 0.0);
    KILN_ASSIGN_OR_RETURN(Tensor bias, Tensor::empty(gemm->outputs[0]->dtype, Dims{n}));
    for (int64_t o = 0; o < n; ++o) bias.set(o, (bias_scale * old_bias[o] - mean[o]) * scale[o] + shift[o]);
    KILN_ASSIGN_OR_RETURN(Value * new_w,
                          g.add_constant(free_name(g, gemm->name + "/bn_folded_weights"), std::move(folded)));
    KILN_ASSIGN_OR_RETURN(Value * new_b, g.add_constant(free_name(g, gemm->name + "/bn_folded_bias"), std::move(bias)));
    std::unique_ptr<Attrs> attrs = gemm->attrs->clone();
    if (gemm->op() == "MatrixMultiply") static_cast<MatrixMultiplyAttrs&>(*attrs).beta = 1.f;
    auto fused = replace_with_node(ctx, pair, gemm->op(), std::move(attrs), {gemm->inputs[0], new_w, new_b});
    if (!fused) {
      g.remove_dead_nodes();  // drops the unused new constants
      return refuse(fused.status().message());
    }
    ctx.applied(str_cat("folded ", names, " into new weights '", new_w->name, "' and bias '", new_b->name, "'"));
    return true;
  });
}

}  // namespace

Pass batchnorm_folding_gemm_pass() {
  return {"batchnorm-folding-gemm",
          "BatchNormalization over the features of a fully connected / matrix multiply with constant 2-D weights -> "
          "folded into new weights and bias",
          fold_batchnorm};
}

Pass gemm_bias_pass() {
  return {"gemm-bias",
          "matrix multiply / fully connected without bias + a constant [n] or [1, ..., n] -> the layer's bias",
          fuse_gemm_bias};
}

Pass gemm_elementwise_sum_pass() {
  return {"gemm-elementwise-sum",
          "matrix multiply / fully connected + a tensor of the output's exact shape -> the layer's residual input "
          "(no broadcasting)",
          fuse_gemm_sum};
}

Pass gemm_activation_pass() {
  return {"gemm-activation",
          "matrix multiply / fully connected + an activation (ReLU, GELU, ...; not PReLU) -> the layer's epilogue",
          fuse_gemm_activation};
}

}  // namespace kiln
