// Cleanup passes: constant folding, dead-code elimination, common-subexpression elimination, no-op removal.
#include <algorithm>
#include <cstring>
#include <unordered_map>

#include "ops/elementwise/elementwise.h"
#include "ops/scale/scale.h"
#include "ops/shuffle/shuffle.h"
#include "passes/passes.h"
#include "passes/pattern.h"

namespace kiln {
namespace {

bool all_outputs_known(const Node& n) {
  return std::all_of(n.outputs.begin(), n.outputs.end(), [](Value* v) { return v->value() != nullptr; });
}

Status fold_constants(PassContext& ctx) {
  Graph& g = ctx.graph();
  KILN_ASSIGN_OR_RETURN(std::vector<Node*> order, g.topological_order());
  for (Node* n : order) {
    if (n->schema->host || !n->schema->deterministic || !n->subgraphs.empty() || n->outputs.empty() ||
        all_outputs_known(*n))
      continue;
    if (g.try_fold(n).folded) ctx.applied(str_cat("folded '", n->name, "' (", n->op(), ") into a constant"));
  }
  if (ctx.changes().empty()) return Status::ok();
  KILN_RETURN_IF_ERROR(g.fold_known_values());
  return g.infer_shapes();  // values now known can make shapes after them static
}

Status remove_dead_code(PassContext& ctx) {
  Graph& g = ctx.graph();
  std::vector<std::string> before;
  for (Node* n : g.nodes()) before.push_back(n->name);
  g.remove_dead_nodes();
  if (before.size() == g.nodes().size()) return Status::ok();
  for (const std::string& name : before)
    if (!g.find_node(name)) ctx.applied(str_cat("removed '", name, "': nothing reads its outputs"));
  return Status::ok();
}

uint64_t mix(uint64_t h, uint64_t x) { return (h ^ x) * 0x100000001b3ULL; }

uint64_t bytes_hash(const Tensor& t) {
  uint64_t h = 0xcbf29ce484222325ULL;
  const auto* p = static_cast<const unsigned char*>(t.raw());
  const size_t n = t.nbytes();
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = mix(h, w);
  }
  for (; i < n; ++i) h = mix(h, p[i]);
  return h;
}

bool same_constant(const Value& a, const Value& b) {
  return a.dtype == b.dtype && a.dims == b.dims && a.constant.nbytes() == b.constant.nbytes() &&
         std::memcmp(a.constant.raw(), b.constant.raw(), a.constant.nbytes()) == 0;
}

bool same_node(const Node& a, const Node& b) {
  return a.schema == b.schema && a.inputs == b.inputs && a.outputs.size() == b.outputs.size() &&
         a.attrs->equals(*b.attrs);
}

Status merge_common(PassContext& ctx) {
  Graph& g = ctx.graph();
  // Equal constants first (same dtype, dims and bytes), so nodes reading them become equal too.
  std::unordered_map<uint64_t, std::vector<Value*>> constants;
  for (Value* v : g.values()) {
    if (!v->is_constant() || v->kind != ValueKind::kTensor || v->dtype == DataType::kString || v->uses.empty() ||
        is_graph_output(g, v))
      continue;
    auto& same = constants[mix(bytes_hash(v->constant), static_cast<uint64_t>(v->dims.numel()))];
    auto it = std::find_if(same.begin(), same.end(), [&](Value* c) { return same_constant(*c, *v); });
    if (it == same.end()) {
      same.push_back(v);
      continue;
    }
    ctx.applied(str_cat("constant '", v->name, "' is the same as '", (*it)->name, "'"));
    g.replace_all_uses(v, *it);
  }
  KILN_ASSIGN_OR_RETURN(std::vector<Node*> order, g.topological_order());
  std::unordered_map<uint64_t, std::vector<Node*>> seen;
  for (Node* n : order) {
    if (n->schema->host || !n->schema->deterministic || !n->subgraphs.empty() || n->outputs.empty()) continue;
    uint64_t h = mix(std::hash<std::string>{}(n->op()), n->attrs->hash());
    for (Value* in : n->inputs) h = mix(h, reinterpret_cast<uintptr_t>(in));
    auto& same = seen[h];
    auto it = std::find_if(same.begin(), same.end(), [&](Node* c) { return same_node(*c, *n); });
    const bool output =
        std::any_of(n->outputs.begin(), n->outputs.end(), [&](Value* v) { return is_graph_output(g, v); });
    if (it == same.end() || output) {
      same.push_back(n);
      continue;
    }
    ctx.applied(str_cat("'", n->name, "' (", n->op(), ") computes the same as '", (*it)->name, "'"));
    for (size_t i = 0; i < n->outputs.size(); ++i) g.replace_all_uses(n->outputs[i], (*it)->outputs[i]);
    KILN_RETURN_IF_ERROR(g.remove_node(n));
  }
  return Status::ok();
}

bool identity_perm(const std::vector<int64_t>& perm) {
  for (size_t i = 0; i < perm.size(); ++i)
    if (perm[i] != static_cast<int64_t>(i)) return false;
  return true;
}

// Why `n` leaves its input 0 unchanged ("" when it does not): the passthrough the node is.
std::string no_op_reason(const Node& n) {
  Value* x = n.inputs.empty() ? nullptr : n.inputs[0];
  if (!x || n.outputs.size() != 1 || x->kind != ValueKind::kTensor) return "";
  const Value* y = n.outputs[0];
  if (y->dtype != x->dtype || y->dims != x->dims || !x->dims.is_static()) return "";
  const std::string& op = n.op();
  if (op == "Identity") return "identity";
  if (op == "Cast") return "a cast to the same dtype";
  if (const auto* a = attrs_if<ShuffleAttrs>(&n, "Shuffle"))
    return identity_perm(a->first_transpose) && identity_perm(a->second_transpose) ? "a reshape to the same shape" : "";
  auto absent_or = [&](size_t i, double v) {
    return i >= n.inputs.size() || !n.inputs[i] || known_all_equal(n.inputs[i], v);
  };
  if (op == "Scale")
    return absent_or(1, 0) && absent_or(2, 1) && absent_or(3, 1) ? "a scale that adds 0, multiplies by 1, raises to 1"
                                                                 : "";
  if (const auto* a = attrs_if<ElementWiseAttrs>(&n, "ElementWise");
      a && n.inputs.size() == 2 && is_floating(x->dtype)) {
    const Value* b = n.inputs[1];
    if (a->op == ElementWiseOp::kSum && known_all_equal(b, 0)) return "an add of 0";
    if (a->op == ElementWiseOp::kSub && known_all_equal(b, 0)) return "a subtraction of 0";
    if (a->op == ElementWiseOp::kProd && known_all_equal(b, 1)) return "a multiplication by 1";
    if (a->op == ElementWiseOp::kDiv && known_all_equal(b, 1)) return "a division by 1";
    if (a->op == ElementWiseOp::kPow && known_all_equal(b, 1)) return "a power of 1";
  }
  return "";
}

Status remove_no_ops(PassContext& ctx) {
  Graph& g = ctx.graph();
  KILN_ASSIGN_OR_RETURN(std::vector<Node*> order, g.topological_order());
  for (Node* n : order) {
    if (n->schema->host && n->op() != "Identity") continue;
    // An add or multiply with the constant first: swap the view so input 0 is the passed-through one.
    std::string why = no_op_reason(*n);
    Value* through = n->inputs.empty() ? nullptr : n->inputs[0];
    if (why.empty() && n->op() == "ElementWise" && n->inputs.size() == 2 && n->inputs[0] && n->inputs[1]) {
      const auto& a = static_cast<const ElementWiseAttrs&>(*n->attrs);
      const Value* c = n->inputs[0];
      Value* x = n->inputs[1];
      const Value* y = n->outputs[0];
      if (y->dims == x->dims && y->dtype == x->dtype && x->dims.is_static() && is_floating(x->dtype) &&
          ((a.op == ElementWiseOp::kSum && known_all_equal(c, 0)) ||
           (a.op == ElementWiseOp::kProd && known_all_equal(c, 1)))) {
        why = a.op == ElementWiseOp::kSum ? "an add of 0" : "a multiplication by 1";
        through = x;
      }
    }
    if (why.empty()) continue;
    const std::string name = n->name, op = n->op();
    if (Status st = bypass_node(g, n, through); !st.is_ok()) {
      ctx.refused(str_cat("removing '", name, "' (", why, "): ", st.message()));
      continue;
    }
    ctx.applied(str_cat("removed '", name, "' (", op, "): ", why));
  }
  return Status::ok();
}

}  // namespace

Pass constant_folding_pass() {
  return {"constant-folding",
          "computes nodes whose inputs are all known at build time into constants (within the fold limits)",
          fold_constants};
}

Pass dead_code_pass() {
  return {"dead-code", "removes nodes nothing reaches the graph outputs through", remove_dead_code};
}

Pass common_subexpression_pass() {
  return {"common-subexpression", "merges equal constants and nodes that compute the same op on the same inputs",
          merge_common};
}

Pass no_op_removal_pass() {
  return {"no-op-removal",
          "removes identities, casts to the same dtype, reshapes to the same shape, identity transposes, and scales "
          "or elementwise ops that add 0, multiply or divide by 1, raise to 1",
          remove_no_ops};
}

}  // namespace kiln
