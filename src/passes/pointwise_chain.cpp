// The pointwise-chain fusion: two or more float32 pointwise nodes in a row (activations, unary math, binary
// arithmetic with a constant or a same-shaped tensor), each the sole reader of the one before -> one
// PointwiseChain node that runs the whole program per element. Runs after every other fusion.
#include <algorithm>
#include <unordered_set>

#include "ops/activation/activation.h"
#include "ops/elementwise/elementwise.h"
#include "ops/pointwise_chain/pointwise_chain.h"
#include "ops/unary/unary.h"
#include "passes/passes.h"
#include "passes/pattern.h"

namespace kiln {
namespace {

// The step `n` adds to a chain whose running value is `running` (of dims `shape`), with the value a binary step
// reads in *operand (nullptr for a scalar, the running value or no operand); nullopt when `n` cannot join.
std::optional<PointwiseStep> as_step(const Node& n, const Value* running, const Dims& shape, Value** operand) {
  *operand = nullptr;
  if (n.outputs.size() != 1 || n.outputs[0]->dims != shape || n.inputs.empty() || n.inputs[0] == nullptr)
    return std::nullopt;
  PointwiseStep s;
  if (const auto* a = attrs_if<ActivationAttrs>(&n, "Activation")) {
    if (a->kind == ActivationKind::kPRelu || n.inputs[0] != running) return std::nullopt;
    s.kind = PointwiseStepKind::kActivation;
    s.op = static_cast<int64_t>(a->kind);
    s.alpha = a->alpha;
    s.beta = a->beta;
    return s;
  }
  if (const auto* a = attrs_if<UnaryAttrs>(&n, "Unary")) {
    if (a->op == UnaryOp::kNot || a->op == UnaryOp::kIsNan || a->op == UnaryOp::kIsInf || n.inputs[0] != running)
      return std::nullopt;
    s.kind = PointwiseStepKind::kUnary;
    s.op = static_cast<int64_t>(a->op);
    return s;
  }
  const auto* a = attrs_if<ElementWiseAttrs>(&n, "ElementWise");
  if (!a || n.inputs.size() != 2 || !n.inputs[1]) return std::nullopt;
  switch (a->op) {
    case ElementWiseOp::kSum:
    case ElementWiseOp::kSub:
    case ElementWiseOp::kProd:
    case ElementWiseOp::kDiv:
    case ElementWiseOp::kMax:
    case ElementWiseOp::kMin:
    case ElementWiseOp::kPow: break;
    default: return std::nullopt;
  }
  if (n.inputs[0] != running && n.inputs[1] != running) return std::nullopt;
  s.kind = PointwiseStepKind::kBinary;
  s.op = static_cast<int64_t>(a->op);
  Value* other = n.inputs[0] == running ? n.inputs[1] : n.inputs[0];
  s.swapped = n.inputs[1] == running && n.inputs[0] != running;
  if (other == running) {
    s.operand = kOperandRunning;
    return s;
  }
  if (other->dtype != running->dtype) return std::nullopt;
  if (const std::optional<double> c = known_scalar(other); c && other->dtype == DataType::kFloat32) {
    s.operand = kOperandScalar;
    s.scalar = static_cast<float>(*c);
    return s;
  }
  const bool fits = other->value() ? [&] {
    auto both = broadcast_dims(shape, other->dims);
    return both && *both == shape;
  }()
                                   : other->dims == shape;
  if (!fits) return std::nullopt;
  *operand = other;
  s.operand = 0;  // set to the input index when the node is made
  return s;
}

// The running input a chain starting at `n` takes: a non-constant input of the output's shape (input 0 first).
Value* head_input(const Node& n) {
  for (size_t i = 0; i < std::min<size_t>(n.inputs.size(), n.op() == "ElementWise" ? 2 : 1); ++i) {
    Value* in = n.inputs[i];
    if (in && !in->value() && n.outputs.size() == 1 && in->dims == n.outputs[0]->dims) return in;
  }
  return nullptr;
}

struct Chain {
  std::vector<Node*> nodes;
  std::vector<PointwiseStep> steps;
  std::vector<Value*> operands;  // per step (nullptr where none)
  Value* x = nullptr;
};

Chain grow_chain(const Graph& g, Node* head) {
  Chain c;
  c.x = head_input(*head);
  if (!c.x || !c.x->dims.is_static()) return c;
  const Dims shape = c.x->dims;
  Node* n = head;
  const Value* running = c.x;
  while (n) {
    Value* operand = nullptr;
    std::optional<PointwiseStep> s = as_step(*n, running, shape, &operand);
    if (!s) break;
    c.nodes.push_back(n);
    c.steps.push_back(*s);
    c.operands.push_back(operand);
    running = n->outputs[0];
    n = sole_consumer(g, running);
  }
  return c;
}

Status fuse_chains(PassContext& ctx) {
  Graph& g = ctx.graph();
  KILN_ASSIGN_OR_RETURN(std::vector<Node*> order, g.topological_order());
  std::vector<std::string> names;
  names.reserve(order.size());
  for (Node* n : order) names.push_back(n->name);
  std::unordered_set<std::string> seen;
  for (const std::string& name : names) {
    Node* head = g.find_node(name);
    if (!head || seen.count(name)) continue;
    Chain c = grow_chain(g, head);
    for (Node* n : c.nodes) seen.insert(n->name);
    if (c.nodes.size() < 2) continue;
    const std::string what = quoted(c.nodes);
    std::string why;
    for (const Node* n : c.nodes)
      if (n->outputs[0]->dtype != DataType::kFloat32 && why.empty())
        why = str_cat("'", n->outputs[0]->name, "' is ", dtype_name(n->outputs[0]->dtype),
                      " (only float32 chains are fused)");
    if (!why.empty()) {
      ctx.refused(str_cat("fusing ", what, " into PointwiseChain: ", why));
      continue;
    }
    auto attrs = std::make_unique<PointwiseChainAttrs>();
    std::vector<Value*> inputs = {c.x};
    for (size_t i = 0; i < c.steps.size(); ++i) {
      PointwiseStep s = c.steps[i];
      if (Value* v = c.operands[i]) {
        auto it = std::find(inputs.begin(), inputs.end(), v);
        if (it == inputs.end()) it = inputs.insert(inputs.end(), v);
        s.operand = it - inputs.begin();
      }
      attrs->push(s);
    }
    const std::string program = describe_pointwise_program(*attrs);
    auto fused = replace_with_node(ctx, c.nodes, "PointwiseChain", std::move(attrs), inputs);
    if (!fused) {
      ctx.refused(str_cat("fusing ", what, " into PointwiseChain: ", fused.status().message()));
      continue;
    }
    ctx.applied(str_cat("fused ", what, " into PointwiseChain (", program, ")"));
  }
  return Status::ok();
}

}  // namespace

Pass pointwise_chain_pass() {
  return {"pointwise-chain",
          "fuses chains of two or more float32 activations, unary and binary pointwise ops (operands constant or of "
          "the chain's shape), each the sole reader of the one before, into one PointwiseChain layer",
          fuse_chains};
}

}  // namespace kiln
