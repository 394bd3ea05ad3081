// The LayerNorm pattern older PyTorch exports write: ReduceMean, Sub, Pow 2 (or Mul of the difference by
// itself), ReduceMean, Add eps, Sqrt, Div, then optionally Mul gamma and Add beta, over the last axes ->
// one LayerNormalization.
#include <algorithm>

#include "ops/elementwise/elementwise.h"
#include "ops/normalization/normalization.h"
#include "ops/reduce/reduce.h"
#include "ops/unary/unary.h"
#include "passes/passes.h"
#include "passes/pattern.h"

namespace kiln {
namespace {

bool is_ew(const Node* n, ElementWiseOp op) {
  const auto* a = attrs_if<ElementWiseAttrs>(n, "ElementWise");
  return a && a->op == op && n->inputs.size() == 2;
}

// The first reader of `v` that `pred` accepts, or nullptr.
template <class P>
Node* reader(const Value* v, P pred) {
  for (const Use& u : v->uses)
    if (pred(u.node)) return u.node;
  return nullptr;
}

// The other operand of a binary node than `v`.
Value* other_operand(const Node* n, const Value* v) { return n->inputs[0] == v ? n->inputs[1] : n->inputs[0]; }

// A ReduceMean's axes, normalized and sorted, or nullopt when they are not known now.
std::optional<std::vector<int64_t>> mean_axes(const Node* n) {
  const auto* a = attrs_if<ReduceAttrs>(n, "Reduce");
  if (!a || a->op != ReduceOp::kMean) return std::nullopt;
  const Tensor* given = n->inputs.size() > 1 && n->inputs[1] ? n->inputs[1]->value() : nullptr;
  if (n->inputs.size() > 1 && n->inputs[1] && !given) return std::nullopt;
  std::vector<int64_t> axes = reduce_axes(*a, given);
  const int r = n->inputs[0]->dims.rank();
  if (axes.empty()) {  // every axis (unless noop_with_empty_axes)
    if (a->noop_with_empty_axes) return std::nullopt;
    for (int i = 0; i < r; ++i) axes.push_back(i);
  }
  for (int64_t& x : axes) x = x < 0 ? x + r : x;
  std::sort(axes.begin(), axes.end());
  return axes;
}

// Where the pattern ends and what the fused layer takes.
struct LayerNormMatch {
  std::vector<Node*> nodes;
  Value *x = nullptr, *gamma = nullptr, *beta = nullptr;
  int64_t axis = -1;
  float epsilon = 0;
  std::string why;
};

// A parameter of the normalized dims: rank within the normalized rank once leading 1s are dropped.
bool param_shaped(const Value* p, int x_rank, int norm_rank) {
  const int extra = p->dims.rank() - norm_rank;
  for (int i = 0; i < extra; ++i)
    if (p->dims[i] != 1) return false;
  return p->dims.rank() <= x_rank;
}

// The optional Mul gamma / Add beta after `y`: the node when it applies (its parameter in *param); nullptr when
// the pattern ends before it; `why` set when the parameter is shaped like one but not a constant.
Node* affine_step(const Graph& g, Value* y, ElementWiseOp op, int x_rank, int norm_rank, Value** param,
                  std::string& why) {
  Node* n = sole_consumer(g, y);
  if (!is_ew(n, op)) return nullptr;
  Value* p = other_operand(n, y);
  if (p == y || !param_shaped(p, x_rank, norm_rank)) return nullptr;
  if (!p->value()) {
    why = str_cat("the ", op == ElementWiseOp::kProd ? "scale (gamma)" : "bias (beta)", " '", p->name,
                  "' is not a constant");
    return n;
  }
  *param = p;
  return n;
}

std::optional<LayerNormMatch> match_layer_norm(const Graph& g, Node* mean) {
  std::optional<std::vector<int64_t>> axes = mean_axes(mean);
  if (!axes) return std::nullopt;
  LayerNormMatch m;
  m.x = mean->inputs[0];
  Node* sub = sole_consumer(g, mean->outputs[0]);
  if (!is_ew(sub, ElementWiseOp::kSub) || sub->inputs[0] != m.x || sub->inputs[1] != mean->outputs[0])
    return std::nullopt;
  Value* d = sub->outputs[0];
  Node* sq = reader(d, [&](const Node* n) {
    return (is_ew(n, ElementWiseOp::kProd) && n->inputs[0] == d && n->inputs[1] == d) ||
           (is_ew(n, ElementWiseOp::kPow) && n->inputs[0] == d && known_scalar(n->inputs[1]) == 2.0);
  });
  Node* div = reader(d, [&](const Node* n) { return is_ew(n, ElementWiseOp::kDiv) && n->inputs[0] == d; });
  if (!sq || !div) return std::nullopt;
  Node* var = reader(sq->outputs[0], [](const Node* n) { return mean_axes(n).has_value(); });
  if (!var) return std::nullopt;
  Node* add_eps = reader(var->outputs[0], [](const Node* n) { return is_ew(n, ElementWiseOp::kSum); });
  if (!add_eps) return std::nullopt;
  Node* sqrt = reader(add_eps->outputs[0], [](const Node* n) {
    const auto* a = attrs_if<UnaryAttrs>(n, "Unary");
    return a && a->op == UnaryOp::kSqrt;
  });
  if (!sqrt || div->inputs[1] != sqrt->outputs[0]) return std::nullopt;
  m.nodes = {mean, sub, sq, var, add_eps, sqrt, div};

  const int r = m.x->dims.rank();
  const int k = static_cast<int>(axes->size());
  m.axis = r - k;
  bool last = k > 0;
  for (int i = 0; i < k; ++i) last = last && (*axes)[static_cast<size_t>(i)] == r - k + i;
  std::vector<int64_t> axes2 = *mean_axes(var);
  if (!last || axes2 != *axes) {
    m.why = str_cat("the means run over axes ", Dims::from(*axes)->to_string(), " and ", Dims::from(axes2)->to_string(),
                    " of a rank-", r, " input, not both over the same last ones");
    return m;
  }
  for (Node* mean_node : {mean, var})
    if (!static_cast<const ReduceAttrs&>(*mean_node->attrs).keep_dims) {
      m.why = str_cat("'", mean_node->name, "' drops the reduced dims (keepdims 0)");
      return m;
    }
  const std::optional<double> eps = known_scalar(other_operand(add_eps, var->outputs[0]));
  if (!eps) {
    m.why = str_cat("epsilon '", other_operand(add_eps, var->outputs[0])->name, "' is not a constant scalar");
    return m;
  }
  m.epsilon = static_cast<float>(*eps);
  Value* y = div->outputs[0];
  if (Node* mul = affine_step(g, y, ElementWiseOp::kProd, r, k, &m.gamma, m.why)) {
    m.nodes.push_back(mul);
    y = mul->outputs[0];
  }
  if (!m.why.empty()) return m;
  if (Node* add = affine_step(g, y, ElementWiseOp::kSum, r, k, &m.beta, m.why)) m.nodes.push_back(add);
  return m;
}

// Why a value computed inside `nodes` (but the last's) is read outside them ("" when none is).
std::string outside_reader(const Graph& g, const std::vector<Node*>& nodes) {
  for (size_t i = 0; i + 1 < nodes.size(); ++i)
    for (Value* v : nodes[i]->outputs) {
      if (is_graph_output(g, v)) return str_cat("'", v->name, "' is a graph output");
      for (const Use& u : v->uses)
        if (std::find(nodes.begin(), nodes.end(), u.node) == nodes.end())
          return str_cat("'", v->name, "' is also read by '", u.node->name, "'");
    }
  return "";
}

// A constant parameter with leading 1s dropped down to the normalized rank (LayerNormalization's broadcast).
Result<Value*> param_input(Graph& g, Value* p, int norm_rank) {
  if (!p || p->dims.rank() <= norm_rank) return p;
  Dims dims;
  for (int i = p->dims.rank() - norm_rank; i < p->dims.rank(); ++i) dims.push_back(p->dims[i]);
  KILN_ASSIGN_OR_RETURN(Tensor copy, p->value()->clone());
  KILN_ASSIGN_OR_RETURN(Tensor shaped, copy.reshape(dims));
  return g.add_constant(free_name(g, p->name + "#layer_norm"), std::move(shaped));
}

Status fuse_layer_norms(PassContext& ctx) {
  Graph& g = ctx.graph();
  KILN_ASSIGN_OR_RETURN(std::vector<Node*> order, g.topological_order());
  std::vector<std::string> means;
  for (Node* n : order)
    if (mean_axes(n)) means.push_back(n->name);
  for (const std::string& name : means) {
    Node* mean = g.find_node(name);
    if (!mean) continue;
    std::optional<LayerNormMatch> m = match_layer_norm(g, mean);
    if (!m) continue;
    const std::string what = quoted(m->nodes);
    if (m->why.empty()) m->why = outside_reader(g, m->nodes);
    if (!m->why.empty()) {
      ctx.refused(str_cat("fusing ", what, " into LayerNormalization: ", m->why));
      continue;
    }
    const int norm_rank = m->x->dims.rank() - static_cast<int>(m->axis);
    auto gamma = param_input(g, m->gamma, norm_rank);
    auto beta = param_input(g, m->beta, norm_rank);
    if (!gamma || !beta) {
      ctx.refused(
          str_cat("fusing ", what, " into LayerNormalization: ", (!gamma ? gamma.status() : beta.status()).message()));
      continue;
    }
    auto attrs = std::make_unique<LayerNormalizationAttrs>();
    attrs->axis = m->axis - m->x->dims.rank();
    attrs->epsilon = m->epsilon;
    const int64_t axis = attrs->axis;
    std::vector<Value*> inputs = {m->x, *gamma, *beta};
    while (inputs.size() > 1 && !inputs.back()) inputs.pop_back();
    auto fused = replace_with_node(ctx, m->nodes, "LayerNormalization", std::move(attrs), inputs);
    if (!fused) {
      ctx.refused(str_cat("fusing ", what, " into LayerNormalization: ", fused.status().message()));
      continue;
    }
    ctx.applied(str_cat("fused ", what, " into LayerNormalization (axis ", axis, ", epsilon ", m->epsilon,
                        m->gamma ? ", scale" : "", m->beta ? ", bias" : "", ")"));
  }
  return Status::ok();
}

}  // namespace

Pass layernorm_pattern_pass() {
  return {"layernorm-pattern",
          "fuses ReduceMean, Sub, Pow 2, ReduceMean, Add eps, Sqrt, Div (and a constant Mul gamma, Add beta) over the "
          "last axes into one LayerNormalization",
          fuse_layer_norms};
}

}  // namespace kiln
