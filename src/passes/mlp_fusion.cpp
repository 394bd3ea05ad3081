// mlp: TensorRT's MLP fusions. A MatrixMultiply / FullyConnected with constant 2-D weights and a bias and/or a
// fused activation (what gemm-bias and gemm-activation leave) is a 1-layer MLP; chains of 2 to 31 such layers with
// nothing between become one MLP node.
#include <unordered_set>

#include "kiln/logger.h"
#include "ops/mlp/mlp.h"
#include "passes/gemm_pattern.h"
#include "passes/passes.h"
#include "passes/pattern.h"

namespace kiln {
namespace {

constexpr size_t kMaxMlpLayers = 31;

const MatrixMultiplyAttrs* matmul_attrs(const Node& n) { return attrs_if<MatrixMultiplyAttrs>(&n, "MatrixMultiply"); }

// Why `n` is no MLP layer, or "" when it is one.
std::string layer_problem(const Node& n) {
  if (!is_gemm(&n)) return "it is no matrix multiply or fully connected layer";
  if (!is_floating(n.outputs[0]->dtype)) return "it computes in integers";
  if (gemm_input(n, kGemmResidualInput)) return "it has a residual input";
  Value* x = n.inputs[0];
  Value* w = n.inputs[1];
  Value* bias = gemm_input(n, 2);
  if (!bias && !gemm_activation(n).on) return "it has neither a bias nor an activation";
  if (!w->value() || w->dims.rank() != 2) return "its weights are not a constant 2-D matrix";
  if (x->dims.rank() < 1 || x->dims[x->dims.rank() - 1] < 0) return "its input's last dim is not known";
  if (const auto* a = matmul_attrs(n)) {
    if (a->transpose_a) return "it transposes its input";
    const int64_t cols = gemm_columns(n);
    const bool plain_bias = bias && bias->dims == Dims{cols} && a->beta == 1.f;
    if (bias && !plain_bias && !(bias->value() && along_last_axis(*bias, cols)))
      return str_cat("its bias of shape ", bias->dims.to_string(), " is not a constant [", cols, "]");
    return "";
  }
  const auto& fc = static_cast<const FullyConnectedAttrs&>(*n.attrs);
  const int r = x->dims.rank();
  if ((fc.axis < 0 ? fc.axis + r : fc.axis) != r - 1) return "it flattens more than its input's last axis";
  return "";
}

// A new constant in `g` of `dims` from `values`, named from `base`.
Result<Value*> new_constant(Graph& g, const std::string& base, DataType dtype, Dims dims,
                            const std::vector<double>& values) {
  KILN_ASSIGN_OR_RETURN(Tensor t, Tensor::empty(dtype, dims));
  for (int64_t i = 0; i < t.numel(); ++i) t.set(i, values[static_cast<size_t>(i)]);
  return g.add_constant(free_name(g, base), std::move(t));
}

// Layer `n`'s inputs as the MLP takes them: weights [out, in] and bias [out], new constants where the layer's own
// differ (a matrix multiply's [in, out] weights, its alpha and beta, a missing bias).
Result<std::pair<Value*, Value*>> mlp_weights_and_bias(Graph& g, const Node& n) {
  Value* w = n.inputs[1];
  Value* bias = gemm_input(n, 2);
  const DataType dtype = n.outputs[0]->dtype;
  const int64_t outs = gemm_columns(n);
  float alpha = 1.f, beta = 1.f;
  bool transposed = true;  // stored as [out, in]
  if (const auto* a = matmul_attrs(n)) alpha = a->alpha, beta = a->beta, transposed = a->transpose_b;
  if (!transposed || alpha != 1.f) {
    const Tensor& t = *w->value();
    const int64_t rows = t.dims()[0], cols = t.dims()[1];
    std::vector<double> v(static_cast<size_t>(t.numel()));
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) v[transposed ? i * cols + j : j * rows + i] = alpha * t.at(i * cols + j);
    const Dims dims = transposed ? Dims{rows, cols} : Dims{cols, rows};
    KILN_ASSIGN_OR_RETURN(w, new_constant(g, n.name + "/mlp_weights", dtype, dims, v));
  }
  if (!bias) {
    KILN_ASSIGN_OR_RETURN(bias, new_constant(g, n.name + "/mlp_bias", dtype, Dims{outs}, std::vector<double>(outs)));
  } else if (bias->dims != Dims{outs} || beta != 1.f) {
    std::vector<double> v = tensor_to_doubles(*bias->value());
    for (double& e : v) e *= beta;
    KILN_ASSIGN_OR_RETURN(bias, new_constant(g, n.name + "/mlp_bias", dtype, Dims{outs}, v));
  }
  return std::make_pair(w, bias);
}

Status fuse_chain(PassContext& ctx, const std::vector<Node*>& chain) {
  Graph& g = ctx.graph();
  const std::string names = quoted(chain);
  const std::string what = str_cat(chain.size(), "-layer MLP");
  MlpAttrs attrs;
  std::vector<Value*> inputs = {chain[0]->inputs[0]};
  for (Node* n : chain) {
    KILN_ASSIGN_OR_RETURN(auto wb, mlp_weights_and_bias(g, *n));
    inputs.insert(inputs.end(), {wb.first, wb.second});
    attrs.add_layer(gemm_activation(*n));
  }
  auto fused = replace_with_node(ctx, chain, "MLP", std::make_unique<MlpAttrs>(attrs), inputs);
  if (!fused) {
    // The constants made for it are unused now; the final dead-code pass drops them (removing nodes here could
    // remove ones the caller's loop has yet to visit).
    ctx.refused(str_cat("fusing ", names, " into a ", what, ": ", fused.status().message()));
    return Status::ok();
  }
  ctx.applied(str_cat("fused ", names, " into a ", what));
  return Status::ok();
}

Status fuse_mlp(PassContext& ctx) {
  Graph& g = ctx.graph();
  KILN_ASSIGN_OR_RETURN(std::vector<Node*> order, g.topological_order());
  std::unordered_set<const Node*> taken;  // in a chain already (compared, never read once fused)
  for (Node* head : order) {
    if (taken.count(head) || !layer_problem(*head).empty()) continue;
    std::vector<Node*> chain = {head};
    while (chain.size() < kMaxMlpLayers) {
      Node* next = sole_consumer(g, chain.back()->outputs[0]);
      if (!is_gemm(next) || next->inputs[0] != chain.back()->outputs[0]) break;
      if (std::string why = layer_problem(*next); !why.empty()) {
        ctx.refused(str_cat("chaining ", quoted(chain), " + '", next->name, "': '", next->name,
                            "' is not an MLP layer: ", why));
        break;
      }
      chain.push_back(next);
    }
    taken.insert(chain.begin(), chain.end());
    if (chain.size() == 1) {
      // Not a change: the layer stays as the gemm passes left it.
      log_verbose("optimizer: mlp: '", head->name, "' is a 1-layer MLP (it stays a fused ", head->op(), ")");
      continue;
    }
    KILN_RETURN_IF_ERROR(fuse_chain(ctx, chain));
  }
  return Status::ok();
}

}  // namespace

Pass mlp_pass() {
  return {"mlp",
          "chains of 2 to 31 matrix multiply / fully connected layers with constant weights and a bias or activation "
          "-> one N-layer MLP (a single one stays a fused layer: a 1-layer MLP)",
          fuse_mlp};
}

}  // namespace kiln
