#pragma once
// One PointwiseChain step on one float, shared by the reference, CPU and CUDA kernels: the same scalar definitions as
// the Activation, Unary and ElementWise kernels, so a chain computes what its nodes computed.
#include "kernels/ref/activation.h"
#include "kernels/ref/elementwise.h"
#include "kernels/ref/unary.h"
#include "ops/pointwise_chain/pointwise_chain.h"

namespace kiln::ref {

KILN_HD inline float unary_step(UnaryOp op, float v) {
  float out = v;
  dispatch_unary_op(op, [&](auto o) {
    if constexpr (unary_accepts<decltype(o)::value, float>() && decltype(o)::value != UnaryOp::kIsNan &&
                  decltype(o)::value != UnaryOp::kIsInf)
      out = static_cast<float>(unary<decltype(o)::value, float>(v));
  });
  return out;
}

KILN_HD inline float binary_step(ElementWiseOp op, float a, float b) {
  float out = a;
  dispatch_op(op, [&](auto o) {
    constexpr ElementWiseOp kOp = decltype(o)::value;
    if constexpr (kOp == ElementWiseOp::kSum || kOp == ElementWiseOp::kSub || kOp == ElementWiseOp::kProd ||
                  kOp == ElementWiseOp::kDiv || kOp == ElementWiseOp::kMax || kOp == ElementWiseOp::kMin ||
                  kOp == ElementWiseOp::kPow)
      out = binary<kOp, float>(a, b, false);
  });
  return out;
}

/// The step applied to running value `v`; `operand` is the operand's value for binary steps.
KILN_HD inline float apply_step(const PointwiseStep& s, float v, float operand) {
  switch (s.kind) {
    case PointwiseStepKind::kActivation: return activation(static_cast<ActivationKind>(s.op), s.alpha, s.beta, v);
    case PointwiseStepKind::kUnary: return unary_step(static_cast<UnaryOp>(s.op), v);
    case PointwiseStepKind::kBinary:
      return s.swapped ? binary_step(static_cast<ElementWiseOp>(s.op), operand, v)
                       : binary_step(static_cast<ElementWiseOp>(s.op), v, operand);
  }
  return v;
}

}  // namespace kiln::ref
