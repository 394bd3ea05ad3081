// The attention fusion: MatMul(q, k^T), a constant scale (on the scores or on q), an optional additive mask,
// Softmax over the last axis and MatMul(., v) -> one Attention node taking k untransposed.
#include <algorithm>

#include "ops/attention/attention.h"
#include "ops/elementwise/elementwise.h"
#include "ops/matmul/matmul.h"
#include "ops/shuffle/shuffle.h"
#include "ops/softmax/softmax.h"
#include "passes/passes.h"
#include "passes/pattern.h"

namespace kiln {
namespace {

// A Div or Mul of `x` by a constant scalar: the factor x is multiplied by, or nullopt.
std::optional<double> scalar_factor(const Node& n, const Value* x) {
  const auto* a = attrs_if<ElementWiseAttrs>(&n, "ElementWise");
  if (!a || n.inputs.size() != 2) return std::nullopt;
  const Value* other = n.inputs[0] == x ? n.inputs[1] : n.inputs[0];
  const std::optional<double> c = known_scalar(other);
  if (!c) return std::nullopt;
  if (a->op == ElementWiseOp::kProd) return *c;
  if (a->op == ElementWiseOp::kDiv && n.inputs[0] == x && *c != 0) return 1.0 / *c;
  return std::nullopt;
}

bool is_scale_op(const Node* n) {
  const auto* a = attrs_if<ElementWiseAttrs>(n, "ElementWise");
  return a && n->inputs.size() == 2 && (a->op == ElementWiseOp::kProd || a->op == ElementWiseOp::kDiv);
}

Node* producer_if(const Value* v, std::string_view op) {
  return v && v->producer && v->producer->op() == op ? v->producer : nullptr;
}

// The MatMul `v` comes from, directly or through a Div/Mul (returned in *scale, with the scores' input index).
Node* scores_matmul(const Value* v, Node** scale) {
  *scale = nullptr;
  if (Node* mm = producer_if(v, "MatrixMultiply")) return mm;
  Node* s = v ? v->producer : nullptr;
  if (!is_scale_op(s)) return nullptr;
  for (Value* in : s->inputs)
    if (Node* mm = producer_if(in, "MatrixMultiply")) {
      *scale = s;
      return mm;
    }
  return nullptr;
}

// The composite permutation of a Shuffle that only transposes, or nullopt.
std::optional<std::vector<int64_t>> pure_transpose(const Node* n) {
  const auto* a = attrs_if<ShuffleAttrs>(n, "Shuffle");
  if (!a || a->has_reshape_dims || (n->inputs.size() > 1 && n->inputs[1])) return std::nullopt;
  const int r = n->inputs[0]->dims.rank();
  std::vector<int64_t> perm(static_cast<size_t>(r));
  for (int i = 0; i < r; ++i) {
    const int64_t s = a->second_transpose.empty() ? i : a->second_transpose[static_cast<size_t>(i)];
    perm[static_cast<size_t>(i)] = a->first_transpose.empty() ? s : a->first_transpose[static_cast<size_t>(s)];
  }
  return perm;
}

// Why `v` cannot disappear into the fused layer ("" when only `next` reads it).
std::string also_read(const Graph& g, const Value* v, const Node* next) {
  if (is_graph_output(g, v)) return str_cat("'", v->name, "' is a graph output");
  for (const Use& u : v->uses)
    if (u.node != next) return str_cat("'", v->name, "' is also read by '", u.node->name, "'");
  return "";
}

bool plain_matmul(const Node& n) {
  const auto& a = static_cast<const MatrixMultiplyAttrs&>(*n.attrs);
  return !a.transpose_a && (n.inputs.size() < 3 || !n.inputs[2]) && n.inputs[0]->dims.rank() >= 2 &&
         n.inputs[1]->dims.rank() >= 2;
}

// Everything the rewrite needs; `why` is set when the restriction forbids it.
struct AttentionMatch {
  std::vector<Node*> nodes;  // in topological order
  Value *q = nullptr, *k = nullptr, *v = nullptr, *mask = nullptr;
  double scale = 1;
  Node* k_transpose = nullptr;        // the Shuffle making k^T
  std::vector<int64_t> k_perm;        // the permutation that makes k from the Shuffle's input (empty: none needed)
  bool k_transpose_absorbed = false;  // the Shuffle is part of `nodes`
  std::string why;
};

// nullopt: `softmax` is not the middle of an attention pattern.
std::optional<AttentionMatch> match_attention(const Graph& g, Node* softmax) {
  Node* pv = sole_consumer(g, softmax->outputs[0]);
  if (!pv || pv->op() != "MatrixMultiply" || pv->inputs[0] != softmax->outputs[0] || pv->inputs[1] == pv->inputs[0])
    return std::nullopt;
  AttentionMatch m;
  Value* scores = softmax->inputs[0];
  Node* add = nullptr;
  Node* scale = nullptr;
  Node* qk = nullptr;
  if (const auto* a = attrs_if<ElementWiseAttrs>(scores->producer, "ElementWise"); a && a->op == ElementWiseOp::kSum) {
    add = scores->producer;
    for (int i = 0; i < 2 && !qk; ++i)
      if ((qk = scores_matmul(add->inputs[i], &scale))) m.mask = add->inputs[1 - i];
  } else {
    qk = scores_matmul(scores, &scale);
  }
  if (!qk) return std::nullopt;
  m.nodes = {qk};
  if (scale) m.nodes.push_back(scale);
  if (add) m.nodes.push_back(add);
  m.nodes.push_back(softmax);
  m.nodes.push_back(pv);

  const auto& sa = static_cast<const SoftmaxAttrs&>(*softmax->attrs);
  const int rank = scores->dims.rank();
  const int64_t axis = sa.axis < 0 ? sa.axis + rank : sa.axis;
  if (axis != rank - 1) {
    m.why = str_cat("the softmax runs over axis ", axis, ", not the last (", rank - 1, ")");
    return m;
  }
  for (size_t i = 0; i + 1 < m.nodes.size(); ++i)
    if (std::string why = also_read(g, m.nodes[i]->outputs[0], m.nodes[i + 1]); !why.empty()) {
      m.why = why;
      return m;
    }
  if (scale) {
    const std::optional<double> f = scalar_factor(*scale, qk->outputs[0]);
    if (!f) {
      m.why = str_cat("the scale '", scale->name, "' is not a division or multiplication by a constant scalar");
      return m;
    }
    m.scale = *f;
  }
  if (!plain_matmul(*qk) || !plain_matmul(*pv) || static_cast<const MatrixMultiplyAttrs&>(*pv->attrs).transpose_b ||
      static_cast<const MatrixMultiplyAttrs&>(*pv->attrs).alpha != 1.f) {
    m.why =
        "a MatMul has a 1-D operand, a transposed first operand, a bias or (the second) a transposed operand or alpha";
    return m;
  }
  m.scale *= static_cast<const MatrixMultiplyAttrs&>(*qk->attrs).alpha;
  if (add && add->outputs[0]->dims != qk->outputs[0]->dims) {
    m.why = str_cat("the mask '", m.mask->name, "' of shape ", m.mask->dims.to_string(), " broadcasts the scores to ",
                    add->outputs[0]->dims.to_string());
    return m;
  }
  m.v = pv->inputs[1];
  m.q = qk->inputs[0];
  // A constant scale on q moves into the layer.
  if (Node* qs = m.q->producer; is_scale_op(qs) && sole_consumer(g, m.q) == qk)
    for (Value* in : qs->inputs)
      if (std::optional<double> f = scalar_factor(*qs, in); f && in != m.q) {
        m.scale *= *f;
        m.q = in;
        m.nodes.insert(m.nodes.begin(), qs);
        break;
      }
  for (const Value* in : {m.q, m.v, m.mask})
    if (in && std::find(m.nodes.begin(), m.nodes.end(), in->producer) != m.nodes.end()) {
      m.why = str_cat("'", in->name, "' is both computed inside the pattern and an operand of it");
      return m;
    }
  // k: the MatMul transposes it itself, or a transposing Shuffle made k^T.
  Value* kt = qk->inputs[1];
  if (static_cast<const MatrixMultiplyAttrs&>(*qk->attrs).transpose_b) {
    m.k = kt;
    return m;
  }
  std::optional<std::vector<int64_t>> perm = pure_transpose(kt->producer);
  const int r = kt->dims.rank();
  if (!perm) {
    m.why = str_cat("k^T '", kt->name, "' is not made by a transpose (a Shuffle without reshape) the pass can absorb");
    return m;
  }
  std::swap((*perm)[static_cast<size_t>(r - 1)], (*perm)[static_cast<size_t>(r - 2)]);
  m.k_transpose = kt->producer;
  m.k = m.k_transpose->inputs[0];
  bool identity = true;
  for (int i = 0; i < r; ++i) identity = identity && (*perm)[static_cast<size_t>(i)] == i;
  if (!identity) m.k_perm = *perm;
  if (sole_consumer(g, kt) == qk) {
    m.k_transpose_absorbed = true;
    m.nodes.insert(std::find(m.nodes.begin(), m.nodes.end(), qk), m.k_transpose);
  }
  return m;
}

Status fuse_attention(PassContext& ctx) {
  Graph& g = ctx.graph();
  KILN_ASSIGN_OR_RETURN(std::vector<Node*> order, g.topological_order());
  std::vector<std::string> softmaxes;
  for (Node* n : order)
    if (n->op() == "Softmax") softmaxes.push_back(n->name);
  for (const std::string& name : softmaxes) {
    Node* softmax = g.find_node(name);
    if (!softmax) continue;
    std::optional<AttentionMatch> m = match_attention(g, softmax);
    if (!m) continue;
    const std::string what = quoted(m->nodes);
    if (!m->why.empty()) {
      ctx.refused(str_cat("fusing ", what, " into Attention: ", m->why));
      continue;
    }
    // k with the last two dims swapped back: a new transpose where the old one did more than swap them.
    Node* k_shuffle = nullptr;
    if (!m->k_perm.empty()) {
      auto sa = std::make_unique<ShuffleAttrs>();
      sa->first_transpose = m->k_perm;
      auto made = g.add_node("Shuffle", m->k_transpose->name + "#k", std::move(sa), {m->k});
      if (!made) {
        ctx.refused(str_cat("fusing ", what, " into Attention: ", made.status().message()));
        continue;
      }
      k_shuffle = *made;
      m->k = k_shuffle->outputs[0];
    }
    auto attrs = std::make_unique<AttentionAttrs>();
    attrs->scale = static_cast<float>(m->scale);
    std::vector<Value*> inputs = {m->q, m->k, m->v};
    if (m->mask) inputs.push_back(m->mask);
    const std::string old_k_name = m->k_transpose ? m->k_transpose->name : "";
    const std::string old_k_value = m->k_transpose ? m->k_transpose->outputs[0]->name : "";
    auto fused = replace_with_node(ctx, m->nodes, "Attention", std::move(attrs), inputs);
    if (!fused) {
      if (k_shuffle) KILN_RETURN_IF_ERROR(g.remove_node(k_shuffle));
      ctx.refused(str_cat("fusing ", what, " into Attention: ", fused.status().message()));
      continue;
    }
    if (k_shuffle && m->k_transpose_absorbed) {  // the new transpose takes the old one's place and names
      KILN_RETURN_IF_ERROR(g.rename_node(k_shuffle, old_k_name));
      KILN_RETURN_IF_ERROR(g.rename_value(k_shuffle->outputs[0], old_k_value));
    }
    ctx.applied(str_cat("fused ", what, " into Attention (scale ", m->scale, m->mask ? ", masked" : "",
                        k_shuffle ? str_cat(", k through '", k_shuffle->name, "' now transposing to [..., Sk, D]") : "",
                        ")"));
  }
  return Status::ok();
}

// ---- attention-heads: the head split and merge around an Attention move into it ----

bool same_perm(const std::vector<int64_t>& p, std::initializer_list<int64_t> want) {
  return std::equal(p.begin(), p.end(), want.begin(), want.end());
}

bool identity_or_empty(const std::vector<int64_t>& p) {
  for (size_t i = 0; i < p.size(); ++i)
    if (p[i] != static_cast<int64_t>(i)) return false;
  return true;
}

bool known(int64_t d) { return d > 0; }

// The Shuffle that splits a [B, S, H * D] projection into heads [B, H, S, D] (reshape, then transpose 0 2 1 3) when it
// makes `x` for `attention` alone, else nullptr. S, H and D must be static: then the reshape can only be the split.
Node* head_split(const Graph& g, const Value* x, const Node* attention) {
  Node* p = x->producer;
  const auto* a = attrs_if<ShuffleAttrs>(p, "Shuffle");
  if (!a || sole_consumer(g, x) != attention || (p->inputs.size() > 1 && p->inputs[1]) || !a->has_reshape_dims ||
      !identity_or_empty(a->first_transpose) || !same_perm(a->second_transpose, {0, 2, 1, 3}))
    return nullptr;
  const Dims& in = p->inputs[0]->dims;
  const Dims& out = x->dims;
  if (in.rank() != 3 || out.rank() != 4 || !known(out[1]) || !known(out[2]) || !known(out[3]) || in[1] != out[2] ||
      in[2] != out[1] * out[3] || in[0] != out[0])
    return nullptr;
  return p;
}

// The Shuffle that merges the heads of `y` [B, H, S, Dv] back into [B, S, H * Dv] (transpose 0 2 1 3, then reshape)
// when it is y's sole reader, else nullptr.
Node* head_merge(const Graph& g, const Value* y) {
  Node* p = sole_consumer(g, y);
  const auto* a = attrs_if<ShuffleAttrs>(p, "Shuffle");
  if (!a || p->inputs[0] != y || (p->inputs.size() > 1 && p->inputs[1]) || !a->has_reshape_dims ||
      !same_perm(a->first_transpose, {0, 2, 1, 3}) || !identity_or_empty(a->second_transpose))
    return nullptr;
  const Dims& in = y->dims;
  const Dims& out = p->outputs[0]->dims;
  if (in.rank() != 4 || out.rank() != 3 || !known(in[1]) || !known(in[2]) || !known(in[3]) || out[1] != in[2] ||
      out[2] != in[1] * in[3] || out[0] != in[0])
    return nullptr;
  return p;
}

Status fold_attention_heads(PassContext& ctx) {
  Graph& g = ctx.graph();
  KILN_ASSIGN_OR_RETURN(std::vector<Node*> order, g.topological_order());
  std::vector<std::string> names;
  for (Node* n : order)
    if (n->op() == "Attention" && static_cast<const AttentionAttrs&>(*n->attrs).heads == 0) names.push_back(n->name);
  for (const std::string& name : names) {
    Node* attention = g.find_node(name);
    if (!attention || attention->inputs.size() < 3) continue;
    Node* split[3] = {};
    for (int i = 0; i < 3; ++i) split[i] = head_split(g, attention->inputs[static_cast<size_t>(i)], attention);
    Node* merge = head_merge(g, attention->outputs[0]);
    if (!split[0] || !split[1] || !split[2] || !merge) continue;
    const int64_t heads = attention->inputs[0]->dims[1];
    if (attention->inputs[1]->dims[1] != heads || attention->inputs[2]->dims[1] != heads) continue;
    const auto& old = static_cast<const AttentionAttrs&>(*attention->attrs);
    auto attrs = std::make_unique<AttentionAttrs>();
    attrs->scale = old.scale;
    attrs->heads = heads;
    std::vector<Value*> inputs = {split[0]->inputs[0], split[1]->inputs[0], split[2]->inputs[0]};
    if (attention->inputs.size() > 3) inputs.push_back(attention->inputs[3]);
    // In topological order (the order of this pass's start holds nodes earlier rewrites removed): splits first.
    KILN_ASSIGN_OR_RETURN(std::vector<Node*> now, g.topological_order());
    std::vector<Node*> nodes;
    for (Node* n : now)
      if (n == split[0] || n == split[1] || n == split[2]) nodes.push_back(n);
    nodes.push_back(attention);
    nodes.push_back(merge);
    const std::string what = quoted(nodes);
    auto fused = replace_with_node(ctx, nodes, "Attention", std::move(attrs), inputs);
    if (!fused) {
      ctx.refused(str_cat("moving the head split and merge into ", what, ": ", fused.status().message()));
      continue;
    }
    ctx.applied(str_cat("moved the head split and merge around '", name, "' into it (", heads, " heads)"));
  }
  return Status::ok();
}

}  // namespace

Pass attention_heads_pass() {
  return {"attention-heads",
          "moves the Shuffles that split q, k and v [B, S, H*D] into heads [B, H, S, D] and merge the output back into "
          "the Attention layer (heads read in place from the projections' rows)",
          fold_attention_heads};
}

Pass attention_pass() {
  return {"attention",
          "fuses MatMul(q, k^T), a constant scale, an optional additive mask, Softmax over the last axis and "
          "MatMul(., v) into one Attention layer (k's transpose absorbed)",
          fuse_attention};
}

}  // namespace kiln
