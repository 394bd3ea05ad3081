#include "ops/pointwise_chain/pointwise_chain.h"

#include "ops/activation/activation.h"
#include "ops/elementwise/elementwise.h"
#include "ops/registry.h"
#include "ops/unary/unary.h"

namespace kiln {

const char* enum_name(PointwiseStepKind kind) {
  switch (kind) {
    case PointwiseStepKind::kActivation: return "activation";
    case PointwiseStepKind::kUnary: return "unary";
    case PointwiseStepKind::kBinary: return "binary";
  }
  return "?";
}

PointwiseStep PointwiseChainAttrs::step(size_t i) const {
  PointwiseStep s;
  s.kind = static_cast<PointwiseStepKind>(kinds[i]);
  s.op = ops[i];
  s.operand = operands[i];
  s.swapped = swapped[i] != 0;
  s.scalar = scalars[i];
  s.alpha = alphas[i];
  s.beta = betas[i];
  return s;
}

void PointwiseChainAttrs::push(const PointwiseStep& s) {
  kinds.push_back(static_cast<int64_t>(s.kind));
  ops.push_back(s.op);
  operands.push_back(s.operand);
  swapped.push_back(s.swapped ? 1 : 0);
  scalars.push_back(s.scalar);
  alphas.push_back(s.alpha);
  betas.push_back(s.beta);
}

namespace {

bool chainable_binary(ElementWiseOp op) {
  switch (op) {
    case ElementWiseOp::kSum:
    case ElementWiseOp::kSub:
    case ElementWiseOp::kProd:
    case ElementWiseOp::kDiv:
    case ElementWiseOp::kMax:
    case ElementWiseOp::kMin:
    case ElementWiseOp::kPow: return true;
    default: return false;
  }
}

const char* binary_symbol(ElementWiseOp op) {
  switch (op) {
    case ElementWiseOp::kSum: return "+";
    case ElementWiseOp::kSub: return "-";
    case ElementWiseOp::kProd: return "*";
    case ElementWiseOp::kDiv: return "/";
    case ElementWiseOp::kPow: return "^";
    default: return enum_name(op);
  }
}

}  // namespace

Status check_pointwise_program(const PointwiseChainAttrs& a, int num_inputs) {
  const size_t n = a.kinds.size();
  if (a.ops.size() != n || a.operands.size() != n || a.swapped.size() != n || a.scalars.size() != n ||
      a.alphas.size() != n || a.betas.size() != n)
    return invalid_argument(
        "PointwiseChain program lists (kinds, ops, operands, swapped, scalars, alphas, betas) "
        "must have one entry per step; kinds has ",
        n);
  if (n == 0) return invalid_argument("PointwiseChain program has no steps");
  for (size_t i = 0; i < n; ++i) {
    const PointwiseStep s = a.step(i);
    switch (s.kind) {
      case PointwiseStepKind::kActivation:
        if (s.op < 0 || s.op > static_cast<int64_t>(ActivationKind::kCelu) ||
            s.op == static_cast<int64_t>(ActivationKind::kPRelu))
          return invalid_argument("PointwiseChain step ", i, ": activation ", s.op, " is not one a chain can hold");
        break;
      case PointwiseStepKind::kUnary: {
        const auto op = static_cast<UnaryOp>(s.op);
        if (s.op < 0 || s.op > static_cast<int64_t>(UnaryOp::kIsInf) || op == UnaryOp::kNot || op == UnaryOp::kIsNan ||
            op == UnaryOp::kIsInf)
          return invalid_argument("PointwiseChain step ", i, ": unary op ", s.op, " is not a float -> float op");
        break;
      }
      case PointwiseStepKind::kBinary:
        if (s.op < 0 || s.op > static_cast<int64_t>(ElementWiseOp::kBitShiftRight) ||
            !chainable_binary(static_cast<ElementWiseOp>(s.op)))
          return invalid_argument("PointwiseChain step ", i, ": binary op ", s.op,
                                  " is not one a chain can hold (sum, sub, prod, div, max, min, pow)");
        if (s.operand != kOperandRunning && s.operand != kOperandScalar && (s.operand < 0 || s.operand >= num_inputs))
          return invalid_argument("PointwiseChain step ", i, ": operand ", s.operand, " names no input (the node has ",
                                  num_inputs, ")");
        break;
      default: return invalid_argument("PointwiseChain step ", i, ": unknown kind ", a.kinds[i]);
    }
    if (s.kind != PointwiseStepKind::kBinary && s.operand != kOperandNone)
      return invalid_argument("PointwiseChain step ", i, ": a ", enum_name(s.kind), " step takes no operand");
  }
  return Status::ok();
}

std::string describe_pointwise_program(const PointwiseChainAttrs& a) {
  std::string out;
  for (size_t i = 0; i < a.size(); ++i) {
    const PointwiseStep s = a.step(i);
    std::string step;
    if (s.kind == PointwiseStepKind::kActivation) {
      step = enum_name(static_cast<ActivationKind>(s.op));
    } else if (s.kind == PointwiseStepKind::kUnary) {
      step = enum_name(static_cast<UnaryOp>(s.op));
    } else {
      const std::string operand = s.operand == kOperandRunning  ? "itself"
                                  : s.operand == kOperandScalar ? str_cat(s.scalar)
                                                                : str_cat("in", s.operand);
      const char* sym = binary_symbol(static_cast<ElementWiseOp>(s.op));
      step = s.swapped ? str_cat(operand, " ", sym, " _") : str_cat(sym, " ", operand);
    }
    out += (out.empty() ? "" : ", ") + step;
  }
  return out;
}

namespace {

OpSchema pointwise_chain_schema() {
  OpSchema s = make_schema<PointwiseChainAttrs>(
      "PointwiseChain", "pointwise_chain",
      "a chain of activations, unary math and binary arithmetic run per element as one program (fused)");
  s.input_names = {"x", "operand"};
  s.min_inputs = 1;
  s.max_inputs = -1;
  s.infer = [](const InferContext& ctx) -> Result<std::vector<TensorDesc>> {
    const auto& a = ctx.attrs_as<PointwiseChainAttrs>();
    KILN_RETURN_IF_ERROR(check_pointwise_program(a, ctx.num_inputs()));
    const TensorDesc& x = ctx.input(0);
    if (!is_floating(x.dtype))
      return invalid_argument("PointwiseChain needs a floating-point input 'x', got ", dtype_name(x.dtype));
    for (int i = 1; i < ctx.num_inputs(); ++i) {
      if (!ctx.has_input(i)) return invalid_argument("PointwiseChain operand ", i, " is missing");
      const TensorDesc& in = ctx.input(i);
      if (in.dtype != x.dtype)
        return invalid_argument("PointwiseChain operand ", i, " has type ", dtype_name(in.dtype), " but 'x' has ",
                                dtype_name(x.dtype));
      auto both = broadcast_dims(x.dims, in.dims);
      if (!both || *both != x.dims)
        return invalid_argument("PointwiseChain operand ", i, " of shape ", in.dims.to_string(),
                                " must broadcast to the shape of 'x' ", x.dims.to_string());
    }
    return one_output(x.dtype, x.dims);
  };
  s.pointwise = true;
  return s;
}

KILN_REGISTER_OP(pointwise_chain_schema());

}  // namespace
}  // namespace kiln
