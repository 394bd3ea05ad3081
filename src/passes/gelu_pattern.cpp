// gelu-pattern: PyTorch's GELU exports (the erf form and the tanh approximation, in their operand orders) become one
// Activation of kind GELU.
#include <cmath>
#include <unordered_set>

#include "ops/activation/activation.h"
#include "ops/elementwise/elementwise.h"
#include "ops/unary/unary.h"
#include "passes/passes.h"
#include "passes/pattern.h"

namespace kiln {
namespace {

constexpr double kSqrt2 = 1.4142135623730951;
constexpr double kSqrt2OverPi = 0.7978845608028654;
constexpr double kCubeCoefficient = 0.044715;
constexpr double kRelativeTolerance = 1e-4;

bool is_elementwise(const Node* n, ElementWiseOp op) {
  const auto* a = attrs_if<ElementWiseAttrs>(n, "ElementWise");
  return a && a->op == op && n->inputs.size() == 2 && n->inputs[0] && n->inputs[1];
}

// The value of a known one-element tensor of any numeric type (exports write Pow's 3 as float or integer).
std::optional<double> scalar_of(const Value* v) {
  const Tensor* t = v ? v->value() : nullptr;
  if (!t || t->numel() != 1 || t->dtype() == DataType::kString) return std::nullopt;
  return tensor_to_doubles(*t).at(0);
}

// A binary node read as "x <op> constant": the operand that is not a known scalar, and the scalar.
struct WithConstant {
  Node* node = nullptr;
  Value* operand = nullptr;
  double constant = 0;
};

// `n` as ElementWise `op` of a value and a known scalar (in either order when `op` commutes), or nullopt.
std::optional<WithConstant> with_constant(Node* n, ElementWiseOp op) {
  if (!is_elementwise(n, op)) return std::nullopt;
  const bool commutes = op == ElementWiseOp::kSum || op == ElementWiseOp::kProd;
  if (auto c = scalar_of(n->inputs[1]); c && !n->inputs[0]->value()) return WithConstant{n, n->inputs[0], *c};
  if (auto c = scalar_of(n->inputs[0]); c && commutes && !n->inputs[1]->value())
    return WithConstant{n, n->inputs[1], *c};
  return std::nullopt;
}

// `n` as a product of `x` and another value: that value, or nullptr.
Value* times(const Node* n, const Value* x) {
  if (!is_elementwise(n, ElementWiseOp::kProd)) return nullptr;
  if (n->inputs[0] == x) return n->inputs[1];
  if (n->inputs[1] == x) return n->inputs[0];
  return nullptr;
}

// A matched GELU: its nodes in topological order and each constant with the value it must have.
struct GeluMatch {
  std::vector<Node*> nodes;
  Value* x = nullptr;
  std::vector<std::tuple<std::string, double, double>> constants;  // what, found, expected
};

// The shared end of both forms, from `add` = 1 + erf(...) or 1 + tanh(...): x * 0.5 * add in its export orders
// (x * add * 0.5, (x * 0.5) * add, x * (add * 0.5)). Appends the nodes; false when the structure differs.
bool match_tail(const Graph& g, Node* add, GeluMatch& m) {
  Node* mul = sole_consumer(g, add->outputs[0]);
  Value* other = times(mul, add->outputs[0]);
  if (!other) return false;
  if (other == m.x) {  // (x * add) * 0.5
    auto half = with_constant(sole_consumer(g, mul->outputs[0]), ElementWiseOp::kProd);
    if (!half || half->operand != mul->outputs[0]) return false;
    m.nodes.insert(m.nodes.end(), {mul, half->node});
    m.constants.emplace_back("the final factor", half->constant, 0.5);
    return true;
  }
  if (auto half = with_constant(other->producer, ElementWiseOp::kProd); half && half->operand == m.x) {  // (x*0.5)*add
    m.nodes.insert(m.nodes.begin(), half->node);
    m.nodes.push_back(mul);
    m.constants.emplace_back("the factor of x", half->constant, 0.5);
    return true;
  }
  if (auto c = scalar_of(other)) {  // x * (add * 0.5)
    Node* last = sole_consumer(g, mul->outputs[0]);
    if (times(last, mul->outputs[0]) != m.x) return false;
    m.nodes.insert(m.nodes.end(), {mul, last});
    m.constants.emplace_back("the factor of (1 + ...)", *c, 0.5);
    return true;
  }
  return false;
}

// The erf form from its Erf node: x / sqrt(2) (or x * 1/sqrt(2)), erf, + 1, then the tail.
std::optional<GeluMatch> match_erf_form(const Graph& g, Node* erf) {
  const auto* u = attrs_if<UnaryAttrs>(erf, "Unary");
  if (!u || u->op != UnaryOp::kErf || !erf->inputs[0]) return std::nullopt;
  GeluMatch m;
  Node* pre = erf->inputs[0]->producer;
  if (auto div = with_constant(pre, ElementWiseOp::kDiv)) {
    m.constants.emplace_back("the divisor", div->constant, kSqrt2);
    m.x = div->operand;
  } else if (auto mul = with_constant(pre, ElementWiseOp::kProd)) {
    m.constants.emplace_back("the factor inside erf", mul->constant, 1 / kSqrt2);
    m.x = mul->operand;
  } else {
    return std::nullopt;
  }
  auto one = with_constant(sole_consumer(g, erf->outputs[0]), ElementWiseOp::kSum);
  if (!one || one->operand != erf->outputs[0]) return std::nullopt;
  m.constants.emplace_back("the constant added to erf", one->constant, 1);
  m.nodes = {pre, erf, one->node};
  if (!match_tail(g, one->node, m)) return std::nullopt;
  return m;
}

// x^3 as Pow(x, 3), (x * x) * x or x * (x * x): its nodes, or nullopt.
std::optional<std::vector<Node*>> match_cube(Value* cube, const Value* x, GeluMatch& m) {
  Node* n = cube ? cube->producer : nullptr;
  if (auto pow = with_constant(n, ElementWiseOp::kPow); pow && pow->operand == x) {
    m.constants.emplace_back("the power", pow->constant, 3);
    return std::vector<Node*>{n};
  }
  Value* rest = times(n, x);
  if (!rest || !rest->producer || !is_elementwise(rest->producer, ElementWiseOp::kProd)) return std::nullopt;
  Node* square = rest->producer;
  if (square->inputs[0] != x || square->inputs[1] != x) return std::nullopt;
  return std::vector<Node*>{square, n};
}

// The tanh form from its Tanh node: x + 0.044715 * x^3, * sqrt(2/pi), tanh, + 1, then the tail.
std::optional<GeluMatch> match_tanh_form(const Graph& g, Node* tanh) {
  const auto* a = attrs_if<ActivationAttrs>(tanh, "Activation");
  if (!a || a->kind != ActivationKind::kTanh || !tanh->inputs[0]) return std::nullopt;
  GeluMatch m;
  auto scaled = with_constant(tanh->inputs[0]->producer, ElementWiseOp::kProd);
  if (!scaled || !is_elementwise(scaled->operand->producer, ElementWiseOp::kSum)) return std::nullopt;
  m.constants.emplace_back("the factor inside tanh", scaled->constant, kSqrt2OverPi);
  Node* sum = scaled->operand->producer;
  for (int i = 0; i < 2 && m.nodes.empty(); ++i) {
    Value* x = sum->inputs[i];
    auto term = with_constant(sum->inputs[1 - i]->producer, ElementWiseOp::kProd);
    if (!term) continue;
    GeluMatch tried = m;
    tried.x = x;
    auto cube = match_cube(term->operand, x, tried);
    if (!cube) continue;
    tried.constants.emplace_back("the cube's coefficient", term->constant, kCubeCoefficient);
    tried.nodes = *cube;
    tried.nodes.insert(tried.nodes.end(), {term->node, sum});
    m = std::move(tried);
  }
  if (m.nodes.empty()) return std::nullopt;
  auto one = with_constant(sole_consumer(g, tanh->outputs[0]), ElementWiseOp::kSum);
  if (!one || one->operand != tanh->outputs[0]) return std::nullopt;
  m.constants.emplace_back("the constant added to tanh", one->constant, 1);
  m.nodes.insert(m.nodes.end(), {scaled->node, tanh, one->node});
  if (!match_tail(g, one->node, m)) return std::nullopt;
  return m;
}

// The first constant off by more than the tolerance, as a sentence; empty when all match.
std::string constant_mismatch(const GeluMatch& m) {
  for (const auto& [what, found, expected] : m.constants)
    if (std::abs(found - expected) > kRelativeTolerance * std::abs(expected))
      return str_cat(what, " is ", found, ", not ", expected);
  return "";
}

Status fuse_gelu(PassContext& ctx) {
  Graph& g = ctx.graph();
  KILN_ASSIGN_OR_RETURN(std::vector<Node*> order, g.topological_order());
  std::unordered_set<const Node*> gone;  // fused away: compared, never read
  for (Node* n : order) {
    if (gone.count(n)) continue;
    const bool erf = attrs_if<UnaryAttrs>(n, "Unary") != nullptr;
    std::optional<GeluMatch> m = erf ? match_erf_form(g, n) : match_tanh_form(g, n);
    if (!m) continue;
    const std::string names = quoted(m->nodes);
    const char* form = erf ? "erf" : "tanh";
    if (!is_floating(m->x->dtype)) continue;
    if (std::string why = constant_mismatch(*m); !why.empty()) {
      ctx.refused(str_cat("fusing ", names, " into GELU (", form, " form): ", why));
      continue;
    }
    ActivationAttrs gelu = activation_defaults(ActivationKind::kGelu);
    gelu.beta = erf ? 0.f : 1.f;
    auto fused = replace_with_node(ctx, m->nodes, "Activation", std::make_unique<ActivationAttrs>(gelu), {m->x});
    if (!fused) {
      ctx.refused(str_cat("fusing ", names, " into GELU (", form, " form): ", fused.status().message()));
      continue;
    }
    gone.insert(m->nodes.begin(), m->nodes.end());
    ctx.applied(str_cat("fused ", names, " into one GELU (", form, " form)"));
  }
  return Status::ok();
}

}  // namespace

Pass gelu_pattern_pass() {
  return {"gelu-pattern",
          "PyTorch's GELU exports (x * 0.5 * (1 + erf(x / sqrt(2))) and the tanh approximation, in their operand "
          "orders) -> one GELU activation",
          fuse_gelu};
}

}  // namespace kiln
